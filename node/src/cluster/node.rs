//! One node of the cluster as this node sees it: address, role, liveness stamps, epoch.

use super::flags::{bit, NodeFlags};
use super::id::{NodeId, ShardId};

/// Longest hostname accepted (`cluster-announce-hostname`, nodes.conf); Redis bounds it by
/// what fits in a ping extension, we by what a DNS name can be.
pub const HOSTNAME_MAX: usize = 255;
/// Longest ip text: an IPv6 address with a zone fits in Redis's `NET_IP_STR_LEN` (46).
pub const IP_MAX: usize = 46;

/// Whether the bus link to a node is up (CLUSTER NODES prints `connected`/`disconnected`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    Connected,
    Disconnected,
}

impl LinkState {
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Connected => "connected",
            LinkState::Disconnected => "disconnected",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    pub id: NodeId,
    /// Client-facing ip; empty until learned (a lone node does not know its own address).
    pub ip: String,
    pub port: u16,
    /// Cluster bus port.
    pub cport: u16,
    /// Announced hostname; empty when none.
    pub hostname: String,
    pub shard: ShardId,
    pub flags: NodeFlags,
    /// The primary of a replica.
    pub primary: Option<NodeId>,
    /// Unix ms of the ping awaiting a pong, 0 if none.
    pub ping_sent: u64,
    /// Unix ms of the last pong.
    pub pong_received: u64,
    pub config_epoch: u64,
    pub link: LinkState,
    /// Replication offset last known (CLUSTER SHARDS `replication-offset`).
    pub repl_offset: u64,
    /// The replication history `repl_offset` counts, as last advertised (None: not said).
    pub repl_id: Option<super::id::HexId>,
    /// It last said it is fenced after a restart (serves nothing until the topology
    /// decides; `agent::restart_fence`).
    pub fenced: bool,
    /// Where its cluster bus is reached on the fabric: the text form of `bus::EndpointAddr`
    /// (no spaces, no `@`); empty until known.
    pub bus_addr: String,
}

impl ClusterNode {
    /// A primary with no address known yet.
    pub fn new(id: NodeId, shard: ShardId) -> Self {
        ClusterNode {
            id,
            ip: String::new(),
            port: 0,
            cport: 0,
            hostname: String::new(),
            shard,
            flags: NodeFlags(bit::MASTER),
            primary: None,
            ping_sent: 0,
            pong_received: 0,
            config_epoch: 0,
            link: LinkState::Disconnected,
            repl_offset: 0,
            repl_id: None,
            fenced: false,
            bus_addr: String::new(),
        }
    }

    pub fn is_myself(&self) -> bool {
        self.flags.has(bit::MYSELF)
    }

    pub fn is_primary(&self) -> bool {
        self.flags.has(bit::MASTER)
    }

    pub fn is_replica(&self) -> bool {
        self.flags.has(bit::SLAVE)
    }

    pub fn is_failed(&self) -> bool {
        self.flags.has(bit::FAIL)
    }

    /// Failed or suspected (`fail` or `fail?`).
    pub fn is_failing(&self) -> bool {
        self.flags.has(bit::FAIL) || self.flags.has(bit::PFAIL)
    }

    /// `connected` for myself always, as Redis prints it.
    pub fn link_name(&self) -> &'static str {
        if self.is_myself() {
            LinkState::Connected.name()
        } else {
            self.link.name()
        }
    }
}
