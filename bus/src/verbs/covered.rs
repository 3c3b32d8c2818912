//! Selective signaling: which send work requests ask the device for a completion, and which
//! completions stand for earlier requests that did not.
//!
//! A WRITE the caller posts with `post_write_covered` may go out unsignaled: the device writes
//! no completion entry for it when it succeeds, and the connection reports it folded into the
//! next completion of its send queue (`Completion::covers`). That is sound on an RC QP because
//! its send queue completes in order: when a request completes, every request posted before
//! it has completed too (a failed one always writes an entry, signaled or not, and so do the
//! flushed ones after it). It saves the device a completion entry and the poller a CQ read per
//! covered WRITE: the replication ring's record WRITEs, each followed by a signaled doorbell.
//!
//! Bounds: a covered request is signaled anyway when it is the `COVERED_RUN_MAX`th unsignaled
//! one in a row, and when it takes the send queue's last slot (else a full queue of covered
//! requests would wait for a completion that never comes).
//!
//! Bookkeeping only: no verbs calls here (unit-tested without a device).

use std::collections::VecDeque;

/// The device writes a completion at least once every this many send requests (at most
/// `COVERED_RUN_MAX - 1` unsignaled in a row), so the send queue's slots and the regions the
/// requests hold are given back in steps of at most this many.
pub(crate) const COVERED_RUN_MAX: u32 = 32;

/// One QP's send requests in post order, from their post to the completion that reports them.
#[derive(Debug)]
pub(crate) struct SendOrder {
    /// (internal id, signaled), oldest first. At most the send queue's depth.
    posted: VecDeque<(u64, bool)>,
    /// Unsignaled requests posted since the last signaled one.
    unsignaled_run: u32,
}

impl SendOrder {
    pub(crate) fn new(send_max: u32) -> Self {
        SendOrder {
            posted: VecDeque::with_capacity(send_max as usize),
            unsignaled_run: 0,
        }
    }

    /// Whether the next send request asks for its own completion: always unless the caller
    /// lets it be `covered`; then when it would make the run `COVERED_RUN_MAX` long or is the
    /// one that fills the queue (`sends_with_it` of `send_max`).
    pub(crate) fn signal(&self, covered: bool, sends_with_it: u32, send_max: u32) -> bool {
        !covered || self.unsignaled_run + 1 >= COVERED_RUN_MAX || sends_with_it >= send_max
    }

    /// Records a request the QP accepted.
    pub(crate) fn posted(&mut self, internal: u64, signaled: bool) {
        self.posted.push_back((internal, signaled));
        self.unsignaled_run = if signaled { 0 } else { self.unsignaled_run + 1 };
    }

    /// A completion entry for send request `internal`: hands `release` every earlier request
    /// still listed (unsignaled ones that completed before it) and returns how many, or None
    /// if `internal` is not listed (the entry is then the caller's to report as it is).
    pub(crate) fn complete(&mut self, internal: u64, mut release: impl FnMut(u64)) -> Option<u32> {
        let at = self.posted.iter().position(|&(id, _)| id == internal)?;
        let mut covers = 0u32;
        for (id, signaled) in self.posted.drain(..=at) {
            if id == internal {
                break;
            }
            // A signaled request's own entry comes before any later request's (in order):
            // one still listed here means an entry was lost.
            if signaled {
                tracing::warn!(
                    internal = id,
                    "a signaled send request completed without its own entry"
                );
            }
            release(id);
            covers += 1;
        }
        Some(covers)
    }

    /// Requests posted and not yet reported.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.posted.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covered_requests_are_signaled_once_per_run_and_at_the_last_slot() {
        // Goal: a covered request goes unsignaled except as the 32nd of a run or when it fills
        // the queue; an uncovered one is always signaled and ends the run.
        let mut order = SendOrder::new(255);
        let mut signaled = Vec::new();
        for i in 0..70u64 {
            let s = order.signal(true, (i + 1) as u32, 255);
            order.posted(i, s);
            if s {
                signaled.push(i);
            }
        }
        assert_eq!(signaled, [31, 63]);
        assert!(order.signal(false, 71, 255));
        order.posted(70, true);
        // The run starts again after the signaled one.
        assert!(!order.signal(true, 72, 255));
        // The request that takes the last slot asks for its completion, covered or not.
        assert!(order.signal(true, 255, 255));
        assert!(!order.signal(true, 254, 255));
    }

    #[test]
    fn a_completion_reports_the_unsignaled_requests_before_it() {
        // Goal: the entry of request 3 stands for 0, 1 and 2 too (released, counted as
        // covers), not for 4; an entry for an unknown id changes nothing.
        let mut order = SendOrder::new(16);
        for i in 0..5u64 {
            order.posted(i, i == 3 || i == 4);
        }
        let mut released = Vec::new();
        assert_eq!(order.complete(3, |id| released.push(id)), Some(3));
        assert_eq!(released, [0, 1, 2]);
        assert_eq!(order.complete(99, |id| released.push(id)), None);
        assert_eq!(order.len(), 1);
        assert_eq!(order.complete(4, |id| released.push(id)), Some(0));
        assert_eq!(order.len(), 0);
    }

    #[test]
    fn a_failed_unsignaled_request_reports_the_ones_before_it() {
        // Goal: a covered request that fails writes its own (error) entry, and the flushed
        // ones after it each write theirs: every request is reported exactly once.
        let mut order = SendOrder::new(16);
        for i in 0..6u64 {
            order.posted(i, i == 5);
        }
        let mut reported = 0u32;
        // 2 fails; 3, 4 and 5 are flushed, each with its own entry.
        for id in 2..6u64 {
            reported += 1 + order.complete(id, |_| {}).unwrap();
        }
        assert_eq!(reported, 6);
        assert_eq!(order.len(), 0);
    }
}
