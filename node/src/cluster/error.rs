//! Errors of topology operations, each carrying Redis 7.0.15's exact reply text (checked
//! against a real `redis-server --cluster-enabled yes`).

use super::id::NodeId;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    #[error("ERR Invalid or out of range slot")]
    InvalidSlot,
    #[error("ERR Slot {0} is already busy")]
    SlotBusy(u16),
    #[error("ERR Slot {0} is already unassigned")]
    SlotUnassigned(u16),
    #[error("ERR Slot {0} specified multiple times")]
    SlotRepeated(u16),
    #[error("ERR start slot number {0} is greater than end slot number {1}")]
    RangeReversed(u16, u16),
    #[error("ERR DB must be empty to perform CLUSTER FLUSHSLOTS.")]
    FlushSlotsNotEmpty,
    #[error("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP")]
    SetSlotSyntax,
    #[error("ERR Please use SETSLOT only with masters.")]
    SetSlotOnReplica,
    #[error("ERR I'm not the owner of hash slot {0}")]
    NotOwner(u16),
    #[error("ERR I'm already the owner of hash slot {0}")]
    AlreadyOwner(u16),
    /// MIGRATING/IMPORTING name a node we do not know (the text quotes the argument).
    #[error("ERR I don't know about node {0}")]
    UnknownNodeMigration(String),
    /// SETSLOT NODE names a node we do not know.
    #[error("ERR Unknown node {0}")]
    UnknownNode(String),
    #[error("ERR Target node is not a master")]
    TargetNotPrimary,
    #[error("ERR Can't assign hashslot {0} to a different node while I still hold keys for this hash slot.")]
    SlotHasKeys(u16),
    #[error("ERR error saving the cluster node config: {0}")]
    Save(String),
    /// The node table is full (`NODES_MAX`).
    #[error("ERR too many nodes in the cluster (at most {0})")]
    TooManyNodes(usize),
    #[error("ERR node {0} is already known")]
    DuplicateNode(NodeId),
    #[error("ERR Can't replicate myself")]
    ReplicateMyself,
    #[error("ERR I can only replicate a master, not a replica.")]
    ReplicateReplica,
    #[error("ERR To set a master the node must be empty and without assigned slots.")]
    ReplicateNotEmpty,
    /// CLUSTER REPLICAS of a replica.
    #[error("ERR The specified node is not a master")]
    NotAPrimary,
    #[error("ERR I tried hard but I can't forget myself...")]
    ForgetMyself,
    #[error("ERR Can't forget my master!")]
    ForgetMyPrimary,
    #[error("ERR CLUSTER RESET can't be called with master nodes containing keys")]
    ResetWithKeys,
    #[error("ERR Invalid config epoch specified: {0}")]
    InvalidConfigEpoch(i64),
    #[error(
        "ERR The user can assign a config epoch only when the node does not know any other node."
    )]
    ConfigEpochOthersKnown,
    #[error("ERR Node config epoch is already non-zero")]
    ConfigEpochNonZero,
    /// A topology change the Raft group did not make (no leader, timeout, refused on apply).
    #[error("ERR topology change not made: {0}")]
    Topology(String),
}
