//! The operator of a simulated cluster: topology changes made the way an admin's CLUSTER
//! commands make them — by a proposal on a node in a topology group, by hand on a node in
//! none — and retried when they do not take.

use crate::sim::Sim;
use node::cluster::consensus::TopologyCommand;
use std::collections::HashMap;

/// How long the operator waits before it repeats a change that has not shown yet.
pub const RETRY_MS: u64 = 1_000;

#[derive(Default)]
pub struct Operator {
    /// Per node: when a change was last made there.
    last_ms: HashMap<usize, u64>,
}

impl Operator {
    /// Makes `command` at node `i`, unless a change was made there less than RETRY_MS ago.
    pub fn change(&mut self, sim: &mut Sim, i: usize, command: TopologyCommand) {
        if !sim.nodes[i].alive {
            return;
        }
        if let Some(&at) = self.last_ms.get(&i) {
            if sim.now.saturating_sub(at) < RETRY_MS {
                return;
            }
        }
        self.last_ms.insert(i, sim.now);
        if sim.nodes[i].core.in_group() {
            sim.propose(i, command);
            return;
        }
        let t = &mut sim.nodes[i].topology;
        let me = t.myself().id;
        // Refusals (a slot taken meanwhile) are what the admin would see and retry.
        let _ = match &command {
            TopologyCommand::AssignSlots { node, ranges } if *node == me => t.add_slots(ranges),
            TopologyCommand::RemoveSlots { ranges } => t.del_slots(ranges),
            _ => return,
        };
        sim.save(i);
    }
}

/// Without a topology group: the fresh node takes `ranges` at a config epoch above every
/// live node's (what an operator's SETSLOT NODE plus BUMPEPOCH do), unless it holds them
/// already.
pub fn take_over_by_epoch(sim: &mut Sim, fresh: usize, ranges: &[(u16, u16)]) {
    let holds = {
        let t = &sim.nodes[fresh].topology;
        let me = t.myself_index();
        ranges
            .iter()
            .all(|&(s, e)| (s..=e).all(|slot| t.slots.owner(slot) == Some(me)))
    };
    if holds {
        return;
    }
    let epoch = sim
        .live()
        .map(|i| sim.nodes[i].topology.current_epoch)
        .max()
        .unwrap_or(0)
        + 1;
    let t = &mut sim.nodes[fresh].topology;
    t.current_epoch = epoch;
    t.myself_mut().config_epoch = epoch;
    let me = t.myself_index();
    for &(start, end) in ranges {
        for slot in start..=end {
            t.slots.set_owner(slot, Some(me));
        }
    }
    sim.save(fresh);
}
