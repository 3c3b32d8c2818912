//! A busy-polling thread serving fabric clients (DESIGN §5): it runs each request to
//! completion on the thread that found it (progress, read, execute, write) and, when nothing
//! happened for `rdma-busy-poll-us`, stops polling: it blocks on its clients' completion
//! channels (verbs: each client's; libfabric's tcp: the listener endpoint's one CQ
//! descriptor) and its doorbell (rung for a new client, a woken blocked command, the close,
//! an arrival another poller routed to one of its clients), or, where the provider has no
//! descriptor to wait on (libfabric's shm), backs off step by step to short sleeps, so an
//! idle node does not burn a core.
//!
//! The spin phase yields the core at each empty turn instead of spinning in place: on a host
//! where the poller shares its core (clients, the node's other threads, a co-located
//! benchmark), a pure spin holds the core for its whole time slice while the thread that
//! would produce the next request waits for it. Measured by hand over ofi:shm on 2 cores (the
//! node's CPU around `operator bench -t get -P 1 -c 4`): pure spinning cost 7-10 us of server
//! CPU per `GET` and yielding 3.6-6 (TCP: 9); on a core of its own `sched_yield` returns at
//! once and the loop is a spin again.

use super::client::{FabricClient, READ_CHUNK};
use super::slot::PollerSlot;
use crate::node_state::stats::Stats;
use crate::server::Server;
use bus::idle::{wait_readable, Doorbell, IdleWait, WAIT_FDS_MAX};
use bus::Connection;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest sleep of an idle poller: bounds the added latency of the first request after a
/// quiet period.
const IDLE_SLEEP_MAX: Duration = Duration::from_millis(1);
/// First sleep after the spin phase; doubled up to [`IDLE_SLEEP_MAX`].
const IDLE_SLEEP_MIN: Duration = Duration::from_micros(20);
/// Longest block of an idle poller: its clients' timers (keepalives every 3 s, the silence
/// limit) run late by at most this, and the watchdog (`WEDGE_LIMIT`) sees a beat well within
/// its limit.
const IDLE_BLOCK_MAX: Duration = Duration::from_millis(100);
/// New clients taken from the accept thread per loop, so a connection storm cannot stall the
/// clients already served.
const ADMIT_PER_LOOP_MAX: usize = 64;

/// What the accept thread hands a poller.
pub struct Admission<C: Connection> {
    pub client: FabricClient<C>,
}

/// Runs until shutdown and the last client is gone.
pub fn run<C: Connection>(server: Arc<Server>, slot: Arc<PollerSlot<C>>) {
    let index = slot.index;
    let mut clients: Vec<FabricClient<C>> = Vec::new();
    let mut admitted = Vec::with_capacity(ADMIT_PER_LOOP_MAX);
    let mut scratch = vec![0u8; READ_CHUNK];
    // One clock read per loop serves both the streams' keepalives and the heartbeat.
    let started = slot.heart.epoch();
    let mut idle_since: Option<(Instant, Duration)> = None;
    let mut sleep = IDLE_SLEEP_MIN;
    let mut wait_fds = Vec::new();
    loop {
        let now = started.elapsed();
        slot.heart.beat_at(now);
        let mut busy = false;
        // Read before taking, so a client queued just before the close is still taken.
        let closed = slot.is_closed();
        slot.take(ADMIT_PER_LOOP_MAX, &mut admitted);
        for mut a in admitted.drain(..) {
            slot.client_arrived(&server.stats);
            if let Some(bell) = &slot.bell {
                a.client.attach_bell(bell);
            }
            clients.push(a.client);
            busy = true;
        }
        for c in clients.iter_mut() {
            busy |= c.turn(now, &mut scratch);
        }
        clients.retain_mut(|c| {
            if c.is_done() {
                c.finish();
                slot.client_left(&server.stats);
                false
            } else {
                true
            }
        });
        if closed && clients.is_empty() {
            tracing::debug!(poller = index, "fabric poller stopped");
            return;
        }
        if busy {
            idle_since = None;
            sleep = IDLE_SLEEP_MIN;
            continue;
        }
        // `rdma-busy-poll-us` may change at run time: read it once per idle period.
        let (since, spin) = *idle_since.get_or_insert_with(|| {
            let us = server.config.read().fabric.busy_poll_us;
            (Instant::now(), Duration::from_micros(us))
        });
        if since.elapsed() < spin {
            // Why not `spin_loop`: see the module doc.
            std::thread::yield_now();
            continue;
        }
        match block_while_idle(&slot, &mut clients, &mut wait_fds) {
            Idle::Blocked { by_bell } => {
                Stats::add(&server.stats.fabric_poller_blocks, 1);
                Stats::add(&server.stats.fabric_poller_bell_wakes, u64::from(by_bell));
            }
            // Polled again at once, but yielding first: a client that keeps answering
            // `Ready` without its turn doing anything must not make this a hard spin.
            Idle::WorkWaiting => {
                Stats::add(&server.stats.fabric_poller_idle_retries, 1);
                std::thread::yield_now()
            }
            Idle::CannotBlock => {
                Stats::add(&server.stats.fabric_poller_sleeps, 1);
                std::thread::sleep(sleep);
                sleep = (sleep * 2).min(IDLE_SLEEP_MAX);
            }
        }
    }
}

/// How an idle period ended.
enum Idle {
    /// Blocked until a completion, the doorbell (`by_bell`) or [`IDLE_BLOCK_MAX`].
    Blocked { by_bell: bool },
    /// Something came in before the poller could block: poll again.
    WorkWaiting,
    /// A client's provider has no descriptor to wait on, or a client needs a timed look.
    CannotBlock,
}

/// Blocks the idle poller on its doorbell and every client's completion channel, for at most
/// [`IDLE_BLOCK_MAX`] or until the earliest blocked command's timeout.
///
/// The order is what makes it safe: the bell is drained first, then each client is armed
/// (a completion after its arming makes its descriptor readable) and its wake-up flag looked
/// at, then the queue of new clients: a wake-up or admission before the drain is seen by
/// those looks, one after it rings the bell again.
fn block_while_idle<C: Connection>(
    slot: &PollerSlot<C>,
    clients: &mut [FabricClient<C>],
    fds: &mut Vec<RawFd>,
) -> Idle {
    let Some(bell) = &slot.bell else {
        return Idle::CannotBlock;
    };
    // From here until the wait ends, a shared endpoint that hands one of our clients
    // something (another poller read it) rings the bell (see `bus::idle::Doorbell`).
    bell.begin_wait();
    let idle = look_then_block(slot, bell, clients, fds);
    bell.end_wait();
    idle
}

fn look_then_block<C: Connection>(
    slot: &PollerSlot<C>,
    bell: &Doorbell,
    clients: &mut [FabricClient<C>],
    fds: &mut Vec<RawFd>,
) -> Idle {
    bell.drain();
    fds.clear();
    fds.push(bell.fd());
    let mut timeout = IDLE_BLOCK_MAX;
    let now = Instant::now();
    for c in clients.iter_mut() {
        match c.arm_idle_wait(fds) {
            IdleWait::Armed => {}
            IdleWait::Ready => return Idle::WorkWaiting,
            IdleWait::Unsupported => return Idle::CannotBlock,
        }
        if let Some(deadline) = c.block_deadline() {
            timeout = timeout.min(deadline.saturating_duration_since(now));
        }
        if fds.len() > WAIT_FDS_MAX {
            return Idle::CannotBlock;
        }
    }
    // A close is looked at by the loop (which ends once the clients are gone; they are
    // killed, which wakes them): blocking meanwhile is right, spinning would not be.
    if slot.has_queued() {
        return Idle::WorkWaiting;
    }
    match wait_readable(fds, timeout) {
        Ok(_) => Idle::Blocked {
            // Drained by the next block; a look here only tells the counter.
            by_bell: bell.drain(),
        },
        Err(e) => {
            tracing::warn!(error = %e, "fabric poller could not block; sleeping instead");
            Idle::CannotBlock
        }
    }
}
