//! PFAIL to FAIL by the failure reports of a majority of voting primaries, the FAIL
//! broadcast, and clearing FAIL when the node is back (protocols.md §2.7).

use super::convert::is_voting;
use super::{Event, Gossip};
use crate::cluster::flags::bit;
use crate::cluster::slots::NodeIndex;
use crate::cluster::topology::Topology;

impl Gossip {
    /// Redis's `markNodeAsFailingIfNeeded`: a node this node suspects becomes FAIL once
    /// valid reports (plus this node, if it votes) reach `size / 2 + 1`.
    pub(super) fn mark_failing_if_needed(&mut self, now_ms: u64, t: &mut Topology, i: NodeIndex) {
        let node = &t.nodes[i as usize];
        if !node.flags.has(bit::PFAIL) || node.flags.has(bit::FAIL) || node.is_myself() {
            return;
        }
        let id = node.id;
        let needed = t.size() / 2 + 1;
        let validity = self.settings.fail_report_validity_ms();
        let mut reports = self.peer(id).valid_reports(now_ms, validity);
        if is_voting(t, t.myself_index()) {
            reports += 1;
        }
        if reports < needed {
            return;
        }
        let node = &mut t.nodes[i as usize];
        node.flags.set(bit::PFAIL, false);
        node.flags.set(bit::FAIL, true);
        self.peer(id).fail_time_ms = now_ms;
        self.save = true;
        self.event(Event::Fail { id });
        self.broadcast_fail(t, id);
    }

    /// A FAIL message: the node is failed everywhere, whatever this node thought.
    pub(super) fn mark_failed_by_message(&mut self, now_ms: u64, t: &mut Topology, i: NodeIndex) {
        let node = &mut t.nodes[i as usize];
        if node.is_myself() || node.flags.has(bit::FAIL) {
            return;
        }
        node.flags.set(bit::PFAIL, false);
        node.flags.set(bit::FAIL, true);
        let id = node.id;
        self.peer(id).fail_time_ms = now_ms;
        self.save = true;
        self.event(Event::Fail { id });
    }

    /// Redis's `clearNodeFailureIfNeeded`, on a PONG from a FAIL node: a replica or a
    /// primary without slots is cleared at once; a primary still owning slots only after
    /// the undo time (nobody failed it over, so it may serve them again).
    pub(super) fn clear_failure_if_needed(&mut self, now_ms: u64, t: &mut Topology, i: NodeIndex) {
        let node = &t.nodes[i as usize];
        if !node.flags.has(bit::FAIL) {
            return;
        }
        let id = node.id;
        let owns_slots = node.is_primary() && t.slots.owns_any(i);
        if owns_slots {
            let failed_for = now_ms.saturating_sub(self.peer(id).fail_time_ms);
            if failed_for <= self.settings.fail_undo_ms() {
                return;
            }
        }
        t.nodes[i as usize].flags.set(bit::FAIL, false);
        self.peer(id).fail_reports.clear();
        self.save = true;
        self.event(Event::FailCleared { id });
    }
}
