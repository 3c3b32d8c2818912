//! Cluster bus message counters (CLUSTER INFO `cluster_stats_messages_*`), by message type.

/// Message type names in bus type-code order (protocols.md §2.3), as CLUSTER INFO prints them.
pub const MESSAGE_TYPES: [&str; 11] = [
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MessageStats {
    pub sent: [u64; MESSAGE_TYPES.len()],
    pub received: [u64; MESSAGE_TYPES.len()],
}
