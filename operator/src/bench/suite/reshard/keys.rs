//! The reshard suite's data: `key:<i>` for i in 0..N, each with a 100-byte value that names
//! its key (so a read back tells a right value from any other). Loaded with pipelines of
//! SETs, one connection per primary, routed by CLUSTER SLOTS; read back the same way after
//! the move, following MOVED (a member may learn the new owner a moment after another).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, bail};
use proto::resp::Frame;

use super::super::sync_client::{error_text, SyncClient};

/// Value bytes per key.
pub const VALUE_BYTES: usize = 100;
/// Commands per pipeline.
const PIPELINE: usize = 1000;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How many MOVED a key may be sent on by before it counts as unreadable.
const REDIRECTS_MAX: usize = 5;

pub fn key(i: u64) -> String {
    format!("key:{i}")
}

pub fn value(i: u64) -> String {
    format!("{i:0>width$}", width = VALUE_BYTES)
}

fn slot(i: u64) -> usize {
    usize::from(proto::slot::key_slot(key(i).as_bytes()))
}

/// The key indexes grouped by the port that owns their slot in `map`.
fn by_owner(keys: u64, map: &[u16]) -> anyhow::Result<BTreeMap<u16, Vec<u64>>> {
    let mut groups: BTreeMap<u16, Vec<u64>> = BTreeMap::new();
    for i in 0..keys {
        let port = map[slot(i)];
        if port == 0 {
            bail!("slot {} has no owner", slot(i));
        }
        groups.entry(port).or_default().push(i);
    }
    Ok(groups)
}

/// SETs every key at its owner, one thread per owner.
pub fn load(keys: u64, map: &[u16]) -> anyhow::Result<()> {
    let groups = by_owner(keys, map)?;
    std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .iter()
            .map(|(&port, indexes)| scope.spawn(move || load_at(port, indexes)))
            .collect();
        for h in handles {
            h.join().map_err(|_| anyhow!("a loader panicked"))??;
        }
        Ok(())
    })
}

fn load_at(port: u16, indexes: &[u64]) -> anyhow::Result<()> {
    let mut c = SyncClient::connect(port, REQUEST_TIMEOUT)?;
    for chunk in indexes.chunks(PIPELINE) {
        let commands: Vec<Vec<String>> = chunk
            .iter()
            .map(|&i| vec!["SET".to_string(), key(i), value(i)])
            .collect();
        for (reply, &i) in c.pipeline(&commands)?.iter().zip(chunk) {
            if let Some(e) = error_text(reply) {
                bail!("SET {} at port {port}: {e}", key(i));
            }
        }
    }
    Ok(())
}

/// What a read back found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadBack {
    pub checked: u64,
    /// Missing, another value, or an error reply.
    pub wrong: u64,
    pub examples: Vec<String>,
}

/// GETs every key from its owner in `map`, following MOVED.
pub fn read_back(keys: u64, map: &[u16]) -> anyhow::Result<ReadBack> {
    let groups = by_owner(keys, map)?;
    let mut out = ReadBack::default();
    let mut conns: BTreeMap<u16, SyncClient> = BTreeMap::new();
    let mut pending: Vec<(u16, Vec<u64>)> = groups.into_iter().collect();
    for _ in 0..=REDIRECTS_MAX {
        let mut moved: BTreeMap<u16, Vec<u64>> = BTreeMap::new();
        for (port, indexes) in std::mem::take(&mut pending) {
            let c = match conns.entry(port) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(SyncClient::connect(port, REQUEST_TIMEOUT)?)
                }
            };
            for chunk in indexes.chunks(PIPELINE) {
                let commands: Vec<Vec<String>> = chunk
                    .iter()
                    .map(|&i| vec!["GET".to_string(), key(i)])
                    .collect();
                for (reply, &i) in c.pipeline(&commands)?.iter().zip(chunk) {
                    match check(reply, i) {
                        Check::Right => out.checked += 1,
                        Check::Moved(to) => moved.entry(to).or_default().push(i),
                        Check::Wrong(what) => {
                            out.checked += 1;
                            out.wrong += 1;
                            if out.examples.len() < 5 {
                                out.examples
                                    .push(format!("{} at port {port}: {what}", key(i)));
                            }
                        }
                    }
                }
            }
        }
        if moved.is_empty() {
            return Ok(out);
        }
        pending = moved.into_iter().collect();
    }
    let left: usize = pending.iter().map(|(_, v)| v.len()).sum();
    bail!("{left} keys still answered MOVED after {REDIRECTS_MAX} redirects")
}

enum Check {
    Right,
    Moved(u16),
    Wrong(String),
}

fn check(reply: &Frame, i: u64) -> Check {
    if let Some(e) = error_text(reply) {
        return match moved_port(&e) {
            Some(port) => Check::Moved(port),
            None => Check::Wrong(e),
        };
    }
    match reply.as_bytes() {
        Some(v) if v == value(i).as_bytes() => Check::Right,
        Some(v) => Check::Wrong(format!("{} bytes of another value", v.len())),
        None => Check::Wrong("missing".into()),
    }
}

/// The port of `MOVED <slot> <host>:<port>`.
pub fn moved_port(error: &str) -> Option<u16> {
    let mut words = error.split_whitespace();
    if words.next()? != "MOVED" {
        return None;
    }
    words.next()?;
    words.next()?.rsplit_once(':')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_100_bytes_and_name_their_key() {
        assert_eq!(value(42).len(), VALUE_BYTES);
        assert!(value(42).ends_with("042") && value(42).starts_with("000"));
        assert_eq!(moved_port("MOVED 12 127.0.0.1:7002"), Some(7002));
        assert_eq!(moved_port("ASK 12 127.0.0.1:7002"), None);
    }
}
