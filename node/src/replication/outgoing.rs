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
}

impl Outgoing {
    /// A write that changed the dataset (its `dirty` count moved), with what it decided.
    pub fn command(&mut self, argv: &[&[u8]], effect: &WriteEffect) -> Result<(), PropagateError> {
        self.commands.extend(propagate(argv, effect)?);
        Ok(())
    }

    /// A key the request found expired (or evicted to make room) and deleted: the replica
    /// deletes it first, as it happened first.
    pub fn key_removed(&mut self, key: &[u8]) {
        self.commands.push(key_removed(key));
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
    /// `out`. The collection stays: the AOF and the backlog each encode it.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let wrapped = self.commands.len() >= 2;
        if wrapped {
            out.extend_from_slice(MULTI);
        }
        encode_into(&self.commands, out);
        if wrapped {
            out.extend_from_slice(EXEC);
        }
    }

    /// As [`Outgoing::encode_into`], then empties the collector.
    pub fn finish_into(&mut self, out: &mut Vec<u8>) {
        self.encode_into(out);
        self.commands.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::propagate::encode_stream;

    #[test]
    fn one_command_goes_alone_several_go_as_a_transaction() {
        let mut out = Outgoing::default();
        assert!(out.is_empty());
        out.command(&[b"SET", b"k", b"v"], &WriteEffect::None)
            .unwrap();
        let mut bytes = Vec::new();
        out.finish_into(&mut bytes);
        assert_eq!(bytes, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
        assert!(out.is_empty());

        out.key_removed(b"old");
        out.command(&[b"EXPIRE", b"k", b"5"], &WriteEffect::ExpiresAtMs(9))
            .unwrap();
        let mut bytes = Vec::new();
        out.finish_into(&mut bytes);
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
        out.command(&[b"GETEX", b"k"], &WriteEffect::None).unwrap();
        assert!(out.is_empty());
        assert!(out
            .command(&[b"EXPIRE", b"k", b"5"], &WriteEffect::None)
            .is_err());
        assert!(out.is_empty());
    }
}
