//! A deterministic in-memory network for topology-log tests: nodes exchange raft bytes
//! through one FIFO queue, time moves by explicit ticks, links can be cut and nodes crashed.
//! Each node's driver saves every turn's `Persist` (into its file when it has one, else a
//! [`MemoryStore`]) before it queues the turn's messages or applies it.
//! After every turn each node's topology image is compared with the image any other node had
//! at the same version: one version, one topology (so never two owners of a slot).

use super::command::{NodeAddress, TopologyCommand};
use super::image::TopologyImage;
use super::log::TopologyLog;
use super::log_error::LogError;
use super::log_file::LogFile;
use super::log_store::{self, LogStore, MemoryStore};
use super::output::{Committed, LeaderChange};
use crate::cluster::id::{HexId, NodeId};
use crate::cluster::node::ClusterNode;
use crate::cluster::topology::Topology;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Turns of ready/deliver per settle before giving up (a quiet group needs a handful).
const SETTLE_TURNS_MAX: usize = 200;

pub fn node_id(n: usize) -> NodeId {
    HexId::parse(format!("{:02x}", n + 0x10).repeat(20).as_bytes()).unwrap()
}

pub fn add_node(n: usize) -> TopologyCommand {
    TopologyCommand::AddNode {
        id: node_id(n),
        shard: HexId::parse(format!("{:02x}", n + 0x80).repeat(20).as_bytes()).unwrap(),
        address: NodeAddress {
            ip: format!("10.0.0.{n}"),
            port: 7000 + n as u16,
            cport: 17000 + n as u16,
            hostname: String::new(),
        },
    }
}

pub struct SimNode {
    pub id: NodeId,
    /// None while crashed.
    pub log: Option<TopologyLog>,
    /// The log's file, when the test gave it one; else `memory` keeps what turns save.
    pub file: Option<Box<dyn LogStore>>,
    pub memory: MemoryStore,
    pub topology: Topology,
    /// Committed command entries in the order this node applied them, with the outcome.
    pub applied: Vec<(Committed, bool)>,
    pub restores: usize,
    /// The leader changes this node's log reported, in order.
    pub leader_reports: Vec<LeaderChange>,
}

pub struct SimNet {
    pub nodes: Vec<SimNode>,
    queue: VecDeque<(usize, NodeId, Vec<u8>)>,
    /// Directed links that drop everything.
    cut: BTreeSet<(usize, usize)>,
    /// The first image seen at each version, and which node had it.
    images: BTreeMap<u64, (usize, TopologyImage)>,
    pub step_errors: Vec<LogError>,
    /// Percent of messages dropped, drawn from a seeded source.
    loss_percent: u32,
    loss_rng: SmallRng,
}

impl SimNet {
    /// `voters` founding voters and `learners` founding learners, nodes 0.. in that order.
    pub fn new(voters: usize, learners: usize, seed: u64) -> Self {
        let voter_ids: Vec<NodeId> = (0..voters).map(node_id).collect();
        let learner_ids: Vec<NodeId> = (voters..voters + learners).map(node_id).collect();
        let mut net = SimNet {
            nodes: Vec::new(),
            queue: VecDeque::new(),
            cut: BTreeSet::new(),
            images: BTreeMap::new(),
            step_errors: Vec::new(),
            loss_percent: 0,
            loss_rng: SmallRng::seed_from_u64(seed),
        };
        for n in 0..voters + learners {
            let log =
                TopologyLog::new(node_id(n), &voter_ids, &learner_ids, seed + n as u64).unwrap();
            net.push(log);
        }
        net
    }

    /// Adds a node started with `log` (a joiner); returns its index.
    pub fn push(&mut self, log: TopologyLog) -> usize {
        let id = log.me();
        let shard = HexId::parse(&[b'f'; 40]).unwrap();
        self.nodes.push(SimNode {
            id,
            log: Some(log),
            file: None,
            memory: MemoryStore::default(),
            topology: Topology::new(ClusterNode::new(id, shard)),
            applied: Vec::new(),
            restores: 0,
            leader_reports: Vec::new(),
        });
        self.nodes.len() - 1
    }

    pub fn log(&mut self, i: usize) -> &mut TopologyLog {
        self.nodes[i].log.as_mut().expect("node is crashed")
    }

    fn index(&self, id: &NodeId) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == *id)
    }

    /// Alive nodes that believe they lead.
    pub fn leaders(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| {
                self.nodes[i]
                    .log
                    .as_ref()
                    .is_some_and(TopologyLog::is_leader)
            })
            .collect()
    }

    pub fn crash(&mut self, i: usize) {
        self.nodes[i].log = None;
        self.nodes[i].file = None;
    }

    /// Node `i`'s log is kept in `file` (a new one) from now on.
    pub fn attach_file<F: LogFile>(&mut self, i: usize, file: &F)
    where
        F::Store: 'static,
    {
        let log = self.nodes[i].log.take().expect("node is crashed");
        let (log, store) = log.with_file(file).unwrap();
        self.nodes[i].log = Some(log);
        self.nodes[i].file = Some(Box::new(store));
    }

    /// Node `i` takes a snapshot of `topology` and its driver saves it.
    pub fn compact(&mut self, i: usize, topology: &Topology) -> Result<(), LogError> {
        let node = &mut self.nodes[i];
        let log = node.log.as_mut().expect("node is crashed");
        match log.compact(topology)? {
            Some(persist) => {
                log_store::save(log, store_of(&mut node.file, &mut node.memory), &persist)
            }
            None => Ok(()),
        }
    }

    /// Cuts every link between `group` and the other nodes, both ways.
    pub fn partition(&mut self, group: &[usize]) {
        for &a in group {
            for b in 0..self.nodes.len() {
                if !group.contains(&b) {
                    self.cut.insert((a, b));
                    self.cut.insert((b, a));
                }
            }
        }
    }

    /// Drops `percent` of all messages from now on (0: none).
    pub fn set_loss(&mut self, percent: u32) {
        self.loss_percent = percent;
    }

    pub fn heal(&mut self) {
        self.cut.clear();
    }

    /// One tick on every alive node, then settle.
    pub fn tick(&mut self) {
        for n in self.nodes.iter_mut() {
            if let Some(log) = n.log.as_mut() {
                log.tick().unwrap();
            }
        }
        self.settle();
    }

    pub fn run(&mut self, ticks: usize) {
        for _ in 0..ticks {
            self.tick();
        }
    }

    /// Ticks until exactly one node leads (at most `ticks_max`); returns it.
    pub fn elect(&mut self, ticks_max: usize) -> usize {
        for _ in 0..ticks_max {
            if let [one] = self.leaders()[..] {
                return one;
            }
            self.tick();
        }
        panic!(
            "no single leader after {ticks_max} ticks: {:?}",
            self.leaders()
        );
    }

    /// Runs ready/deliver turns until nothing moves.
    pub fn settle(&mut self) {
        for _ in 0..SETTLE_TURNS_MAX {
            let mut moved = false;
            for i in 0..self.nodes.len() {
                moved |= self.turn(i);
            }
            while let Some((from, to, bytes)) = self.queue.pop_front() {
                moved = true;
                let Some(t) = self.index(&to) else { continue };
                let lost =
                    self.loss_percent > 0 && self.loss_rng.gen_range(0..100) < self.loss_percent;
                if lost || self.cut.contains(&(from, t)) || self.nodes[from].log.is_none() {
                    continue;
                }
                let from_id = self.nodes[from].id;
                if let Some(log) = self.nodes[t].log.as_mut() {
                    if let Err(e) = log.step(&from_id, &bytes) {
                        self.step_errors.push(e);
                    }
                }
            }
            if !moved {
                return;
            }
        }
        panic!("the group did not settle");
    }

    /// One ready turn of node `i`: apply its output, queue its messages, check its image.
    fn turn(&mut self, i: usize) -> bool {
        let node = &mut self.nodes[i];
        let Some(log) = node.log.as_mut() else {
            return false;
        };
        let out = log.ready().unwrap();
        if out.is_empty() {
            return false;
        }
        let store = store_of(&mut node.file, &mut node.memory);
        if let Some(persist) = &out.persist {
            log_store::save(log, store, persist).unwrap();
        }
        let outcomes = out.apply_to(&mut node.topology);
        if out.snapshot_due {
            if let Some(persist) = log.compact(&node.topology).unwrap() {
                log_store::save(log, store, &persist).unwrap();
            }
        }
        node.restores += out.restore.is_some() as usize;
        node.leader_reports.extend(out.leader.clone());
        for entry in &out.committed {
            let ok = outcomes
                .iter()
                .any(|(index, r)| *index == entry.index && r.is_ok());
            node.applied.push((entry.clone(), ok));
        }
        for (to, bytes) in out.messages {
            self.queue.push_back((i, to, bytes));
        }
        let image = TopologyImage::capture(&node.topology);
        match self.images.get(&image.version) {
            Some((first, seen)) => assert_eq!(
                *seen, image,
                "node {i} and node {first} differ at version {}",
                image.version
            ),
            None => {
                self.images.insert(image.version, (i, image));
            }
        }
        true
    }

    /// The commands node `i` applied, in order.
    pub fn commands(&self, i: usize) -> Vec<(u64, TopologyCommand)> {
        self.nodes[i]
            .applied
            .iter()
            .map(|(c, _)| (c.index, c.command.clone().unwrap()))
            .collect()
    }

    /// Versions at which two or more nodes' images were compared.
    pub fn versions_seen(&self) -> usize {
        self.images.len()
    }
}

/// Where a node's turns are saved: its file, else memory.
fn store_of<'a>(
    file: &'a mut Option<Box<dyn LogStore>>,
    memory: &'a mut MemoryStore,
) -> &'a mut dyn LogStore {
    match file {
        Some(f) => f.as_mut(),
        None => memory,
    }
}
