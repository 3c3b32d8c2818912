//! What the Raft log has done to one node's topology: the index it applied last (the
//! topology version gossip carries) and the nodes it added. Nodes learned otherwise (MEET,
//! gossip, an old config file) sit in the same table but are invisible to the log's checks,
//! so every node decides a committed command from the same facts.

use crate::cluster::id::NodeId;
use std::collections::BTreeSet;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsensusState {
    /// Index of the last log entry applied (0: none yet). Two nodes at one version hold the
    /// same replicated topology.
    pub version: u64,
    /// Nodes added by the log (AddNode) and not forgotten since; at most NODES_MAX.
    pub nodes: BTreeSet<NodeId>,
}
