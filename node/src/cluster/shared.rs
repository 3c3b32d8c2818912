//! The cluster state a running node shares between its connections: the topology behind a
//! lock, and the store it is persisted in (the config file, through
//! [`ConfigStore`](super::config_store::ConfigStore)). Every change that Redis would save
//! (slot assignment, SETSLOT) is written to the store before the command answers.

use super::agent::AgentSettings;
use super::config_store::{self, ConfigStore, LoadError};
use super::consensus::TopologyCommand;
use super::error::ClusterError;
use super::gossip::view::PeerView;
use super::id::{HexId, NodeId};
use super::node::{ClusterNode, LinkState};
use super::topology::{Settings, Topology};
use crate::config::params::CLUSTER_PORT_MAX;
use crate::config::Config;
use parking_lot::{Mutex, RwLock};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The bus port is the client port plus this (Redis's `CLUSTER_PORT_INCR`).
pub const BUS_PORT_OFFSET: u16 = 10000;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("port {0} is too high for cluster mode: the bus port is the client port + 10000, so the port must be {CLUSTER_PORT_MAX} or less")]
    PortTooHigh(u16),
    #[error("cluster mode needs a TCP port (port 0 was given): the bus port is the client port + 10000, and tls-cluster is not supported")]
    NoPort,
    #[error("writing the cluster config file {path}: {source}")]
    Save {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Without a secret any process that reaches the bus can join, vote and take slots.
    #[error("cluster mode on an address beyond loopback (bind / rdma-bind) needs a cluster-secret shared by the cluster's nodes (e.g. `cluster-secret $(openssl rand -hex 32)` in every node's config); refusing to start without one")]
    NoSecret,
}

/// This node's standing in the Raft topology group, as the bus thread last published it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupView {
    /// The group (its founder's id); None while the node is in none.
    pub group: Option<super::id::NodeId>,
    pub leader: Option<super::id::NodeId>,
    pub voters: usize,
    pub learners: usize,
    /// The topology version (last applied log index).
    pub version: u64,
}

/// How long a command waits for its topology change beyond the agent's own timeout (which
/// answers first): the bus thread may be slow to take the request.
const PROPOSAL_WAIT_SLACK: Duration = Duration::from_secs(1);

/// Why a proposal failed when its outcome never came.
pub const PROPOSAL_NO_ANSWER: &str = "no answer from the cluster bus";

/// Where a proposal's outcome arrives.
pub type ProposalOutcome =
    std::sync::mpsc::Receiver<Result<(), crate::cluster::agent::ProposeError>>;

/// What a command does once its change is committed and applied here, before it answers.
pub type OnCommit = Box<dyn FnOnce(&Cluster) + Send>;

/// A client's topology change in flight: where its outcome arrives, and what follows it.
pub struct PendingChange {
    pub outcome: ProposalOutcome,
    pub on_commit: Option<OnCommit>,
}

/// Nodes the group forgot that this node has not answered a FORGET for yet, at most this
/// many (older ones go first): one per node of the largest cluster.
const FORGOTTEN_MAX: usize = super::topology::NODES_MAX;
/// How long such a FORGET is answered OK: gossip's blacklist period.
const FORGOTTEN_TTL: Duration = Duration::from_millis(super::gossip::blacklist::BLACKLIST_TTL_MS);

/// A client blocked until the serving lease holds again. Defined here and implemented by
/// the server's client handle, so the cluster core does not import the server.
pub trait LeaseWaiter: Send + Sync {
    /// Still blocked, not killed: a waiter that is not goes from the list.
    fn still_waiting(&self) -> bool;
    /// Runs its command again.
    fn wake(&self);
}

pub struct Cluster {
    pub topology: RwLock<Topology>,
    group: RwLock<GroupView>,
    /// See [`Cluster::take_forgotten`].
    forgotten: Mutex<std::collections::VecDeque<(NodeId, Instant)>>,
    /// Where the topology is saved (nodes.conf).
    config_store: Box<dyn ConfigStore>,
    /// One writer of the config file at a time: SAVECONFIG saves under the topology's read
    /// lock, so two of them could otherwise share the temp file.
    save_lock: Mutex<()>,
    /// The running cluster bus, set once when it is up.
    pub bus: std::sync::OnceLock<super::transport::BusHandle>,
    /// The gossip core's per-node state as of its last tick (failure reports, links),
    /// published by the bus thread for CLUSTER COUNT-FAILURE-REPORTS and LINKS.
    pub peer_view: RwLock<PeerView>,
    /// Until when (unix ms) this node's serving lease holds (gossip `serving_until`, in a
    /// topology group), set by the bus thread after every step: keyed commands are served
    /// only before it. A deadline rather than a flag, so that it runs out on time even
    /// when the bus thread is late.
    serving_until: std::sync::atomic::AtomicU64,
    /// Whether the last step found the lease held (only for logging the transitions).
    serving_logged: std::sync::atomic::AtomicBool,
    /// The serving lease's length the bus runs with (ms; 0 before the bus is up).
    lease_ms: std::sync::atomic::AtomicU64,
    /// Clients blocked until the lease holds again (see [`Cluster::wake_when_serving`]).
    lease_waiters: Mutex<Vec<std::sync::Arc<dyn LeaseWaiter>>>,
    /// This process's gossip incarnation (0 before the bus is up): a replica names it when
    /// it links, so its primary tells a later restart from gossip not yet caught up.
    incarnation: std::sync::atomic::AtomicU64,
    /// Set at start when the node was a primary and restarted without everything it had
    /// acknowledged; lifted by the bus thread when the topology decided
    /// (`agent::restart_fence`). While set the node serves no keyed command and links no
    /// replica. `fenced` mirrors it for one relaxed load.
    restart_fence: Mutex<Option<super::agent::restart_fence::Fence>>,
    fenced: std::sync::atomic::AtomicBool,
    /// Bumped when CLUSTER SET-SECRET gives the node its secret, so the bus thread picks
    /// it up from the config.
    secret_generation: std::sync::atomic::AtomicU64,
    /// Keyed commands served per slot (the admin API's ops/s).
    pub slot_ops: super::slot_ops::SlotOps,
    /// The slot migrations this node is the source of, as its command path sees them.
    pub migration_gate: super::migration::MigrationGate,
}

impl Cluster {
    /// Loads this node's identity and topology from the config file's store, or makes a new
    /// node (random id and shard, drawn from `rng`, no slots) and saves it, so a restart
    /// keeps the id.
    pub fn start(
        config: &Config,
        store: Box<dyn ConfigStore>,
        rng: &mut impl rand::Rng,
    ) -> Result<Cluster, StartError> {
        if config.port == 0 {
            return Err(StartError::NoPort);
        }
        if config.port > CLUSTER_PORT_MAX {
            return Err(StartError::PortTooHigh(config.port));
        }
        if config.cluster.secret.is_empty() {
            if config.listens_beyond_loopback() {
                return Err(StartError::NoSecret);
            }
            tracing::warn!("cluster-secret is empty: any local process can join this cluster's bus, vote and take slots; set one (scripts/run.sh and `operator cluster create` generate one)");
        }
        let mut topology = match config_store::load(store.as_ref(), rng)? {
            Some(t) => {
                tracing::info!(path = %store.path().display(), id = %t.myself().id, "cluster config loaded");
                t
            }
            None => {
                let node = ClusterNode::new(HexId::random(rng), HexId::random(rng));
                tracing::info!(id = %node.id, "no cluster config found, new node id");
                Topology::new(node)
            }
        };
        // No bus link survives a restart: peers are disconnected until they talk again, and
        // a ping the previous run left unanswered is not this run's (its old send time would
        // make the first tick suspect the peer at once).
        for node in topology.nodes.iter_mut() {
            node.link = LinkState::Disconnected;
            node.ping_sent = 0;
        }
        topology.settings = Settings::from(&config.cluster);
        let me = topology.myself_mut();
        let announced = |port: u16, real: u16| if port == 0 { real } else { port };
        me.port = announced(config.cluster.announce_port, config.port);
        me.cport = announced(
            config.cluster.announce_bus_port,
            config.port + BUS_PORT_OFFSET,
        );
        me.link = LinkState::Connected;
        topology.refresh_state();
        config_store::save(store.as_ref(), &topology).map_err(|source| StartError::Save {
            path: store.path().to_path_buf(),
            source,
        })?;
        Ok(Cluster {
            topology: RwLock::new(topology),
            config_store: store,
            save_lock: Mutex::new(()),
            bus: std::sync::OnceLock::new(),
            peer_view: RwLock::new(PeerView::default()),
            group: RwLock::new(GroupView::default()),
            forgotten: Mutex::new(std::collections::VecDeque::new()),
            // Not before the bus's first step: a node restarting with a saved config that
            // names it a slot owner may have been failed over while it was down, and must
            // not take writes on its old slots before it hears how things stand.
            serving_until: std::sync::atomic::AtomicU64::new(0),
            serving_logged: std::sync::atomic::AtomicBool::new(false),
            lease_ms: std::sync::atomic::AtomicU64::new(0),
            lease_waiters: Mutex::new(Vec::new()),
            incarnation: std::sync::atomic::AtomicU64::new(0),
            restart_fence: Mutex::new(None),
            fenced: std::sync::atomic::AtomicBool::new(false),
            secret_generation: std::sync::atomic::AtomicU64::new(0),
            slot_ops: Default::default(),
            migration_gate: Default::default(),
        })
    }

    /// Whether keyed commands may be served here at `now_ms` (unix ms, the caller's clock
    /// reading: the cluster layer reads none), under the serving lease (unbounded outside a
    /// topology group).
    pub fn serving_at(&self, now_ms: u64) -> bool {
        match self
            .serving_until
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            u64::MAX => true,
            until => now_ms <= until,
        }
    }

    /// The restart fence, if the node is fenced (see the field).
    pub fn restart_fence(&self) -> Option<super::agent::restart_fence::Fence> {
        *self.restart_fence.lock()
    }

    /// Whether the node is fenced after a restart (one relaxed load).
    pub fn is_fenced(&self) -> bool {
        self.fenced.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets (at start) or lifts (None, by the bus thread) the restart fence.
    pub fn set_restart_fence(&self, fence: Option<super::agent::restart_fence::Fence>) {
        let mut f = self.restart_fence.lock();
        *f = fence;
        self.fenced
            .store(fence.is_some(), std::sync::atomic::Ordering::Relaxed);
    }

    /// This process's gossip incarnation; 0 before the bus is up.
    pub fn incarnation(&self) -> u64 {
        self.incarnation.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many times the secret changed at run time (the bus re-reads it when this moves).
    pub fn secret_generation(&self) -> u64 {
        self.secret_generation
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Called after the config's `cluster-secret` was replaced.
    pub fn secret_changed(&self) {
        self.secret_generation
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// Set once by the bus when it starts.
    pub fn set_incarnation(&self, incarnation: u64) {
        self.incarnation
            .store(incarnation, std::sync::atomic::Ordering::Relaxed);
    }

    /// The serving lease's length (ms) the bus runs with; 0 before the bus is up.
    pub fn lease_ms(&self) -> u64 {
        self.lease_ms.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Set once by the bus when it starts, from the settings its gossip core runs with.
    pub fn set_lease_ms(&self, lease_ms: u64) {
        self.lease_ms
            .store(lease_ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// The bus thread's latest lease deadline, computed at `now_ms` (unix ms).
    pub fn set_serving_until(&self, until_ms: u64, now_ms: u64) {
        self.serving_until
            .store(until_ms, std::sync::atomic::Ordering::Relaxed);
        let serving = now_ms <= until_ms;
        let was = self
            .serving_logged
            .swap(serving, std::sync::atomic::Ordering::Relaxed);
        if was != serving {
            if serving {
                tracing::info!("in touch with a majority of the primaries again: serving");
            } else {
                tracing::warn!("cut off from the majority of the primaries: not serving");
            }
        }
        if serving {
            self.wake_lease_waiters();
        }
    }

    /// Wakes `client` (to run its command again) once the serving lease holds; at once if
    /// it holds already (it may have come back since the command looked).
    pub fn wake_when_serving(&self, client: std::sync::Arc<dyn LeaseWaiter>, now_ms: u64) {
        {
            let mut waiters = self.lease_waiters.lock();
            // Bounded by the clients blocked now: a waiter that timed out, left or was
            // killed while the lease stayed lapsed (a partition of hours, its client
            // retrying) goes, and a retried command does not register twice.
            waiters.retain(|c| c.still_waiting() && !std::sync::Arc::ptr_eq(c, &client));
            waiters.push(client);
        }
        if self.serving_at(now_ms) {
            self.wake_lease_waiters();
        }
    }

    fn wake_lease_waiters(&self) {
        let waiters = std::mem::take(&mut *self.lease_waiters.lock());
        for client in waiters {
            client.wake();
        }
    }

    /// CONFIG SET of `cluster-require-full-coverage` / `cluster-allow-reads-when-down`: the
    /// state is recomputed at once, as Redis does.
    pub fn apply_settings(&self, settings: Settings) {
        let mut t = self.topology.write();
        if t.settings != settings {
            t.settings = settings;
            t.refresh_state();
        }
    }

    /// Applies a change and saves the result when it succeeded.
    pub fn change<R>(
        &self,
        f: impl FnOnce(&mut Topology) -> Result<R, ClusterError>,
    ) -> Result<R, ClusterError> {
        let mut t = self.topology.write();
        let r = f(&mut t)?;
        self.save_locked(&t)?;
        Ok(r)
    }

    pub fn group_view(&self) -> GroupView {
        self.group.read().clone()
    }

    pub(crate) fn set_group_view(&self, view: GroupView) {
        let mut g = self.group.write();
        if *g != view {
            *g = view;
        }
    }

    /// The group forgot `id` (a FORGET committed, perhaps sent to another node).
    pub(crate) fn note_forgotten(&self, id: NodeId, now: Instant) {
        let mut f = self.forgotten.lock();
        if f.len() >= FORGOTTEN_MAX {
            f.pop_front();
        }
        f.push_back((id, now));
    }

    /// Whether the group forgot `id` within the blacklist period and this node has not said
    /// so yet. `redis-cli --cluster del-node` sends FORGET to every node and needs an OK
    /// from each, as Redis (where each node forgets by itself) gives: the first FORGET of
    /// a node the group forgot answers OK here, a second one "Unknown node", as in Redis.
    pub fn take_forgotten(&self, id: &NodeId, now: Instant) -> bool {
        let mut f = self.forgotten.lock();
        f.retain(|(_, at)| now.saturating_duration_since(*at) < FORGOTTEN_TTL);
        match f.iter().position(|(n, _)| n == id) {
            Some(i) => {
                f.remove(i);
                true
            }
            None => false,
        }
    }

    /// Whether topology changes go through the Raft group (else they apply here, as Redis
    /// applies them).
    pub fn in_group(&self) -> bool {
        self.group.read().group.is_some()
    }

    /// Commits a topology change through the group and waits until it applied here (or
    /// failed). Blocks the calling thread for up to [`Cluster::proposal_wait`]: a manual
    /// failover's own thread, and (on the connection's thread, stalling that io-thread's
    /// other clients) changes inside EXEC. CLUSTER commands otherwise wait with their
    /// client blocked, through [`Cluster::propose_then`].
    pub fn propose(&self, command: TopologyCommand) -> Result<(), ClusterError> {
        let outcome = self.propose_then(command, None)?;
        match outcome.recv_timeout(Self::proposal_wait()) {
            Ok(result) => result.map_err(|e| ClusterError::Topology(e.to_string())),
            Err(_) => Err(ClusterError::Topology(PROPOSAL_NO_ANSWER.into())),
        }
    }

    /// Hands a topology change to the group; its outcome arrives on the returned receiver
    /// (within [`Cluster::proposal_wait`]), and `then` runs once it is there.
    pub fn propose_then(
        &self,
        command: TopologyCommand,
        then: Option<Box<dyn FnOnce() + Send>>,
    ) -> Result<ProposalOutcome, ClusterError> {
        let not_made = |why: &str| ClusterError::Topology(why.into());
        let bus = self
            .bus
            .get()
            .ok_or_else(|| not_made("the cluster bus is not running"))?;
        bus.propose(command, then)
            .ok_or_else(|| not_made("the cluster bus is too busy"))
    }

    /// How long a proposal's outcome may take: the agent's proposal timeout, plus slack for
    /// the bus thread's turn.
    pub fn proposal_wait() -> Duration {
        Duration::from_millis(AgentSettings::default().proposal_timeout_ms) + PROPOSAL_WAIT_SLACK
    }

    /// CLUSTER SAVECONFIG.
    pub fn save(&self) -> Result<(), ClusterError> {
        let t = self.topology.read();
        self.save_locked(&t)
    }

    fn save_locked(&self, t: &Topology) -> Result<(), ClusterError> {
        let _one_writer = self.save_lock.lock();
        config_store::save(self.config_store.as_ref(), t).map_err(|e| {
            tracing::error!(path = %self.config_store.path().display(), "saving the cluster config: {e}");
            ClusterError::Save(e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    use crate::server::persistence::nodes_conf_file::start_cluster as start;

    fn config(dir: &std::path::Path, port: u16) -> Config {
        let mut c = Config {
            dir: dir.to_path_buf(),
            port,
            ..Config::default()
        };
        c.cluster.enabled = true;
        c
    }

    #[test]
    fn lease_waiters_are_only_the_clients_blocked_now() {
        use std::sync::atomic::Ordering::Relaxed;
        let dir = tempfile::tempdir().unwrap();
        let c = start(&config(dir.path(), 7000)).unwrap();
        let addr: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let client = |id| std::sync::Arc::new(crate::server::ClientShared::new(id, addr, addr));
        let (a, b) = (client(1), client(2));
        // Registered, then blocked by its connection (as the session does after the command).
        c.wake_when_serving(a.clone(), crate::clock::unix_millis());
        a.blocked.store(true, Relaxed);
        c.wake_when_serving(a.clone(), crate::clock::unix_millis());
        assert_eq!(
            c.lease_waiters.lock().len(),
            1,
            "a retried command registers once"
        );
        c.wake_when_serving(b.clone(), crate::clock::unix_millis());
        b.blocked.store(true, Relaxed);
        // `a` timed out: it is no longer blocked, and goes at the next registration.
        a.blocked.store(false, Relaxed);
        c.wake_when_serving(b.clone(), crate::clock::unix_millis());
        assert_eq!(c.lease_waiters.lock().len(), 1);
        // The lease holds: the waiters are woken and the list is empty.
        c.set_serving_until(u64::MAX - 1, 0);
        assert!(c.lease_waiters.lock().is_empty());
        assert!(b.take_wakeup());
    }

    /// A new node saves its identity at once; the next start on the same file reuses it and
    /// takes the current port; slot changes are saved before they are answered.
    #[test]
    fn identity_survives_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let first = start(&config(dir.path(), 7000)).unwrap();
        let id = first.topology.read().myself().id;
        first.change(|t| t.add_slots(&[(5, 9)])).unwrap();
        drop(first);
        let again = start(&config(dir.path(), 7001)).unwrap();
        let t = again.topology.read();
        assert_eq!(t.myself().id, id);
        assert_eq!((t.myself().port, t.myself().cport), (7001, 17001));
        assert_eq!(t.slots.ranges_of(t.myself_index()), vec![(5, 9)]);
    }

    /// A ping left unanswered in the saved config does not carry over to the next run.
    #[test]
    fn a_saved_pending_ping_is_forgotten_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let first = start(&config(dir.path(), 7000)).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let peer = ClusterNode::new(HexId::random(&mut rng), HexId::random(&mut rng));
        let peer_id = peer.id;
        first
            .change(|t| {
                let i = t.add_node(peer).expect("room for a node");
                t.nodes[i as usize].ping_sent = 1_700_000_000_000;
                Ok(())
            })
            .unwrap();
        drop(first);
        let again = start(&config(dir.path(), 7000)).unwrap();
        let t = again.topology.read();
        let i = t.index_of(&peer_id).expect("the peer was saved");
        assert_eq!(t.nodes[i as usize].ping_sent, 0);
    }

    #[test]
    fn the_bus_port_must_fit() {
        let dir = tempfile::tempdir().unwrap();
        let e = start(&config(dir.path(), 55536)).err().unwrap();
        assert!(e.to_string().contains("55535"), "{e}");
    }
}
