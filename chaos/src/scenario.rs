//! One seeded run: 3-7 nodes meet through one introducer, split the slots, live through a
//! spell of faults, heal and converge; then a primary dies for good, a fresh node takes its
//! slots, the cluster settles, and the dead node comes back and gives its slots up.

use crate::checks::{self, Checker, Violation, ViolationKind};
use crate::faults::Faults;
use crate::net::{NetStats, Weather};
use crate::operator::{take_over_by_epoch, Operator};
use crate::sim::{Sim, START_MS};
use node::cluster::consensus::TopologyCommand;
use node::cluster::flags::bit;
use proto::slot::SLOT_COUNT;
use rand::Rng;

/// Cluster sizes drawn from the seed.
pub const NODES_MIN: usize = 3;
pub const NODES_MAX: usize = 7;
/// How long faults are injected.
pub const FAULT_MS: u64 = 8_000;
/// Bounds on each wait: failing to get there in time is a violation. They follow from the
/// node timeout (2 s): detection takes up to ~3 timeouts, clearing FAIL 2 more.
pub const BOOT_LIMIT_MS: u64 = 20_000;
pub const HEAL_LIMIT_MS: u64 = 30_000;
pub const FAIL_LIMIT_MS: u64 = 20_000;
pub const JOIN_LIMIT_MS: u64 = 20_000;
pub const SETTLE_LIMIT_MS: u64 = 20_000;
/// Chance per round (100 ms) that the operator moves a slot during the fault spell.
pub const MOVE_CHANCE_PER_ROUND: f64 = 0.2;

/// What a passing run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub seed: u64,
    pub nodes: usize,
    /// Virtual time the run took.
    pub virtual_ms: u64,
    pub net: NetStats,
    pub partitions: u32,
    pub crashes: u32,
    pub storms: u32,
    /// Virtual time from the end of the faults to convergence.
    pub heal_ms: u64,
    /// Virtual time from the takeover to every slot owned by a live node everywhere.
    pub replace_ms: u64,
    /// Hash of the whole trace: two runs of one seed give the same.
    pub trace_hash: u64,
    /// Highest Raft topology version a live node reached (0: no group was founded).
    pub topology_version: u64,
    /// Live nodes in a topology group at the end.
    pub grouped: usize,
    /// Topology changes the operator made through the group that were answered OK.
    pub proposals_ok: usize,
}

/// The command that replays `seed`.
pub fn replay_command(seed: u64) -> String {
    format!("CHAOS_SEED={seed} cargo test -p chaos --test seeds -- replay_one_seed --nocapture")
}

/// Runs the scenario of `seed`, deterministically.
pub fn run_seed(seed: u64) -> Result<Report, Violation> {
    let mut run = Run::new(seed);
    run.scenario().map_err(|kind| Violation {
        seed,
        at_ms: run.sim.now - START_MS,
        kind,
    })?;
    Ok(run.report())
}

struct Run {
    sim: Sim,
    checker: Checker,
    faults: Faults,
    calm: Weather,
    heal_ms: u64,
    replace_ms: u64,
}

impl Run {
    fn new(seed: u64) -> Run {
        let mut sim = Sim::new(seed, 0);
        let n = sim.rng_mut().gen_range(NODES_MIN..=NODES_MAX);
        for _ in 0..n {
            sim.add_node();
        }
        // Even calm, the network reorders, loses and duplicates a little.
        let rng = sim.rng_mut();
        let calm = Weather {
            loss: rng.gen_range(0.0..0.05),
            duplicate: rng.gen_range(0.0..0.05),
            delay_max_ms: rng.gen_range(1..50),
        };
        sim.net.weather = calm;
        Run {
            sim,
            checker: Checker::default(),
            faults: Faults::default(),
            calm,
            heal_ms: 0,
            replace_ms: 0,
        }
    }

    fn scenario(&mut self) -> Result<(), ViolationKind> {
        let n = self.sim.nodes.len();
        for i in 1..n {
            self.sim.meet(i, 0);
        }
        self.wait("boot", BOOT_LIMIT_MS, checks::members_agree)?;
        self.split_slots()?;

        self.inject_faults()?;
        let failed = self.faults.heal_all(&mut self.sim, self.calm);
        self.restart_failures(failed)?;
        self.heal_ms = self.wait("heal", HEAL_LIMIT_MS, |sim| {
            checks::converged(sim)?;
            all_slots_owned(sim)
        })?;

        let victim = self.pick_victim();
        self.replace(victim)?;
        // The dead primary returns: it learns it lost its slots and joins the new view.
        self.sim
            .restart(victim)
            .map_err(|e| self.restart_failed(victim, e.to_string()))?;
        self.wait("old owner back", HEAL_LIMIT_MS, |sim| {
            checks::converged(sim)?;
            all_slots_owned(sim)
        })?;
        Ok(())
    }

    /// Each node adds its share of the slots, as `CLUSTER ADDSLOTSRANGE` on each would: by
    /// itself while it is in no topology group, else by a proposal (retried until its
    /// slots are its own in its view).
    fn split_slots(&mut self) -> Result<u64, ViolationKind> {
        let n = self.sim.nodes.len();
        let share = move |i: usize| {
            let start = i * SLOT_COUNT / n;
            let end = (i + 1) * SLOT_COUNT / n - 1;
            (start as u16, end as u16)
        };
        let mut operator = Operator::default();
        self.wait_acting(
            "slots spread",
            BOOT_LIMIT_MS,
            |sim| {
                for i in 0..n {
                    let (start, end) = share(i);
                    let t = &sim.nodes[i].topology;
                    let me = t.myself_index();
                    if (start..=end).any(|s| t.slots.owner(s) != Some(me)) {
                        let node = t.myself().id;
                        operator.change(
                            sim,
                            i,
                            TopologyCommand::AssignSlots {
                                node,
                                ranges: vec![(start, end)],
                            },
                        );
                    }
                }
            },
            |sim| {
                checks::converged(sim)?;
                all_slots_owned(sim)
            },
        )
    }

    /// The fault spell; meanwhile an operator keeps moving single slots between primaries
    /// through the topology group, from random nodes (the change must never give a slot two
    /// owners at one topology version, whatever the network does to the proposals).
    fn inject_faults(&mut self) -> Result<(), ViolationKind> {
        let end = self.sim.now + FAULT_MS;
        let mut operator = Operator::default();
        while self.sim.now < end {
            let failed = self.faults.on_round(&mut self.sim, self.calm);
            self.restart_failures(failed)?;
            if self.sim.chance(MOVE_CHANCE_PER_ROUND) {
                self.move_a_slot(&mut operator);
            }
            self.round()?;
        }
        Ok(())
    }

    /// Proposes, at a random live node in a group, that a random slot go to a random primary
    /// of the group.
    fn move_a_slot(&mut self, operator: &mut Operator) {
        let live: Vec<usize> = self
            .sim
            .live()
            .filter(|&i| self.sim.nodes[i].core.in_group())
            .collect();
        if live.is_empty() {
            return;
        }
        let at = live[self.sim.rng_mut().gen_range(0..live.len())];
        let primaries: Vec<_> = {
            let t = &self.sim.nodes[at].topology;
            t.nodes
                .iter()
                .filter(|n| n.is_primary() && t.consensus.nodes.contains(&n.id))
                .map(|n| n.id)
                .collect()
        };
        if primaries.is_empty() {
            return;
        }
        let node = primaries[self.sim.rng_mut().gen_range(0..primaries.len())];
        let slot = self.sim.rng_mut().gen_range(0..SLOT_COUNT as u16);
        operator.change(
            &mut self.sim,
            at,
            TopologyCommand::SetSlotNode { slot, node },
        );
    }

    /// A live primary with slots (in node 0's view of the converged cluster).
    fn pick_victim(&mut self) -> usize {
        let primaries: Vec<usize> = (0..self.sim.nodes.len())
            .filter(|&i| {
                let t = &self.sim.nodes[i].topology;
                t.myself().is_primary() && !t.slots.ranges_of(t.myself_index()).is_empty()
            })
            .collect();
        primaries[self.sim.rng_mut().gen_range(0..primaries.len())]
    }

    /// Kills `victim` for good, waits for the cluster to fail it, brings in a fresh node and
    /// gives it the victim's slots at a new config epoch (what an operator's SETSLOT NODE
    /// plus BUMPEPOCH do), then waits until every slot is served by a live node.
    fn replace(&mut self, victim: usize) -> Result<(), ViolationKind> {
        let victim_id = self.sim.nodes[victim].id();
        self.sim.crash(victim);
        self.wait("victim failed", FAIL_LIMIT_MS, move |sim| {
            for i in sim.live() {
                let t = &sim.nodes[i].topology;
                let flags = t.index_of(&victim_id).map(|k| t.nodes[k as usize].flags);
                if !flags.is_some_and(|f| f.has(bit::FAIL)) {
                    return Err(format!("node {i} does not fail the victim"));
                }
            }
            Ok(())
        })?;

        let introducer = self.sim.live().next().expect("a live node");
        let fresh = self.sim.add_node();
        self.sim.meet(fresh, introducer);
        // Its slot map lacks the dead node's slots (nobody alive claims them): members only.
        self.wait("fresh node joined", JOIN_LIMIT_MS, |sim| {
            checks::members_agree(sim)
        })?;

        let ranges = {
            let t = &self.sim.nodes[introducer].topology;
            let k = t
                .index_of(&victim_id)
                .expect("the introducer knows the victim");
            t.slots.ranges_of(k)
        };
        let fresh_id = self.sim.nodes[fresh].id();
        let mut operator = Operator::default();
        self.replace_ms = self.wait_acting(
            "slots owned again",
            SETTLE_LIMIT_MS,
            |sim| {
                if !sim.nodes[introducer].core.in_group() {
                    take_over_by_epoch(sim, fresh, &ranges);
                    return;
                }
                // Read again every round: the introducer may not have applied every
                // change that gave the victim a slot when the ranges were first taken.
                let t = &sim.nodes[introducer].topology;
                let victim_ranges = t
                    .index_of(&victim_id)
                    .map(|k| t.slots.ranges_of(k))
                    .unwrap_or_default();
                // The fresh node must be in the group's topology before it can own slots.
                if !t.consensus.nodes.contains(&fresh_id) {
                    return;
                }
                if !victim_ranges.is_empty() {
                    operator.change(
                        sim,
                        introducer,
                        TopologyCommand::RemoveSlots {
                            ranges: victim_ranges,
                        },
                    );
                } else {
                    // Every unassigned slot, as `redis-cli --cluster fix` would cover them.
                    let unowned = unowned_ranges(t);
                    if unowned.is_empty() {
                        return;
                    }
                    operator.change(
                        sim,
                        introducer,
                        TopologyCommand::AssignSlots {
                            node: fresh_id,
                            ranges: unowned,
                        },
                    );
                }
            },
            |sim| {
                checks::converged(sim)?;
                all_slots_owned(sim)
            },
        )?;
        Ok(())
    }

    /// [`Self::wait`], calling `act` before every round (an operator who retries).
    fn wait_acting(
        &mut self,
        phase: &'static str,
        limit_ms: u64,
        mut act: impl FnMut(&mut Sim),
        done: impl Fn(&Sim) -> Result<(), String>,
    ) -> Result<u64, ViolationKind> {
        let start = self.sim.now;
        loop {
            let outcome = done(&self.sim);
            if outcome.is_ok() {
                return Ok(self.sim.now - start);
            }
            if self.sim.now - start >= limit_ms {
                return Err(ViolationKind::NoConvergence {
                    phase,
                    limit_ms,
                    detail: outcome.err().unwrap_or_default(),
                });
            }
            act(&mut self.sim);
            self.round()?;
        }
    }

    /// Runs rounds until `done` holds (checked after every round) or `limit_ms` passes;
    /// returns the time it took.
    fn wait(
        &mut self,
        phase: &'static str,
        limit_ms: u64,
        done: impl Fn(&Sim) -> Result<(), String>,
    ) -> Result<u64, ViolationKind> {
        self.wait_acting(phase, limit_ms, |_| {}, done)
    }

    fn round(&mut self) -> Result<(), ViolationKind> {
        self.sim.round();
        self.checker.after_step(&self.sim)
    }

    fn restart_failures(&self, failed: Vec<(usize, String)>) -> Result<(), ViolationKind> {
        match failed.into_iter().next() {
            Some((i, reason)) => Err(self.restart_failed(i, reason)),
            None => Ok(()),
        }
    }

    fn restart_failed(&self, i: usize, reason: String) -> ViolationKind {
        ViolationKind::RestartFailed {
            node: self.sim.nodes[i].id(),
            reason,
        }
    }

    fn report(&self) -> Report {
        Report {
            seed: self.sim.seed,
            nodes: self.sim.nodes.len(),
            virtual_ms: self.sim.now - START_MS,
            net: self.sim.net.stats,
            partitions: self.faults.partitions,
            crashes: self.faults.crashes,
            storms: self.faults.storms,
            heal_ms: self.heal_ms,
            replace_ms: self.replace_ms,
            trace_hash: self.sim.trace_hash(),
            topology_version: self
                .sim
                .live()
                .map(|i| self.sim.nodes[i].topology.consensus.version)
                .max()
                .unwrap_or(0),
            grouped: self
                .sim
                .live()
                .filter(|&i| self.sim.nodes[i].core.in_group())
                .count(),
            proposals_ok: self
                .sim
                .nodes
                .iter()
                .map(|n| n.replies.iter().filter(|(_, r)| r.is_ok()).count())
                .sum(),
        }
    }
}

/// The runs of slots `t` assigns to nobody.
fn unowned_ranges(t: &node::cluster::topology::Topology) -> Vec<(u16, u16)> {
    let mut out: Vec<(u16, u16)> = Vec::new();
    for slot in 0..SLOT_COUNT as u16 {
        if t.slots.owner(slot).is_some() {
            continue;
        }
        match out.last_mut() {
            Some((_, end)) if *end + 1 == slot => *end = slot,
            _ => out.push((slot, slot)),
        }
    }
    out
}

/// Every slot owned by a live node, in every live node's view.
fn all_slots_owned(sim: &Sim) -> Result<(), String> {
    for i in sim.live() {
        let missing = checks::slots_without_live_owner(sim, i);
        if missing > 0 {
            return Err(format!("node {i}: {missing} slots without a live owner"));
        }
    }
    Ok(())
}
