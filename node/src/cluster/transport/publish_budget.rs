//! Bounds on PUBLISH propagation waiting for the bus thread. The request queue it shares
//! with MEETs and topology proposals is bounded by count only; a burst of large PUBLISHes
//! could hold gigabytes in it, or fill it so that a proposal finds no room. Publishes get
//! half of the queue's slots and a byte budget; past either, a PUBLISH is not propagated
//! (and counted: INFO stats `cluster_publish_dropped`).

use super::REQUESTS_MAX;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// Channel plus message bytes one PUBLISH may carry to the other nodes: one bus message
/// (`MESSAGE_MAX`) less room for its header (up to ~64 KiB of slot ranges, doubled for
/// margin). Larger ones are refused with an error before anything is delivered, rather
/// than lost on the way.
pub const PUBLISH_PAYLOAD_MAX: usize = proto::bus::limits::MESSAGE_MAX - 256 * 1024;
/// PUBLISHes waiting for the bus thread at most: the other half of the queue stays free
/// for MEETs, FORGETs and topology proposals.
pub const PUBLISH_QUEUED_MAX: usize = REQUESTS_MAX / 2;
/// Bytes of channel and message waiting for the bus thread at most.
pub const PUBLISH_QUEUED_BYTES_MAX: usize = 64 << 20;

#[derive(Debug, Default)]
pub struct PublishBudget {
    queued: AtomicUsize,
    bytes: AtomicUsize,
    dropped: AtomicU64,
}

/// A queued PUBLISH's share of the budget, given back when the bus thread drops it.
#[derive(Debug)]
pub struct PublishTicket {
    budget: Arc<PublishBudget>,
    bytes: usize,
}

impl Drop for PublishTicket {
    fn drop(&mut self) {
        self.budget.queued.fetch_sub(1, Relaxed);
        self.budget.bytes.fetch_sub(self.bytes, Relaxed);
    }
}

impl PublishBudget {
    /// A ticket for `bytes` more, or None (counted as dropped) when the budget is spent.
    pub fn take(self: &Arc<Self>, bytes: usize) -> Option<PublishTicket> {
        let queued = self.queued.fetch_add(1, Relaxed);
        let held = self.bytes.fetch_add(bytes, Relaxed);
        // The ticket exists from here: dropping it gives both back.
        let ticket = PublishTicket {
            budget: self.clone(),
            bytes,
        };
        if queued >= PUBLISH_QUEUED_MAX || held + bytes > PUBLISH_QUEUED_BYTES_MAX {
            drop(ticket);
            self.note_dropped();
            return None;
        }
        Some(ticket)
    }

    pub fn note_dropped(&self) {
        self.dropped.fetch_add(1, Relaxed);
    }

    /// PUBLISHes not propagated since start.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    #[cfg(test)]
    fn queued(&self) -> (usize, usize) {
        (self.queued.load(Relaxed), self.bytes.load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_are_bounded_by_count_and_bytes_and_given_back_on_drop() {
        let budget = Arc::new(PublishBudget::default());
        let mut held: Vec<PublishTicket> = (0..PUBLISH_QUEUED_MAX)
            .map(|_| budget.take(1).expect("within the count"))
            .collect();
        assert!(budget.take(1).is_none());
        assert_eq!(budget.dropped(), 1);
        assert_eq!(budget.queued(), (PUBLISH_QUEUED_MAX, PUBLISH_QUEUED_MAX));
        held.clear();
        assert_eq!(budget.queued(), (0, 0));

        let big = budget
            .take(PUBLISH_QUEUED_BYTES_MAX - 10)
            .expect("within the bytes");
        assert!(budget.take(11).is_none());
        let small = budget.take(10).expect("exactly the rest");
        assert_eq!(budget.dropped(), 2);
        drop((big, small));
        assert_eq!(budget.queued(), (0, 0));
    }
}
