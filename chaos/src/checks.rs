//! The invariants. [`Checker::after_step`] runs after every simulation round; the
//! convergence checks run when the scenario waits for the cluster to settle.

use crate::sim::Sim;
use node::cluster::flags::bit;
use node::cluster::id::NodeId;
use node::cluster::Topology;
use proto::slot::SLOT_COUNT;
use std::collections::{BTreeSet, HashMap};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ViolationKind {
    /// Two nodes claim one slot with the same config epoch: no rule can decide between
    /// them, so parts of the cluster may route the slot differently for good.
    #[error("slot {slot} claimed by {a} and {b}, both at config epoch {epoch}")]
    DoubleClaim {
        slot: u16,
        epoch: u64,
        a: NodeId,
        b: NodeId,
    },
    /// An epoch a node has used went back (typically: not saved before a crash).
    #[error("node {node}: {what} went back from {from} to {to}")]
    EpochWentBack {
        node: NodeId,
        what: &'static str,
        from: u64,
        to: u64,
    },
    #[error("no convergence within {limit_ms} ms ({phase}): {detail}")]
    NoConvergence {
        phase: &'static str,
        limit_ms: u64,
        detail: String,
    },
    #[error("restart of {node} failed: {reason}")]
    RestartFailed { node: NodeId, reason: String },
    /// Two nodes of one topology group at one version hold different replicated topologies
    /// (slot owners or roles): the log did not keep them in step.
    #[error("nodes {a} and {b} of one topology group differ at version {version}")]
    VersionsDiverged { version: u64, a: NodeId, b: NodeId },
}

/// A failed run: what broke, when, and how to replay it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("seed {seed} at {at_ms} ms: {kind}\n  replay: {}", crate::replay_command(*.seed))]
pub struct Violation {
    pub seed: u64,
    pub at_ms: u64,
    pub kind: ViolationKind,
}

/// Keeps what the checks compare across steps (the epochs each node has used).
#[derive(Default)]
pub struct Checker {
    /// Per node: (current epoch, own config epoch) seen so far.
    epochs: Vec<(u64, u64)>,
    /// Per node: the (group, version) last fingerprinted, so a node is hashed again only
    /// when its version moves.
    seen: Vec<Option<(NodeId, u64)>>,
    /// (group, version) → (fingerprint of the replicated topology, first node there).
    versions: HashMap<(NodeId, u64), (u64, NodeId)>,
}

impl Checker {
    pub fn after_step(&mut self, sim: &Sim) -> Result<(), ViolationKind> {
        no_double_claims(sim)?;
        self.one_topology_per_version(sim)?;
        self.epochs_never_go_back(sim)
    }

    /// Every node of a group at one version holds one slot map and one set of roles: so no
    /// slot has two owners in one topology version anywhere.
    fn one_topology_per_version(&mut self, sim: &Sim) -> Result<(), ViolationKind> {
        self.seen.resize(sim.nodes.len(), None);
        for i in sim.live() {
            let node = &sim.nodes[i];
            let Some(group) = node.core.agent.group() else {
                continue;
            };
            let version = node.topology.consensus.version;
            if version == 0 || self.seen[i] == Some((group, version)) {
                continue;
            }
            self.seen[i] = Some((group, version));
            let fp = fingerprint(&node.topology);
            match self.versions.get(&(group, version)) {
                Some(&(other, first)) if other != fp => {
                    return Err(ViolationKind::VersionsDiverged {
                        version,
                        a: first,
                        b: node.id(),
                    })
                }
                Some(_) => {}
                None => {
                    self.versions.insert((group, version), (fp, node.id()));
                }
            }
        }
        Ok(())
    }

    fn epochs_never_go_back(&mut self, sim: &Sim) -> Result<(), ViolationKind> {
        self.epochs.resize(sim.nodes.len(), (0, 0));
        for i in sim.live() {
            let t = &sim.nodes[i].topology;
            let now = (t.current_epoch, t.myself().config_epoch);
            let (was_current, was_config) = self.epochs[i];
            self.epochs[i] = now;
            // In a topology group epochs are the log's (an entry's index), taken from the
            // group's snapshot when joining: they may step back then, and decide nothing.
            if sim.nodes[i].core.in_group() {
                continue;
            }
            let went_back = |what, from, to| ViolationKind::EpochWentBack {
                node: sim.nodes[i].id(),
                what,
                from,
                to,
            };
            if now.0 < was_current {
                return Err(went_back("current epoch", was_current, now.0));
            }
            if now.1 < was_config {
                return Err(went_back("config epoch", was_config, now.1));
            }
        }
        Ok(())
    }
}

/// What a live primary says it serves (what its headers carry): its slots at its config
/// epoch. No two such claims may share a slot and an epoch.
pub fn no_double_claims(sim: &Sim) -> Result<(), ViolationKind> {
    let mut claims: Vec<(u64, usize)> = sim
        .live()
        .filter(|&i| sim.nodes[i].topology.myself().is_primary())
        .map(|i| (sim.nodes[i].topology.myself().config_epoch, i))
        .collect();
    claims.sort_unstable();
    // Slots are scanned only for nodes that share an epoch (rare once collisions are
    // resolved), so the check costs little per step.
    for group in claims.chunk_by(|a, b| a.0 == b.0).filter(|g| g.len() > 1) {
        let nodes: Vec<usize> = group.iter().map(|&(_, i)| i).collect();
        for slot in 0..SLOT_COUNT as u16 {
            let mut claimants = nodes.iter().filter(|&&i| {
                let t = &sim.nodes[i].topology;
                t.slots.owner(slot) == Some(t.myself_index())
            });
            if let (Some(&a), Some(&b)) = (claimants.next(), claimants.next()) {
                return Err(ViolationKind::DoubleClaim {
                    slot,
                    epoch: group[0].0,
                    a: sim.nodes[a].id(),
                    b: sim.nodes[b].id(),
                });
            }
        }
    }
    Ok(())
}

/// FNV-1a of what the log replicates: slot owners by id, and the role of every node it
/// added.
pub fn fingerprint(t: &Topology) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (start, end, owner) in slot_map(t) {
        eat(&start.to_be_bytes());
        eat(&end.to_be_bytes());
        eat(owner.as_bytes());
    }
    for id in &t.consensus.nodes {
        eat(id.as_bytes());
        if let Some(n) = t.index_of(id).map(|k| &t.nodes[k as usize]) {
            eat(&[n.is_primary() as u8]);
            eat(n.primary.as_ref().map_or(&[][..], |p| p.as_bytes()));
        }
    }
    h
}

/// The slot map as (start, end, owner id) runs: comparable across nodes, whose tables
/// index nodes differently.
pub fn slot_map(t: &Topology) -> Vec<(u16, u16, NodeId)> {
    let mut out: Vec<(u16, u16, NodeId)> = Vec::new();
    for (start, end, owner) in t.slots.runs() {
        let id = t.nodes[owner as usize].id;
        match out.last_mut() {
            Some(last) if last.2 == id && last.1 + 1 == start => last.1 = end,
            _ => out.push((start, end, id)),
        }
    }
    out
}

/// Members this node knows (handshakes excluded).
pub fn node_set(t: &Topology) -> BTreeSet<NodeId> {
    t.nodes
        .iter()
        .filter(|n| !n.flags.has(bit::HANDSHAKE))
        .map(|n| n.id)
        .collect()
}

/// Whether every live node (all mutually reachable) holds the same node set, containing
/// every live node, and the same slot map, with no live node suspecting another. Dead nodes
/// may be known or not (a node that joined after one died never met it). `Err` says what
/// differs.
pub fn converged(sim: &Sim) -> Result<(), String> {
    members_agree(sim)?;
    let live: Vec<usize> = sim.live().collect();
    let Some(&first) = live.first() else {
        return Ok(());
    };
    let map0 = slot_map(&sim.nodes[first].topology);
    for &i in &live {
        if slot_map(&sim.nodes[i].topology) != map0 {
            return Err(format!(
                "node {i} ({}) has another slot map than node {first} ({})",
                describe(sim, i),
                describe(sim, first)
            ));
        }
    }
    Ok(())
}

/// A node's standing in its topology group, for failure messages.
pub fn describe(sim: &Sim, i: usize) -> String {
    let n = &sim.nodes[i];
    let a = &n.core.agent;
    let short = |id: Option<NodeId>| id.map_or("-".to_string(), |id| id.as_str()[..8].to_string());
    let (voters, learners) = a.members();
    format!(
        "id {} group {} version {} leader {} voters {} learners {} slots {:?}",
        short(Some(n.id())),
        short(a.group()),
        n.topology.consensus.version,
        short(a.leader()),
        voters.len(),
        learners.len(),
        slot_map(&n.topology)
            .iter()
            .map(|(s, e, o)| format!("{s}-{e}:{}", &o.as_str()[..6]))
            .collect::<Vec<_>>()
    )
}

/// The membership part of [`converged`]: the same live members everywhere, nobody live
/// suspected by a live node.
pub fn members_agree(sim: &Sim) -> Result<(), String> {
    let live: Vec<usize> = sim.live().collect();
    let Some(&first) = live.first() else {
        return Ok(());
    };
    let dead: BTreeSet<NodeId> = (0..sim.nodes.len())
        .filter(|&i| !sim.nodes[i].alive)
        .map(|i| sim.nodes[i].id())
        .collect();
    let members = |t: &Topology| -> BTreeSet<NodeId> { &node_set(t) - &dead };
    let t0 = &sim.nodes[first].topology;
    let set0 = members(t0);
    for &i in &live {
        let t = &sim.nodes[i].topology;
        if members(t) != set0 {
            return Err(format!("node {i} knows other nodes than node {first}"));
        }
        for &j in &live {
            let id = sim.nodes[j].id();
            let Some(k) = t.index_of(&id) else {
                return Err(format!("node {i} does not know live node {j}"));
            };
            if t.nodes[k as usize].flags.has(bit::FAIL | bit::PFAIL) && i != j {
                return Err(format!("node {i} suspects live node {j}"));
            }
        }
    }
    Ok(())
}

/// Slots not owned by a live node in node `i`'s view.
pub fn slots_without_live_owner(sim: &Sim, i: usize) -> usize {
    let live: BTreeSet<NodeId> = sim.live().map(|j| sim.nodes[j].id()).collect();
    let t = &sim.nodes[i].topology;
    let owned: usize = t
        .slots
        .runs()
        .iter()
        .filter(|&&(_, _, o)| live.contains(&t.nodes[o as usize].id))
        .map(|&(s, e, _)| (e - s) as usize + 1)
        .sum();
    SLOT_COUNT - owned
}
