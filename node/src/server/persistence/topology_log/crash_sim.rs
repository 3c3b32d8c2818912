//! A group whose members crash at random points and restart from their log files, for the
//! durable-log tests. Each member's driver saves a turn's `Persist` into its file before it
//! sends or applies anything of the turn. A crash during a turn loses everything that turn
//! returned (no message left, nothing applied) and keeps a random prefix of what the turn
//! wrote to the file, as a power cut before the fsync may. A restarted member starts with an empty topology and
//! rebuilds it from its log. Every committed entry any member reports is recorded; two
//! reports of one index must agree, and so must any two topologies at one version.

use super::durable::{DurableLog, TopologyLogFile};
use crate::cluster::consensus::command::TopologyCommand;
use crate::cluster::consensus::image::TopologyImage;
use crate::cluster::consensus::log::TopologyLog;
use crate::cluster::consensus::log_store;
use crate::cluster::consensus::sim::node_id;
use crate::cluster::id::{HexId, NodeId};
use crate::cluster::node::ClusterNode;
use crate::cluster::topology::Topology;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

/// Turns of ready/deliver per settle before giving up.
const SETTLE_TURNS_MAX: usize = 300;

pub struct Member {
    pub id: NodeId,
    pub path: PathBuf,
    /// None while down.
    pub log: Option<TopologyLog>,
    /// The log's file, open for saving while the member is up.
    pub file: Option<DurableLog>,
    pub topology: Topology,
}

pub struct CrashNet {
    pub members: Vec<Member>,
    queue: VecDeque<(usize, Vec<u8>)>,
    /// Every committed command any member reported, by index.
    pub committed: BTreeMap<u64, TopologyCommand>,
    images: BTreeMap<u64, TopologyImage>,
    rng: SmallRng,
    /// Percent of turns during which the member crashes.
    pub crash_percent: u32,
    pub crashes: usize,
    /// Crashes that left part of the turn's writes on disk (a torn or partial tail).
    pub partial_writes: usize,
    pub restarts: usize,
}

fn fresh_topology(id: NodeId) -> Topology {
    Topology::new(ClusterNode::new(id, HexId::parse(&[b'f'; 40]).unwrap()))
}

impl CrashNet {
    /// `voters` founding voters, each writing its file under `dir`.
    pub fn new(voters: usize, seed: u64, dir: &Path) -> Self {
        let ids: Vec<NodeId> = (0..voters).map(node_id).collect();
        let members = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                let path = dir.join(format!("node-{i}.log"));
                let (log, file) = TopologyLog::new(id, &ids, &[], seed + i as u64)
                    .unwrap()
                    .with_file(&TopologyLogFile::new(&path))
                    .unwrap();
                Member {
                    id,
                    path,
                    log: Some(log),
                    file: Some(file),
                    topology: fresh_topology(id),
                }
            })
            .collect();
        CrashNet {
            members,
            queue: VecDeque::new(),
            committed: BTreeMap::new(),
            images: BTreeMap::new(),
            rng: SmallRng::seed_from_u64(seed),
            crash_percent: 0,
            crashes: 0,
            partial_writes: 0,
            restarts: 0,
        }
    }

    pub fn leader(&self) -> Option<usize> {
        let leaders: Vec<usize> = (0..self.members.len())
            .filter(|&i| {
                self.members[i]
                    .log
                    .as_ref()
                    .is_some_and(TopologyLog::is_leader)
            })
            .collect();
        match leaders[..] {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Member `i` goes down between turns.
    pub fn crash(&mut self, i: usize) {
        self.members[i].file = None;
        if self.members[i].log.take().is_some() {
            self.crashes += 1;
        }
    }

    /// Member `i` comes back from its file with an empty topology.
    pub fn restart(&mut self, i: usize) {
        let seed = self.rng.gen();
        let m = &mut self.members[i];
        let (log, file) = TopologyLog::open(m.id, &TopologyLogFile::new(&m.path), seed)
            .unwrap()
            .expect("a member's file outlives it");
        assert_eq!(log.applied(), log.snapshot_index());
        m.log = Some(log);
        m.file = Some(file);
        m.topology = fresh_topology(m.id);
        self.restarts += 1;
    }

    pub fn is_up(&self, i: usize) -> bool {
        self.members[i].log.is_some()
    }

    /// One tick on every member that is up, then settle.
    pub fn tick(&mut self) {
        for m in self.members.iter_mut() {
            if let Some(log) = m.log.as_mut() {
                log.tick().unwrap();
            }
        }
        self.settle();
    }

    pub fn settle(&mut self) {
        for _ in 0..SETTLE_TURNS_MAX {
            let mut moved = false;
            for i in 0..self.members.len() {
                moved |= self.turn(i);
            }
            while let Some((to, bytes)) = self.queue.pop_front() {
                moved = true;
                let from = self.sender_of(&bytes);
                if let (Some(log), Some(from)) = (self.members[to].log.as_mut(), from) {
                    // A message from before a crash may contradict what a peer now holds;
                    // the log refuses it, as it would any stale network message.
                    let _ = log.step(&from, &bytes);
                }
            }
            if !moved {
                return;
            }
        }
        panic!("the group did not settle");
    }

    fn sender_of(&self, bytes: &[u8]) -> Option<NodeId> {
        use protobuf::Message as _;
        let m = raft::prelude::Message::parse_from_bytes(bytes).ok()?;
        self.members
            .iter()
            .map(|m| m.id)
            .find(|id| crate::cluster::consensus::raft_id::raft_id(id) == m.from)
    }

    fn turn(&mut self, i: usize) -> bool {
        let ids: Vec<NodeId> = self.members.iter().map(|m| m.id).collect();
        let m = &mut self.members[i];
        let (Some(log), Some(file)) = (m.log.as_mut(), m.file.as_mut()) else {
            return false;
        };
        let (len_before, rewrites_before) = (file.len(), file.rewrites());
        let out = log.ready().unwrap();
        if out.is_empty() {
            return false;
        }
        if let Some(persist) = &out.persist {
            log_store::save(log, file, persist).unwrap();
        }
        if self.rng.gen_range(0..100) < self.crash_percent {
            let (len_after, rewrote) = (file.len(), file.rewrites() != rewrites_before);
            m.log = None;
            m.file = None;
            self.crashes += 1;
            // A rewrite is atomic (the new file or the old one); appends may be cut anywhere.
            if !rewrote && len_after > len_before {
                let cut = self.rng.gen_range(len_before..=len_after);
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&m.path)
                    .unwrap()
                    .set_len(cut)
                    .unwrap();
                self.partial_writes += (cut < len_after) as usize;
            }
            return true;
        }
        out.apply_to(&mut m.topology);
        if out.snapshot_due {
            if let Some(persist) = log.compact(&m.topology).unwrap() {
                log_store::save(log, file, &persist).unwrap();
            }
        }
        for c in &out.committed {
            let command = c.command.clone().unwrap();
            let seen = self
                .committed
                .entry(c.index)
                .or_insert_with(|| command.clone());
            assert_eq!(
                *seen, command,
                "two commands committed at index {}",
                c.index
            );
        }
        for (to, bytes) in out.messages {
            if let Some(t) = ids.iter().position(|id| *id == to) {
                self.queue.push_back((t, bytes));
            }
        }
        let image = TopologyImage::capture(&m.topology);
        let seen = self
            .images
            .entry(image.version)
            .or_insert_with(|| image.clone());
        assert_eq!(*seen, image, "two topologies at version {}", image.version);
        true
    }

    /// Takes a snapshot on member `i` if its topology is where its log applied to.
    pub fn compact(&mut self, i: usize) {
        let m = &mut self.members[i];
        if let (Some(log), Some(file)) = (m.log.as_mut(), m.file.as_mut()) {
            if m.topology.consensus.version == log.applied() {
                if let Some(persist) = log.compact(&m.topology).unwrap() {
                    log_store::save(log, file, &persist).unwrap();
                }
            }
        }
    }

    /// Proposes on the leader, if there is one (a lost proposal is fine).
    pub fn propose(&mut self, command: &TopologyCommand) -> bool {
        match self.leader() {
            Some(l) => self.members[l]
                .log
                .as_mut()
                .unwrap()
                .propose(command)
                .is_ok(),
            None => false,
        }
    }

    pub fn rng(&mut self) -> &mut SmallRng {
        &mut self.rng
    }
}
