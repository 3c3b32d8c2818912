//! A replica executing its primary's stream: the released bytes, cut into whole commands by
//! the replication core's [`StreamCursor`] (which also keeps the offsets a replica
//! acknowledges and mirrors), run through the dispatcher as the primary's client (no replies;
//! writes allowed on a read-only replica), and mirrored into this node's own history.

use crate::node_state::client::ClientShared;
use crate::replication::stream_cursor::{AfterCommand, CursorError, StreamCursor};
use crate::server::session::{Session, Step};
use crate::server::Server;
use proto::resp::RequestLimits;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("the primary's stream is not RESP commands at offset {at}: {reason}")]
    Protocol { at: u64, reason: String },
    #[error("the primary's stream closed the replica's session at offset {0}")]
    Closed(u64),
}

pub struct StreamApplier {
    session: Session,
    cursor: StreamCursor,
}

impl StreamApplier {
    /// An applier whose next byte is `executed + 1`, in the database the mirrored stream is
    /// in there (kept across reconnects and, through saves, restarts: the primary selects
    /// only when its stream's database changes).
    pub fn new(server: &Arc<Server>, executed: u64) -> Self {
        let unspecified = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0);
        let shared = Arc::new(ClientShared::new(
            server.clients.next_id(),
            unspecified,
            unspecified,
        ));
        shared.primary_link.store(true, Relaxed);
        // Listed (CLIENT LIST TYPE master) and killable: a kill drops the link, which then
        // reconnects and resyncs (partially when the primary still has the bytes).
        server.clients.add(shared.clone());
        let mut session = Session::new(server.clone(), shared);
        session.client.authenticated = true;
        session.client.primary_link = true;
        session.client.select(server.replication.stream_db());
        StreamApplier {
            session,
            cursor: StreamCursor::new(executed),
        }
    }

    /// CLIENT KILL (TYPE master) was given: the link must be dropped.
    pub fn killed(&self) -> bool {
        self.session.shared().is_killed()
    }

    /// The offset the replica may acknowledge.
    pub fn applied(&self) -> u64 {
        self.cursor.applied()
    }

    /// A full sync loaded a snapshot at `offset`: the stream continues after it, and whatever
    /// was pending or half-open belongs to the replaced dataset.
    pub fn reset(&mut self, offset: u64) {
        self.cursor.reset(offset);
        self.session.client.multi = None;
        // The primary's stream selects again after a full sync; until then, as Redis's
        // fresh master client, database 0.
        self.session.client.select(0);
    }
}

impl Drop for StreamApplier {
    fn drop(&mut self) {
        self.session.cleanup();
    }
}

impl StreamApplier {
    /// Executes every whole command in `bytes` (the stream's next bytes, in order).
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), ApplyError> {
        let limits = RequestLimits {
            max_bulk_len: self.session.server.hot.proto_max_bulk_len.load(Relaxed) as usize,
            ..RequestLimits::default()
        };
        let server = self.session.server.clone();
        // The commands change the dataset before they are mirrored into the history (not
        // under their shards, as a primary feeds): a save meanwhile is not exact.
        let _unfed = server.replication.unfed_write();
        let session = &mut self.session;
        // The session's database after the last command run: the stream's after the
        // settled bytes the mirror gets.
        let db = std::cell::Cell::new(session.client.db);
        let run = |command: crate::replication::stream_cursor::StreamCommand<'_>| {
            session.input.extend_from_slice(command.bytes);
            let (step, _) = session.process_input();
            // The primary's client gets no replies.
            session.output.clear();
            db.set(session.client.db);
            if matches!(step, Step::Close) {
                return Err(ApplyError::Closed(command.at));
            }
            Ok(match session.client.multi {
                Some(_) => AfterCommand::InTransaction,
                None => AfterCommand::Settled,
            })
        };
        let mirror = |settled: &[u8], applied: u64| {
            let mirrored = server.replication.feed_raw(settled, db.get());
            debug_assert_eq!(mirrored, applied, "the history left the stream");
        };
        self.cursor
            .push(bytes, &limits, run, mirror)
            .map_err(|e| match e {
                CursorError::Protocol { at, reason } => ApplyError::Protocol { at, reason },
                CursorError::Run(e) => e,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::db::Locked;
    use crate::server::unix_millis;

    fn resp(args: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        out
    }

    fn get(server: &Server, key: &[u8]) -> Option<String> {
        let db = Locked::lock_all(&server.keyspace, unix_millis(), 0);
        db.get_shared(key).map(|e| format!("{:?}", e.value))
    }

    /// Goal: commands split anywhere execute once each, in order, writes pass although the
    /// node is a replica, and the applied offset never stops inside a command or an open
    /// transaction. Method: a stream fed byte by byte, the offset checked after each byte.
    #[test]
    fn whole_commands_run_and_the_applied_offset_skips_open_transactions() {
        crate::commands::install_table();
        let server = Arc::new(Server::new(Config::default()));
        server.replica_of.follow("127.0.0.1", 1);
        let first = resp(&["SET", "a", "1"]);
        let txn = [
            resp(&["MULTI"]),
            resp(&["INCR", "n"]),
            resp(&["INCR", "n"]),
            resp(&["EXEC"]),
        ]
        .concat();
        let stream = [first.clone(), txn.clone()].concat();
        let base = 100;
        let primary_id = crate::replication::ids::ReplId::parse(&[b'b'; 40]).unwrap();
        server.replication.adopt_history(primary_id, base);
        let mut a = StreamApplier::new(&server, base);
        for (i, b) in stream.iter().enumerate() {
            a.push(&[*b]).unwrap();
            let fed = i as u64 + 1;
            let expected = if fed < first.len() as u64 {
                base
            } else if fed < stream.len() as u64 {
                base + first.len() as u64
            } else {
                base + stream.len() as u64
            };
            assert_eq!(a.applied(), expected, "after {fed} bytes");
        }
        assert!(get(&server, b"a").is_some());
        assert_eq!(
            get(&server, b"n"),
            Some(format!("{:?}", crate::db::Value::Int(2)))
        );
        assert_eq!(
            server.replication.history(),
            (primary_id, base + stream.len() as u64),
            "the replica's own history mirrors the stream"
        );
        assert!(a.push(b"*1\r\n$x\r\n").is_err(), "garbage is an error");
        a.reset(500);
        assert_eq!(a.applied(), 500);
    }
}
