//! Bounds on everything a bus message can carry. A peer (or anyone who can reach the fabric)
//! controls these bytes, so every length and count has a ceiling checked before use.

/// Largest encoded message (before fragmentation). A PING naming every node of a
/// [`NODES_MAX`]-node cluster in gossip (about 400 B an entry with a long fabric address)
/// plus a header listing 16384 single-slot ranges stays below it, and so does a Raft
/// snapshot of the largest topology (1 MiB image plus raft's framing).
pub const MESSAGE_MAX: usize = 2 << 20;

/// Largest topology command a RAFTPROPOSE carries (the node's own bound is lower).
pub const RAFT_COMMAND_MAX: usize = 128 * 1024;

/// Most nodes a cluster has (Redis Cluster's design limit); bounds gossip sections.
pub const NODES_MAX: usize = 1000;

/// Most gossip entries in one PING/PONG/MEET: Redis sends max(3, N/10) plus every PFAIL
/// node, which is never more than the other nodes of the cluster.
pub const GOSSIP_ENTRIES_MAX: usize = NODES_MAX;

/// Most slot ranges in a header or an UPDATE: every slot as its own range.
pub const SLOT_RANGES_MAX: usize = 16384;

/// Highest slot number.
pub const SLOT_MAX: u32 = 16383;

/// A node or shard id: 40 hex characters (Redis's `CLUSTER_NAMELEN`).
pub const NODE_ID_LEN: usize = 40;

/// Longest ip text (Redis's `NET_IP_STR_LEN`).
pub const IP_MAX: usize = 46;

/// Longest hostname (a DNS name).
pub const HOSTNAME_MAX: usize = 255;

/// Longest fabric address text (`bus::EndpointAddr`'s text form: an ofi provider name of at
/// most 64 characters and 128 raw bytes in hex fit with room).
pub const BUS_ADDR_MAX: usize = 512;

/// Longest PUBLISH channel name; the message itself is bounded by [`MESSAGE_MAX`].
pub const CHANNEL_MAX: usize = 64 * 1024;
