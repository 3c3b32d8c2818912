//! What the gossip core remembers about a node beyond [`ClusterNode`]: liveness stamps that
//! CLUSTER NODES does not print, and the failure reports other primaries sent about it.
//!
//! [`ClusterNode`]: crate::cluster::node::ClusterNode

use crate::cluster::id::NodeId;
use crate::cluster::topology::NODES_MAX;
use std::collections::VecDeque;

/// Topology versions remembered per peer with when each was first advertised: enough to
/// tell since when a peer has been at or past a recent version (older ones fold into the
/// oldest entry, which only makes the answer later, the safe side).
pub const VERSION_HISTORY_MAX: usize = 8;

/// A voting primary said, at `time_ms`, that the node is failing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailReport {
    pub reporter: NodeId,
    pub time_ms: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peer {
    /// Last time any message arrived from the node (any data counts as liveness).
    pub data_received_ms: u64,
    /// When the node was added (a handshake times out from here).
    pub created_ms: u64,
    /// When a ping (or MEET) last left for it, first or retry.
    pub last_ping_send_ms: u64,
    /// The latest stamp (its clock) its PING, PONG or MEET carried: echoed back to it.
    pub stamp_received_ms: u64,
    /// When (this node's clock) that stamp arrived: the basis of the echo in the ledger.
    pub stamp_arrived_ms: u64,
    /// The highest topology version at which it vouched that all its echoes at lower
    /// versions had run out (`echo_ledger`): from that version on it counts for a node
    /// promoted there without the lease-long hand-off. Reset when its version goes back.
    pub echoes_expired_below: u64,
    /// The latest stamp of this node's (this node's clock) it echoed back: it was alive
    /// and at its advertised version after that instant. The serving lease counts from
    /// here (`quorum.rs`), not from arrival, so it needs no bound on delivery time.
    pub echo_received_ms: u64,
    /// When it was marked FAIL.
    pub fail_time_ms: u64,
    /// When its bus port was last asked for its bus address (`rediscover`).
    pub last_lookup_ms: u64,
    /// The process incarnation its last header named (0: none heard yet, or an older node
    /// that does not say): a new one means it restarted.
    pub incarnation: u64,
    /// The Raft topology version its last header advertised.
    pub topology_version: u64,
    /// What its last header claimed: the slots it (or its primary) serves, and its primary
    /// if it says it is a replica. Once this node is in a topology group these claims no
    /// longer change the topology; the group's leader reads them to take in a node that
    /// is not in the group yet.
    pub claimed_slots: Vec<(u16, u16)>,
    pub claimed_primary: Option<NodeId>,
    /// One report per reporter, at most [`NODES_MAX`] (one per other node).
    pub fail_reports: Vec<FailReport>,
    /// When the first ping since the node was last unreachable left (0: none): CLUSTER
    /// LINKS's outbound link.
    pub link_to_since_ms: u64,
    /// When the first message since it was last unreachable arrived (0: none): the
    /// inbound link.
    pub link_from_since_ms: u64,
    /// The handshake was started by CLUSTER MEET, not by gossip: it may bring back a
    /// forgotten node (as in Redis, only gossip is held back by the blacklist).
    pub met_by_command: bool,
    /// Handshake windows this MEET has used up beyond the first (see `expire_handshakes`).
    pub meet_attempts: u8,
    /// (topology version, when a header first advertised it), oldest first, increasing.
    pub versions: VecDeque<(u64, u64)>,
}

impl Peer {
    /// Records the topology version a header advertised at `now_ms`. A version going back
    /// (a restart from an older log, a reset) starts the history again.
    pub fn saw_version(&mut self, version: u64, now_ms: u64) {
        match self.versions.back() {
            Some(&(last, _)) if last == version => return,
            Some(&(last, _)) if last > version => {
                self.versions.clear();
                self.echoes_expired_below = 0;
            }
            _ => {}
        }
        self.versions.push_back((version, now_ms));
        if self.versions.len() > VERSION_HISTORY_MAX {
            // The oldest entry stays: it says since when the peer has been at or past
            // every version up to it (dropping it would make a peer that moved through
            // many versions look new to all of them). Dropping the next one only makes
            // `at_or_past_since` later for versions between the two, never earlier.
            self.versions.remove(1);
        }
    }

    /// When the lease its latest echo gives runs out (None: it never echoed a stamp).
    pub fn echo_lease_end(&self, lease_ms: u64) -> Option<u64> {
        (self.echo_received_ms != 0).then(|| self.echo_received_ms.saturating_add(lease_ms))
    }

    /// Since when the peer has advertised `version` or later without going back (None: its
    /// last header is below it).
    pub fn at_or_past_since(&self, version: u64) -> Option<u64> {
        let mut since = None;
        for &(v, at) in self.versions.iter().rev() {
            if v < version {
                break;
            }
            since = Some(at);
        }
        since
    }

    /// Adds or refreshes `reporter`'s report; true if it is new.
    pub fn add_report(&mut self, reporter: NodeId, now_ms: u64) -> bool {
        if let Some(r) = self
            .fail_reports
            .iter_mut()
            .find(|r| r.reporter == reporter)
        {
            r.time_ms = now_ms;
            return false;
        }
        if self.fail_reports.len() >= NODES_MAX {
            return false;
        }
        self.fail_reports.push(FailReport {
            reporter,
            time_ms: now_ms,
        });
        true
    }

    pub fn remove_report(&mut self, reporter: &NodeId) {
        self.fail_reports.retain(|r| r.reporter != *reporter);
    }

    /// Reports not older than `validity_ms`, without dropping the others.
    pub fn valid_report_count(&self, now_ms: u64, validity_ms: u64) -> usize {
        self.fail_reports
            .iter()
            .filter(|r| now_ms.saturating_sub(r.time_ms) <= validity_ms)
            .count()
    }

    /// Drops reports older than `validity_ms`; returns how many remain.
    pub fn valid_reports(&mut self, now_ms: u64, validity_ms: u64) -> usize {
        self.fail_reports
            .retain(|r| now_ms.saturating_sub(r.time_ms) <= validity_ms);
        self.fail_reports.len()
    }
}

#[cfg(test)]
mod tests {
    use super::{Peer, VERSION_HISTORY_MAX};

    /// A peer that moved through many versions (a reshard commits thousands) is still known
    /// to have been past the old ones since long ago; a version between kept entries may
    /// only come out later than it was, never earlier.
    #[test]
    fn a_long_version_history_keeps_its_oldest_entry() {
        let mut p = Peer::default();
        p.saw_version(1, 100);
        for v in 2..=50u64 {
            p.saw_version(v, 1_000 + v);
        }
        assert!(p.versions.len() <= VERSION_HISTORY_MAX);
        assert_eq!(p.at_or_past_since(0), Some(100));
        assert_eq!(p.at_or_past_since(1), Some(100));
        assert_eq!(p.at_or_past_since(50), Some(1_050));
        for v in 2..=50u64 {
            let since = p.at_or_past_since(v).unwrap();
            assert!(since >= 1_000 + v, "version {v} counted from {since}");
        }
        assert_eq!(p.at_or_past_since(51), None);
    }
}
