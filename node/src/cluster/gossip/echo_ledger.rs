//! What this node has echoed to whom, so that it can vouch that its old echoes have run out:
//! the fast hand-off of the serving lease (`quorum.rs`).
//!
//! A deposed primary P, still at a topology version below the promotion v that replaced it,
//! counts a voter R only by echoes R sent at versions below v; each runs out a lease after
//! the instant its stamp was taken, which is before R received it. So once R can say "every
//! echo I sent at a version below my current one w, to any node not known to be at w or
//! later, carried a stamp I received at least a lease ago", none of them counts anywhere any
//! more, and the node promoted at v can count R at once instead of a lease after R
//! advertised v. A node known (by its own header) to be at w or later is no deposed owner of
//! anything a version up to w moved: it is left out, which is what makes the claim hold
//! within milliseconds of a promotion once the live nodes have applied it, while a primary
//! that is dead (its last stamp arrived a node timeout ago) does not hold it back.
//!
//! Times are this node's clock; the claim leaves as an age (a duration), so clocks of
//! different nodes need not agree, only run at the same rate over a lease.

use crate::cluster::id::NodeId;
use std::collections::HashMap;

/// What was echoed to one node: the version and stamp-receipt time ("basis") of the latest
/// echo-bearing message, and the basis of the latest one at a lower version than that.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Echoed {
    version: u64,
    basis_ms: u64,
    below_basis_ms: u64,
}

impl Echoed {
    /// The basis of the latest echo sent at a version below `version` (0: none).
    fn below(&self, version: u64) -> u64 {
        if self.version < version {
            self.basis_ms
        } else {
            self.below_basis_ms
        }
    }
}

#[derive(Debug, Default)]
pub struct EchoLedger {
    echoed: HashMap<NodeId, Echoed>,
    /// Echoes this process cannot account for (before it started, or to nodes whose
    /// entries were dropped) had bases no later than this.
    floor_ms: u64,
}

impl EchoLedger {
    /// Called on every input: the first call marks the start, before which this process
    /// sent nothing it remembers (an earlier run of the node may have).
    pub fn start(&mut self, now_ms: u64) {
        if self.floor_ms == 0 {
            self.floor_ms = now_ms.max(1);
        }
    }

    /// A message at `version` echoed to `to` a stamp this node received at `basis_ms`.
    pub fn record(&mut self, to: NodeId, version: u64, basis_ms: u64) {
        let e = self.echoed.entry(to).or_default();
        if version > e.version {
            e.below_basis_ms = e.below_basis_ms.max(e.basis_ms);
            e.version = version;
        } else if version < e.version {
            // A message below the latest version (the node went back, say a reset): it is
            // an echo below the latest one's version.
            e.below_basis_ms = e.below_basis_ms.max(basis_ms);
            return;
        }
        e.basis_ms = e.basis_ms.max(basis_ms);
    }

    /// How long ago (at `now_ms`) this node received the newest stamp it echoed, in a
    /// message at a version below `version`, to a node not known to be at `version` or
    /// later (`known_version` of a node: its last header's, None if unknown).
    #[cfg(test)]
    pub fn old_echo_age(
        &self,
        now_ms: u64,
        version: u64,
        known_version: impl Fn(&NodeId) -> Option<u64>,
    ) -> u64 {
        now_ms.saturating_sub(self.old_echo_basis(version, known_version))
    }

    /// The receipt time of that newest stamp (at least the floor): what the age counts from.
    pub fn old_echo_basis(
        &self,
        version: u64,
        known_version: impl Fn(&NodeId) -> Option<u64>,
    ) -> u64 {
        self.echoed
            .iter()
            .filter(|(id, _)| known_version(id).is_none_or(|v| v < version))
            .map(|(_, e)| e.below(version))
            .fold(self.floor_ms, u64::max)
    }

    /// Drops entries whose newest echo basis is older than `keep_ms`, raising the floor to
    /// the newest basis dropped: bounds the ledger by the nodes echoed lately. A dropped
    /// node then counts as one known at no version, so the claim only gets more cautious.
    pub fn prune(&mut self, now_ms: u64, keep_ms: u64) {
        let cutoff = now_ms.saturating_sub(keep_ms);
        let mut floor = self.floor_ms;
        self.echoed.retain(|_, e| {
            let newest = e.basis_ms.max(e.below_basis_ms);
            if newest < cutoff {
                floor = floor.max(newest);
                false
            } else {
                true
            }
        });
        self.floor_ms = floor;
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.echoed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::id::HexId;

    fn id(n: u8) -> NodeId {
        HexId::parse(format!("{:040x}", n).as_bytes()).unwrap()
    }

    #[test]
    fn a_fresh_ledger_vouches_for_nothing_before_it_started() {
        let mut l = EchoLedger::default();
        l.start(1_000);
        l.start(5_000);
        assert_eq!(l.old_echo_age(1_100, 3, |_| None), 100);
    }

    #[test]
    fn only_echoes_below_the_version_to_nodes_not_known_past_it_count() {
        let mut l = EchoLedger::default();
        l.start(1_000);
        // Node 1 (dead): last echo at version 4 on a stamp received at 2_000.
        l.record(id(1), 4, 2_000);
        // Node 2 (alive): echoes at 4 until 9_000, then at 5.
        l.record(id(2), 4, 9_000);
        l.record(id(2), 5, 9_050);
        let known = |n: &NodeId| (*n == id(2)).then_some(4);
        // Node 2 is not known at 5 yet: its echo at 4 (basis 9_000) holds the claim back.
        assert_eq!(l.old_echo_age(9_100, 5, known), 100);
        // Known at 5: only the dead node's old echo is left.
        let known = |n: &NodeId| (*n == id(2)).then_some(5);
        assert_eq!(l.old_echo_age(9_100, 5, known), 7_100);
        // Echoes at the claim's own version never count.
        l.record(id(3), 5, 9_090);
        assert_eq!(
            l.old_echo_age(9_100, 5, |n| (*n != id(1)).then_some(4)),
            100
        );
        assert_eq!(
            l.old_echo_age(9_100, 5, |n| (*n == id(2)).then_some(5)),
            7_100
        );
        // Asked about an older version than it tracks, it answers cautiously (the echoes
        // at 4 are counted as if below 4): never a claim too strong.
        assert_eq!(l.old_echo_age(9_100, 4, |_| None), 100);
    }

    #[test]
    fn skipping_versions_keeps_the_latest_lower_echo() {
        let mut l = EchoLedger::default();
        l.start(1);
        l.record(id(1), 2, 100);
        l.record(id(1), 3, 200);
        l.record(id(1), 3, 300);
        l.record(id(1), 7, 400);
        // Below 7: the version-3 echo with basis 300; below 3: the one at 2.
        assert_eq!(l.old_echo_age(1_000, 7, |_| None), 700);
        assert_eq!(l.old_echo_age(1_000, 8, |_| None), 600);
        // A message at a lower version than the latest still counts below it.
        l.record(id(1), 5, 450);
        assert_eq!(l.old_echo_age(1_000, 7, |_| None), 550);
    }

    #[test]
    fn pruning_keeps_what_it_drops_in_the_floor() {
        let mut l = EchoLedger::default();
        l.start(1);
        l.record(id(1), 2, 100);
        l.record(id(2), 2, 5_000);
        l.prune(6_000, 2_000);
        assert_eq!(l.len(), 1);
        assert_eq!(l.old_echo_age(6_000, 3, |_| Some(9)), 5_900);
        assert_eq!(l.old_echo_age(6_000, 3, |_| None), 1_000);
    }
}
