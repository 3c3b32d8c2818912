//! What the accept thread and one polling thread share: the queue of clients admitted to the
//! poller, the poller's heartbeat, by which the accept thread's watchdog tells a poller that
//! is stuck inside one call (see `pollers.rs`) from one that is merely busy, and the count of
//! the clients it serves.
//!
//! Why the count lives here: INFO's `fabric_connected_clients` counts clients a poller
//! serves. The clients of a stuck poller are served by nobody (a shm call spinning on a lock
//! a killed peer held never returns), so the watchdog moves them from that count to
//! `fabric_stranded_clients`, and back if the poller runs again. Admission, departure and
//! those moves take one lock, so the two gauges never count a client twice or below zero.

use super::poller::Admission;
use crate::node_state::stats::Stats;
use bus::idle::Doorbell;
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
    served: Mutex<Served>,
    /// Rung when a client is queued or the slot closes, so an idle poller blocked on its
    /// clients' completion channels wakes for them. `None` if the eventfd could not be made:
    /// the poller then sleeps in short steps while idle, as on providers without channels.
    pub bell: Option<Arc<Doorbell>>,
}

/// The clients a poller holds, and whether the watchdog counts them as stranded.
#[derive(Debug, Default)]
struct Served {
    clients: u64,
    stranded: bool,
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
            served: Mutex::new(Served::default()),
            bell: match Doorbell::new() {
                Ok(bell) => Some(Arc::new(bell)),
                Err(e) => {
                    tracing::warn!(poller = index, error = %e, "no doorbell; the poller sleeps while idle");
                    None
                }
            },
        }
    }

    /// The poller took a client in.
    pub fn client_arrived(&self, stats: &Stats) {
        let mut s = self.served.lock();
        s.clients += 1;
        Stats::add(Self::gauge(stats, s.stranded), 1);
    }

    /// A client of the poller is gone.
    pub fn client_left(&self, stats: &Stats) {
        let mut s = self.served.lock();
        assert!(s.clients > 0, "a poller lost a client it did not count");
        s.clients -= 1;
        Self::gauge(stats, s.stranded).fetch_sub(1, Relaxed);
    }

    /// The watchdog judged the poller stuck (`true`) or running again (`false`): its
    /// clients move between the served and the stranded count. Returns how many they are.
    pub fn set_stranded(&self, stats: &Stats, stranded: bool) -> u64 {
        let mut s = self.served.lock();
        if s.stranded != stranded {
            Self::gauge(stats, s.stranded).fetch_sub(s.clients, Relaxed);
            Stats::add(Self::gauge(stats, stranded), s.clients);
            s.stranded = stranded;
        }
        s.clients
    }

    fn gauge(stats: &Stats, stranded: bool) -> &AtomicU64 {
        if stranded {
            &stats.fabric_stranded_clients
        } else {
            &stats.fabric_connected_clients
        }
    }

    pub fn push(&self, a: Admission<C>) {
        let mut q = self.queue.lock();
        q.push_back(a);
        self.queued.store(q.len(), Release);
        drop(q);
        self.ring();
    }

    /// Whether clients wait to be taken (a poller's last look before it blocks).
    pub fn has_queued(&self) -> bool {
        self.queued.load(Acquire) > 0
    }

    fn ring(&self) {
        if let Some(bell) = &self.bell {
            bell.ring();
        }
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
        self.ring();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Acquire)
    }
}
