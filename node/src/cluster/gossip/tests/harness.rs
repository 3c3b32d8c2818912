//! An in-memory network of gossip cores: virtual time, a seeded message queue with loss,
//! delay and partitions, and every message sealed, fragmented to a small MTU, reassembled and
//! opened on the way, as the fabric wiring will do.

use super::super::{Action, Event, Gossip, GossipSettings, Input};
use crate::cluster::flags::bit;
use crate::cluster::id::HexId;
use crate::cluster::node::ClusterNode;
use crate::cluster::topology::Topology;
use proto::bus::{from_datagram, to_datagrams, Reassembler, ReassemblyLimits};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

pub const SECRET: &[u8] = b"harness secret";
/// A verbs UD-like payload limit, so large PINGs travel in several fragments.
pub const MTU: usize = 1000;
pub const TICK_MS: u64 = super::super::settings::TICK_MS;

pub struct SimNode {
    pub gossip: Gossip,
    pub topology: Topology,
    pub addr: String,
    pub alive: bool,
    pub reassembler: Reassembler<String>,
    pub events: Vec<(u64, Event)>,
    pub saves: usize,
}

pub struct Net {
    pub nodes: Vec<SimNode>,
    /// Datagrams in flight by delivery time (then sequence, for a stable order).
    queue: BTreeMap<(u64, u64), (usize, String, Vec<u8>)>,
    seq: u64,
    /// Messages sent so far (numbers each send's fragments).
    sends: u64,
    rng: StdRng,
    pub now: u64,
    pub loss: f64,
    pub delay_max_ms: u64,
    /// Every datagram takes at least this long (at most `delay_max_ms`).
    pub min_delay_ms: u64,
    /// Node pairs that cannot reach each other.
    pub cut: Vec<(usize, usize)>,
    /// (from, to): messages from the first node to the second are lost, the other way not.
    pub one_way_cut: Vec<(usize, usize)>,
}

pub fn settings() -> GossipSettings {
    GossipSettings {
        node_timeout_ms: 2_000,
        ping_retry_ms: 300,
        ..GossipSettings::default()
    }
}

impl Net {
    pub fn new(n: usize, seed: u64) -> Net {
        Net::with_settings(n, seed, settings())
    }

    pub fn with_settings(n: usize, seed: u64, settings: GossipSettings) -> Net {
        let mut rng = StdRng::seed_from_u64(seed);
        let nodes = (0..n)
            .map(|i| {
                let mut me = ClusterNode::new(HexId::random(&mut rng), HexId::random(&mut rng));
                me.ip = format!("10.0.0.{}", i + 1);
                me.port = 7000 + i as u16;
                me.cport = 17000 + i as u16;
                me.bus_addr = format!("sim:{i}");
                SimNode {
                    gossip: Gossip::new(settings, seed ^ ((i as u64 + 1) * 0x9e37)),
                    topology: Topology::new(me),
                    addr: format!("sim:{i}"),
                    alive: true,
                    reassembler: Reassembler::new(ReassemblyLimits::default()),
                    events: Vec::new(),
                    saves: 0,
                }
            })
            .collect();
        Net {
            nodes,
            queue: BTreeMap::new(),
            seq: 0,
            sends: 0,
            rng,
            now: 1_000_000,
            loss: 0.0,
            delay_max_ms: 5,
            min_delay_ms: 0,
            cut: Vec::new(),
            one_way_cut: Vec::new(),
        }
    }

    fn index_of_addr(&self, addr: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.addr == addr)
    }

    fn reachable(&self, a: usize, b: usize) -> bool {
        !self
            .cut
            .iter()
            .any(|&(x, y)| (x, y) == (a, b) || (y, x) == (a, b))
            && !self.one_way_cut.contains(&(a, b))
    }

    pub fn step(&mut self, i: usize, input: Input) {
        let node = &mut self.nodes[i];
        let actions = node.gossip.step(self.now, input, &mut node.topology);
        self.dispatch(i, actions);
    }

    /// Node `i` applied topology `version` (as the cluster core does after a commit: the
    /// version goes into its headers and every reachable node is pinged with it).
    pub fn apply_version(&mut self, i: usize, version: u64) {
        let now = self.now;
        let node = &mut self.nodes[i];
        node.gossip.set_topology_version(version);
        let actions = node.gossip.announce_version(now, &mut node.topology);
        self.dispatch(i, actions);
    }

    fn dispatch(&mut self, i: usize, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Send { to, msg } => {
                    let Some(dst) = self.index_of_addr(&to) else {
                        continue;
                    };
                    self.sends += 1;
                    let datagrams =
                        to_datagrams(&msg, SECRET, MTU, self.sends).expect("a valid message");
                    for d in datagrams {
                        if self.rng.gen_bool(self.loss) || !self.reachable(i, dst) {
                            continue;
                        }
                        let delay = self.min_delay_ms.min(self.delay_max_ms)..=self.delay_max_ms;
                        let at = self.now + self.rng.gen_range(delay);
                        self.seq += 1;
                        let from = self.nodes[i].addr.clone();
                        self.queue.insert((at, self.seq), (dst, from, d));
                    }
                }
                Action::SaveConfig => self.nodes[i].saves += 1,
                Action::Event(e) => self.nodes[i].events.push((self.now, e)),
                // Addresses do not move in this network.
                Action::Deliver { .. } | Action::Lookup { .. } => {}
            }
        }
    }

    /// Runs the network for `ms` of virtual time, ticking every node every TICK_MS.
    pub fn run(&mut self, ms: u64) {
        let end = self.now + ms;
        while self.now < end {
            let next_tick = (self.now / TICK_MS + 1) * TICK_MS;
            while let Some((&(at, seq), _)) = self.queue.iter().next() {
                if at > next_tick {
                    break;
                }
                let (dst, from, d) = self.queue.remove(&(at, seq)).expect("present");
                self.now = self.now.max(at);
                if !self.nodes[dst].alive {
                    continue;
                }
                let now = self.now;
                let node = &mut self.nodes[dst];
                let whole = from_datagram(&mut node.reassembler, &from, &d, SECRET, now);
                if let Some(msg) = whole.expect("intact datagrams open") {
                    self.step(
                        dst,
                        Input::Receive {
                            from,
                            msg: Box::new(msg),
                        },
                    );
                }
            }
            self.now = next_tick;
            for i in 0..self.nodes.len() {
                if self.nodes[i].alive {
                    self.step(i, Input::Tick);
                }
            }
        }
    }

    /// Runs until `done` holds (checked every tick) or `limit_ms` passes; returns the time
    /// it took.
    pub fn run_until(&mut self, limit_ms: u64, done: impl Fn(&Net) -> bool) -> Option<u64> {
        let start = self.now;
        while self.now - start <= limit_ms {
            if done(self) {
                return Some(self.now - start);
            }
            self.run(TICK_MS);
        }
        None
    }

    pub fn meet(&mut self, i: usize, j: usize) {
        let addr = self.nodes[j].addr.clone();
        self.step(i, Input::Meet { addr });
    }

    pub fn id(&self, i: usize) -> HexId {
        self.nodes[i].topology.myself().id
    }

    /// Whether node `i` knows every node of the net as a member, and nothing else.
    pub fn knows_all(&self, i: usize) -> bool {
        let t = &self.nodes[i].topology;
        t.nodes.len() == self.nodes.len()
            && (0..self.nodes.len()).all(|j| {
                t.index_of(&self.id(j))
                    .is_some_and(|k| !t.nodes[k as usize].flags.has(bit::HANDSHAKE))
            })
    }

    /// The flags node `i` has for node `j`.
    pub fn flags_of(&self, i: usize, j: usize) -> Option<u16> {
        let t = &self.nodes[i].topology;
        t.index_of(&self.id(j)).map(|k| t.nodes[k as usize].flags.0)
    }

    /// Brings up `n` nodes that all met node 0 and converged.
    pub fn converged(n: usize, seed: u64) -> Net {
        Net::converged_with(n, seed, settings())
    }

    pub fn converged_with(n: usize, seed: u64, settings: GossipSettings) -> Net {
        let mut net = Net::with_settings(n, seed, settings);
        for i in 1..n {
            net.meet(i, 0);
        }
        let took = net.run_until(20_000, |net| (0..n).all(|i| net.knows_all(i)));
        assert!(took.is_some(), "{n} nodes did not converge");
        net
    }
}
