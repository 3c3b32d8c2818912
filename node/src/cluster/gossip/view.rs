//! What commands may read of the gossip core's per-node state, which lives on the bus
//! thread: failure reports (CLUSTER COUNT-FAILURE-REPORTS) and the bus "links" (CLUSTER
//! LINKS). The bus thread publishes a fresh copy every tick, so a reader never waits for
//! that thread and the core pays O(nodes) ten times a second, not per message.
//!
//! The bus runs on datagrams, so a link is what Redis's TCP link stands for: an outbound
//! link to a node exists from the first ping sent to it until it is found unreachable, an
//! inbound one from the first message heard from it until then.

use super::Gossip;
use crate::cluster::id::NodeId;
use crate::cluster::topology::Topology;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerSummary {
    pub id: NodeId,
    /// Failure reports still valid at the time of the copy.
    pub fail_reports: usize,
    /// When the outbound link was made (unix ms), None when there is none.
    pub link_to_since_ms: Option<u64>,
    /// When the inbound link was made, None when there is none.
    pub link_from_since_ms: Option<u64>,
    /// The process incarnation its last header named (0: none yet): replication links end
    /// when their peer's changes (it restarted).
    pub incarnation: u64,
    /// When anything last arrived from it (unix ms, 0: never): how long it has been silent
    /// as of `at_ms`, which a FAIL flag that outlives the silence does not say.
    pub heard_ms: u64,
}

/// Every other member's summary, in topology order, as of `at_ms`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerView {
    pub at_ms: u64,
    pub peers: Vec<PeerSummary>,
}

impl PeerView {
    pub fn get(&self, id: &NodeId) -> Option<&PeerSummary> {
        self.peers.iter().find(|p| p.id == *id)
    }
}

impl Gossip {
    /// A copy of the per-node state commands show, for the nodes in `t` but myself.
    pub fn peer_view(&self, now_ms: u64, t: &Topology) -> PeerView {
        let validity = self.settings.fail_report_validity_ms();
        let since = |ms: u64| (ms != 0).then_some(ms);
        let peers = t
            .nodes
            .iter()
            .filter(|n| !n.is_myself())
            .map(|n| {
                let p = self.peers.get(&n.id);
                PeerSummary {
                    id: n.id,
                    fail_reports: p.map_or(0, |p| p.valid_report_count(now_ms, validity)),
                    link_to_since_ms: p.and_then(|p| since(p.link_to_since_ms)),
                    link_from_since_ms: p.and_then(|p| since(p.link_from_since_ms)),
                    incarnation: p.map_or(0, |p| p.incarnation),
                    heard_ms: p.map_or(0, |p| p.data_received_ms),
                }
            })
            .collect();
        PeerView {
            at_ms: now_ms,
            peers,
        }
    }
}
