//! Where the stream of executed writes goes: the append-only file while it logs, and the
//! replication backlog while one exists on a primary. Encoded per request by the
//! dispatcher ([`Outgoing`]), or per removed key by active expiry and eviction, and fed while
//! the shards it touched are still held, so both keep each key's writes in the order they
//! happened.

use crate::replication::outgoing::Outgoing;

/// The offsets a feed reached (None: that consumer did not take it).
#[derive(Debug, Clone, Copy, Default)]
pub struct Fed {
    /// `master_repl_offset` after it (what WAIT waits for).
    pub repl: Option<u64>,
    /// The AOF's offset after it (what the client's replies wait for).
    pub log: Option<u64>,
}

pub trait WriteStream {
    /// Feeds `outgoing` to the consumers that take it. Call with its shards held.
    fn feed(&self, outgoing: &mut Outgoing) -> Fed;
    /// Why writes are refused (the AOF cannot be written), if they are.
    fn refusing_writes(&self) -> Option<String>;
    /// The AOF's offset after everything appended so far.
    fn log_end(&self) -> u64;
}
