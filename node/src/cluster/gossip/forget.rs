//! CLUSTER FORGET in the core: the node leaves the topology, its state here and the
//! failure reports it made go, and it is blacklisted so that gossip from nodes that still
//! know it does not bring it back (Redis's `clusterBlacklistAddNode` + `clusterDelNode`).

use super::{Event, Gossip};
use crate::cluster::flags::bit;
use crate::cluster::id::NodeId;
use crate::cluster::slots::NodeIndex;
use crate::cluster::topology::Topology;

impl Gossip {
    pub(super) fn forget(&mut self, now_ms: u64, id: NodeId, addr: &str, t: &mut Topology) {
        self.blacklist.add(id, now_ms);
        // The command usually removed it already; this covers a core driven on its own.
        if t.index_of(&id).is_some() && t.forget(id.as_bytes()).is_ok() {
            self.save = true;
        }
        // Handshakes gossip started toward its address in between would bring it back.
        if !addr.is_empty() {
            let stale: Vec<NodeIndex> = t
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| {
                    n.flags.has(bit::HANDSHAKE)
                        && n.bus_addr == addr
                        && !self.peers.get(&n.id).is_some_and(|p| p.met_by_command)
                })
                .map(|(i, _)| i as NodeIndex)
                .collect();
            for i in stale.into_iter().rev() {
                if let Some(n) = t.remove_node(i) {
                    self.peers.remove(&n.id);
                }
            }
        }
        self.peers.remove(&id);
        for p in self.peers.values_mut() {
            p.remove_report(&id);
        }
        self.event(Event::NodeForgotten { id });
    }

    /// Whether gossip may not add `id` back now.
    pub fn is_blacklisted(&mut self, id: &NodeId, now_ms: u64) -> bool {
        self.blacklist.contains(id, now_ms)
    }
}
