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

/// One QP's unsignaled send requests in post order, from their post to the completion that
/// reports them. Signaled requests are only numbered: a connection that never posts covered
/// WRITEs (a Stream) never touches the list.
#[derive(Debug, Default)]
pub(crate) struct SendOrder {
    /// (post number, internal id) of unsignaled requests not yet reported, oldest first. At
    /// most the send queue's depth (each holds a send slot until reported).
    unsignaled: VecDeque<(u64, u64)>,
    /// The next request's post number.
    next_seq: u64,
    /// Unsignaled requests posted since the last signaled one.
    unsignaled_run: u32,
}

impl SendOrder {
    /// Whether the next send request asks for its own completion: always unless the caller
    /// lets it be `covered`; then when it would make the run `COVERED_RUN_MAX` long or is the
    /// one that fills the queue (`sends_with_it` of `send_max`).
    pub(crate) fn signal(&self, covered: bool, sends_with_it: u32, send_max: u32) -> bool {
        !covered || self.unsignaled_run + 1 >= COVERED_RUN_MAX || sends_with_it >= send_max
    }

    /// Records a request the QP accepted; returns its post number.
    pub(crate) fn posted(&mut self, internal: u64, signaled: bool) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        if signaled {
            self.unsignaled_run = 0;
        } else {
            self.unsignaled.push_back((seq, internal));
            self.unsignaled_run += 1;
        }
        seq
    }

    /// A completion entry for the send request numbered `seq`: hands `release` every
    /// unsignaled request posted before it (they completed before it, in order) and returns
    /// how many. The request itself leaves the list too if it was unsignaled (a failed one
    /// writes its own entry).
    pub(crate) fn complete(&mut self, seq: u64, mut release: impl FnMut(u64)) -> u32 {
        let mut covers = 0u32;
        while let Some(&(s, id)) = self.unsignaled.front() {
            if s > seq {
                break;
            }
            self.unsignaled.pop_front();
            if s < seq {
                release(id);
                covers += 1;
            }
        }
        covers
    }

    /// Unsignaled requests posted and not yet reported.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.unsignaled.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covered_requests_are_signaled_once_per_run_and_at_the_last_slot() {
        // Goal: a covered request goes unsignaled except as the 32nd of a run or when it fills
        // the queue; an uncovered one is always signaled and ends the run.
        let mut order = SendOrder::default();
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
        // covers), not for 5; the signaled request 4 after it covers nothing.
        let mut order = SendOrder::default();
        let seqs: Vec<u64> = (0..6u64)
            .map(|i| order.posted(100 + i, i == 3 || i == 4))
            .collect();
        let mut released = Vec::new();
        assert_eq!(order.complete(seqs[3], |id| released.push(id)), 3);
        assert_eq!(released, [100, 101, 102]);
        assert_eq!(order.len(), 1);
        assert_eq!(order.complete(seqs[4], |id| released.push(id)), 0);
        assert_eq!(order.len(), 1, "request 5 still waits for a later entry");
    }

    #[test]
    fn a_failed_unsignaled_request_reports_the_ones_before_it() {
        // Goal: a covered request that fails writes its own (error) entry, and the flushed
        // ones after it each write theirs: every request is reported exactly once.
        let mut order = SendOrder::default();
        let seqs: Vec<u64> = (0..6u64).map(|i| order.posted(i, i == 5)).collect();
        let mut reported = 0u32;
        // 2 fails; 3, 4 and 5 are flushed, each with its own entry.
        for &seq in &seqs[2..] {
            reported += 1 + order.complete(seq, |_| {});
        }
        assert_eq!(reported, 6);
        assert_eq!(order.len(), 0);
    }
}
