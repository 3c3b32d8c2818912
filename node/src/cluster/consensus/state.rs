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
    /// The log index of the `Promote` that made this node the primary it is (0: none, or
    /// its role predates the group). Only a promotion displaces a primary that may still
    /// be serving, so only it needs the serving hand-off (`gossip::quorum`); slot grants
    /// (AssignSlots takes unowned slots, SETSLOT NODE ends a migration the source's
    /// MIGRATING state already guards) do not stop the new owner from serving. Local: a
    /// snapshot install sets it conservatively (see `TopologyImage::restore`).
    pub promoted_at: u64,
    /// The version the config file recorded when this node last saved it (0: in no group):
    /// its log must reopen at or past it. Saved again as long as the log has not restored
    /// a higher version, so a start that fails does not erase it; left by the log itself.
    pub saved_version: u64,
    /// The atomic slot migrations as the log applied them (replicated: in the image).
    pub migrations: crate::cluster::migration::MigrationLedger,
    /// The admin operations as the log applied them (replicated: in the image).
    pub operations: crate::cluster::op_journal::OperationJournal,
}
