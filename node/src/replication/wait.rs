//! Clients waiting for replicas to acknowledge their writes: `WAIT numreplicas timeout`, and a
//! synchronous mode where a write is answered only once enough replicas acknowledged it. Both
//! are a waiter on an offset, answered when [`ReplicaAcks::count_acked`] reaches the number or
//! the deadline passes, whichever comes first (Redis's `processClientsWaitingReplicas`).

use super::ack::ReplicaAcks;

/// Clients that may wait at once: every waiter is a blocked client already bounded by
/// `maxclients` (10 000 by default); this bounds the queue should that limit be raised.
pub const WAITERS_MAX: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    #[error("ERR too many clients waiting for replicas ({WAITERS_MAX})")]
    TooManyWaiters,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter<C> {
    pub client: C,
    /// The client's last write's end offset (Redis's `woff`).
    pub offset: u64,
    pub numreplicas: usize,
    /// Unix ms after which it is answered with whatever count it has; `None`: no timeout
    /// (`WAIT n 0`).
    pub deadline_ms: Option<u64>,
}

/// A waiter's answer: the client and how many replicas acknowledged its offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitDone<C> {
    pub client: C,
    pub acked: usize,
    pub timed_out: bool,
}

#[derive(Debug, Clone)]
pub struct WaitQueue<C> {
    waiting: Vec<Waiter<C>>,
}

impl<C> Default for WaitQueue<C> {
    fn default() -> Self {
        WaitQueue {
            waiting: Vec::new(),
        }
    }
}

impl<C> WaitQueue<C> {
    /// Starts a wait, or answers it at once when already satisfied (`Ok(Some(..))`), as WAIT
    /// replies immediately when enough replicas acknowledged.
    pub fn wait<K: Ord>(
        &mut self,
        waiter: Waiter<C>,
        acks: &ReplicaAcks<K>,
    ) -> Result<Option<WaitDone<C>>, WaitError> {
        let acked = acks.count_acked(waiter.offset);
        if acked >= waiter.numreplicas {
            return Ok(Some(WaitDone {
                client: waiter.client,
                acked,
                timed_out: false,
            }));
        }
        if self.waiting.len() >= WAITERS_MAX {
            return Err(WaitError::TooManyWaiters);
        }
        self.waiting.push(waiter);
        Ok(None)
    }

    /// Answers every waiter that is now satisfied or past its deadline, in arrival order.
    /// Call after acknowledgements move and when [`next_deadline`](Self::next_deadline)
    /// passes.
    pub fn poll<K: Ord>(&mut self, acks: &ReplicaAcks<K>, now_ms: u64) -> Vec<WaitDone<C>> {
        let mut done = Vec::new();
        let mut still = Vec::with_capacity(self.waiting.len());
        for w in self.waiting.drain(..) {
            let acked = acks.count_acked(w.offset);
            let timed_out = w.deadline_ms.is_some_and(|d| now_ms >= d);
            if acked >= w.numreplicas || timed_out {
                done.push(WaitDone {
                    client: w.client,
                    acked,
                    timed_out: acked < w.numreplicas,
                });
            } else {
                still.push(w);
            }
        }
        self.waiting = still;
        done
    }

    /// Drops a client's waits (it disconnected).
    pub fn cancel(&mut self, client: &C)
    where
        C: PartialEq,
    {
        self.waiting.retain(|w| &w.client != client);
    }

    /// The earliest deadline, for the caller's timer.
    pub fn next_deadline(&self) -> Option<u64> {
        self.waiting.iter().filter_map(|w| w.deadline_ms).min()
    }

    /// The lowest offset anyone waits for: the point up to which the caller should ask for
    /// fresh acknowledgements (Redis sends `REPLCONF GETACK`).
    pub fn lowest_offset(&self) -> Option<u64> {
        self.waiting.iter().map(|w| w.offset).min()
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acks_at(offsets: &[u64]) -> ReplicaAcks<usize> {
        let mut acks = ReplicaAcks::default();
        for (i, &o) in offsets.iter().enumerate() {
            acks.attach(i, 0, 0).unwrap();
            acks.set_online(&i, 0);
            acks.observe(&i, o, 1_000, 0);
        }
        acks
    }

    fn waiter(
        client: u32,
        offset: u64,
        numreplicas: usize,
        deadline_ms: Option<u64>,
    ) -> Waiter<u32> {
        Waiter {
            client,
            offset,
            numreplicas,
            deadline_ms,
        }
    }

    #[test]
    fn satisfied_waits_answer_at_once() {
        let mut q = WaitQueue::default();
        let acks = acks_at(&[100, 50]);
        let done = q.wait(waiter(1, 60, 1, Some(10)), &acks).unwrap();
        assert_eq!(
            done,
            Some(WaitDone {
                client: 1,
                acked: 1,
                timed_out: false
            })
        );
        // WAIT 0 is always satisfied.
        assert!(q.wait(waiter(2, 999, 0, None), &acks).unwrap().is_some());
        assert!(q.is_empty());
    }

    #[test]
    fn waits_end_on_acks_or_deadline() {
        let mut q = WaitQueue::default();
        let mut acks = acks_at(&[10, 10]);
        assert!(q
            .wait(waiter(1, 20, 2, Some(500)), &acks)
            .unwrap()
            .is_none());
        assert!(q.wait(waiter(2, 30, 1, None), &acks).unwrap().is_none());
        assert!(q
            .wait(waiter(3, 40, 2, Some(300)), &acks)
            .unwrap()
            .is_none());
        assert_eq!(
            (q.next_deadline(), q.lowest_offset()),
            (Some(300), Some(20))
        );
        assert!(q.poll(&acks, 100).is_empty());
        acks.observe(&0, 35, 1_000, 200);
        // Client 2 needs one replica at 30: done. Client 1 needs two at 20: not yet.
        assert_eq!(
            q.poll(&acks, 200),
            vec![WaitDone {
                client: 2,
                acked: 1,
                timed_out: false
            }]
        );
        // Client 3's deadline passes with one replica of two.
        assert_eq!(
            q.poll(&acks, 300),
            vec![WaitDone {
                client: 3,
                acked: 0,
                timed_out: true
            }]
        );
        acks.observe(&1, 25, 1_000, 400);
        assert_eq!(
            q.poll(&acks, 400),
            vec![WaitDone {
                client: 1,
                acked: 2,
                timed_out: false
            }]
        );
        assert!(q.is_empty());
    }

    #[test]
    fn cancel_and_bound() {
        let mut q = WaitQueue::default();
        let acks = acks_at(&[]);
        q.wait(waiter(7, 1, 1, None), &acks).unwrap();
        q.cancel(&7);
        assert!(q.is_empty());
        for i in 0..WAITERS_MAX as u32 {
            q.wait(waiter(i, 1, 1, None), &acks).unwrap();
        }
        assert_eq!(
            q.wait(waiter(0, 1, 1, None), &acks),
            Err(WaitError::TooManyWaiters)
        );
    }
}
