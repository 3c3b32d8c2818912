//! A replica's reading of its primary's stream, without I/O: released bytes in, whole
//! commands out (each with the offset of its first byte), and the two offsets a replica keeps.
//!
//! - `executed`: the last stream byte whose command ran.
//! - `applied`: the last byte after which no transaction was open: what the replica may
//!   acknowledge and what its own history (the backlog it serves once promoted) mirrors.
//!   Inside MULTI the queued commands have not changed the dataset yet, and a resync from a
//!   point inside the transaction would lose its MULTI, so both stop before it until EXEC.
//!
//! The caller runs each command ([`StreamCursor::push`]'s `run`, which says whether a
//! transaction is open after it) and mirrors whole stretches into its history (`mirror`):
//! the node through its dispatcher and backlog, the chaos crate through its simulated store.

use proto::resp::request::Parsed;
use proto::resp::{RequestLimits, RequestParser};
use smallvec::SmallVec;

/// One whole command of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCommand<'a> {
    /// The stream offset of its first byte.
    pub at: u64,
    /// Its RESP bytes, exactly as the primary sent them.
    pub bytes: &'a [u8],
    /// Its arguments, the command name first.
    pub args: &'a [&'a [u8]],
}

/// What running a command left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterCommand {
    /// No transaction is open: the stream up to here may be acknowledged and mirrored.
    Settled,
    /// A MULTI is open: acknowledging and mirroring wait for its EXEC (or DISCARD).
    InTransaction,
}

#[derive(Debug, thiserror::Error)]
pub enum CursorError<E> {
    #[error("the primary's stream is not RESP commands at offset {at}: {reason}")]
    Protocol { at: u64, reason: String },
    /// Running a command failed; the stream cannot go on past it.
    #[error(transparent)]
    Run(E),
}

#[derive(Debug)]
pub struct StreamCursor {
    parser: RequestParser,
    /// Released bytes not yet run (at most one incomplete command after `push`).
    pending: Vec<u8>,
    executed: u64,
    applied: u64,
    /// Bytes run past `applied` (an open transaction's), mirrored once it ends.
    unmirrored: Vec<u8>,
    /// A transaction was open after the last command run.
    in_transaction: bool,
}

impl StreamCursor {
    /// A cursor whose next byte is `executed + 1`, with nothing open.
    pub fn new(executed: u64) -> Self {
        StreamCursor {
            parser: RequestParser::new(),
            pending: Vec::new(),
            executed,
            applied: executed,
            unmirrored: Vec::new(),
            in_transaction: false,
        }
    }

    /// The last stream byte whose command ran.
    pub fn executed(&self) -> u64 {
        self.executed
    }

    /// The offset the replica may acknowledge (see the module comment).
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// The stream goes on after `offset` (a full sync loaded a snapshot taken there, or a new
    /// link starts): whatever was pending or half-open belongs to what was replaced. The
    /// caller ends a transaction its executor may still hold open.
    pub fn reset(&mut self, offset: u64) {
        self.parser = RequestParser::new();
        self.pending.clear();
        self.unmirrored.clear();
        self.in_transaction = false;
        self.executed = offset;
        self.applied = offset;
    }

    /// Takes the stream's next `bytes` (in order) and runs every whole command they complete:
    /// `run` executes one and says whether a transaction is open after it; `mirror` gets
    /// each stretch that ends settled, in order, and must extend the replica's history to
    /// exactly [`StreamCursor::applied`] (checked in debug builds by the caller's return).
    pub fn push<E>(
        &mut self,
        bytes: &[u8],
        limits: &RequestLimits,
        mut run: impl FnMut(StreamCommand<'_>) -> Result<AfterCommand, E>,
        mut mirror: impl FnMut(&[u8], u64),
    ) -> Result<(), CursorError<E>> {
        self.pending.extend_from_slice(bytes);
        let mut pos = 0;
        let result = loop {
            if pos >= self.pending.len() {
                break Ok(());
            }
            let at = self.executed + pos as u64 + 1;
            // A stream (and an AOF) holds RESP arrays only: an inline command is damage.
            if !self.parser.in_progress() && self.pending[pos] != b'*' {
                break Err(CursorError::Protocol {
                    at,
                    reason: format!("expected '*', got {:?}", self.pending[pos] as char),
                });
            }
            let len = match self.parser.parse(&self.pending[pos..], limits) {
                Ok(Parsed::Request { len }) => {
                    let bytes = &self.pending[pos..pos + len];
                    let args: SmallVec<[&[u8]; 8]> = (0..self.parser.arg_count())
                        .map(|i| self.parser.arg(bytes, i))
                        .collect();
                    let command = StreamCommand {
                        at,
                        bytes,
                        args: &args,
                    };
                    match run(command) {
                        Ok(after) => self.in_transaction = after == AfterCommand::InTransaction,
                        Err(e) => break Err(CursorError::Run(e)),
                    }
                    len
                }
                // Empty arrays change nothing: they settle as what preceded.
                Ok(Parsed::Empty { len }) => len,
                Ok(Parsed::Incomplete) => break Ok(()),
                Err(e) => {
                    break Err(CursorError::Protocol {
                        at,
                        reason: e.to_string(),
                    })
                }
            };
            self.unmirrored
                .extend_from_slice(&self.pending[pos..pos + len]);
            pos += len;
            if !self.in_transaction {
                self.applied = self.executed + pos as u64;
                mirror(&self.unmirrored, self.applied);
                self.unmirrored.clear();
            }
        };
        self.pending.drain(..pos);
        self.executed += pos as u64;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(args: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        out
    }

    /// A replica in miniature: records what ran (and where) and what was mirrored; MULTI
    /// opens a transaction, EXEC and DISCARD end it.
    #[derive(Default)]
    struct Replica {
        ran: Vec<(u64, String)>,
        history: Vec<u8>,
        open: bool,
    }

    impl Replica {
        fn push(&mut self, c: &mut StreamCursor, bytes: &[u8]) -> Result<(), CursorError<()>> {
            let Replica { ran, history, open } = self;
            let base = c.applied() - history.len() as u64;
            c.push(
                bytes,
                &RequestLimits::default(),
                |cmd| {
                    let name = String::from_utf8_lossy(cmd.args[0]).to_ascii_uppercase();
                    match name.as_str() {
                        "MULTI" => *open = true,
                        "EXEC" | "DISCARD" => *open = false,
                        "FAIL" => return Err(()),
                        _ => {}
                    }
                    ran.push((cmd.at, name));
                    Ok(if *open {
                        AfterCommand::InTransaction
                    } else {
                        AfterCommand::Settled
                    })
                },
                |bytes, applied| {
                    history.extend_from_slice(bytes);
                    assert_eq!(
                        base + history.len() as u64,
                        applied,
                        "history left the stream"
                    );
                },
            )
        }
    }

    /// Goal: commands split anywhere run once each, in order, at their offsets; the applied
    /// offset never stops inside a command or an open transaction, and the history mirrors
    /// exactly the settled stream. Method: a stream fed byte by byte, checked after each.
    #[test]
    fn commands_cut_anywhere_run_once_and_applied_skips_open_transactions() {
        let first = resp(&["SET", "a", "1"]);
        let txn = [
            resp(&["MULTI"]),
            resp(&["INCR", "n"]),
            b"*-1\r\n".to_vec(),
            resp(&["EXEC"]),
        ]
        .concat();
        let last = [b"*0\r\n".to_vec(), resp(&["DEL", "a"])].concat();
        let stream = [first.clone(), txn.clone(), last.clone()].concat();
        let base = 100;
        let mut c = StreamCursor::new(base);
        let mut r = Replica::default();
        let (f, t) = (first.len() as u64, txn.len() as u64);
        for (i, b) in stream.iter().enumerate() {
            r.push(&mut c, &[*b]).unwrap();
            let fed = i as u64 + 1;
            let expected = match fed {
                n if n < f => 0,
                n if n < f + t => f,
                n if n < f + t + 4 => f + t,
                n if n < stream.len() as u64 => f + t + 4,
                _ => stream.len() as u64,
            };
            assert_eq!(c.applied(), base + expected, "after {fed} bytes");
            assert_eq!(
                r.history.len() as u64,
                expected,
                "mirrored after {fed} bytes"
            );
        }
        let names: Vec<&str> = r.ran.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(names, ["SET", "MULTI", "INCR", "EXEC", "DEL"]);
        assert_eq!(r.ran[0].0, base + 1);
        assert_eq!(r.ran[1].0, base + f + 1);
        assert_eq!(r.history, stream);
        assert_eq!(c.executed(), base + stream.len() as u64);
    }

    /// Goal: garbage is a typed error naming its offset; a failed command stops the stream
    /// before it (the commands before it count as run); a reset forgets a half-open
    /// transaction and a partial command.
    #[test]
    fn garbage_and_failures_stop_the_stream_and_a_reset_starts_clean() {
        let mut c = StreamCursor::new(0);
        let mut r = Replica::default();
        let ok = resp(&["SET", "a", "1"]);
        let stream = [ok.clone(), resp(&["FAIL"]), resp(&["SET", "b", "2"])].concat();
        assert!(matches!(r.push(&mut c, &stream), Err(CursorError::Run(()))));
        assert_eq!(c.executed(), ok.len() as u64);
        assert_eq!(c.applied(), ok.len() as u64);

        let mut c = StreamCursor::new(10);
        let mut r = Replica::default();
        match r.push(&mut c, b"*1\r\n$x\r\n") {
            Err(CursorError::Protocol { at, .. }) => assert_eq!(at, 11),
            other => panic!("{other:?}"),
        }
        let mut c = StreamCursor::new(0);
        let ok = resp(&["SET", "a", "1"]);
        match r.push(&mut c, &[ok.clone(), b"SET b 2\r\n".to_vec()].concat()) {
            Err(CursorError::Protocol { at, reason }) => {
                assert_eq!(at, ok.len() as u64 + 1);
                assert!(reason.contains("expected '*'"), "{reason}");
            }
            other => panic!("inline commands are not stream: {other:?}"),
        }

        let mut c = StreamCursor::new(0);
        let mut r = Replica::default();
        let open = [resp(&["MULTI"]), resp(&["INCR", "n"]), b"*2\r\n$3".to_vec()].concat();
        r.push(&mut c, &open).unwrap();
        assert_eq!(c.applied(), 0);
        c.reset(500);
        r.open = false;
        r.history.clear();
        let after = resp(&["SET", "c", "3"]);
        r.push(&mut c, &after).unwrap();
        assert_eq!(c.applied(), 500 + after.len() as u64);
        assert_eq!(r.history, after);
    }
}
