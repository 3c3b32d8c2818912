//! Automatic failover, the leader's part (DESIGN.md §5, protocols.md §2.8 in Raft form): a
//! primary that owns slots and is FAIL is replaced by the most up-to-date of its replicas
//! through a `Promote` proposal, instead of Redis's replica-run election. The group's log
//! orders the change, so two replicas can never both take the slots.
//!
//! The candidate is the replica with the highest `repl_offset` (as gossip last heard it)
//! among the primary's replicas that are neither PFAIL nor FAIL; ties go to the smallest id,
//! so every leader picks the same one. With synchronous acks there must be enough healthy
//! replicas that one surely holds every acknowledged write (`failover_sync_acks`, see
//! [`promotion_candidate`]). One proposal per failed primary is in flight at a
//! time: it is proposed again only once it committed (refused when applied, say), or after
//! `proposal_timeout_ms` (lost with a leader change).
//!
//! The primary must have stopped serving before a replica takes its place: FAIL needs a
//! majority of voting primaries to have heard nothing from it for `node_timeout`, while
//! the primary serves only while a majority echoed one of its stamps within a lease, a
//! fraction of it (`Gossip::in_majority`). A FAIL flag may outlive the silence (a primary owning slots
//! keeps FAIL for 2 × node_timeout after it is back), so the leader also wants to have
//! heard nothing from the primary itself for a whole node timeout.
//!
//! A primary that restarted without everything it acknowledged says so (`fenced` in its
//! header; see `restart_fence`): it serves nothing, so it needs no FAIL, and the leader
//! promotes its replica that holds more of its history, myself included as the fenced one
//! (a fenced node may lead the group).

use super::restart_fence::{self, Fence, Verdict};
use super::TopologyAgent;
use crate::cluster::consensus::{Committed, ProposalId, TopologyCommand};
use crate::cluster::flags::bit;
use crate::cluster::gossip::Gossip;
use crate::cluster::id::NodeId;
use crate::cluster::slots::NodeIndex;
use crate::cluster::topology::{Topology, NODES_MAX};
use std::cmp::Reverse;
use std::collections::HashMap;

/// Failovers in flight at once, at most: one per failed primary, and a primary is a node.
pub const FAILOVERS_IN_FLIGHT_MAX: usize = NODES_MAX;

/// A `Promote` this leader proposed and has not seen commit yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct InFlight {
    pub replica: NodeId,
    pub proposal: ProposalId,
    pub deadline_ms: u64,
}

/// The failovers in flight, by failed primary.
#[derive(Debug, Default)]
pub(super) struct Failovers {
    in_flight: HashMap<NodeId, InFlight>,
    /// Promotions proposed so far (for logs and tests).
    pub proposed: u64,
}

impl Failovers {
    /// Forgets proposals that committed (whatever their outcome: the next upkeep sees the
    /// topology they left) and those past their deadline.
    pub fn settle(&mut self, now_ms: u64, committed: &[Committed]) {
        self.in_flight.retain(|_, f| {
            f.deadline_ms > now_ms && !committed.iter().any(|c| c.proposal == Some(f.proposal))
        });
    }

    pub fn is_in_flight(&self, primary: &NodeId) -> bool {
        self.in_flight.contains_key(primary)
    }

    fn start(&mut self, primary: NodeId, flight: InFlight) -> bool {
        if self.in_flight.len() >= FAILOVERS_IN_FLIGHT_MAX {
            return false;
        }
        self.in_flight.insert(primary, flight);
        self.proposed += 1;
        true
    }

    pub fn clear(&mut self) {
        self.in_flight.clear();
    }
}

/// Whether the primary at `i` must be failed over: logged, a primary owning slots, FAIL,
/// not myself, and silent here for a whole node timeout (`last_heard_ms`: when this node
/// last heard from it, None if never).
pub fn needs_failover(
    t: &Topology,
    i: NodeIndex,
    now_ms: u64,
    node_timeout_ms: u64,
    last_heard_ms: Option<u64>,
) -> bool {
    let n = &t.nodes[i as usize];
    !n.is_myself()
        && n.is_primary()
        && n.flags.has(bit::FAIL)
        && t.consensus.nodes.contains(&n.id)
        && t.slots.owns_any(i)
        && last_heard_ms.is_none_or(|at| now_ms.saturating_sub(at) > node_timeout_ms)
}

/// The replica to promote in place of `primary`: among its logged replicas that are neither
/// PFAIL nor FAIL, the highest `repl_offset`, ties to the smallest id.
///
/// With synchronous replication (`sync_acks` > 0: a write is acknowledged once that many
/// replicas have it) an acknowledged write may be on `sync_acks` replicas only, so the
/// candidates must include at least `replicas - sync_acks + 1` of them (any such set meets
/// every set of `sync_acks`); with fewer healthy ones there is no safe choice and nobody is
/// promoted. The failover simulation found this: with two replicas and one ack, the replica
/// that acknowledged was cut off together with the primary, and promoting the other lost
/// the write. `sync_acks` 0 (asynchronous) promises nothing and needs one candidate.
pub fn promotion_candidate(t: &Topology, primary: &NodeId, sync_acks: usize) -> Option<NodeId> {
    let logged: Vec<_> = t
        .replicas_of(primary)
        .filter(|r| t.consensus.nodes.contains(&r.id))
        .collect();
    let healthy: Vec<_> = logged.iter().filter(|r| !r.is_failing()).collect();
    let needed = match sync_acks {
        0 => 1,
        acks => logged.len() - acks.min(logged.len()) + 1,
    };
    if healthy.len() < needed {
        return None;
    }
    healthy
        .into_iter()
        .max_by_key(|r| (r.repl_offset, Reverse(r.id)))
        .map(|r| r.id)
}

/// The replica to promote in place of the fenced primary at `i` (it restarted without all it
/// acknowledged and says so): the one [`restart_fence::verdict`] names, judged on what the
/// fenced node advertises (its history's id and the offset it loaded). None when the node is
/// not fenced, not logged, or no replica is safe to promote.
pub fn fenced_handover(t: &Topology, i: NodeIndex, sync_acks: usize) -> Option<NodeId> {
    let n = &t.nodes[i as usize];
    if !n.fenced || !t.consensus.nodes.contains(&n.id) {
        return None;
    }
    let fence = Fence {
        replid: n.repl_id?,
        offset: n.repl_offset,
        since_ms: 0,
    };
    match restart_fence::verdict(t, &n.id, &fence, sync_acks, |_| true) {
        Verdict::HandOver(replica) => Some(replica),
        Verdict::Serve(_) | Verdict::Wait => None,
    }
}

impl<W> TopologyAgent<W> {
    /// The leader's failover upkeep: one `Promote` per failed or fenced primary, at a time.
    pub(super) fn fail_over(&mut self, now_ms: u64, t: &Topology, gossip: &Gossip) {
        let timeout = self.settings.proposal_timeout_ms;
        self.failovers.settle(now_ms, &[]);
        let Some(g) = &mut self.group else { return };
        let node_timeout = gossip.settings().node_timeout_ms;
        let acks = self.settings.failover_sync_acks;
        for i in 0..t.nodes.len() as NodeIndex {
            let primary = t.nodes[i as usize].id;
            if self.failovers.is_in_flight(&primary) {
                continue;
            }
            let (replica, why) = if let Some(replica) = fenced_handover(t, i, acks) {
                (replica, "handing a fenced primary's slots to its replica")
            } else if needs_failover(t, i, now_ms, node_timeout, gossip.last_heard_ms(&primary)) {
                let Some(replica) = promotion_candidate(t, &primary, acks) else {
                    tracing::debug!(%primary, "failed primary without a replica safe to promote");
                    continue;
                };
                (replica, "failing over: promoting a replica")
            } else {
                continue;
            };
            match g.log.propose(&TopologyCommand::Promote { replica }) {
                Ok(proposal) => {
                    tracing::info!(%primary, %replica, "{why}");
                    let flight = InFlight {
                        replica,
                        proposal,
                        deadline_ms: now_ms + timeout,
                    };
                    if !self.failovers.start(primary, flight) {
                        tracing::warn!("too many failovers in flight");
                    }
                }
                Err(e) => tracing::debug!(%primary, error = %e, "failover not proposed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::consensus::{TopologyImage, TopologyLog};
    use crate::cluster::gossip::GossipSettings;
    use crate::cluster::node::ClusterNode;

    const NOW: u64 = 1_000_000;

    fn node_id(n: usize) -> NodeId {
        // Distinct in every byte: raft ids are taken from part of the node id.
        crate::cluster::id::HexId::parse(format!("{:02x}", n + 0x10).repeat(20).as_bytes()).unwrap()
    }
    const TIMEOUT: u64 = 2_000;

    /// Me (a primary with slots 0-99), primary P (slots 100-199, FAIL) with replicas R1-R3.
    fn shard() -> Topology {
        let mut t = Topology::new(ClusterNode::new(node_id(0), node_id(0)));
        for n in 1..=4 {
            let mut node = ClusterNode::new(node_id(n), node_id(1));
            if n > 1 {
                node.flags.set(bit::MASTER, false);
                node.flags.set(bit::SLAVE, true);
                node.primary = Some(node_id(1));
            }
            t.add_node(node).unwrap();
        }
        t.add_slots(&[(0, 99)]).unwrap();
        let p = t.index_of(&node_id(1)).unwrap();
        for slot in 100..200 {
            t.slots.set_owner(slot, Some(p));
        }
        t.nodes[p as usize].flags.set(bit::FAIL, true);
        t.consensus.nodes = (0..=4).map(node_id).collect();
        t
    }

    fn node(t: &mut Topology, n: usize) -> &mut ClusterNode {
        let i = t.index_of(&node_id(n)).unwrap();
        &mut t.nodes[i as usize]
    }

    #[test]
    fn the_most_advanced_healthy_replica_is_chosen() {
        let promotion_candidate = |t: &Topology, p: &NodeId| promotion_candidate(t, p, 0);
        let mut t = shard();
        node(&mut t, 2).repl_offset = 10;
        node(&mut t, 3).repl_offset = 30;
        node(&mut t, 4).repl_offset = 20;
        assert_eq!(promotion_candidate(&t, &node_id(1)), Some(node_id(3)));
        // A suspected replica is passed over, however far it got.
        node(&mut t, 3).flags.set(bit::PFAIL, true);
        assert_eq!(promotion_candidate(&t, &node_id(1)), Some(node_id(4)));
        node(&mut t, 4).flags.set(bit::FAIL, true);
        assert_eq!(promotion_candidate(&t, &node_id(1)), Some(node_id(2)));
        node(&mut t, 2).flags.set(bit::FAIL, true);
        assert_eq!(promotion_candidate(&t, &node_id(1)), None);
    }

    #[test]
    fn synchronous_acks_need_enough_healthy_replicas() {
        let mut t = shard();
        node(&mut t, 2).repl_offset = 10;
        node(&mut t, 3).repl_offset = 30;
        let p = node_id(1);
        // Three replicas, all healthy: any ack count allows a choice.
        for acks in 0..=4 {
            assert_eq!(
                promotion_candidate(&t, &p, acks),
                Some(node_id(3)),
                "{acks}"
            );
        }
        // One down: with 1 ack the write may be on it alone; with 2, one of the two
        // others has it.
        node(&mut t, 3).flags.set(bit::FAIL, true);
        assert_eq!(promotion_candidate(&t, &p, 1), None);
        assert_eq!(promotion_candidate(&t, &p, 2), Some(node_id(2)));
        assert_eq!(promotion_candidate(&t, &p, 0), Some(node_id(2)));
        node(&mut t, 4).flags.set(bit::PFAIL, true);
        assert_eq!(promotion_candidate(&t, &p, 2), None);
        assert_eq!(promotion_candidate(&t, &p, 3), Some(node_id(2)));
    }

    #[test]
    fn ties_go_to_the_smallest_id_and_unlogged_replicas_do_not_count() {
        let promotion_candidate = |t: &Topology, p: &NodeId| promotion_candidate(t, p, 1);
        let mut t = shard();
        for n in 2..=4 {
            node(&mut t, n).repl_offset = 7;
        }
        assert_eq!(promotion_candidate(&t, &node_id(1)), Some(node_id(2)));
        t.consensus.nodes.remove(&node_id(2));
        assert_eq!(promotion_candidate(&t, &node_id(1)), Some(node_id(3)));
    }

    #[test]
    fn only_a_failed_silent_slot_owner_is_failed_over() {
        let mut t = shard();
        let p = t.index_of(&node_id(1)).unwrap();
        assert!(needs_failover(&t, p, NOW, TIMEOUT, None));
        assert!(needs_failover(&t, p, NOW, TIMEOUT, Some(NOW - TIMEOUT - 1)));
        // Heard from lately: the FAIL flag is stale, the primary may be serving.
        assert!(!needs_failover(&t, p, NOW, TIMEOUT, Some(NOW - TIMEOUT)));
        // Suspected only.
        t.nodes[p as usize].flags.set(bit::FAIL, false);
        t.nodes[p as usize].flags.set(bit::PFAIL, true);
        assert!(!needs_failover(&t, p, NOW, TIMEOUT, None));
        // Failed but without slots: nothing to take over.
        let mut t = shard();
        for slot in 100..200 {
            t.slots.set_owner(slot, None);
        }
        assert!(!needs_failover(&t, p, NOW, TIMEOUT, None));
        // Never myself.
        let mut t = shard();
        let me = t.myself_index();
        t.nodes[me as usize].flags.set(bit::FAIL, true);
        assert!(!needs_failover(&t, me, NOW, TIMEOUT, None));
    }

    #[test]
    fn settled_by_commit_or_deadline() {
        let mut f = Failovers::default();
        let flight = |proposal, deadline_ms| InFlight {
            replica: node_id(2),
            proposal: ProposalId(proposal),
            deadline_ms,
        };
        assert!(f.start(node_id(1), flight(5, NOW + 100)));
        assert!(f.start(node_id(3), flight(6, NOW + 200)));
        f.settle(NOW, &[]);
        assert!(f.is_in_flight(&node_id(1)) && f.is_in_flight(&node_id(3)));
        let committed = Committed {
            index: 9,
            command: Ok(TopologyCommand::Promote {
                replica: node_id(2),
            }),
            proposal: Some(ProposalId(5)),
        };
        f.settle(NOW, &[committed]);
        assert!(!f.is_in_flight(&node_id(1)));
        f.settle(NOW + 200, &[]);
        assert!(!f.is_in_flight(&node_id(3)));
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(3);
        for n in 0..FAILOVERS_IN_FLIGHT_MAX {
            f.start(NodeId::random(&mut rng), flight(n as u64, NOW + 1000));
        }
        assert!(!f.start(NodeId::random(&mut rng), flight(0, NOW + 1000)));
        assert_eq!(f.proposed, 2 + FAILOVERS_IN_FLIGHT_MAX as u64);
    }

    fn history() -> crate::replication::ids::ReplId {
        crate::replication::ids::ReplId::parse(&[b'a'; 40]).unwrap()
    }

    /// Goal: a primary that says it is fenced (restarted without all it acknowledged) is
    /// handed to its replica furthest ahead in its history, without FAIL; not when it is
    /// not fenced, says no history, or no replica is ahead of what it loaded.
    #[test]
    fn a_fenced_primary_is_handed_to_the_replica_furthest_ahead() {
        let mut t = shard();
        let p = t.index_of(&node_id(1)).unwrap();
        t.nodes[p as usize].flags.set(bit::FAIL, false);
        t.nodes[p as usize].repl_id = Some(history());
        t.nodes[p as usize].repl_offset = 5;
        for (n, offset) in [(2, 10), (3, 30), (4, 20)] {
            node(&mut t, n).repl_id = Some(history());
            node(&mut t, n).repl_offset = offset;
        }
        assert_eq!(fenced_handover(&t, p, 1), None, "not fenced");
        t.nodes[p as usize].fenced = true;
        assert_eq!(fenced_handover(&t, p, 0), Some(node_id(3)));
        assert_eq!(fenced_handover(&t, p, 1), Some(node_id(3)));
        // With one ack, 3 - 1 + 1 = 3 replicas must report: a failing one blocks it.
        node(&mut t, 4).flags.set(bit::PFAIL, true);
        assert_eq!(fenced_handover(&t, p, 1), None);
        assert_eq!(fenced_handover(&t, p, 2), Some(node_id(3)));
        node(&mut t, 4).flags.set(bit::PFAIL, false);
        // The fenced node loaded more than any replica holds: it serves, nobody is promoted.
        t.nodes[p as usize].repl_offset = 30;
        assert_eq!(fenced_handover(&t, p, 1), None);
        t.nodes[p as usize].repl_offset = 5;
        t.nodes[p as usize].repl_id = None;
        assert_eq!(fenced_handover(&t, p, 1), None, "no history said");
    }

    /// Goal: the leader hands over its own slots when it is the fenced one. Method: a
    /// one-voter group led by me, fenced, owning slots 0-99, with a replica ahead of me.
    #[test]
    fn a_fenced_leader_hands_its_own_slots_to_its_replica() {
        let mut t = shard();
        // P is well: the only thing to do is my hand-over.
        let p = t.index_of(&node_id(1)).unwrap();
        t.nodes[p as usize].flags.set(bit::FAIL, false);
        let me = t.myself_index();
        t.nodes[me as usize].fenced = true;
        t.nodes[me as usize].repl_id = Some(history());
        let mut r = ClusterNode::new(node_id(5), node_id(0));
        r.flags.set(bit::MASTER, false);
        r.flags.set(bit::SLAVE, true);
        r.primary = Some(node_id(0));
        r.repl_id = Some(history());
        r.repl_offset = 50;
        t.add_node(r).unwrap();
        t.consensus.nodes.insert(node_id(5));
        t.consensus.version = crate::cluster::consensus::log::BOOTSTRAP_INDEX;
        let image = TopologyImage::capture(&t);
        let mut log = TopologyLog::found(node_id(0), &[node_id(0)], &[], image, 7).unwrap();
        log.campaign().unwrap();
        let mut agent: TopologyAgent<u64> =
            TopologyAgent::new(node_id(0), super::super::AgentSettings::default(), 7);
        agent.enter(NOW, node_id(0), log);
        let gossip = Gossip::new(GossipSettings::default(), 7);
        let mut now = NOW;
        for _ in 0..20 {
            now += 100;
            agent.step(now, super::super::AgentInput::Tick, &mut t, &gossip);
        }
        let r = t.index_of(&node_id(5)).unwrap();
        assert!(t.nodes[r as usize].is_primary());
        assert_eq!(t.slots.owner(50), Some(r));
        assert_eq!(t.myself().primary, Some(node_id(5)));
    }

    /// A one-voter group led by me: the leader's upkeep promotes R3 (highest offset) once,
    /// the promotion commits and applies, and nothing more is proposed.
    #[test]
    fn the_leader_promotes_once_and_the_promotion_applies() {
        let mut t = shard();
        node(&mut t, 2).repl_offset = 10;
        node(&mut t, 3).repl_offset = 30;
        t.consensus.version = crate::cluster::consensus::log::BOOTSTRAP_INDEX;
        let image = TopologyImage::capture(&t);
        let mut log = TopologyLog::found(node_id(0), &[node_id(0)], &[], image, 7).unwrap();
        log.campaign().unwrap();
        let mut agent: TopologyAgent<u64> =
            TopologyAgent::new(node_id(0), super::super::AgentSettings::default(), 7);
        agent.enter(NOW, node_id(0), log);
        let gossip = Gossip::new(
            GossipSettings {
                node_timeout_ms: TIMEOUT,
                ..GossipSettings::default()
            },
            7,
        );
        let mut now = NOW;
        for _ in 0..20 {
            now += 100;
            agent.step(now, super::super::AgentInput::Tick, &mut t, &gossip);
        }
        assert!(agent.is_leader());
        assert_eq!(agent.failovers.proposed, 1);
        let r3 = t.index_of(&node_id(3)).unwrap();
        assert!(t.nodes[r3 as usize].is_primary());
        assert_eq!(t.slots.owner(150), Some(r3));
        let old = t.index_of(&node_id(1)).unwrap();
        assert_eq!(t.nodes[old as usize].primary, Some(node_id(3)));
        assert_eq!(node(&mut t, 2).primary, Some(node_id(3)));
        assert!(!agent.failovers.is_in_flight(&node_id(1)));
    }
}
