//! The polling threads of one fabric listener, owned by its accept thread: admission of new
//! clients round-robin, and a watchdog for pollers stuck inside one call.
//!
//! Why a watchdog: libfabric 1.17's shm provider (Debian bookworm's) guards each endpoint's
//! shared-memory region with a process-shared spinlock that both sides take. A peer killed
//! while holding it (SIGKILL in the middle of its send or progress) leaves it held forever, and
//! the next call of ours that touches that region spins forever. Nothing can unstick that
//! thread, but its other clients need not be the only ones it takes down: a poller silent for
//! [`WEDGE_LIMIT`] gets no new clients, the clients queued for it go to a healthy poller, and
//! when no healthy poller is left a replacement starts (at most [`REPLACEMENTS_MAX`]).
//! A poller that beats again (it was only running one very long command) is healthy again.

use super::poller::{self, Admission};
use super::slot::{Heartbeat, PollerSlot};
use crate::server::Server;
use bus::Connection;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Silence after which a poller is judged stuck. Its loop starts at least every millisecond
/// when idle, so only one call (a provider call or one command) that long can cause it.
pub const WEDGE_LIMIT: Duration = Duration::from_secs(2);
/// Replacement pollers one listener may start in its life: each stuck thread keeps spinning,
/// so a node that keeps meeting the fault should run out of replacements, not of cores.
pub const REPLACEMENTS_MAX: usize = 4;
/// How long shutdown waits for a poller to finish before leaving it behind.
const JOIN_WAIT: Duration = Duration::from_secs(5);

/// A poller thread as shutdown sees it.
pub struct PollerThread {
    pub heart: Arc<Heartbeat>,
    pub handle: JoinHandle<()>,
}

pub struct Pollers<C: Connection> {
    server: Arc<Server>,
    slots: Vec<Arc<PollerSlot<C>>>,
    threads: Vec<PollerThread>,
    next: usize,
    replacements: usize,
}

impl<C: Connection> Pollers<C> {
    /// Starts `count` pollers.
    pub fn start(server: Arc<Server>, count: usize) -> std::io::Result<Self> {
        let mut p = Pollers {
            server,
            slots: Vec::new(),
            threads: Vec::new(),
            next: 0,
            replacements: 0,
        };
        for _ in 0..count.max(1) {
            p.spawn()?;
        }
        Ok(p)
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let index = self.slots.len();
        let slot = Arc::new(PollerSlot::new(index));
        slot.heart.beat();
        let server = self.server.clone();
        let theirs = slot.clone();
        let handle = std::thread::Builder::new()
            .name(format!("node-fabric-{index}"))
            .spawn(move || poller::run::<C>(server, theirs))?;
        self.threads.push(PollerThread {
            heart: slot.heart.clone(),
            handle,
        });
        self.slots.push(slot);
        Ok(())
    }

    /// Hands a client to the next healthy poller (to any, if none is healthy).
    pub fn admit(&mut self, a: Admission<C>) {
        let n = self.slots.len();
        let healthy = (0..n)
            .map(|k| (self.next + k) % n)
            .find(|&i| !self.slots[i].heart.is_wedged());
        let i = healthy.unwrap_or(self.next % n);
        self.next = i + 1;
        self.slots[i].push(a);
    }

    /// Judges every poller by its heartbeat; call a few times a second.
    pub fn watch(&mut self) {
        let limit = WEDGE_LIMIT.as_millis() as u64;
        let mut orphans = Vec::new();
        for slot in &self.slots {
            let silent = slot.heart.silent_ms();
            let wedged = slot.heart.is_wedged();
            if !wedged && silent > limit {
                slot.heart.set_wedged(true);
                // Stranded first: a reader that sees the stall counted sees its clients moved.
                let stranded = slot.set_stranded(&self.server.stats, true);
                crate::node_state::stats::Stats::add(&self.server.stats.fabric_poller_stalls, 1);
                tracing::error!(
                    poller = slot.index,
                    silent_ms = silent,
                    stranded,
                    "fabric poller stuck inside one call (a peer killed while holding a \
                     provider lock?); its clients are stranded until it returns, new clients \
                     go elsewhere"
                );
                orphans.extend(slot.take_all());
            } else if wedged && silent <= limit {
                slot.heart.set_wedged(false);
                let clients = slot.set_stranded(&self.server.stats, false);
                tracing::warn!(poller = slot.index, clients, "fabric poller running again");
            }
        }
        let all_wedged = self.slots.iter().all(|s| s.heart.is_wedged());
        if all_wedged && self.replacements < REPLACEMENTS_MAX {
            self.replacements += 1;
            match self.spawn() {
                Ok(()) => tracing::warn!(
                    replacements = self.replacements,
                    "started a replacement fabric poller"
                ),
                Err(e) => tracing::error!(error = %e, "starting a replacement fabric poller"),
            }
        }
        for a in orphans {
            self.admit(a);
        }
    }

    /// No more admissions: pollers stop once their clients are gone.
    pub fn close(self) -> Vec<PollerThread> {
        for slot in &self.slots {
            slot.close();
        }
        self.threads
    }
}

/// Waits for the pollers to stop, but not for ones stuck for good.
pub fn join_all(threads: Vec<PollerThread>) {
    let deadline = Instant::now() + JOIN_WAIT;
    for t in threads {
        while !t.handle.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if t.handle.is_finished() {
            let _ = t.handle.join();
        } else {
            tracing::warn!(
                wedged = t.heart.is_wedged(),
                "a fabric poller did not stop; leaving it"
            );
        }
    }
}
