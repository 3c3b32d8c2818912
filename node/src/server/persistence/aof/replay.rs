//! Replaying an increment at start: its RESP commands run through the dispatcher, in order,
//! as a client that every check lets through (Redis's AOF "fake client": the primary link's
//! rights, no replies). Read in chunks, so memory holds one command and one chunk.
//!
//! A command cut short at the end of the file, or a transaction whose EXEC never came, is a
//! truncated tail: the caller decides whether that is acceptable (only at the very end of
//! the last increment, with `aof-load-truncated yes`). Anything else that is not a RESP
//! command array, or a command this node does not know, is damage.

use crate::command_framework::dispatch;
use crate::node_state::client::{Client, ClientShared};
use crate::node_state::stats::LocalStats;
use crate::replication::stream_cursor::{AfterCommand, CursorError, StreamCommand, StreamCursor};
use crate::server::Server;
use bytes::BytesMut;
use proto::resp::RequestLimits;
use std::fs::File;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

/// Bytes read from the file at a time.
pub const READ_CHUNK: usize = 1 << 20;
/// Error replies logged one by one; past this they are only counted.
const LOGGED_ERRORS_MAX: u64 = 10;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Replayed {
    pub commands: u64,
    /// Bytes of whole commands (and transactions) executed: where a truncated tail starts.
    pub good_len: u64,
    /// The file ended inside a command or an open transaction.
    pub truncated: bool,
    /// Commands that answered an error (not damage: logged and counted).
    pub errors: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot read: {0}")]
    Read(std::io::Error),
    #[error("bad format at offset {offset}: {reason}")]
    Damaged { offset: u64, reason: String },
}

/// Runs every whole command of `path` against `server`'s keyspace.
pub fn replay_file(server: &Arc<Server>, path: &Path) -> Result<Replayed, ReplayError> {
    let mut file = File::open(path).map_err(ReplayError::Read)?;
    replay(server, |buf| file.read(buf))
}

/// Runs the commands `read` yields (a file's bytes, in order) until it returns 0. The file
/// is cut into commands by the same core a replica reads its primary's stream with
/// ([`StreamCursor`]): its settled offset is where a truncated tail starts.
pub fn replay(
    server: &Arc<Server>,
    mut read: impl FnMut(&mut [u8]) -> std::io::Result<usize>,
) -> Result<Replayed, ReplayError> {
    let mut loader = Loader::new(server);
    let limits = RequestLimits {
        max_bulk_len: server.config.read().proto_max_bulk_len as usize,
        ..RequestLimits::default()
    };
    // Cursor offsets count from 1; file offsets from 0 (cursor offset = file offset + 1).
    let mut cursor = StreamCursor::new(0);
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut out = Replayed::default();
    let mut read_len = 0u64;
    loop {
        let n = read(&mut chunk).map_err(ReplayError::Read)?;
        if n == 0 {
            break;
        }
        read_len += n as u64;
        let run = |command: StreamCommand<'_>| {
            let offset = command.at - 1;
            loader.execute(command.args, offset, &mut out)?;
            out.commands += 1;
            Ok(match loader.client.multi {
                Some(_) => AfterCommand::InTransaction,
                None => AfterCommand::Settled,
            })
        };
        // Nothing to mirror: a node's own AOF is not a replication history.
        cursor
            .push(&chunk[..n], &limits, run, |_, _| {})
            .map_err(|e| match e {
                CursorError::Protocol { at, reason } => ReplayError::Damaged {
                    offset: at - 1,
                    reason,
                },
                CursorError::Run(e) => e,
            })?;
    }
    out.good_len = cursor.applied();
    out.truncated = out.good_len < read_len;
    Ok(out)
}

/// The dispatcher's view of the file: a client that may do anything, replies dropped.
struct Loader<'a> {
    server: &'a Arc<Server>,
    client: Client,
    reply: BytesMut,
    stats: LocalStats,
}

impl<'a> Loader<'a> {
    fn new(server: &'a Arc<Server>) -> Self {
        let unspecified = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0);
        let shared = Arc::new(ClientShared::new(
            server.clients.next_id(),
            unspecified,
            unspecified,
        ));
        let mut client = Client::new(shared, true);
        // The primary link's rights: no redirects, no read-only refusal, no pauses.
        client.primary_link = true;
        Loader {
            server,
            client,
            reply: BytesMut::new(),
            stats: LocalStats::default(),
        }
    }

    fn execute(
        &mut self,
        args: &[&[u8]],
        offset: u64,
        out: &mut Replayed,
    ) -> Result<(), ReplayError> {
        self.reply.clear();
        let _effects = dispatch::execute(
            &**self.server,
            &mut self.client,
            &mut self.reply,
            args,
            &mut self.stats,
        );
        if self.reply.first() != Some(&b'-') {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&self.reply[1..])
            .trim_end()
            .to_string();
        if text.starts_with("ERR unknown command") {
            return Err(ReplayError::Damaged {
                offset,
                reason: text,
            });
        }
        out.errors += 1;
        if out.errors <= LOGGED_ERRORS_MAX {
            tracing::warn!(offset, reply = %text, "a command from the AOF answered an error");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::db::Locked;
    use crate::server::unix_millis;
    use proptest::prelude::*;

    fn resp(args: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        out
    }

    fn run(server: &Arc<Server>, bytes: &[u8]) -> Result<Replayed, ReplayError> {
        // Two-byte reads: every command and header is split across chunks.
        let mut at = 0;
        replay(server, |buf| {
            let n = (bytes.len() - at).min(2).min(buf.len());
            buf[..n].copy_from_slice(&bytes[at..at + n]);
            at += n;
            Ok(n)
        })
    }

    fn value(server: &Server, key: &str) -> Option<String> {
        let db = Locked::lock_all(&server.keyspace, unix_millis(), 0);
        db.get_shared(key.as_bytes())
            .map(|e| format!("{:?}", e.value))
    }

    fn server() -> Arc<Server> {
        crate::commands::install_table();
        Arc::new(Server::new(Config::default()))
    }

    #[test]
    fn whole_commands_and_transactions_run_and_a_cut_tail_is_reported() {
        let s = server();
        let set = resp(&["SET", "a", "1"]);
        let txn = [
            resp(&["MULTI"]),
            resp(&["INCR", "n"]),
            resp(&["INCR", "n"]),
            resp(&["EXEC"]),
        ]
        .concat();
        let whole = [set.clone(), txn.clone()].concat();
        let r = run(&s, &whole).unwrap();
        assert_eq!(r.good_len, whole.len() as u64);
        assert!(!r.truncated);
        assert_eq!(r.commands, 5);
        assert!(value(&s, "a").is_some());
        assert_eq!(
            value(&s, "n"),
            Some(format!("{:?}", crate::db::Value::Int(2)))
        );

        // Cut inside the last command, and inside the transaction: the tail starts at the
        // last whole command outside a transaction.
        for cut in [whole.len() - 3, set.len() + resp(&["MULTI"]).len() + 2] {
            let s = server();
            let r = run(&s, &whole[..cut]).unwrap();
            assert!(r.truncated, "cut at {cut}");
            assert_eq!(r.good_len, set.len() as u64, "cut at {cut}");
            assert_eq!(
                value(&s, "n"),
                None,
                "an unfinished transaction changes nothing"
            );
        }
    }

    #[test]
    fn damage_is_an_error_with_its_offset() {
        let set = resp(&["SET", "a", "1"]);
        let cases: Vec<(Vec<u8>, u64)> = vec![
            (
                [set.clone(), b"garbage\r\n".to_vec()].concat(),
                set.len() as u64,
            ),
            (
                [set.clone(), b"*1\r\n$x\r\n".to_vec()].concat(),
                set.len() as u64,
            ),
            (
                [set.clone(), resp(&["NOSUCHCOMMAND", "x"])].concat(),
                set.len() as u64,
            ),
        ];
        for (bytes, at) in cases {
            match run(&server(), &bytes) {
                Err(ReplayError::Damaged { offset, .. }) => assert_eq!(offset, at),
                other => panic!("{:?}: {other:?}", String::from_utf8_lossy(&bytes)),
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Arbitrary bytes after a valid command: an outcome or an error, never a panic.
        #[test]
        fn random_tails_never_panic(tail in prop::collection::vec(any::<u8>(), 0..200)) {
            let bytes = [resp(&["SET", "a", "1"]), tail].concat();
            let _ = run(&server(), &bytes);
        }
    }
}
