//! The gossip core's timing knobs (Redis's names and defaults, protocols.md §2.7, §2.15).

/// How often the node is expected to feed [`super::Input::Tick`] (Redis's `clusterCron`
/// runs 10 times a second); the random ping happens every [`RANDOM_PING_EVERY_TICKS`] ticks.
pub const TICK_MS: u64 = 100;
/// Every this many ticks one of a few random nodes, the one heard from least recently, is
/// pinged (Redis: every 10 iterations, out of 5 random nodes).
pub const RANDOM_PING_EVERY_TICKS: u64 = 10;
/// Nodes sampled for the random ping.
pub const RANDOM_PING_SAMPLE: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GossipSettings {
    /// `cluster-node-timeout`: silence after which a node is suspected (PFAIL).
    pub node_timeout_ms: u64,
    /// Datagrams get lost (TCP in Redis does not): an unanswered ping is sent again after
    /// this, without resetting the time the first one left, so suspicion is not delayed.
    pub ping_retry_ms: u64,
    /// Failure reports stay valid for this many node timeouts (Redis: 2).
    pub fail_report_validity_mult: u64,
    /// A failed primary that still owns slots is cleared after this many node timeouts
    /// once it is reachable again (Redis: `CLUSTER_FAIL_UNDO_TIME_MULT` = 2).
    pub fail_undo_time_mult: u64,
    /// The client port this node serves over the fabric, advertised in its header (0: none).
    pub rdma_port: u16,
    /// The serving lease is the node timeout divided by this (at least five ticks): 8 in a
    /// node (a sixteenth lapsed under a loaded test suite's scheduling stalls), whose bus
    /// ticks every [`GossipSettings::tick_interval_ms`]; the simulator, which
    /// ticks every TICK_MS, uses a longer lease (the safety argument holds for any lease
    /// shorter than the node timeout, with a hand-off of one lease).
    pub lease_divisor: u64,
}

impl Default for GossipSettings {
    fn default() -> Self {
        GossipSettings {
            node_timeout_ms: 15_000,
            ping_retry_ms: 1_000,
            fail_report_validity_mult: 2,
            fail_undo_time_mult: 2,
            rdma_port: 0,
            lease_divisor: 8,
        }
    }
}

impl GossipSettings {
    /// A handshake not answered within this is given up (Redis: max(node timeout, 1 s)).
    pub fn handshake_timeout_ms(&self) -> u64 {
        self.node_timeout_ms.max(1000)
    }

    /// A link silent for this long with a ping pending is considered broken (Redis: half
    /// the node timeout).
    pub fn ping_interval_ms(&self) -> u64 {
        self.node_timeout_ms / 2
    }

    /// Nodes not heard from for this long are pinged: a third of the serving lease (Redis
    /// pings at half the node timeout). The lease counts from echoed stamps, which take a
    /// round trip and the peer's next message to come back, so a third leaves two thirds of
    /// the lease for scheduling stalls on a loaded machine before a primary stops serving.
    /// Pings are small datagrams on the fabric: a few dozen per second per peer.
    pub fn heartbeat_ms(&self) -> u64 {
        self.lease_ms() / 3
    }

    /// The serving lease (`quorum.rs`): the node timeout over `lease_divisor`, at least five ticks
    /// so that heartbeats fit in it. Shorter is safer (a cut-off primary stops sooner) and
    /// makes the hand-off after a promotion shorter, which is most of failover time after
    /// detection; it costs heartbeats.
    pub fn lease_ms(&self) -> u64 {
        (self.node_timeout_ms / self.lease_divisor.max(2)).max(5 * self.tick_interval_ms())
    }

    /// How often the runtime should tick the core: a hundredth of the node timeout, between
    /// 10 and TICK_MS ms, so failure detection is not coarser than the timeout allows and
    /// the lease (at least five ticks) can be as short as its divisor asks.
    pub fn tick_interval_ms(&self) -> u64 {
        (self.node_timeout_ms / 100).clamp(10, TICK_MS)
    }

    pub fn fail_report_validity_ms(&self) -> u64 {
        self.node_timeout_ms * self.fail_report_validity_mult
    }

    pub fn fail_undo_ms(&self) -> u64 {
        self.node_timeout_ms * self.fail_undo_time_mult
    }
}
