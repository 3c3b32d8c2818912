//! What one client request adds to the replication stream: the rewritten writes it executed
//! (one command, or each write of an EXEC) and the keys it found expired on the way, encoded
//! once as a unit. More than one command goes out as MULTI ... EXEC so that a replica applies
//! them atomically, as Redis 7 wraps everything one call propagates.
//!
//! Bounded by the request itself: every command here is one the request executed, or a DEL of
//! a key it touched; SPOP's pops are cut into [`SREM_BATCH_MAX`](super::propagate::SREM_BATCH_MAX)
//! batches.

use super::propagate::WriteEffect;
use super::propagate::{encode_into, key_removed, propagate, Argv, PropagateError};

const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";

#[derive(Debug, Default)]
pub struct Outgoing {
    commands: Vec<Argv>,
    /// The database of the first command, and of the last (a SELECT is among the commands
    /// wherever the database changes in between).
    first_db: usize,
    last_db: usize,
    /// Set by the first command only replicas get (PUBLISH, as Redis propagates it): the
    /// same collection without those, which is what the AOF logs. None for nearly every
    /// request.
    logged: Option<Box<Outgoing>>,
}

/// `SELECT db` as the stream carries it (Redis emits it wherever the database of a write
/// differs from the previous write's).
pub fn select_command(db: usize) -> Argv {
    vec![b"SELECT".to_vec(), db.to_string().into_bytes()]
}

impl Outgoing {
    /// A write in database `db` that changed the dataset (its `dirty` count moved), with
    /// what it decided.
    pub fn command(
        &mut self,
        db: usize,
        argv: &[&[u8]],
        effect: &WriteEffect,
    ) -> Result<(), PropagateError> {
        let commands = propagate(argv, effect)?;
        if !commands.is_empty() {
            if let Some(logged) = self.logged.as_mut() {
                logged.push(db, commands.iter().cloned());
            }
            self.push(db, commands);
        }
        Ok(())
    }

    /// A command for replicas only (PUBLISH outside cluster mode, so that a replica's
    /// subscribers hear what the primary's hear, as Redis's `PROPAGATE_REPL`): in the
    /// stream in its place among the request's writes, left out of the AOF.
    pub fn replica_only_command(&mut self, db: usize, argv: &[&[u8]]) {
        if self.logged.is_none() {
            self.logged = Some(Box::new(Outgoing {
                commands: self.commands.clone(),
                first_db: self.first_db,
                last_db: self.last_db,
                logged: None,
            }));
        }
        self.push(db, [argv.iter().map(|a| a.to_vec()).collect()]);
    }

    /// A key of database `db` the request found expired (or evicted to make room) and
    /// deleted: the replica deletes it first, as it happened first.
    pub fn key_removed(&mut self, db: usize, key: &[u8]) {
        if let Some(logged) = self.logged.as_mut() {
            logged.push(db, [key_removed(key)]);
        }
        self.push(db, [key_removed(key)]);
    }

    /// Appends `commands` of database `db`, after a SELECT if the database changes.
    fn push(&mut self, db: usize, commands: impl IntoIterator<Item = Argv>) {
        self.enter(db);
        self.commands.extend(commands);
    }

    /// Notes that the next command is in `db`.
    fn enter(&mut self, db: usize) {
        if self.commands.is_empty() {
            self.first_db = db;
        } else if db != self.last_db {
            self.commands.push(select_command(db));
        }
        self.last_db = db;
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// The commands collected, in order (a migration link takes them one by one).
    pub fn commands(&self) -> &[Argv] {
        &self.commands
    }

    /// The stream bytes for everything collected (MULTI/EXEC-wrapped when more than one
    /// command, as [`transaction`](super::propagate::transaction) wraps them), appended to
    /// `out`, preceded by a SELECT when the first command's database is not the consumer's
    /// `selected` one (what its stream last selected; None: unknown, so the next request
    /// selects whatever its database): Redis's `slaveseldb` / `aof_selected_db`. A reader
    /// that starts in the middle of a stream must know the database there: the producer
    /// sets `selected` to None where a reader may start afresh (a full sync, a new AOF
    /// increment), and one that continues (a partial resync) carries its own. The
    /// collection stays: the AOF and the backlog each encode it, each with its own
    /// `selected`.
    pub fn encode_into(&self, out: &mut Vec<u8>, selected: &mut Option<usize>) {
        if self.commands.is_empty() {
            return;
        }
        if *selected != Some(self.first_db) {
            encode_into(&[select_command(self.first_db)], out);
        }
        *selected = Some(self.last_db);
        let wrapped = self.commands.len() >= 2;
        if wrapped {
            out.extend_from_slice(MULTI);
        }
        encode_into(&self.commands, out);
        if wrapped {
            out.extend_from_slice(EXEC);
        }
    }

    /// As [`Outgoing::encode_into`] without the replica-only commands: what the AOF logs.
    pub fn encode_log_into(&self, out: &mut Vec<u8>, selected: &mut Option<usize>) {
        self.logged
            .as_deref()
            .unwrap_or(self)
            .encode_into(out, selected);
    }

    /// As [`Outgoing::encode_into`], then empties the collector.
    pub fn finish_into(&mut self, out: &mut Vec<u8>, selected: &mut Option<usize>) {
        self.encode_into(out, selected);
        self.commands.clear();
        self.logged = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::propagate::encode_stream;

    /// Replica-only commands (PUBLISH) are in the stream in their place and not in the log,
    /// whose database markers and wrapping follow only what it logs.
    #[test]
    fn replica_only_commands_reach_the_stream_and_not_the_log() {
        let cmd = |args: &[&str]| -> Argv { args.iter().map(|a| a.as_bytes().to_vec()).collect() };
        let mut out = Outgoing::default();
        out.replica_only_command(0, &[b"PUBLISH", b"ch", b"m"]);
        out.command(1, &[b"SET", b"k", b"v"], &WriteEffect::None)
            .unwrap();
        out.command(1, &[b"SET", b"k2", b"v"], &WriteEffect::None)
            .unwrap();
        out.replica_only_command(2, &[b"PUBLISH", b"ch", b"n"]);

        let mut log = Vec::new();
        let mut log_selected = Some(1);
        out.encode_log_into(&mut log, &mut log_selected);
        let expect = encode_stream(&[
            cmd(&["MULTI"]),
            cmd(&["SET", "k", "v"]),
            cmd(&["SET", "k2", "v"]),
            cmd(&["EXEC"]),
        ]);
        assert_eq!(log, expect, "{}", String::from_utf8_lossy(&log));
        assert_eq!(
            log_selected,
            Some(1),
            "the trailing marker to 2 is not logged"
        );

        let mut stream = Vec::new();
        let mut stream_selected = None;
        out.finish_into(&mut stream, &mut stream_selected);
        let expect = encode_stream(&[
            cmd(&["SELECT", "0"]),
            cmd(&["MULTI"]),
            cmd(&["PUBLISH", "ch", "m"]),
            cmd(&["SELECT", "1"]),
            cmd(&["SET", "k", "v"]),
            cmd(&["SET", "k2", "v"]),
            cmd(&["SELECT", "2"]),
            cmd(&["PUBLISH", "ch", "n"]),
            cmd(&["EXEC"]),
        ]);
        assert_eq!(stream, expect, "{}", String::from_utf8_lossy(&stream));
        assert_eq!(stream_selected, Some(2));

        // Nothing but replica-only commands: the log gets nothing and keeps its database.
        out.replica_only_command(3, &[b"PUBLISH", b"ch", b"o"]);
        let mut log = Vec::new();
        out.encode_log_into(&mut log, &mut log_selected);
        assert!(log.is_empty());
        assert_eq!(log_selected, Some(1));
        let mut stream = Vec::new();
        out.finish_into(&mut stream, &mut stream_selected);
        let expect = encode_stream(&[cmd(&["SELECT", "3"]), cmd(&["PUBLISH", "ch", "o"])]);
        assert_eq!(stream, expect);
    }

    #[test]
    fn one_command_goes_alone_several_go_as_a_transaction() {
        let mut out = Outgoing::default();
        assert!(out.is_empty());
        out.command(0, &[b"SET", b"k", b"v"], &WriteEffect::None)
            .unwrap();
        let mut bytes = Vec::new();
        let mut selected = Some(0);
        out.finish_into(&mut bytes, &mut selected);
        assert_eq!(bytes, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
        assert!(out.is_empty());

        out.key_removed(0, b"old");
        out.command(0, &[b"EXPIRE", b"k", b"5"], &WriteEffect::ExpiresAtMs(9))
            .unwrap();
        let mut bytes = Vec::new();
        out.finish_into(&mut bytes, &mut selected);
        let expect = encode_stream(&[
            vec![b"MULTI".to_vec()],
            vec![b"DEL".to_vec(), b"old".to_vec()],
            vec![b"PEXPIREAT".to_vec(), b"k".to_vec(), b"9".to_vec()],
            vec![b"EXEC".to_vec()],
        ]);
        assert_eq!(bytes, expect);
    }

    #[test]
    fn a_command_that_propagates_nothing_adds_nothing() {
        let mut out = Outgoing::default();
        out.command(0, &[b"GETEX", b"k"], &WriteEffect::None)
            .unwrap();
        assert!(out.is_empty());
        assert!(out
            .command(0, &[b"EXPIRE", b"k", b"5"], &WriteEffect::None)
            .is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn a_write_in_another_database_than_the_consumers_is_preceded_by_select() {
        let mut out = Outgoing::default();
        let mut selected = None;
        let mut bytes = Vec::new();
        out.command(3, &[b"SET", b"k", b"v"], &WriteEffect::None)
            .unwrap();
        out.finish_into(&mut bytes, &mut selected);
        assert_eq!(
            bytes,
            encode_stream(&[
                select_command(3),
                vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()]
            ])
        );
        assert_eq!(selected, Some(3));
        // The stream stays in database 3: no SELECT before the next request there; a
        // change inside one request: a SELECT in between.
        let mut bytes = Vec::new();
        out.command(3, &[b"DEL", b"k"], &WriteEffect::None).unwrap();
        out.key_removed(0, b"x");
        out.finish_into(&mut bytes, &mut selected);
        let expect = encode_stream(&[
            vec![b"MULTI".to_vec()],
            vec![b"DEL".to_vec(), b"k".to_vec()],
            select_command(0),
            vec![b"DEL".to_vec(), b"x".to_vec()],
            vec![b"EXEC".to_vec()],
        ]);
        assert_eq!(bytes, expect);
        assert_eq!(selected, Some(0));
        // Back in database 0 after it: no SELECT.
        let mut bytes = Vec::new();
        out.command(0, &[b"DEL", b"y"], &WriteEffect::None).unwrap();
        out.finish_into(&mut bytes, &mut selected);
        assert_eq!(
            bytes,
            encode_stream(&[vec![b"DEL".to_vec(), b"y".to_vec()]])
        );
        // Another database: selected again.
        let mut bytes = Vec::new();
        out.command(5, &[b"DEL", b"z"], &WriteEffect::None).unwrap();
        out.finish_into(&mut bytes, &mut selected);
        assert_eq!(
            bytes,
            encode_stream(&[select_command(5), vec![b"DEL".to_vec(), b"z".to_vec()]])
        );
    }

    #[test]
    fn an_unknown_selection_selects_even_database_0() {
        let mut out = Outgoing::default();
        let mut selected = None;
        let mut bytes = Vec::new();
        out.command(0, &[b"SET", b"k", b"v"], &WriteEffect::None)
            .unwrap();
        out.finish_into(&mut bytes, &mut selected);
        assert_eq!(
            bytes,
            encode_stream(&[
                select_command(0),
                vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()]
            ])
        );
        assert_eq!(selected, Some(0));
    }
}
