//! Replication's core without I/O (DESIGN §5, issue 5): the pieces a primary and its replicas
//! need to agree on one offset-numbered stream of write commands. The fabric (Ring WRITEs,
//! ack words) and the node's runtime drive them; the chaos crate can drive them the same way.
//!
//! Offsets are Redis's throughout: stream bytes are numbered from 1, `master_repl_offset` is
//! the last byte written or processed, and a PSYNC names the first byte wanted.
//!
//! - [`ids`]: replication id and the previous id kept across a promotion;
//! - [`backlog`]: the offset-addressed byte ring partial resyncs are served from;
//! - [`psync`]: the primary's continue/full-sync decision and the replica's request/reply;
//! - [`propagate`]: an executed write rewritten into deterministic commands, RESP-encoded;
//! - [`outgoing`]: what one request (a command, an EXEC) adds to the stream;
//! - [`record`]: a ring record's payload: the stream offset of its first byte, the bytes;
//! - [`apply_order`]: a replica's reorder buffer: records released strictly by offset;
//! - [`stream_cursor`]: the released stream cut into whole commands, and the offsets a
//!   replica acknowledges and mirrors (transactions settle at their EXEC);
//! - [`ack`]: acknowledged offsets, WAIT counts, `min-replicas-to-write`;
//! - [`wait`]: clients waiting for acknowledgements (WAIT, synchronous writes);
//! - [`report`]: INFO replication fields and the ROLE reply;
//! - [`handshake`]: the messages that set a link up (ring advert, PSYNC, ack words, decision);
//! - [`link_frame`]: a ring record on a link: stream bytes or a full sync's snapshot pieces;
//! - [`fullsync`]: a snapshot cut into frames and reassembled within a limit;
//! - [`ship`]: the primary's end of a link (backlog → ring WRITEs, applied offset back);
//! - [`ship_pace`]: that link's timing decisions (ping, online, `repl-timeout`, busy polling)
//!   with the time passed in;
//! - [`link`]: the replica's end (ring → in-order stream bytes, applied offset published);
//! - [`link_pace`]: that link's timing decisions (primary silent, busy polling) with the
//!   time passed in.
//!
//! The running node holds them in the server layer's `Replication` state: the dispatcher
//! captures each request's writes into an [`outgoing::Outgoing`] (handlers say what they
//! decided through `Ctx::replicate`) and feeds it to the backlog while the request's shards
//! are still locked; WAIT, ROLE, INFO and `min-replicas-to-write` read it there.

pub mod ack;
pub mod apply_order;
pub mod backlog;
pub mod fullsync;
pub mod handshake;
pub mod ids;
pub mod link;
pub mod link_frame;
pub mod link_pace;
pub mod outgoing;
pub mod propagate;
pub mod psync;
pub mod record;
pub mod report;
pub mod ship;
pub mod ship_pace;
pub mod stream_cursor;
pub mod wait;

#[cfg(test)]
mod link_tests;
#[cfg(test)]
mod scenario_tests;
