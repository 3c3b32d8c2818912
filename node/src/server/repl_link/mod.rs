//! Replication's runtime over the fabric (issue 5): the threads that move the stream from a
//! primary's backlog into its replicas' rings and apply it there. The cores they drive (no
//! I/O) are in [`crate::replication`]; the shared state in [`crate::node_state::replication`]
//! (primary) and [`crate::node_state::replica_of`] (replica).
//!
//! - [`primary`]: the `repl-fabric-port` listener and a shipper thread per replica;
//! - [`ship_thread`]: the primary's thread per replica link (backlog → ring, acks back);
//! - [`replica`]: the link thread of a replica (setup over TCP, stream over the ring);
//! - [`apply`]: the stream executed as the primary's client, the offset to acknowledge;
//! - [`control`]: the replica's RESP-over-TCP setup connection;
//! - [`snapshot`]: a full sync's snapshot, consistent with its offset, and its load;
//! - [`cluster_role`]: in cluster mode, the topology's role for this node made real;
//! - [`peer_watch`]: in cluster mode, each end of a link watching the other through gossip;
//! - [`manual_failover`]: CLUSTER FAILOVER's coordination with the primary.

pub mod apply;
pub mod cluster_role;
pub mod control;
pub mod manual_failover;
pub mod peer_watch;
pub mod primary;
pub mod replica;
pub mod ship_thread;
pub mod snapshot;

use crate::node_state::replica_of::FollowOutcome;
use crate::server::Server;

pub use crate::node_state::services::replication_links::FollowError;

/// Makes this node a replica of `host:port` (REPLICAOF, `replicaof`): `Ok(true)` when a new
/// link was started, `Ok(false)` when that primary was already followed.
pub fn follow(server: &Server, host: &str, port: u16) -> Result<bool, FollowError> {
    follow_node(server, host, port, None)
}

/// [`follow`] of the cluster node `node` at `host:port` (the topology names it).
pub fn follow_node(
    server: &Server,
    host: &str,
    port: u16,
    node: Option<crate::cluster::NodeId>,
) -> Result<bool, FollowError> {
    let owner = server.owner().ok_or(FollowError::NotStarted)?;
    match server.replica_of.follow_node(host, port, node) {
        FollowOutcome::AlreadyFollowing => Ok(false),
        FollowOutcome::Started(generation) => {
            tracing::info!(host, port, "connecting to MASTER (REPLICAOF)");
            replica::start(&owner, generation)?;
            Ok(true)
        }
    }
}
