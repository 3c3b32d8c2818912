//! The bus messages as protobuf structs (prost, written by hand: no build script, no protoc).
//! Field tags are the wire contract: never renumber, only add.
//!
//! Unlike Redis's fixed 2256-byte header with a 2 KB slot bitmap, slots travel as inclusive
//! ranges, so a header costs a few hundred bytes and fits a datagram of a verbs UD MTU in the
//! common case.

/// An inclusive range of slots, `start..=end`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct SlotRange {
    #[prost(uint32, tag = "1")]
    pub start: u32,
    #[prost(uint32, tag = "2")]
    pub end: u32,
}

/// What a node says about itself: where it is reached, by clients and by the bus.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct NodeRecord {
    /// The text form of the sender's `bus::EndpointAddr` (proto does not depend on bus).
    #[prost(bytes = "vec", tag = "1")]
    pub bus_addr: Vec<u8>,
    /// Announced client ip; empty lets the receiver keep what it knows.
    #[prost(string, tag = "2")]
    pub ip: String,
    /// Client TCP port.
    #[prost(uint32, tag = "3")]
    pub port: u32,
    /// Client port on the fabric (0: none).
    #[prost(uint32, tag = "4")]
    pub rdma_port: u32,
    #[prost(string, tag = "5")]
    pub hostname: String,
    /// 40 hex characters.
    #[prost(string, tag = "6")]
    pub shard_id: String,
    #[prost(uint64, tag = "7")]
    pub repl_offset: u64,
    /// Cluster bus port as CLUSTER NODES prints it (`ip:port@cport`).
    #[prost(uint32, tag = "8")]
    pub cport: u32,
    /// Random per process start (0: not said, an older node): a change tells peers the
    /// node restarted, whatever they heard in between.
    #[prost(uint64, tag = "9")]
    pub incarnation: u64,
    /// The replication history `repl_offset` counts (40 hex; empty: not said).
    #[prost(string, tag = "10")]
    pub repl_id: String,
    /// The node restarted without everything it had acknowledged as a primary and serves
    /// nothing until the topology decides (the restart fence).
    #[prost(bool, tag = "11")]
    pub fenced: bool,
}

/// Carried by every message (Redis's `clusterMsg` header, protocols.md §2.2).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Header {
    /// Sender node id, 40 hex characters.
    #[prost(string, tag = "1")]
    pub sender: String,
    #[prost(uint64, tag = "2")]
    pub current_epoch: u64,
    /// The sender's config epoch (its primary's, if the sender is a replica).
    #[prost(uint64, tag = "3")]
    pub config_epoch: u64,
    /// Version of the Raft-replicated topology the sender has applied (0: none).
    #[prost(uint64, tag = "4")]
    pub topology_version: u64,
    /// Node flag bits as in protocols.md §2.6 (PRIMARY, REPLICA...).
    #[prost(uint32, tag = "5")]
    pub flags: u32,
    /// The sender's primary (40 hex), empty for a primary.
    #[prost(string, tag = "6")]
    pub primary: String,
    /// Slots the sender (or its primary) serves.
    #[prost(message, repeated, tag = "7")]
    pub slots: Vec<SlotRange>,
    #[prost(message, optional, tag = "8")]
    pub record: Option<NodeRecord>,
    /// The cluster state as the sender sees it (`cluster_state:ok`).
    #[prost(bool, tag = "9")]
    pub state_ok: bool,
}

/// One other node as the sender sees it (Redis's `clusterMsgDataGossip`, §2.4).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct GossipEntry {
    #[prost(string, tag = "1")]
    pub node_id: String,
    /// Unix ms (Redis sends seconds; ms costs nothing in a varint).
    #[prost(uint64, tag = "2")]
    pub ping_sent: u64,
    #[prost(uint64, tag = "3")]
    pub pong_received: u64,
    #[prost(string, tag = "4")]
    pub ip: String,
    #[prost(uint32, tag = "5")]
    pub port: u32,
    #[prost(uint32, tag = "6")]
    pub cport: u32,
    #[prost(uint32, tag = "7")]
    pub flags: u32,
    #[prost(bytes = "vec", tag = "8")]
    pub bus_addr: Vec<u8>,
}

/// The body of PING, PONG and MEET.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Gossip {
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<GossipEntry>,
    /// The sender's clock (ms) when this left: the receiver echoes it back.
    #[prost(uint64, tag = "2")]
    pub stamp_ms: u64,
    /// The latest `stamp_ms` the sender has received from the receiver (0: none): the
    /// receiver learns that the sender was alive after that instant of its own clock, which
    /// is what its serving lease counts from (node `gossip::quorum`).
    #[prost(uint64, tag = "3")]
    pub echo_ms: u64,
    /// How long ago the sender received the newest stamp it echoed, in a message at a
    /// version below this header's, to any node not known to be at this header's version
    /// (0: no claim). Past the lease, none of those echoes counts anywhere any more: the
    /// node promoted at or below this version may count the sender at once.
    #[prost(uint64, tag = "4")]
    pub old_echo_age_ms: u64,
}

/// FAIL: the named node is failed (forces FAIL on every receiver).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Fail {
    #[prost(string, tag = "1")]
    pub node_id: String,
}

/// UPDATE: the named node owns these slots at this config epoch (§2.9).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Update {
    #[prost(string, tag = "1")]
    pub node_id: String,
    #[prost(uint64, tag = "2")]
    pub config_epoch: u64,
    #[prost(message, repeated, tag = "3")]
    pub slots: Vec<SlotRange>,
}

/// PUBLISH and PUBLISHSHARD.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Publish {
    #[prost(bytes = "vec", tag = "1")]
    pub channel: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub message: Vec<u8>,
}

/// A Raft message, encoded by raft's own codec (its types are not ours).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Raft {
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
    /// The topology group (its founder's node id, 40 hex): a node in one group ignores
    /// another's traffic, and a node in none joins the group that addresses it.
    #[prost(string, tag = "2")]
    pub group: String,
}

/// A follower's topology change for the group's leader to propose on its behalf.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct RaftPropose {
    /// The topology group, as in [`Raft`].
    #[prost(string, tag = "1")]
    pub group: String,
    /// The proposer's own name for the proposal (it recognises the entry by it).
    #[prost(uint64, tag = "2")]
    pub seq: u64,
    /// The command in the topology log's encoding.
    #[prost(bytes = "vec", tag = "3")]
    pub command: Vec<u8>,
}

/// What a message is, with its body.
#[derive(Clone, PartialEq, Eq, prost::Oneof)]
pub enum Body {
    #[prost(message, tag = "2")]
    Ping(Gossip),
    #[prost(message, tag = "3")]
    Pong(Gossip),
    #[prost(message, tag = "4")]
    Meet(Gossip),
    #[prost(message, tag = "5")]
    Fail(Fail),
    #[prost(message, tag = "6")]
    Update(Update),
    #[prost(message, tag = "7")]
    Publish(Publish),
    #[prost(message, tag = "8")]
    PublishShard(Publish),
    #[prost(message, tag = "9")]
    Raft(Raft),
    #[prost(message, tag = "10")]
    RaftPropose(RaftPropose),
}

/// One bus message: the header and one body.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct BusMessage {
    #[prost(message, optional, tag = "1")]
    pub header: Option<Header>,
    #[prost(oneof = "Body", tags = "2, 3, 4, 5, 6, 7, 8, 9, 10")]
    pub body: Option<Body>,
}

impl Body {
    /// The kind's name, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Body::Ping(_) => "ping",
            Body::Pong(_) => "pong",
            Body::Meet(_) => "meet",
            Body::Fail(_) => "fail",
            Body::Update(_) => "update",
            Body::Publish(_) => "publish",
            Body::PublishShard(_) => "publishshard",
            Body::Raft(_) => "raft",
            Body::RaftPropose(_) => "raftpropose",
        }
    }
}
