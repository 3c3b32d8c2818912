//! Where the stream of executed writes goes: the append-only file while it logs, and the
//! replication backlog while one exists on a primary. Encoded per request by the
//! dispatcher ([`Outgoing`]), or per removed key by active expiry and eviction, and fed while
//! the shards it touched are still held, so both keep each key's writes in the order they
//! happened.

use super::Server;
use crate::replication::outgoing::Outgoing;

pub use crate::node_state::services::write_stream::Fed;

/// Feeds `outgoing` to the consumers that take it. Call with its shards held.
pub fn feed(server: &Server, outgoing: &mut Outgoing) -> Fed {
    if let Some(cluster) = server.cluster.as_ref() {
        if cluster.migration_gate.streaming() {
            super::slot_migration::tap::feed(&cluster.migration_gate, outgoing);
        }
    }
    let log = server.aof.log.append(outgoing);
    // A replica's history is its primary's stream, mirrored byte for byte by the link
    // (repl_link::apply): what it executes itself is never added to it. Its AOF logs what
    // it executes, like any node's.
    let repl = (server.replication.has_backlog() && !server.replica_of.is_replica())
        .then(|| server.replication.feed(outgoing));
    Fed { repl, log }
}
