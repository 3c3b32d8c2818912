//! Commands waiting for their topology change to apply, by proposal id, each with a
//! deadline. Bounded: past [`PENDING_MAX`] a new change is refused at once rather than
//! queued behind a group that does not commit.

use crate::cluster::consensus::ProposalId;
use std::collections::BTreeMap;

/// Most changes waiting at once. Topology changes come from operators and redis-cli one at a
/// time (a reshard sends one SETSLOT per slot per node, serially), so this is generous.
pub const PENDING_MAX: usize = 1024;

pub struct Pending<W> {
    waiting: BTreeMap<ProposalId, (W, u64)>,
}

impl<W> Default for Pending<W> {
    fn default() -> Self {
        Pending {
            waiting: BTreeMap::new(),
        }
    }
}

impl<W> Pending<W> {
    pub fn is_full(&self) -> bool {
        self.waiting.len() >= PENDING_MAX
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn insert(&mut self, id: ProposalId, waiter: W, deadline_ms: u64) {
        debug_assert!(!self.is_full());
        self.waiting.insert(id, (waiter, deadline_ms));
    }

    /// The waiter of a committed proposal (None: not ours any more, it timed out).
    pub fn take(&mut self, id: ProposalId) -> Option<W> {
        self.waiting.remove(&id).map(|(w, _)| w)
    }

    /// Waiters whose deadline passed.
    pub fn expire(&mut self, now_ms: u64) -> Vec<W> {
        let late: Vec<ProposalId> = self
            .waiting
            .iter()
            .filter(|(_, (_, deadline))| *deadline <= now_ms)
            .map(|(id, _)| *id)
            .collect();
        late.into_iter().filter_map(|id| self.take(id)).collect()
    }

    pub fn drain(&mut self) -> Vec<W> {
        std::mem::take(&mut self.waiting)
            .into_values()
            .map(|(w, _)| w)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_leave_by_commit_or_deadline() {
        let mut p = Pending::default();
        p.insert(ProposalId(1), "a", 100);
        p.insert(ProposalId(2), "b", 200);
        assert_eq!(p.take(ProposalId(1)), Some("a"));
        assert_eq!(p.take(ProposalId(1)), None);
        assert!(p.expire(199).is_empty());
        assert_eq!(p.expire(200), vec!["b"]);
        assert_eq!(p.len(), 0);
    }

    #[test]
    fn it_is_bounded() {
        let mut p = Pending::default();
        for i in 0..PENDING_MAX as u64 {
            p.insert(ProposalId(i), i, 10);
        }
        assert!(p.is_full());
        assert_eq!(p.drain().len(), PENDING_MAX);
        assert!(!p.is_full());
    }
}
