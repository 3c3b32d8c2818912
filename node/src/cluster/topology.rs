//! This node's view of the cluster: the node table, the slot map and the epochs. Pure data
//! and methods, no I/O: commands, the config file and (later) the bus all drive it.

use super::consensus::ConsensusState;
use super::error::ClusterError;
use super::flags::bit;
use super::id::NodeId;
use super::node::ClusterNode;
use super::slots::{NodeIndex, SlotMap, NO_OWNER};
use super::stats::MessageStats;

/// Most nodes a topology holds. Redis Cluster is designed for up to 1000 nodes; the bound
/// also keeps every node index below [`NO_OWNER`].
pub const NODES_MAX: usize = 1000;
const _: () = assert!(NODES_MAX < NO_OWNER as usize);

/// Whether the cluster serves queries (CLUSTER INFO `cluster_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    Ok,
    Fail,
}

impl Health {
    pub fn name(self) -> &'static str {
        match self {
            Health::Ok => "ok",
            Health::Fail => "fail",
        }
    }
}

/// Policies that decide the state and the routing of reads (Redis's defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `cluster-require-full-coverage`: any unserved slot puts the whole cluster down.
    pub require_full_coverage: bool,
    /// `cluster-allow-reads-when-down`.
    pub allow_reads_when_down: bool,
}

impl From<&crate::config::params::ClusterConfig> for Settings {
    fn from(c: &crate::config::params::ClusterConfig) -> Self {
        Settings {
            require_full_coverage: c.require_full_coverage,
            allow_reads_when_down: c.allow_reads_when_down,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            require_full_coverage: true,
            allow_reads_when_down: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Every known node; `myself` indexes this node. Slot owners are indexes into it.
    pub nodes: Vec<ClusterNode>,
    myself: NodeIndex,
    pub slots: SlotMap,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    pub stats: MessageStats,
    pub settings: Settings,
    /// The Raft log's part: its version (last applied index) and the nodes it added.
    pub consensus: ConsensusState,
    /// Cached by [`Topology::refresh_state`] so routing does not scan 16384 slots.
    state: Health,
}

impl Topology {
    /// A topology that knows only `myself` (flagged MYSELF here).
    pub fn new(mut myself: ClusterNode) -> Self {
        myself.flags.set(bit::MYSELF, true);
        // A node is always connected to itself (CLUSTER NODES says so).
        myself.link = super::node::LinkState::Connected;
        let mut t = Topology {
            nodes: vec![myself],
            myself: 0,
            slots: SlotMap::default(),
            current_epoch: 0,
            last_vote_epoch: 0,
            stats: MessageStats::default(),
            settings: Settings::default(),
            consensus: ConsensusState::default(),
            state: Health::Fail,
        };
        t.refresh_state();
        t
    }

    /// Builds a topology from loaded parts (the config file); `myself` must index a node.
    pub(crate) fn from_parts(
        mut nodes: Vec<ClusterNode>,
        myself: NodeIndex,
        slots: SlotMap,
    ) -> Self {
        if let Some(me) = nodes.get_mut(myself as usize) {
            me.link = super::node::LinkState::Connected;
        }
        let mut t = Topology {
            nodes,
            myself,
            slots,
            current_epoch: 0,
            last_vote_epoch: 0,
            stats: MessageStats::default(),
            settings: Settings::default(),
            consensus: ConsensusState::default(),
            state: Health::Fail,
        };
        t.refresh_state();
        t
    }

    pub fn myself_index(&self) -> NodeIndex {
        self.myself
    }

    pub fn myself(&self) -> &ClusterNode {
        &self.nodes[self.myself as usize]
    }

    pub fn myself_mut(&mut self) -> &mut ClusterNode {
        &mut self.nodes[self.myself as usize]
    }

    pub fn node(&self, index: NodeIndex) -> Option<&ClusterNode> {
        self.nodes.get(index as usize)
    }

    pub fn index_of(&self, id: &NodeId) -> Option<NodeIndex> {
        self.nodes
            .iter()
            .position(|n| n.id == *id)
            .map(|i| i as NodeIndex)
    }

    /// Looks a node up by the text of a command argument.
    pub fn find(&self, arg: &[u8]) -> Option<NodeIndex> {
        NodeId::parse(arg).and_then(|id| self.index_of(&id))
    }

    /// Looks a node up by a command argument as Redis 7.0.15's `clusterLookupNode` does:
    /// ids are case-sensitive there, so an upper-case id is an unknown node. Errors with
    /// `Unknown node <arg>`.
    pub fn lookup_arg(&self, arg: &[u8]) -> Result<NodeIndex, ClusterError> {
        let lower = arg
            .iter()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase());
        lower
            .then(|| self.find(arg))
            .flatten()
            .ok_or_else(|| ClusterError::UnknownNode(String::from_utf8_lossy(arg).into_owned()))
    }

    /// Adds a node learned by MEET, gossip or the config file.
    pub fn add_node(&mut self, node: ClusterNode) -> Result<NodeIndex, ClusterError> {
        if self.nodes.len() >= NODES_MAX {
            return Err(ClusterError::TooManyNodes(NODES_MAX));
        }
        if self.index_of(&node.id).is_some() {
            return Err(ClusterError::DuplicateNode(node.id));
        }
        self.nodes.push(node);
        self.refresh_state();
        Ok((self.nodes.len() - 1) as NodeIndex)
    }

    /// Removes a node other than myself from the table (a timed-out handshake, a duplicate,
    /// FORGET): slot owners, open-slot markers and `myself` are renumbered or dropped with
    /// it. None for myself or an unknown index.
    pub fn remove_node(&mut self, index: NodeIndex) -> Option<ClusterNode> {
        if index == self.myself || index as usize >= self.nodes.len() {
            return None;
        }
        let node = self.nodes.remove(index as usize);
        self.slots.forget_index(index);
        self.slots.migrating.retain(|_, id| *id != node.id);
        self.slots.importing.retain(|_, id| *id != node.id);
        if self.myself > index {
            self.myself -= 1;
        }
        self.refresh_state();
        Some(node)
    }

    /// Drops every node but myself, and with them every slot owner and open-slot marker
    /// (CLUSTER RESET); returns how many nodes were dropped.
    pub fn keep_only_myself(&mut self) -> usize {
        let me = self.nodes.swap_remove(self.myself as usize);
        let dropped = self.nodes.len();
        self.nodes = vec![me];
        self.myself = 0;
        self.slots = SlotMap::default();
        self.refresh_state();
        dropped
    }

    pub fn owner(&self, slot: u16) -> Option<&ClusterNode> {
        self.slots.owner(slot).and_then(|i| self.node(i))
    }

    /// A node's config epoch as advertised: a replica shows its primary's (Redis's
    /// `nodeEpoch`).
    pub fn node_epoch(&self, node: &ClusterNode) -> u64 {
        if node.is_replica() {
            if let Some(p) = node.primary.and_then(|id| self.index_of(&id)) {
                return self.nodes[p as usize].config_epoch;
            }
        }
        node.config_epoch
    }

    /// The replicas of `primary`, in table order.
    pub fn replicas_of(&self, primary: &NodeId) -> impl Iterator<Item = &ClusterNode> + '_ {
        let primary = *primary;
        self.nodes
            .iter()
            .filter(move |n| n.is_replica() && n.primary == Some(primary))
    }

    /// Primaries owning at least one slot (`cluster_size`).
    pub fn size(&self) -> usize {
        let (owns, _) = self.slots.census(self.nodes.len());
        self.nodes
            .iter()
            .zip(owns)
            .filter(|(n, owns)| *owns && n.is_primary())
            .count()
    }

    pub fn state(&self) -> Health {
        self.state
    }

    /// Recomputes the cluster state (Redis's `clusterUpdateState`): down when a slot is
    /// unserved under full coverage, or when a majority of slot-owning primaries is failing.
    pub fn refresh_state(&mut self) {
        // One pass over the slots serves coverage and both counts: this runs after every
        // bus message.
        let (owns, unassigned) = self.slots.census(self.nodes.len());
        let owning = |n: &ClusterNode, owns: bool| owns && n.is_primary();
        let mut ok = true;
        if self.settings.require_full_coverage {
            // Every slot assigned, and no owner of one failed.
            ok = unassigned == 0
                && !self
                    .nodes
                    .iter()
                    .zip(&owns)
                    .any(|(n, &o)| o && n.is_failed());
        }
        if ok {
            let size = self
                .nodes
                .iter()
                .zip(&owns)
                .filter(|(n, &owns)| owning(n, owns))
                .count();
            let reachable = self
                .nodes
                .iter()
                .zip(&owns)
                .filter(|(n, &owns)| owning(n, owns) && !n.is_failing())
                .count();
            // A majority: at least size / 2 + 1 reachable.
            ok = reachable > size / 2;
        }
        self.state = if ok { Health::Ok } else { Health::Fail };
    }

    /// Counts of assigned slots by their owner's health: (ok, pfail, fail).
    pub fn slot_health(&self) -> (usize, usize, usize) {
        let (mut ok, mut pfail, mut fail) = (0, 0, 0);
        for (start, end, o) in self.slots.runs() {
            let n = (end - start) as usize + 1;
            match self.node(o) {
                Some(node) if node.is_failed() => fail += n,
                Some(node) if node.flags.has(bit::PFAIL) => pfail += n,
                _ => ok += n,
            }
        }
        (ok, pfail, fail)
    }
}
