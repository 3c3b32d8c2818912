//! What the accept thread and one polling thread share: the queue of clients admitted to the
//! poller, and the poller's heartbeat, by which the accept thread's watchdog tells a poller
//! that is stuck inside one call (see `watchdog.rs`) from one that is merely busy.

use super::poller::Admission;
use bus::Connection;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::Instant;

pub struct PollerSlot<C: Connection> {
    pub index: usize,
    /// Clients handed to this poller and not yet taken by it.
    queue: Mutex<VecDeque<Admission<C>>>,
    /// `queue.len()`, read without the lock on every loop of a busy-polling thread.
    queued: AtomicUsize,
    pub heart: Arc<Heartbeat>,
    /// The accept thread is gone: no more admissions will come.
    closed: AtomicBool,
}

/// A poller's sign of life, kept apart from the (generic) queue so the listener can judge its
/// threads at shutdown.
#[derive(Debug)]
pub struct Heartbeat {
    /// Milliseconds since `epoch` at the start of the poller's latest loop.
    beat_ms: AtomicU64,
    epoch: Instant,
    /// The watchdog found the poller stuck; it gets no new clients until it beats again.
    wedged: AtomicBool,
}

impl Heartbeat {
    fn new() -> Self {
        Heartbeat {
            beat_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            wedged: AtomicBool::new(false),
        }
    }

    /// The instant heartbeat times count from.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Called by the poller at the start of every loop, with the time since [`Self::epoch`].
    pub fn beat_at(&self, since_epoch: std::time::Duration) {
        self.beat_ms.store(since_epoch.as_millis() as u64, Relaxed);
    }

    /// A beat now (a poller about to start).
    pub fn beat(&self) {
        self.beat_at(self.epoch.elapsed());
    }

    /// How long since the poller last started a loop.
    pub fn silent_ms(&self) -> u64 {
        self.now_ms().saturating_sub(self.beat_ms.load(Relaxed))
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn is_wedged(&self) -> bool {
        self.wedged.load(Relaxed)
    }

    pub fn set_wedged(&self, wedged: bool) {
        self.wedged.store(wedged, Relaxed);
    }
}

impl<C: Connection> PollerSlot<C> {
    pub fn new(index: usize) -> Self {
        PollerSlot {
            index,
            queue: Mutex::new(VecDeque::new()),
            queued: AtomicUsize::new(0),
            heart: Arc::new(Heartbeat::new()),
            closed: AtomicBool::new(false),
        }
    }

    pub fn push(&self, a: Admission<C>) {
        let mut q = self.queue.lock();
        q.push_back(a);
        self.queued.store(q.len(), Release);
    }

    /// Takes up to `max` queued clients (none without taking the lock when the queue is empty).
    pub fn take(&self, max: usize, into: &mut Vec<Admission<C>>) {
        if self.queued.load(Acquire) == 0 {
            return;
        }
        let mut q = self.queue.lock();
        let n = q.len().min(max);
        into.extend(q.drain(..n));
        self.queued.store(q.len(), Release);
    }

    /// Everything still queued: the watchdog hands it to another poller.
    pub fn take_all(&self) -> Vec<Admission<C>> {
        let mut q = self.queue.lock();
        self.queued.store(0, Release);
        q.drain(..).collect()
    }

    pub fn close(&self) {
        self.closed.store(true, Release);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Acquire)
    }
}
