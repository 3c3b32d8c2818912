//! The simulated cluster: nodes (a topology and a gossip core each) on the simulated
//! network, one virtual clock, and a hash of everything that happened (the trace) so that
//! two runs of one seed can be compared.

use crate::net::{Net, Weather};
use node::cluster::agent::{AgentSettings, ProposeError};
use node::cluster::config_file;
use node::cluster::consensus::TopologyCommand;
use node::cluster::core::{ClusterCore, CoreAction, CoreInput};
use node::cluster::gossip::{settings::TICK_MS, Event, GossipSettings, Input};
use node::cluster::id::HexId;
use node::cluster::node::ClusterNode;
use node::cluster::Topology;
use node::server::persistence::topology_group_files::group_store;
use proto::bus::{from_datagram, to_datagrams, Reassembler, ReassemblyLimits};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The cluster secret every simulated node shares.
pub const SECRET: &[u8] = b"chaos cluster secret";
/// A verbs UD-like payload limit: big PINGs travel as several fragments.
pub const MTU: usize = 1000;
/// Virtual start time (ms): far from 0 so "never" (0) and "long ago" differ.
pub const START_MS: u64 = 1_000_000;
/// Most nodes a simulation holds (the initial ones plus replacements).
pub const NODES_MAX: usize = 16;

pub fn gossip_settings() -> GossipSettings {
    GossipSettings {
        node_timeout_ms: 2_000,
        ping_retry_ms: 300,
        // The simulator ticks every TICK_MS (100 ms): heartbeats at a quarter of the node
        // timeout fit a lease of half of it (the node's shorter lease needs its finer ticks).
        lease_divisor: 2,
        ..GossipSettings::default()
    }
}

pub struct SimNode {
    /// This node as first created: what a restart without a config file starts from.
    pub origin: ClusterNode,
    pub addr: String,
    pub topology: Topology,
    /// Gossip and the topology agent; a waiting change is named by a number.
    pub core: ClusterCore<u64>,
    /// Its disk: where its topology group (Raft log) survives crashes.
    pub dir: tempfile::TempDir,
    /// Outcomes of this node's topology changes, by the number [`Sim::propose`] gave.
    pub replies: Vec<(u64, Result<(), ProposeError>)>,
    pub reassembler: Reassembler<String>,
    pub alive: bool,
    /// The config file as last saved (nodes.conf); a restart loads it.
    pub saved: Option<String>,
    pub restarts: u32,
    pub events: u64,
    /// Datagrams the node refused (bad fragment, envelope or MAC).
    pub rejected: u64,
}

impl SimNode {
    pub fn id(&self) -> HexId {
        self.origin.id
    }
}

pub struct Sim {
    pub seed: u64,
    pub nodes: Vec<SimNode>,
    pub net: Net,
    pub now: u64,
    /// Drives the network and every scenario choice; cores get their own seeds.
    pub rng: StdRng,
    trace: u64,
    next_waiter: u64,
    /// Messages sent so far by all nodes (numbers each send's fragments).
    sends: u64,
    /// Settings of the topology agents made from now on.
    pub agent_settings: AgentSettings,
}

impl Sim {
    pub fn new(seed: u64, nodes: usize) -> Sim {
        Sim::with_agents(seed, nodes, AgentSettings::default())
    }

    /// A simulation whose nodes' topology agents use `agent` (a founding delay that never
    /// ends keeps the cluster on gossip alone).
    pub fn with_agents(seed: u64, nodes: usize, agent: AgentSettings) -> Sim {
        let mut sim = Sim {
            seed,
            nodes: Vec::new(),
            net: Net::new(Weather::CALM),
            now: START_MS,
            rng: StdRng::seed_from_u64(seed),
            trace: FNV_OFFSET,
            next_waiter: 0,
            sends: 0,
            agent_settings: agent,
        };
        for _ in 0..nodes {
            sim.add_node();
        }
        sim
    }

    /// A fresh node that knows only itself; returns its index.
    pub fn add_node(&mut self) -> usize {
        let i = self.nodes.len();
        assert!(i < NODES_MAX, "more than {NODES_MAX} simulated nodes");
        let mut me = ClusterNode::new(HexId::random(&mut self.rng), HexId::random(&mut self.rng));
        me.ip = format!("10.0.0.{}", i + 1);
        me.port = 7000 + i as u16;
        me.cport = 17000 + i as u16;
        me.bus_addr = address(i);
        let dir = sim_dir();
        let core = ClusterCore::with_store(
            me.id,
            gossip_settings(),
            self.agent_settings.clone(),
            self.core_seed(i, 0),
            group_store(dir.path()),
            0,
        )
        .expect("a fresh directory holds no group");
        self.nodes.push(SimNode {
            topology: Topology::new(me.clone()),
            origin: me,
            addr: address(i),
            core,
            dir,
            replies: Vec::new(),
            reassembler: Reassembler::new(ReassemblyLimits::default()),
            alive: true,
            saved: None,
            restarts: 0,
            events: 0,
            rejected: 0,
        });
        i
    }

    fn core_seed(&self, i: usize, restarts: u32) -> u64 {
        self.seed
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(((i as u64) << 32) | restarts as u64)
    }

    /// kill -9: the process and everything it did not save are gone.
    pub fn crash(&mut self, i: usize) {
        self.record(&[2, i as u8]);
        self.nodes[i].alive = false;
    }

    /// Starts a crashed node again: same id, topology loaded from its saved config file,
    /// a fresh gossip core.
    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        self.record(&[3, i as u8]);
        let restarts = self.nodes[i].restarts + 1;
        let seed = self.core_seed(i, restarts);
        let node = &mut self.nodes[i];
        let topology = match &node.saved {
            Some(text) => config_file::parse(text, &mut StdRng::seed_from_u64(seed))
                .map_err(|e| e.to_string())?,
            None => Topology::new(node.origin.clone()),
        };
        let applied = topology.consensus.saved_version;
        // The Raft log was written before every message that depended on it: reopening it is
        // what a real restart does. A damaged log, or one that ends before the version the
        // saved config recorded, would refuse the start.
        node.core = ClusterCore::with_store(
            node.origin.id,
            gossip_settings(),
            self.agent_settings.clone(),
            seed,
            group_store(node.dir.path()),
            applied,
        )
        .map_err(|e| format!("topology log: {e}"))?;
        node.topology = topology;
        node.reassembler = Reassembler::new(ReassemblyLimits::default());
        node.restarts = restarts;
        node.alive = true;
        Ok(())
    }

    /// An operator changed node i's topology by hand (CLUSTER ADDSLOTS...): it saves.
    pub fn save(&mut self, i: usize) {
        let text = config_file::render(&self.nodes[i].topology);
        self.nodes[i].saved = Some(text);
    }

    pub fn meet(&mut self, i: usize, j: usize) {
        let addr = self.nodes[j].addr.clone();
        self.step(i, Input::Meet { addr });
    }

    /// Hands node i a topology change (what CLUSTER ADDSLOTS... does on a node in a
    /// group); its outcome lands in the node's `replies` under the returned number.
    pub fn propose(&mut self, i: usize, command: TopologyCommand) -> u64 {
        let waiter = self.next_waiter;
        self.next_waiter += 1;
        self.run_core(i, CoreInput::Propose { command, waiter });
        waiter
    }

    /// Feeds one input to node i and carries out what it returns.
    pub fn step(&mut self, i: usize, input: Input) {
        self.run_core(i, CoreInput::Gossip(input));
    }

    fn run_core(&mut self, i: usize, input: CoreInput<u64>) {
        let now = self.now;
        let node = &mut self.nodes[i];
        let actions = node.core.step(now, input, &mut node.topology);
        for action in actions {
            match action {
                CoreAction::Reply { waiter, result } => {
                    self.record(&[5, i as u8, result.is_ok() as u8]);
                    self.nodes[i].replies.push((waiter, result));
                }
                CoreAction::Send { to, msg } => {
                    let Some(dst) = index_of_address(&to).filter(|&d| d < self.nodes.len()) else {
                        continue;
                    };
                    // A message the wire format refuses is never sent: the core's bug, seen
                    // as a missing message (and a different trace).
                    self.sends += 1;
                    let Ok(parts) = to_datagrams(&msg, SECRET, MTU, self.sends) else {
                        self.record(&[4, i as u8]);
                        continue;
                    };
                    self.net.send(&mut self.rng, now, i, dst, parts);
                }
                CoreAction::SaveConfig => self.save(i),
                CoreAction::Event(e) => {
                    self.nodes[i].events += 1;
                    self.record_event(i, &e);
                }
                // Simulated nodes keep their address across restarts: a lookup would
                // find the one already known, which changes nothing.
                CoreAction::Deliver { .. }
                | CoreAction::Forgotten { .. }
                | CoreAction::Lookup { .. } => {}
            }
        }
    }

    /// One round: delivers every datagram due before the next tick boundary, then ticks
    /// every live node.
    pub fn round(&mut self) {
        let next_tick = self.next_tick();
        self.deliver_until(next_tick);
        self.tick_all(next_tick);
    }

    /// The next tick boundary.
    pub fn next_tick(&self) -> u64 {
        (self.now / TICK_MS + 1) * TICK_MS
    }

    /// Delivers every datagram due at or before `until` (time moves to each), so another
    /// layer (the data path of `data`) can interleave its own deliveries in time order.
    pub fn deliver_until(&mut self, until: u64) {
        while let Some((at, d)) = self.net.next_due(until) {
            self.now = self.now.max(at);
            self.deliver(d.from, d.to, &d.bytes);
        }
    }

    /// Moves time to the tick boundary `at` (from [`Sim::next_tick`]) and ticks every live
    /// node.
    pub fn tick_all(&mut self, at: u64) {
        self.now = self.now.max(at);
        for i in 0..self.nodes.len() {
            if self.nodes[i].alive {
                self.nodes[i].reassembler.expire(self.now);
                self.step(i, Input::Tick);
            }
        }
    }

    fn deliver(&mut self, from: usize, to: usize, bytes: &[u8]) {
        if !self.nodes[to].alive {
            return;
        }
        let mut h = [0u8; 17];
        h[0] = 1;
        h[1..9].copy_from_slice(&self.now.to_le_bytes());
        h[9..17].copy_from_slice(&((from as u64) << 32 | to as u64).to_le_bytes());
        self.record(&h);
        self.record(bytes);
        let sender = address(from);
        let node = &mut self.nodes[to];
        match from_datagram(&mut node.reassembler, &sender, bytes, SECRET, self.now) {
            Ok(Some(msg)) => self.step(
                to,
                Input::Receive {
                    from: sender,
                    msg: Box::new(msg),
                },
            ),
            Ok(None) => {}
            Err(_) => node.rejected += 1,
        }
    }

    /// Hash of everything delivered, every event, crash and restart so far.
    pub fn trace_hash(&self) -> u64 {
        self.trace
    }

    fn record_event(&mut self, i: usize, e: &Event) {
        let text = format!("{} {i} {e:?}", self.now);
        self.record(text.as_bytes());
    }

    fn record(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.trace = (self.trace ^ b as u64).wrapping_mul(FNV_PRIME);
        }
    }

    pub fn live(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|&i| self.nodes[i].alive)
    }

    pub fn rng_mut(&mut self) -> &mut StdRng {
        &mut self.rng
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.rng.gen_bool(p)
    }
}

/// FNV-1a: stable across builds and platforms, unlike std's hasher.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

pub fn address(i: usize) -> String {
    format!("sim:{i}")
}

fn index_of_address(addr: &str) -> Option<usize> {
    addr.strip_prefix("sim:")?.parse().ok()
}

/// A node's disk: on tmpfs where there is one (fsync costs nothing there, and a simulated
/// crash loses only what the process held, not what the kernel had).
fn sim_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    let made = if shm.is_dir() {
        tempfile::Builder::new().prefix("chaos-").tempdir_in(shm)
    } else {
        tempfile::Builder::new().prefix("chaos-").tempdir()
    };
    made.expect("a temporary directory")
}
