//! The leader's upkeep of the group: a node outside the group is taken in (added to the
//! topology with what it claims, then made a member), forgotten nodes leave the group, and
//! voter places (up to five) are filled from reachable learners. One step per node at a
//! time, retried after `reconcile_retry_ms` if it did not commit.

use super::founding::{address_of, is_member, is_reachable};
use super::TopologyAgent;
use crate::cluster::consensus::log::VOTERS_MAX;
use crate::cluster::consensus::TopologyCommand;
use crate::cluster::gossip::Gossip;
use crate::cluster::id::NodeId;
use crate::cluster::topology::{Topology, NODES_MAX};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Step {
    /// AddNode (with its replica link or its unclaimed slots).
    Adopt,
    /// The replica link or unowned slots a logged node outside the group claims.
    Claims,
    /// Make it a voter or a learner.
    Admit,
    /// Remove it from the group.
    Dismiss,
}

/// When each (node, step) was last proposed. At most NODES_MAX * 3 entries: one per node and
/// step, and old ones are dropped as they expire.
#[derive(Default)]
pub(super) struct Attempts {
    last: HashMap<(NodeId, Step), u64>,
}

impl Attempts {
    /// True (and remembered) if the step may be proposed now.
    fn may_try(&mut self, now_ms: u64, retry_ms: u64, node: NodeId, step: Step) -> bool {
        self.last
            .retain(|_, at| now_ms.saturating_sub(*at) < retry_ms);
        if self.last.contains_key(&(node, step)) || self.last.len() >= NODES_MAX * 3 {
            return false;
        }
        self.last.insert((node, step), now_ms);
        true
    }
}

impl<W> TopologyAgent<W> {
    pub(super) fn reconcile(&mut self, now_ms: u64, t: &Topology, gossip: &Gossip) {
        let retry = self.settings.reconcile_retry_ms;
        let Some(g) = &mut self.group else { return };
        let (voters, learners) = g.log.members();
        let mut commands: Vec<(NodeId, Step, Vec<TopologyCommand>)> = Vec::new();
        let mut admit: Option<NodeId> = None;
        for n in t.nodes.iter().filter(|n| is_member(n) && is_reachable(n)) {
            let Some(version) = gossip.topology_version_of(&n.id) else {
                continue;
            };
            let logged = t.consensus.nodes.contains(&n.id);
            // A node outside every group is taken in, with what it claims (until it has
            // joined, its own ADDSLOTS and REPLICATE still count: redis-cli may give a node
            // its slots while the group is being founded). A node of some group (perhaps
            // another) claims nothing here.
            if version == 0 {
                let (step, plan) = if logged {
                    (Step::Claims, claims(t, gossip, n.id))
                } else {
                    (Step::Adopt, adoption(t, gossip, n.id))
                };
                if !plan.is_empty() {
                    commands.push((n.id, step, plan));
                }
            }
            if logged && admit.is_none() && !voters.contains(&n.id) && !learners.contains(&n.id) {
                admit = Some(n.id);
            }
        }
        for (id, step, plan) in commands {
            if !self.attempts.may_try(now_ms, retry, id, step) {
                continue;
            }
            tracing::info!(node = %id, ?step, "taking a node's state into the topology group");
            for c in plan {
                if let Err(e) = g.log.propose(&c) {
                    tracing::debug!(error = %e, "adoption entry not proposed");
                }
            }
        }
        // One membership change at a time (raft's rule).
        if let Some(id) = admit {
            if self.attempts.may_try(now_ms, retry, id, Step::Admit) {
                let r = if voters.len() < VOTERS_MAX {
                    g.log.propose_add_voter(&id)
                } else {
                    g.log.propose_add_learner(&id)
                };
                if let Err(e) = r {
                    tracing::debug!(node = %id, error = %e, "member not added yet");
                }
            }
            return;
        }
        let gone = voters
            .iter()
            .chain(&learners)
            .find(|m| **m != self.me && !t.consensus.nodes.contains(m));
        if let Some(&id) = gone {
            if self.attempts.may_try(now_ms, retry, id, Step::Dismiss) {
                if let Err(e) = g.log.propose_remove(&id) {
                    tracing::debug!(node = %id, error = %e, "forgotten member not removed yet");
                }
            }
            return;
        }
        if voters.len() < VOTERS_MAX {
            let reachable_learner = learners.iter().find(|l| {
                t.index_of(l)
                    .is_some_and(|i| is_reachable(&t.nodes[i as usize]))
            });
            if let Some(&id) = reachable_learner {
                if self.attempts.may_try(now_ms, retry, id, Step::Admit) {
                    if let Err(e) = g.log.propose_add_voter(&id) {
                        tracing::debug!(node = %id, error = %e, "learner not promoted yet");
                    }
                }
            }
        }
    }
}

/// The entries that bring a node outside the group in: AddNode, then what it claims.
fn adoption(t: &Topology, gossip: &Gossip, id: NodeId) -> Vec<TopologyCommand> {
    let Some(i) = t.index_of(&id) else {
        return Vec::new();
    };
    let n = &t.nodes[i as usize];
    let mut plan = vec![TopologyCommand::AddNode {
        id,
        shard: n.shard,
        address: address_of(n),
    }];
    plan.extend(claims(t, gossip, id));
    plan
}

/// What a node outside the group claims that the group can grant: following a node of the
/// group, or else the slots it claims that nobody in the group owns.
fn claims(t: &Topology, gossip: &Gossip, id: NodeId) -> Vec<TopologyCommand> {
    let (claimed, primary) = gossip
        .claims_of(&id)
        .map_or((&[][..], None), |c| (c.slots, c.primary));
    let Some(i) = t.index_of(&id) else {
        return Vec::new();
    };
    let n = &t.nodes[i as usize];
    let logged = t.consensus.nodes.contains(&id);
    if let Some(p) = primary.filter(|p| t.consensus.nodes.contains(p)) {
        let already = logged && n.is_replica() && n.primary == Some(p);
        return if already {
            Vec::new()
        } else {
            vec![TopologyCommand::SetReplicaOf {
                replica: id,
                primary: p,
            }]
        };
    }
    if primary.is_some() || (logged && !n.is_primary()) {
        return Vec::new();
    }
    let mut free: Vec<(u16, u16)> = Vec::new();
    for &(start, end) in claimed {
        for slot in start..=end.min(crate::cluster::slots::SLOT_MAX) {
            if t.slots.owner(slot).is_some() {
                continue;
            }
            match free.last_mut() {
                Some(last) if last.1 + 1 == slot => last.1 = slot,
                _ => free.push((slot, slot)),
            }
        }
    }
    if free.is_empty() {
        return Vec::new();
    }
    vec![TopologyCommand::AssignSlots {
        node: id,
        ranges: free,
    }]
}
