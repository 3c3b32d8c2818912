//! REPLICAOF and REPLCONF RDMA-PORT/RDMA-LINK: the replication link threads.

use crate::node_state::replication::ReplicaAddr;
use crate::replication::handshake::LinkRequest;

/// Who a replica says it is in the cluster (REPLCONF RDMA-LINK's optional arguments): its
/// node id, and its process incarnation if it knows it. The link is watched through gossip
/// by them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaNode {
    pub id: Option<crate::cluster::NodeId>,
    pub incarnation: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("the node is not started yet")]
    NotStarted,
    #[error("cannot start the replication thread: {0}")]
    Thread(#[from] std::io::Error),
}

pub trait ReplicationLinks {
    /// REPLICAOF host port: follows that primary; false when it already did.
    fn follow(&self, host: &str, port: u16) -> Result<bool, FollowError>;
    /// The fabric port replicas link to; 0 when not listening.
    fn link_port(&self) -> u16;
    /// Links the replica whose fabric endpoint is `peer`; returns the encoded `LinkAccept`
    /// or the error to answer. Blocks the calling thread while the link is set up (bounded).
    fn link(
        &self,
        peer: String,
        request: LinkRequest,
        addr: ReplicaAddr,
        node: ReplicaNode,
    ) -> Result<Vec<u8>, String>;
}
