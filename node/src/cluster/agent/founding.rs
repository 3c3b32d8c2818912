//! Founding a group. Nodes meet as Redis nodes do (each may already hold slots it was
//! given by ADDSLOTS); once the set of nodes this node knows has stayed the same, all of
//! them reachable, for `founding_quiet_ms`, and none of them is in a group, the node with
//! the smallest id founds one. Its bootstrap snapshot holds what gossip agreed (the nodes,
//! who replicates whom, who owns which slot) and names up to five voters, the founder
//! first; the founder campaigns at once, the others join when its Raft traffic reaches
//! them and start from that snapshot. Nodes met later are taken in by the leader
//! (`reconcile`).

use super::TopologyAgent;
use crate::cluster::consensus::log::{BOOTSTRAP_INDEX, VOTERS_MAX};
use crate::cluster::consensus::{NodeAddress, TopologyImage, TopologyLog};
use crate::cluster::flags::bit;
use crate::cluster::gossip::Gossip;
use crate::cluster::id::NodeId;
use crate::cluster::node::{ClusterNode, LinkState};
use crate::cluster::slots::NodeIndex;
use crate::cluster::topology::Topology;
use proto::slot::SLOT_COUNT;
use std::collections::BTreeSet;

/// What this node's topology looked like at the last tick (a hash of its nodes, their
/// roles and the slot owners), and since when it has not changed.
#[derive(Default)]
pub(super) struct Watch {
    signature: u64,
    since_ms: u64,
}

/// A node counts for founding once its handshake is done and it has an address.
pub(super) fn is_member(n: &ClusterNode) -> bool {
    !n.is_myself() && !n.flags.has(bit::HANDSHAKE) && !n.flags.has(bit::NOADDR)
}

/// A node the group is founded with: every member. A member that is down holds founding
/// up until it returns or is forgotten: leaving it out would let each side of a partition
/// found a group of its own (a failed flag can be stale on one side).
fn is_founding_member(n: &ClusterNode) -> bool {
    is_member(n)
}

/// Reachable now: linked, and not suspected.
pub(super) fn is_reachable(n: &ClusterNode) -> bool {
    n.link == LinkState::Connected && !n.flags.has(bit::PFAIL) && !n.flags.has(bit::FAIL)
}

pub(super) fn address_of(n: &ClusterNode) -> NodeAddress {
    NodeAddress {
        ip: n.ip.clone(),
        port: n.port,
        cport: n.cport,
        hostname: n.hostname.clone(),
    }
}

impl<W> TopologyAgent<W> {
    pub(super) fn consider_founding(&mut self, now_ms: u64, t: &mut Topology, gossip: &Gossip) {
        let signature = signature(t);
        if signature != self.founding.signature {
            self.founding = Watch {
                signature,
                since_ms: now_ms,
            };
            return;
        }
        let mut known: Vec<NodeId> = t
            .nodes
            .iter()
            .filter(|n| is_founding_member(n))
            .map(|n| n.id)
            .collect();
        known.sort();
        // The group starts from this node's view: only once it has stood still, no slot of
        // ours is being moved, and every member claims what we believe it holds (a reshard
        // in flight, or a claim not yet spread, would otherwise be cut off by the snapshot).
        if !t.slots.migrating.is_empty()
            || !t.slots.importing.is_empty()
            || !claims_agree(t, gossip)
        {
            tracing::trace!("not founding: slots in flight or claims not agreed yet");
            self.founding.since_ms = now_ms;
            return;
        }
        let settled =
            now_ms.saturating_sub(self.founding.since_ms) >= self.settings.founding_quiet_ms;
        let Some(smallest) = known.first() else {
            return;
        };
        let all_reachable = t
            .nodes
            .iter()
            .filter(|n| is_founding_member(n))
            .all(is_reachable);
        // A node already in a group takes this one in; founding a second group would split
        // the cluster.
        let someone_grouped = known
            .iter()
            .any(|id| gossip.topology_version_of(id).unwrap_or(0) > 0);
        if !settled || !all_reachable || someone_grouped || *smallest < self.me {
            tracing::trace!(
                settled,
                all_reachable,
                someone_grouped,
                smallest = *smallest < self.me,
                "not founding"
            );
            return;
        }
        self.found(now_ms, t);
    }

    /// Starts the group: this node, up to four more voters (smallest ids first) and the
    /// rest as learners, from a bootstrap snapshot holding this node's topology as it is.
    fn found(&mut self, now_ms: u64, t: &mut Topology) {
        let mut others: Vec<NodeId> = t
            .nodes
            .iter()
            .filter(|n| is_founding_member(n))
            .map(|n| n.id)
            .collect();
        others.sort();
        let voter_places = VOTERS_MAX - 1;
        let learners = others.split_off(others.len().min(voter_places));
        let mut voters = vec![self.me];
        voters.extend(others);
        // The replicated part of the topology is from now on exactly what the log holds:
        // every member, and the slots they own (a slot of a node still in handshake is
        // dropped; its claim returns once the node is taken in).
        let members: BTreeSet<NodeId> = voters.iter().chain(&learners).copied().collect();
        for slot in 0..SLOT_COUNT as u16 {
            let owner = t.slots.owner(slot).map(|i| t.nodes[i as usize].id);
            if owner.is_some_and(|o| !members.contains(&o)) {
                t.slots.set_owner(slot, None);
            }
        }
        t.consensus.nodes = members;
        t.consensus.version = BOOTSTRAP_INDEX;
        let image = TopologyImage::capture(t);
        let mut log = match TopologyLog::found(self.me, &voters, &learners, image, self.seed) {
            Ok(log) => log,
            Err(e) => {
                tracing::warn!(error = %e, "cannot found a topology group");
                t.consensus = Default::default();
                return;
            }
        };
        if let Err(e) = log.campaign() {
            tracing::warn!(error = %e, "founder could not start an election");
        }
        tracing::info!(
            voters = voters.len(),
            learners = learners.len(),
            "founded the topology group"
        );
        self.save = true;
        self.enter(now_ms, self.me, log);
    }
}

/// A hash of what founding would capture: the nodes, their roles, the slot owners.
fn signature(t: &Topology) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut ids: Vec<(NodeId, bool, Option<NodeId>)> = t
        .nodes
        .iter()
        .filter(|n| !n.flags.has(bit::HANDSHAKE))
        .map(|n| (n.id, n.is_primary(), n.primary))
        .collect();
    ids.sort();
    ids.hash(&mut h);
    for (start, end, owner) in t.slots.runs() {
        (start, end, t.nodes[owner as usize].id).hash(&mut h);
    }
    h.finish()
}

/// Whether every member's last header claims what `t` says of it: a primary its slots, a
/// replica its primary.
fn claims_agree(t: &Topology, gossip: &Gossip) -> bool {
    t.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| is_founding_member(n))
        .all(|(i, n)| {
            let Some(c) = gossip.claims_of(&n.id) else {
                return false;
            };
            if n.is_replica() {
                return c.primary == n.primary;
            }
            c.primary.is_none() && c.slots == t.slots.ranges_of(i as NodeIndex).as_slice()
        })
}
