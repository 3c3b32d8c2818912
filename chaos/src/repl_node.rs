//! One simulated node's data: a key→value store and node's replication core around it. A
//! primary's write is propagated (`replication::propagate`) into its `Backlog` as RESP; a
//! replica executes the whole commands its link released, cut by the node's own
//! `StreamCursor` (the core the node's applier runs on), mirrors them into its own backlog
//! (so that it can serve PSYNCs once promoted) and acknowledges the offset after the last
//! whole command; a full sync's snapshot is the store as SET commands.

use crate::data_net::{Key, Value};
use node::replication::backlog::Backlog;
use node::replication::ids::ReplicationIds;
use node::replication::propagate::{encode_stream, propagate, WriteEffect};
use node::replication::stream_cursor::{AfterCommand, CursorError, StreamCursor};
use proto::resp::Frame;
use proto::resp::RequestLimits;
use rand::Rng;
use std::collections::BTreeMap;

/// Bytes of each node's backlog: a few hundred writes, so that a replica down for a while
/// falls out of it and needs a full sync, while short outages continue with a partial one.
pub const BACKLOG_BYTES: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("replication stream is not RESP at offset {at}: {reason}")]
    Protocol { at: u64, reason: String },
    #[error("replication stream holds a command the simulation never writes at {at}: {what}")]
    Unexpected { at: u64, what: String },
}

/// What a node keeps across a crash: it persists each write before acknowledging it (as
/// with `appendfsync always`), and its replication history with it.
#[derive(Debug)]
pub struct ReplNode {
    pub store: BTreeMap<Key, Value>,
    /// Stream offset of the end of each key's last write.
    last_write: BTreeMap<Key, u64>,
    pub ids: ReplicationIds,
    pub backlog: Backlog,
    /// Highest offset known to be on a replica (or inherited at promotion).
    pub committed: u64,
    /// The node whose stream `ids`' history is, as a replica last synced (full-sync check).
    pub history_primary: Option<usize>,
    /// That primary's config epoch when this node took the history from it, or this node's
    /// own at its promotion (the node's identity `epoch`).
    pub history_epoch: u64,
    /// The stream as a replica reads it (released bytes not yet forming a whole command).
    cursor: StreamCursor,
}

impl ReplNode {
    pub fn new(rng: &mut impl Rng) -> Self {
        ReplNode {
            store: BTreeMap::new(),
            last_write: BTreeMap::new(),
            ids: ReplicationIds::new(rng),
            backlog: Backlog::new(BACKLOG_BYTES, 0).expect("a valid backlog size"),
            committed: 0,
            history_primary: None,
            history_epoch: 0,
            cursor: StreamCursor::new(0),
        }
    }

    /// The last stream byte this node holds (written as a primary or applied as a replica).
    pub fn offset(&self) -> u64 {
        self.backlog.master_repl_offset()
    }

    /// A primary's write: applied, then fed to the backlog as the replicas will execute it.
    /// Returns the offset the write ends at.
    pub fn write(&mut self, key: Key, value: Value) -> u64 {
        let bytes = set_command(key, value);
        let offset = self.backlog.append(&bytes);
        self.store.insert(key, value);
        self.last_write.insert(key, offset);
        offset
    }

    /// The offset `key`'s last write ended at (0: never written).
    pub fn last_write(&self, key: Key) -> u64 {
        self.last_write.get(&key).copied().unwrap_or(0)
    }

    /// A new link starts: released bytes of an older one are not this link's.
    pub fn start_link(&mut self) {
        self.cursor.reset(self.offset());
    }

    /// Executes every whole command of the stream's next `bytes`; returns the offset to
    /// acknowledge (the end of the last whole command executed).
    pub fn execute(&mut self, bytes: &[u8]) -> Result<u64, StreamError> {
        let ReplNode {
            store,
            last_write,
            backlog,
            cursor,
            ..
        } = self;
        let run = |command: node::replication::stream_cursor::StreamCommand<'_>| {
            let (key, value) =
                parse_set_args(command.args).ok_or_else(|| StreamError::Unexpected {
                    at: command.at,
                    what: String::from_utf8_lossy(command.bytes).into_owned(),
                })?;
            store.insert(key, value);
            last_write.insert(key, command.at + command.bytes.len() as u64 - 1);
            Ok(AfterCommand::Settled)
        };
        let mirror = |settled: &[u8], applied: u64| {
            let offset = backlog.append(settled);
            debug_assert_eq!(offset, applied, "the history left the stream");
        };
        cursor
            .push(bytes, &RequestLimits::default(), run, mirror)
            .map_err(|e| match e {
                CursorError::Protocol { at, reason } => StreamError::Protocol { at, reason },
                CursorError::Run(e) => e,
            })?;
        Ok(self.offset())
    }

    /// The store as a full sync ships it: one SET per key.
    pub fn snapshot(&self) -> Vec<u8> {
        self.store
            .iter()
            .flat_map(|(&k, &v)| set_command(k, v))
            .collect()
    }

    /// Replaces the store by a full sync's snapshot taken at `offset` of the history `ids`
    /// names, synced from `primary` (whose config epoch was `primary_epoch`).
    pub fn load(
        &mut self,
        bytes: &[u8],
        offset: u64,
        ids: ReplicationIds,
        primary: usize,
        primary_epoch: u64,
    ) -> Result<(), StreamError> {
        let mut store = BTreeMap::new();
        let mut used = 0;
        while used < bytes.len() {
            let bad = |reason: String| StreamError::Protocol { at: offset, reason };
            let (frame, len) = proto::resp::decode(&bytes[used..])
                .map_err(|e| bad(e.to_string()))?
                .ok_or_else(|| bad("snapshot cut short".into()))?;
            let (key, value) = parse_set(&frame).ok_or_else(|| StreamError::Unexpected {
                at: offset,
                what: format!("{frame:?}"),
            })?;
            store.insert(key, value);
            used += len;
        }
        self.last_write = store.keys().map(|&k| (k, offset)).collect();
        self.store = store;
        self.backlog.reset(offset);
        self.ids = ids;
        self.history_primary = Some(primary);
        self.history_epoch = primary_epoch;
        self.cursor.reset(offset);
        Ok(())
    }
}

fn key_name(key: Key) -> String {
    format!("key:{key}")
}

/// `SET key:<k> <v>` as the primary propagates it.
fn set_command(key: Key, value: Value) -> Vec<u8> {
    let key = key_name(key);
    let value = value.to_string();
    let argv: [&[u8]; 3] = [b"SET", key.as_bytes(), value.as_bytes()];
    let commands = propagate(&argv, &WriteEffect::None).expect("SET propagates as itself");
    encode_stream(&commands)
}

fn parse_set(frame: &Frame) -> Option<(Key, Value)> {
    let Frame::Array(items) = frame else {
        return None;
    };
    let [Frame::Bulk(name), Frame::Bulk(key), Frame::Bulk(value)] = items.as_slice() else {
        return None;
    };
    parse_set_args(&[name, key, value])
}

/// `SET key:<k> <v>` from a command's arguments.
fn parse_set_args(args: &[&[u8]]) -> Option<(Key, Value)> {
    let [name, key, value] = args else {
        return None;
    };
    if !name.eq_ignore_ascii_case(b"SET") {
        return None;
    }
    let key = std::str::from_utf8(key)
        .ok()?
        .strip_prefix("key:")?
        .parse()
        .ok()?;
    let value = std::str::from_utf8(value).ok()?.parse().ok()?;
    Some((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Goal: a replica executing a primary's backlog, cut anywhere, ends with the same store
    /// and offset; a snapshot loads as the store it was taken from.
    #[test]
    fn a_stream_cut_anywhere_and_a_snapshot_rebuild_the_store() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut primary = ReplNode::new(&mut rng);
        for i in 0..50u64 {
            primary.write((i % 7) as Key, i + 1);
        }
        let stream = primary.backlog.range(1).unwrap().to_vec();
        let mut replica = ReplNode::new(&mut rng);
        let mut acked = 0;
        for chunk in stream.chunks(13) {
            acked = replica.execute(chunk).unwrap();
        }
        assert_eq!(acked, primary.offset());
        assert_eq!(replica.store, primary.store);
        assert_eq!(replica.last_write(3), primary.last_write(3));

        let mut loaded = ReplNode::new(&mut rng);
        let ids = ReplicationIds::with_replid(primary.ids.replid());
        loaded
            .load(&primary.snapshot(), primary.offset(), ids, 0, 0)
            .unwrap();
        assert_eq!(loaded.store, primary.store);
        assert_eq!(loaded.offset(), primary.offset());
        assert!(replica.execute(b"*1\r\n$4\r\nPING\r\n").is_err());
    }
}
