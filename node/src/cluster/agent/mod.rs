//! The topology agent: the part of a node that runs its membership of the Raft topology
//! group (DESIGN.md §1), as a core without I/O fed `(now_ms, input)` next to the gossip
//! core. It
//!
//! - founds a group once nodes have met (`founding`): the node with the smallest id among a
//!   settled set of reachable nodes starts a group whose bootstrap snapshot is what gossip
//!   had agreed (every node, replica links, slot owners), so the cluster's first replicated
//!   topology is the one `redis-cli --cluster create` built;
//! - joins the group that addresses it (a node outside any group takes the first group whose
//!   Raft traffic reaches it; the leader sends it a snapshot);
//! - as leader, takes in nodes that are not in the group yet and keeps up to five voters
//!   (`reconcile`), and promotes a replica in place of a failed primary (`failover`);
//! - turns topology changes into proposals, forwarding a follower's to the leader, and
//!   answers each waiting command when its entry applies or times out (`pending`).
//!
//! While a node is in no group (alone, or before founding) the topology changes locally
//! the way Redis changes it, by gossip and config epochs; callers check [`TopologyAgent::in_group`].

mod failover;
mod founding;
mod pending;
mod reconcile;
pub mod restart_fence;
pub mod store;
mod turn;

use super::consensus::log::BOOTSTRAP_INDEX;
use super::consensus::{ApplyError, LogError, LogStore, TopologyCommand, TopologyLog};
use super::gossip::Gossip;
use super::id::NodeId;
use super::topology::Topology;
use pending::Pending;
use reconcile::Attempts;
use store::{GroupStore, StoreError};

/// Timing of the agent; the defaults suit a fabric bus with 100 ms gossip ticks.
#[derive(Clone, Debug)]
pub struct AgentSettings {
    /// How long the set of reachable nodes must stay unchanged before the smallest id founds
    /// a group: a MEET burst (redis-cli meets every node at once) settles first.
    pub founding_quiet_ms: u64,
    /// How long a command waits for its change to apply before it is answered with an error.
    /// The command holds its connection's thread meanwhile (topology changes are rare admin
    /// commands), so this stays short; a change waits for a leader to be known within it.
    pub proposal_timeout_ms: u64,
    /// How long the leader waits before it proposes the same step for a node again (a
    /// proposal can be lost with a leader change).
    pub reconcile_retry_ms: u64,
    /// How long a member waits for its group to get going (a joiner for its first snapshot,
    /// a founder for its first commit) before it gives the group up: a founder that died
    /// right after founding must not leave the others waiting for it for good. Nothing was
    /// committed in such a group, so nothing is lost by leaving it.
    pub abandon_ms: u64,
    /// `repl-sync-acks`: how many replicas acknowledge a write before it is answered (0:
    /// asynchronous). Automatic failover promotes only when enough replicas are healthy
    /// that one of them surely holds every acknowledged write (see `failover`).
    pub failover_sync_acks: usize,
    /// Wall time of one Raft tick (election timeout 10-20 ticks, heartbeat 2). The node
    /// scales it with `cluster-node-timeout` so that a group that lost its leader elects
    /// another about as fast as a failed primary is detected.
    pub raft_tick_ms: u64,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            founding_quiet_ms: 1000,
            proposal_timeout_ms: 3000,
            reconcile_retry_ms: 1000,
            abandon_ms: 10_000,
            failover_sync_acks: 1,
            raft_tick_ms: crate::cluster::consensus::log::TICK_MS,
        }
    }
}

/// What the agent is told. `W` is how the caller names a waiting command (a channel on the
/// node, a number in the simulator).
#[derive(Debug)]
pub enum AgentInput<W> {
    /// The timer; expected about every 100 ms (raft ticks are counted from `now_ms`).
    Tick,
    /// A RAFT bus message from a member.
    Raft {
        from: NodeId,
        group: NodeId,
        data: Vec<u8>,
    },
    /// A RAFTPROPOSE bus message: a follower's change for this node to propose if it leads.
    Forwarded {
        from: NodeId,
        group: NodeId,
        seq: u64,
        command: Vec<u8>,
    },
    /// A command's topology change; the answer comes as [`AgentAction::Reply`].
    Propose { command: TopologyCommand, waiter: W },
    /// CLUSTER RESET: this node leaves its group (and forgets it).
    Leave,
}

/// What the caller must do.
#[derive(Debug)]
pub enum AgentAction<W> {
    /// Send a RAFT bus message to the member `to`.
    Raft {
        to: NodeId,
        group: NodeId,
        data: Vec<u8>,
    },
    /// Send a RAFTPROPOSE bus message to the leader `to`.
    Forward {
        to: NodeId,
        group: NodeId,
        seq: u64,
        command: Vec<u8>,
    },
    /// Answer the waiting command.
    Reply {
        waiter: W,
        result: Result<(), ProposeError>,
    },
    /// The replicated topology changed: save the config file.
    SaveConfig,
    /// The group forgot this node (a committed FORGET): gossip must keep it out for the
    /// blacklist period, as if CLUSTER FORGET had run here. `addr` is its bus address.
    Forgotten { id: NodeId, addr: String },
}

/// Why a topology change was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    #[error("this node is not in a topology group yet")]
    NotInGroup,
    #[error("the topology group has no leader this node can reach")]
    NoLeader,
    #[error("the topology change was not committed within {0} ms")]
    Timeout(u64),
    #[error("{0} topology changes are already waiting")]
    Busy(usize),
    /// Committed but refused when applied (the topology changed since it was checked).
    #[error("{0}")]
    Refused(ApplyError),
    #[error("{0}")]
    Log(LogError),
}

/// A node's group: who founded it (its name on the bus) and this node's Raft log.
pub(crate) struct Group {
    pub id: NodeId,
    pub log: TopologyLog,
    /// Where each turn's `Persist` is written before its messages leave (None: an agent
    /// without a directory keeps the log in memory only).
    pub kept: Option<Box<dyn LogStore>>,
}

pub struct TopologyAgent<W> {
    me: NodeId,
    settings: AgentSettings,
    seed: u64,
    group: Option<Group>,
    /// Wall time up to which raft ticks were given.
    raft_clock_ms: u64,
    founding: founding::Watch,
    pending: Pending<W>,
    attempts: Attempts,
    /// Promotions this node proposed as leader, not committed yet (`failover`).
    failovers: failover::Failovers,
    out: Vec<AgentAction<W>>,
    save: bool,
    /// What this node had made of itself by hand before it joined a group (REPLICATE,
    /// ADDSLOTS while the group was being founded), proposed again once it holds the
    /// group's snapshot, since the snapshot replaces it.
    prejoin: Option<PreJoin>,
    /// Changes waiting for a leader to be known: (command, waiter, deadline).
    parked: std::collections::VecDeque<(TopologyCommand, W, u64)>,
    /// Since when this node's group has committed nothing past its bootstrap (None: it has).
    unstarted_since_ms: Option<u64>,
    /// Where the group survives restarts (None: in memory only, as in unit tests).
    store: Option<GroupStore>,
}

/// This node's own role and slots as they were when it joined a group.
#[derive(Debug)]
pub(crate) struct PreJoin {
    pub primary: Option<NodeId>,
    pub slots: Vec<(u16, u16)>,
}

impl<W> TopologyAgent<W> {
    /// `repl-sync-acks` changed (CONFIG SET): the failover rule follows it at once.
    pub fn set_failover_sync_acks(&mut self, acks: usize) {
        self.settings.failover_sync_acks = acks;
    }

    pub fn new(me: NodeId, settings: AgentSettings, seed: u64) -> Self {
        TopologyAgent {
            me,
            settings,
            seed,
            group: None,
            raft_clock_ms: 0,
            founding: founding::Watch::default(),
            pending: Pending::default(),
            attempts: Attempts::default(),
            failovers: failover::Failovers::default(),
            out: Vec::new(),
            save: false,
            prejoin: None,
            parked: std::collections::VecDeque::new(),
            unstarted_since_ms: None,
            store: None,
        }
    }

    /// An agent whose group is kept in `store`: a node that was in a group when it stopped
    /// is in it again, with its Raft state (its first turn restores the topology from the
    /// log's snapshot and replays the entries after it). A damaged log is an error: a
    /// voter that forgot its vote could elect two leaders, so the node must not start; so
    /// is a log that ends before `applied`, the version the node's config file recorded.
    pub fn with_store(
        me: NodeId,
        settings: AgentSettings,
        seed: u64,
        store: GroupStore,
        applied: u64,
    ) -> Result<Self, StoreError> {
        let mut agent = Self::new(me, settings, seed);
        if let Some((id, log, kept)) = store.open(me, seed, applied)? {
            tracing::info!(group = %id, "back in the topology group");
            agent.group = Some(Group {
                id,
                log,
                kept: Some(kept),
            });
        }
        agent.store = Some(store);
        Ok(agent)
    }

    /// Whether topology changes go through the group's log (else they apply locally).
    pub fn in_group(&self) -> bool {
        self.group.is_some()
    }

    /// The group's name (its founder's id).
    pub fn group(&self) -> Option<NodeId> {
        self.group.as_ref().map(|g| g.id)
    }

    pub fn is_leader(&self) -> bool {
        self.group.as_ref().is_some_and(|g| g.log.is_leader())
    }

    pub fn leader(&self) -> Option<NodeId> {
        self.group.as_ref().and_then(|g| g.log.leader())
    }

    /// The group's voters and learners as this node knows them.
    pub fn members(&self) -> (Vec<NodeId>, Vec<NodeId>) {
        self.group
            .as_ref()
            .map(|g| g.log.members())
            .unwrap_or_default()
    }

    /// Feeds one input; returns what to do, in order. `gossip` tells who is reachable and
    /// what nodes outside the group claim.
    pub fn step(
        &mut self,
        now_ms: u64,
        input: AgentInput<W>,
        t: &mut Topology,
        gossip: &Gossip,
    ) -> Vec<AgentAction<W>> {
        match input {
            AgentInput::Tick => self.tick(now_ms, t, gossip),
            AgentInput::Raft { from, group, data } => self.receive(now_ms, from, group, &data, t),
            AgentInput::Forwarded {
                from,
                group,
                seq,
                command,
            } => self.forwarded(from, group, seq, &command),
            AgentInput::Propose { command, waiter } => self.propose(now_ms, command, waiter),
            AgentInput::Leave => self.leave(),
        }
        self.turn(now_ms, t);
        if self.release_parked(now_ms) {
            self.turn(now_ms, t);
        }
        if std::mem::take(&mut self.save) {
            self.out.push(AgentAction::SaveConfig);
        }
        std::mem::take(&mut self.out)
    }

    fn tick(&mut self, now_ms: u64, t: &mut Topology, gossip: &Gossip) {
        if self.group.is_none() {
            self.consider_founding(now_ms, t, gossip);
            return;
        }
        if self.abandon_if_never_started(now_ms, t) {
            return;
        }
        self.tick_raft(now_ms);
        for waiter in self.pending.expire(now_ms) {
            let timeout = self.settings.proposal_timeout_ms;
            self.reply(waiter, Err(ProposeError::Timeout(timeout)));
        }
        if self.is_leader() {
            self.reconcile(now_ms, t, gossip);
            self.fail_over(now_ms, t, gossip);
        }
    }

    /// Leaves a group that never committed anything past its bootstrap within
    /// `abandon_ms` (see [`AgentSettings::abandon_ms`]); true if it left.
    fn abandon_if_never_started(&mut self, now_ms: u64, t: &mut Topology) -> bool {
        let started = self.group.as_ref().is_some_and(|g| g.log.group_started());
        if t.consensus.version > BOOTSTRAP_INDEX || started {
            self.unstarted_since_ms = None;
            return false;
        }
        let since = *self.unstarted_since_ms.get_or_insert(now_ms);
        if now_ms.saturating_sub(since) < self.settings.abandon_ms {
            return false;
        }
        tracing::warn!("the topology group never started; leaving it");
        self.leave();
        // Nothing was decided by the group: this node says version 0 again and may be
        // taken in by (or found) a group that works.
        t.consensus = Default::default();
        self.save = true;
        true
    }

    fn reply(&mut self, waiter: W, result: Result<(), ProposeError>) {
        self.out.push(AgentAction::Reply { waiter, result });
    }

    /// CLUSTER RESET: the group is left behind; waiting commands learn it.
    fn leave(&mut self) {
        if let Some(g) = self.group.take() {
            tracing::info!(group = %g.id, "left the topology group");
        }
        if let Some(store) = &self.store {
            if let Err(e) = store.forget() {
                tracing::error!(error = %e, "the files of the group left behind stay");
            }
        }
        for waiter in self.pending.drain() {
            self.reply(waiter, Err(ProposeError::NotInGroup));
        }
        for (_, waiter, _) in std::mem::take(&mut self.parked) {
            self.reply(waiter, Err(ProposeError::NotInGroup));
        }
        self.founding = founding::Watch::default();
        self.attempts = Attempts::default();
        self.failovers.clear();
        self.unstarted_since_ms = None;
        self.prejoin = None;
    }
}
