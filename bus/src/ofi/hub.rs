//! A hub: one RDM endpoint that many connections share, each a peer in its address vector.
//!
//! Why: tcp;ofi_rxm gives every endpoint its own buffer pools (a shared receive context of
//! 4,096 x 16 KiB buffers and more: ~86 MiB per endpoint measured), so an endpoint per accepted
//! connection made every client, authenticated or not, cost the node that much. A listener
//! now owns one hub and every connection it accepts is a handle on it (`conn.rs`): per peer
//! there remain libfabric's connection to it (rxm conn, tcp endpoint and socket) and the
//! connection's own regions.
//!
//! Demultiplexing: operations are posted with their connection's `owner` id, which their
//! completion carries back (`rdm.rs` slots); arrivals (SENDs and IMM notes) are routed by the
//! sender's address from `fi_cq_readfrom` (FI_SOURCE). An arrival from an address that is not
//! a connection of this hub (never inserted, or removed on close) is dropped at once.
//!
//! What one peer can do to the others is bounded:
//! - **Arrivals**: each connection's inbox holds at most its posted receives (the most it has
//!   had posted at once: 32 for a pre-auth stream, a Stream's 224 after) plus
//!   [`ARRIVALS_BEYOND_RECEIVES`], and [`ARRIVAL_BYTES_MAX`] bytes; a peer that sends past it
//!   gets its connection failed with a protocol error at its next poll, while the other
//!   peers' arrivals go on being routed.
//! - **Transmit slots** ([`TxLimits`]): an operation holds one of the hub's slots from its
//!   post until its connection has taken its completion. One connection holds at most
//!   `per_connection`, and once fewer than `reserve` are free only connections holding fewer
//!   than [`TX_FAIR_SHARE`] may take more: connections whose operations stay in flight (a
//!   peer that stops polling keeps its WRITEs pending) or that do not take their completions
//!   meet `Full`, the others still get slots.
//! - **IMM notes** wait per peer (`rdm.rs`): a backed-up peer holds back only its own.
//! - **Errors**: a failed operation completes on its own connection; a note the provider
//!   refuses fails its peer's connection only. Only errors of the endpoint itself (reading
//!   the completion queue, re-posting a receive) fail every connection of the hub.
//!
//! Any connection's `poll` drives the whole endpoint and routes what it finds to everyone's
//! inbox, so peers progress whichever connection the caller polls. The endpoint sits behind a
//! mutex: connections of one hub polled from several threads take turns, and nobody holds
//! it while waiting (`send_until` retries with the lock released between attempts).
//!
//! Removing a peer: on tcp its address leaves the address vector when its connection
//! closes. shm 1.17 cannot be asked that safely (`Hub::detach`), so a shm hub keeps every
//! address it was given ([`Mode::SharedKeepingAddresses`]) and serves a bounded number of
//! connections over its life (the listener then opens the next one, `listener.rs`).
//!
//! Blocking while idle (`Hub::arm_idle_wait`): on tcp the endpoint's CQ has a wait
//! descriptor, and a poller that finds all its connections' inboxes empty blocks on it after
//! `fi_trywait`. Since any connection's poll routes arrivals for all, a poller may route one
//! into the inbox of a connection whose poller already looked and is about to block (or is
//! blocked: the socket it would have woken on was read): each inbox may carry its poller's
//! [`Doorbell`], rung when something is delivered to it while that poller waits. The look
//! and the delivery both hold the hub's lock, and the poller marks itself waiting before
//! its looks, so either the look finds the delivery or the delivery finds it waiting.
//!
//! A connector's connection has a private hub with its one peer (`private`): everything that
//! arrives on it is that peer's, as before hubs existed (the handshake's ACCEPT and the
//! messages behind it come from an address not yet in the vector).
//!
//! An unresponsive hub (shm): shm 1.17 guards an endpoint's region with a process-shared
//! spinlock that its peers take too. A peer killed while holding it leaves it held for good,
//! and the thread of ours whose call next touches the region spins inside libfabric for
//! ever, holding the hub's mutex. Nothing gets that thread back, but nobody else need wait
//! for it: on a shm hub the mutex is waited for at most [`HUB_LOCK_PATIENCE`] during which
//! nobody gets it (plus a short grace). A caller that waits that long marks the hub
//! unresponsive; from then on every call on it fails at once
//! (each connection with a `Closed` error, so its poller closes it), its connections' drops
//! skip the detach, and the listener opens a new hub for the next connection.

use std::collections::{HashMap, VecDeque};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use crate::error::BusError;
use crate::idle::{Doorbell, IdleWait};
use crate::provider::{Op, WorkError};

use super::domain::Domain;
use super::endpoint::CqWait;
use super::rdm::{Event, RdmCore, IMM_NOTE_LEN};
use super::sys::{self, FiAddr};

/// Completions read from the endpoint per poll of any of its connections.
const HUB_POLL_BATCH: usize = 32;

/// Further full batches one poll reads while the endpoint keeps returning full ones (a busy
/// hub's one read per round must keep up with every connection's completions).
const HUB_READS_PER_POLL: usize = 3;

/// Pause between attempts of `send_until` (the hub is unlocked meanwhile).
const SEND_RETRY_SLEEP: Duration = Duration::from_micros(50);

/// Longest wait for a shm hub's mutex, while nobody else gets it either, before the hub is
/// taken as unresponsive (see the module doc). On shm a poll holds it for one read of at most
/// [`HUB_POLL_BATCH`] completions and their routing, a post for one provider call:
/// microseconds, or a scheduler slice or two when the holder is preempted on a loaded host.
/// A wrong judgement costs the hub's connections (they are closed) and one more hub: a second
/// is far beyond any hold but a stuck call's.
pub const HUB_LOCK_PATIENCE: Duration = Duration::from_secs(1);

/// A last wait after [`HUB_LOCK_PATIENCE`] ran out with nobody taking the mutex meanwhile:
/// a node stopped as a whole (SIGSTOP, a debugger, a paused VM) wakes its waiters past their
/// patience at the same moment as the holder, which then needs to be scheduled once to let go.
const HUB_LOCK_GRACE: Duration = Duration::from_millis(200);

/// Arrivals (SENDs, IMM notes, failed receives) a connection may have waiting beyond the
/// receives it has posted: what the provider may deliver between a receive's completion and
/// its re-posting, and what a streaming peer may run ahead of a busy node. A Stream's
/// sender bounds its WRITEs in flight by its own completions, which on tcp and shm are
/// local (at transmit, at post), so a client flushing many small writes while the node is
/// busy with one slow command may be that far ahead: 1,024 (with a Stream's 224 receives,
/// more than the 1,024 + 64 allowed when a Stream posted 1,024). Each waiting note is a few
/// bytes; SEND payload is bounded by [`ARRIVAL_BYTES_MAX`] anyway. On verbs such a peer
/// meets RNR NAKs and retries instead.
pub const ARRIVALS_BEYOND_RECEIVES: usize = 1024;

/// Bytes of SEND payload one connection may have waiting (in its inbox, or arrived before a
/// receive was posted): a peer that keeps within its posted receives (control messages of
/// 32 bytes, at most `rdma-recv-wr` of them) never comes near it.
pub const ARRIVAL_BYTES_MAX: usize = 64 * 1024;

/// Operations in flight one connection may keep once its hub runs short of slots (fewer than
/// `TxLimits::reserve` free): enough for a request's reply and its control messages.
pub const TX_FAIR_SHARE: usize = 16;

/// How one hub's transmit slots are shared among its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxLimits {
    /// Slots of the hub, all connections together.
    pub slots: usize,
    /// Slots one connection may hold (operations posted whose completion it has not taken).
    pub per_connection: usize,
    /// Free slots kept for connections holding fewer than [`TX_FAIR_SHARE`].
    pub reserve: usize,
}

/// The most arrivals `receives` posted receives allow to wait.
pub fn arrivals_allowed(receives: usize) -> usize {
    receives + ARRIVALS_BEYOND_RECEIVES
}

/// What one attached connection needs from the hub.
#[derive(Debug)]
pub struct Attached {
    /// Its id in the hub (carried by its operations' completions).
    pub owner: u64,
    /// Its peer's entry in the address vector.
    pub peer_fi: FiAddr,
    /// The most receives the connection has had posted at once; it raises it as it posts
    /// more, and the hub bounds its inbox by it (no lock needed: only ever grows).
    pub receives: Arc<AtomicUsize>,
}

/// What the hub hands a connection.
#[derive(Debug)]
pub enum Delivery {
    /// One of its operations finished.
    Done {
        wr_id: u64,
        op: Op,
        status: Result<(), WorkError>,
    },
    /// Its peer's SEND, copied out of the hub's bounce buffer.
    Send(Vec<u8>),
    /// Its peer's WRITE WITH IMM (the note that follows the data).
    Imm { imm: u32, len: usize },
    /// A receive for it failed.
    RecvFailed(WorkError),
}

impl Delivery {
    fn is_arrival(&self) -> bool {
        !matches!(self, Delivery::Done { .. })
    }
}

/// Why a connection fails at its next poll.
#[derive(Debug)]
enum Fault {
    /// Its peer sent past the inbox limits; what it sends after is dropped.
    Flooded,
    /// The provider refused something for this peer only (an IMM note).
    Failed(String),
}

#[derive(Default)]
struct Inbox {
    items: VecDeque<Delivery>,
    arrivals: usize,
    bytes: usize,
    receives: Arc<AtomicUsize>,
    /// Slots this connection holds: operations posted whose completion it has not taken.
    tx_held: usize,
    /// The hub's `reads` at this connection's last poll.
    reads_seen: u64,
    fault: Option<Fault>,
    /// The doorbell of the thread that polls this connection, rung on a delivery while it
    /// waits (see the module doc).
    bell: Option<Arc<Doorbell>>,
}

impl Inbox {
    fn push(&mut self, delivery: Delivery) {
        self.items.push_back(delivery);
        self.wake();
    }

    /// Its poller has something to look at (a delivery, or a fault its next poll reports).
    fn wake(&self) {
        if let Some(bell) = &self.bell {
            bell.ring_if_waiting();
        }
    }
}

/// A poller's connection left the hub: if it was its last one here and it waits on the
/// descriptor for the others, they are woken to take the role (it may never poll this hub
/// again, so their arrivals would wait for their wait's bound).
fn release_descriptor_if_last(s: &mut HubState, bell: Option<&Arc<Doorbell>>) {
    let (Some(gone), Some((holder, _))) = (bell, &s.descriptor_waiter) else {
        return;
    };
    if !Arc::ptr_eq(gone, holder) {
        return;
    }
    let still_here = s
        .inboxes
        .values()
        .any(|i| i.bell.as_ref().is_some_and(|b| Arc::ptr_eq(b, gone)));
    if !still_here {
        s.descriptor_waiter = None;
        for inbox in s.inboxes.values() {
            inbox.wake();
        }
    }
}

fn unresponsive_error() -> BusError {
    BusError::Closed(
        "ofi hub unresponsive (a call on its endpoint never returned; see hub.rs)".into(),
    )
}

/// The endpoint itself failed: every connection fails at its next poll, so every waiting
/// poller is woken.
fn break_hub(s: &mut HubState, reason: String) {
    s.broken = Some(reason);
    for inbox in s.inboxes.values() {
        inbox.wake();
    }
}

struct HubState {
    core: RdmCore,
    /// Connection inboxes by owner id.
    inboxes: HashMap<u64, Inbox>,
    /// Owner id of each peer address.
    owner_of: HashMap<FiAddr, u64>,
    next_owner: u64,
    tx: TxLimits,
    /// Slots held by all connections together (the sum of their `tx_held`).
    tx_held: usize,
    private: bool,
    /// Peers' addresses stay in the address vector after they detach (see [`Mode`]).
    keep_addresses: bool,
    scratch: VecDeque<Event>,
    /// Arrivals dropped because no connection of this hub had sent them.
    strays: u64,
    /// Set when the endpoint itself failed: every connection fails with it.
    broken: Option<String>,
    /// Reads of the endpoint so far (see [`Hub::poll`]).
    reads: u64,
    /// Whether a poll skips reading when another connection read since (tcp; see
    /// [`Hub::poll`]).
    read_once_per_round: bool,
    /// The poller that blocks on the CQ descriptor for all of this hub's pollers, and the
    /// wait it armed it in (see [`Hub::arm_idle_wait`]).
    descriptor_waiter: Option<(Arc<Doorbell>, u64)>,
}

pub struct Hub {
    state: Mutex<HubState>,
    domain: Arc<Domain>,
    /// The endpoint's name: what peers address.
    name: Vec<u8>,
    /// How long a caller waits for `state` (`None`: as long as it takes; see the module doc).
    patience: Option<Duration>,
    /// A caller waited `patience` for `state` in vain: every call fails at once from then on.
    unresponsive: AtomicBool,
    /// Times a patient caller got `state` (written under it, read by waiters): a wait that saw
    /// it move was behind other callers, not behind a stuck one.
    acquisitions: AtomicU64,
    /// Connections ever attached, readable without the lock (the listener's choice of hub).
    attached: AtomicU64,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

/// Who a hub serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One peer only (a connector's connection), which owns every arrival.
    Private,
    /// A listener's connections; a detached peer's address leaves the address vector.
    Shared,
    /// A listener's connections; a detached peer's address stays in the address vector (its
    /// arrivals are still dropped: it no longer maps to a connection). For shm 1.17, whose
    /// `fi_av_remove` frees the peer's slot in its peer table (`smr_map_del`) before telling
    /// the peer (`smr_unmap_from_endpoint` then finds the slot free and returns early), so
    /// the removed peer keeps sending with that slot's id, and once the slot is reused the
    /// hub attributes those arrivals to the new peer; it also unmaps the peer's region under
    /// operations still in flight to it.
    SharedKeepingAddresses,
}

/// The endpoint of a hub, locked for posting operations.
pub struct Locked<'a>(MutexGuard<'a, HubState>);

impl Locked<'_> {
    /// Posts one operation for connection `owner` with `post`, if its share of the transmit
    /// slots allows (`Full` otherwise: back-pressure, as a full send queue).
    pub fn post(
        &mut self,
        owner: u64,
        post: impl FnOnce(&mut RdmCore) -> Result<(), BusError>,
    ) -> Result<(), BusError> {
        let s = &mut *self.0;
        let free = s.tx.slots.saturating_sub(s.tx_held);
        let tx = s.tx;
        let Some(inbox) = s.inboxes.get(&owner) else {
            return Err(BusError::Closed("ofi connection detached".into()));
        };
        if inbox.tx_held >= tx.per_connection {
            return Err(BusError::Full {
                what: "ofi send work requests of this connection (rdma-send-wr)",
            });
        }
        if free <= tx.reserve && inbox.tx_held >= TX_FAIR_SHARE {
            return Err(BusError::Full {
                what: "ofi hub transmit slots (the rest is kept for other connections)",
            });
        }
        post(&mut s.core)?;
        if let Some(inbox) = s.inboxes.get_mut(&owner) {
            inbox.tx_held += 1;
            s.tx_held += 1;
        }
        Ok(())
    }
}

impl Hub {
    /// A hub over `core`, serving as `mode` says.
    pub fn new(core: RdmCore, tx: TxLimits, mode: Mode) -> Arc<Hub> {
        let read_once_per_round = core.domain().kind == super::kind::OfiKind::Tcp;
        // Only shm's spinlock can be left held by a dead peer; a tcp hub's mutex holders
        // always return.
        let patience = (core.domain().kind == super::kind::OfiKind::Shm && mode != Mode::Private)
            .then_some(HUB_LOCK_PATIENCE);
        Arc::new(Hub {
            domain: core.domain().clone(),
            name: core.ep.name.clone(),
            patience,
            unresponsive: AtomicBool::new(false),
            acquisitions: AtomicU64::new(0),
            attached: AtomicU64::new(0),
            state: Mutex::new(HubState {
                core,
                inboxes: HashMap::new(),
                owner_of: HashMap::new(),
                next_owner: 1,
                tx,
                tx_held: 0,
                private: mode == Mode::Private,
                keep_addresses: mode == Mode::SharedKeepingAddresses,
                scratch: VecDeque::new(),
                strays: 0,
                broken: None,
                reads: 0,
                read_once_per_round,
                descriptor_waiter: None,
            }),
        })
    }

    pub fn domain(&self) -> &Arc<Domain> {
        &self.domain
    }

    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The endpoint, locked for posting; fails if the hub is unresponsive.
    pub fn lock(&self) -> Result<Locked<'_>, BusError> {
        self.state().map(Locked)
    }

    /// The hub's state, waited for at most `patience` while nobody else gets it either, then
    /// [`HUB_LOCK_GRACE`] more (see the module doc).
    fn state(&self) -> Result<MutexGuard<'_, HubState>, BusError> {
        let Some(patience) = self.patience else {
            return Ok(self.state.lock());
        };
        loop {
            if self.unresponsive.load(Relaxed) {
                return Err(unresponsive_error());
            }
            let seen = self.acquisitions.load(Relaxed);
            let moved = || self.acquisitions.load(Relaxed) != seen;
            let got = self.state.try_lock_for(patience).or_else(|| match moved() {
                true => None,
                false => self.state.try_lock_for(HUB_LOCK_GRACE),
            });
            if let Some(guard) = got {
                // Written only under the mutex: a load and a store, no locked add on every
                // poll and post.
                let n = self.acquisitions.load(Relaxed);
                self.acquisitions.store(n + 1, Relaxed);
                return Ok(guard);
            }
            // Others took it meanwhile: this caller was only behind them.
            if moved() {
                continue;
            }
            if !self.unresponsive.swap(true, Relaxed) {
                tracing::error!(
                    waited_ms = (patience + HUB_LOCK_GRACE).as_millis() as u64,
                    "ofi hub unresponsive: a call on its endpoint has not returned (a peer \
                     killed while holding the endpoint's shm lock?); its connections are \
                     closed and new ones go to another hub"
                );
            }
            return Err(unresponsive_error());
        }
    }

    /// Whether a caller waited in vain for the hub (see the module doc): it takes no new
    /// connections.
    pub fn is_unresponsive(&self) -> bool {
        self.unresponsive.load(Relaxed)
    }

    /// Adds the peer at raw address `peer` and gives it an inbox.
    /// A peer address already connected to this hub is refused (two connections cannot
    /// share one sender address: arrivals could not be told apart).
    pub fn attach(&self, peer: &[u8]) -> Result<Attached, BusError> {
        let mut s = self.state()?;
        if s.private && !s.inboxes.is_empty() {
            return Err(BusError::Invalid {
                what: "ofi hub",
                reason: "a private hub has one peer".into(),
            });
        }
        let fi_addr = s.core.ep.av_insert(peer)?;
        if s.owner_of.contains_key(&fi_addr) {
            return Err(BusError::Invalid {
                what: "ofi peer address",
                reason: "already connected to this endpoint".into(),
            });
        }
        let owner = s.next_owner;
        s.next_owner += 1;
        self.attached.store(owner, Relaxed);
        s.owner_of.insert(fi_addr, owner);
        let inbox = Inbox::default();
        let receives = inbox.receives.clone();
        s.inboxes.insert(owner, inbox);
        Ok(Attached {
            owner,
            peer_fi: fi_addr,
            receives,
        })
    }

    /// Removes a connection: its inbox, what is queued for it, and its peer's address (so
    /// whatever the peer sends afterwards is dropped as a stray).
    ///
    /// Its operations still in flight keep their slots, and the regions they name, until the
    /// provider finishes them: the provider may still read those regions and hand back
    /// those contexts, so neither may be reused before. Their completions are then dropped.
    /// tcp;ofi_rxm finishes them (flushed) once the peer's connection goes; on shm there are
    /// none: every WRITE and SEND is injected and done when posted (`piecewise.rs`; shm 1.17
    /// would wait for a dead peer to answer for ever, and hold the hub's later operations
    /// behind it). [`Hub::orphaned`] counts them.
    ///
    /// On an unresponsive hub nothing is done: the hub serves nobody any more, and what the
    /// connection held goes with it (never, if its stuck thread never returns).
    pub fn detach(&self, owner: u64, fi_addr: FiAddr) {
        let Ok(mut s) = self.state() else {
            return;
        };
        let left = s.core.tx_in_flight_of(|o| o == owner);
        if left > 0 {
            tracing::debug!(
                owner,
                left,
                "ofi connection detached with operations in flight"
            );
        }
        if let Some(inbox) = s.inboxes.remove(&owner) {
            s.tx_held -= inbox.tx_held;
            release_descriptor_if_last(&mut s, inbox.bell.as_ref());
        }
        if s.owner_of.get(&fi_addr) == Some(&owner) {
            s.owner_of.remove(&fi_addr);
            s.core.forget_peer(fi_addr, owner);
            if !s.keep_addresses {
                s.core.ep.av_remove(fi_addr);
            }
        }
    }

    /// Hands `owner`'s waiting deliveries to `out` after one read of the endpoint (which is
    /// what drives progress, for every connection of the hub). Fails with a protocol error
    /// once its peer sent past the inbox limits, and with the provider's error once something
    /// for its peer alone failed or the endpoint itself did.
    pub fn poll(&self, owner: u64, out: &mut VecDeque<Delivery>) -> Result<(), BusError> {
        let mut guard = self.state()?;
        let s = &mut *guard;
        // On tcp one read of the endpoint serves every connection: a connection polled after
        // another one read it since its own last poll finds its share routed already. A
        // poller turning 32 clients then reads (and the provider polls every socket) once
        // per round, not 32 times; what arrives meanwhile waits at most one round. Not on
        // shm, where each read moves a bounded part of a large WRITE through the SAR
        // buffers: fewer reads would slow big transfers down (bus test ofi_hub).
        let seen = s.inboxes.get(&owner).map_or(0, |i| i.reads_seen);
        if !s.read_once_per_round {
            s.read_and_route();
        } else if seen == s.reads {
            let mut batches = 0;
            while s.read_and_route() == HUB_POLL_BATCH && batches < HUB_READS_PER_POLL {
                batches += 1;
            }
        }
        if let Some(inbox) = s.inboxes.get_mut(&owner) {
            inbox.reads_seen = s.reads;
        }
        if let Some(reason) = &s.broken {
            return Err(BusError::Closed(format!(
                "ofi hub endpoint failed: {reason}"
            )));
        }
        let Some(inbox) = s.inboxes.get_mut(&owner) else {
            return Err(BusError::Closed("ofi connection detached".into()));
        };
        match &inbox.fault {
            Some(Fault::Flooded) => {
                return Err(BusError::Protocol(format!(
                    "peer sent more than {} messages or {ARRIVAL_BYTES_MAX} bytes beyond its \
                     posted receives",
                    arrivals_allowed(inbox.receives.load(Relaxed)),
                )))
            }
            Some(Fault::Failed(reason)) => return Err(BusError::Closed(reason.clone())),
            None => {}
        }
        let taken = inbox.items.iter().filter(|d| !d.is_arrival()).count();
        inbox.tx_held -= taken;
        s.tx_held -= taken;
        out.extend(inbox.items.drain(..));
        inbox.arrivals = 0;
        inbox.bytes = 0;
        Ok(())
    }

    /// Gives connection `owner`'s inbox the doorbell of the thread that polls it (see the
    /// module doc).
    pub fn set_bell(&self, owner: u64, bell: Arc<Doorbell>) {
        if let Ok(mut s) = self.state() {
            if let Some(inbox) = s.inboxes.get_mut(&owner) {
                inbox.bell = Some(bell);
            }
        }
    }

    /// Whether the thread polling connection `owner` may block (see `crate::idle`): `Ready`
    /// if its inbox holds something (or it has failed: its next poll says so), `Armed` with
    /// the endpoint's wait descriptor pushed to `fds` once `fi_trywait` allows (nothing
    /// pushed when this thread's look pushed it already, or another thread waits on it),
    /// `Unsupported` on an endpoint without one (shm).
    pub fn arm_idle_wait(&self, owner: u64, fds: &mut Vec<RawFd>) -> Result<IdleWait, BusError> {
        let mut s = self.state()?;
        if s.broken.is_some() {
            return Ok(IdleWait::Ready);
        }
        let bell = match s.inboxes.get(&owner) {
            Some(inbox) if inbox.items.is_empty() && inbox.fault.is_none() => inbox.bell.clone(),
            _ => return Ok(IdleWait::Ready),
        };
        // One poller per hub blocks on the descriptor; the others block on their doorbells,
        // which its poll rings when it routes them something (a descriptor shared by every
        // poller would wake them all for each one's traffic). It holds the role for the wait
        // it armed it in; once that wait is over, the next poller to look takes it.
        if let (Some(mine), Some((holder, wait))) = (&bell, &s.descriptor_waiter) {
            if !Arc::ptr_eq(mine, holder) && holder.waiting_in(*wait) {
                return Ok(IdleWait::Armed);
            }
        }
        // Another connection of this hub on the same thread armed the descriptor in this
        // look (the poller pushes its clients' descriptors in turn): one `fi_trywait` per
        // look is enough, since a completion after it makes the descriptor readable.
        if let Some(&last) = fds.last() {
            if s.core.ep.wait_fd() == Some(last) {
                return Ok(IdleWait::Armed);
            }
        }
        Ok(match s.core.ep.arm_wait()? {
            CqWait::NoDescriptor => IdleWait::Unsupported,
            CqWait::Ready => IdleWait::Ready,
            CqWait::Armed(fd) => {
                fds.push(fd);
                if let Some(mine) = bell {
                    let wait = mine.wait_number();
                    s.descriptor_waiter = Some((mine, wait));
                }
                IdleWait::Armed
            }
        })
    }

    /// Sends internal bytes (a handshake) to `to`, retrying until `deadline` while the
    /// provider is busy. The hub is locked for each attempt only (tcp;ofi_rxm says "try
    /// again" until its connection to a new peer is up, which can take a while): the other
    /// connections go on meanwhile, and what each attempt's poll finds is routed as usual.
    pub fn send_until(&self, bytes: &[u8], to: FiAddr, deadline: Instant) -> Result<(), BusError> {
        loop {
            let sent = {
                let mut s = self.state()?;
                let sent = s.core.send_bytes(0, bytes, to);
                s.read_and_route();
                sent
            };
            match sent {
                Err(BusError::Full { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(SEND_RETRY_SLEEP)
                }
                other => return other,
            }
        }
    }

    /// Routes events read before the hub existed (a connector's handshake: the peer's first
    /// messages may sit behind its ACCEPT).
    pub fn absorb(&self, mut events: VecDeque<Event>) {
        let mut s = self.state.lock();
        if let Err(e) = s.route_all(&mut events) {
            break_hub(&mut s, e.to_string());
        }
    }

    // The accessors below wait for the mutex as long as it takes, even on an unresponsive
    // hub: they are for tests and diagnostics of a hub known to be live, never for a thread
    // that must not hang (a poller, the accept thread, metrics).

    /// Arrivals dropped because their sender was no connection of this hub.
    pub fn strays(&self) -> u64 {
        self.state.lock().strays
    }

    /// Operations posted on the endpoint and not yet completed, all connections together
    /// (those of detached connections included until the provider finishes them).
    pub fn in_flight(&self) -> usize {
        self.state.lock().core.tx_in_flight()
    }

    /// Operations in flight whose connection was detached (see [`Hub::detach`]).
    pub fn orphaned(&self) -> usize {
        let s = self.state.lock();
        s.core
            .tx_in_flight_of(|o| o != 0 && !s.inboxes.contains_key(&o))
    }

    /// IMM notes the endpoint held until their WRITE was delivered (`ofi::note_gate`).
    pub fn notes_held(&self) -> u64 {
        self.state.lock().core.notes_held()
    }

    /// Connections ever attached (detached ones included).
    pub fn attached_total(&self) -> u64 {
        self.attached.load(Relaxed)
    }

    /// Connections attached.
    pub fn peers(&self) -> usize {
        self.state.lock().inboxes.len()
    }

    /// How the transmit slots are shared.
    pub fn tx_limits(&self) -> TxLimits {
        self.state.lock().tx
    }

    /// Slots connection `owner` holds (what counts against its share): operations posted
    /// whose completion it has not taken.
    pub fn in_flight_of(&self, owner: u64) -> usize {
        self.state
            .lock()
            .inboxes
            .get(&owner)
            .map_or(0, |inbox| inbox.tx_held)
    }
}

impl HubState {
    /// One read of the endpoint; routes what it found, and what failed for one peer only.
    /// An error of the endpoint itself breaks the hub (every connection fails with it).
    /// One read of the endpoint (at most [`HUB_POLL_BATCH`] completions), routed; how many
    /// it read.
    fn read_and_route(&mut self) -> usize {
        if self.broken.is_some() {
            return 0;
        }
        self.reads += 1;
        let mut events = std::mem::take(&mut self.scratch);
        let read = self.core.poll(&mut events, HUB_POLL_BATCH);
        let count = read.as_ref().map_or(0, |n| *n);
        let read = read.map(|_| ());
        // Every event read is routed even if one fails (they are gone from the CQ).
        let routed = self.route_all(&mut events);
        self.scratch = events;
        for (peer, error) in self.core.take_note_failures() {
            tracing::debug!(%error, "ofi IMM note refused; failing its connection");
            if let Some(inbox) = self
                .owner_of
                .get(&peer)
                .and_then(|o| self.inboxes.get_mut(o))
            {
                inbox.fault.get_or_insert(Fault::Failed(format!(
                    "ofi: announcing a WRITE to this peer failed: {error}"
                )));
                inbox.wake();
            }
        }
        if let Err(e) = read.and(routed) {
            tracing::error!(%e, peers = self.inboxes.len(), "ofi hub endpoint failed");
            break_hub(self, e.to_string());
        }
        count
    }

    /// Routes every event of `events`; the first error (of the endpoint) after.
    fn route_all(&mut self, events: &mut VecDeque<Event>) -> Result<(), BusError> {
        let mut result = Ok(());
        while let Some(event) = events.pop_front() {
            let routed = route(self, event);
            if result.is_ok() {
                result = routed;
            }
        }
        result
    }
}

/// Puts one event in the inbox it belongs to (or drops it).
fn route(s: &mut HubState, event: Event) -> Result<(), BusError> {
    match event {
        Event::TxDone {
            internal: true,
            status,
            ..
        } => {
            if let Err(e) = status {
                tracing::debug!(?e, "ofi internal send failed");
            }
        }
        Event::TxDone {
            wr_id,
            op,
            status,
            owner,
            ..
        } => {
            // A connection closed with operations in flight: their completions go nowhere.
            if let Some(inbox) = s.inboxes.get_mut(&owner) {
                inbox.push(Delivery::Done { wr_id, op, status });
            }
        }
        Event::Received {
            bounce,
            len,
            from,
            note,
        } => {
            let owner = owner_of(s, from);
            let delivery = match owner {
                Some(_) => {
                    let mut bytes = vec![0u8; len];
                    let read = s.core.bounce_read(bounce, &mut bytes);
                    s.core.release_bounce(bounce)?;
                    read?;
                    match note {
                        Some(imm) => {
                            let mut word = [0u8; IMM_NOTE_LEN];
                            let n = bytes.len().min(IMM_NOTE_LEN);
                            word[..n].copy_from_slice(&bytes[..n]);
                            Delivery::Imm {
                                imm,
                                len: u32::from_le_bytes(word) as usize,
                            }
                        }
                        None => Delivery::Send(bytes),
                    }
                }
                None => {
                    s.core.release_bounce(bounce)?;
                    s.strays += 1;
                    return Ok(());
                }
            };
            deliver(s, owner, delivery);
        }
        Event::RecvFailed { error, from } => {
            let owner = owner_of(s, from);
            if owner.is_none() {
                tracing::debug!(?error, "ofi receive failed for an unknown sender");
            }
            deliver(s, owner, Delivery::RecvFailed(error));
        }
    }
    Ok(())
}

/// The connection an arrival from `from` belongs to.
fn owner_of(s: &HubState, from: FiAddr) -> Option<u64> {
    if s.private {
        return s.inboxes.keys().next().copied();
    }
    if from == sys::FI_ADDR_NOTAVAIL {
        return None;
    }
    s.owner_of.get(&from).copied()
}

fn deliver(s: &mut HubState, owner: Option<u64>, delivery: Delivery) {
    let Some(inbox) = owner.and_then(|o| s.inboxes.get_mut(&o)) else {
        return;
    };
    if matches!(inbox.fault, Some(Fault::Flooded)) {
        return;
    }
    let bytes = match &delivery {
        Delivery::Send(b) => b.len(),
        _ => 0,
    };
    if delivery.is_arrival() {
        let allowed = arrivals_allowed(inbox.receives.load(Relaxed));
        if inbox.arrivals + 1 > allowed || inbox.bytes + bytes > ARRIVAL_BYTES_MAX {
            inbox.fault = Some(Fault::Flooded);
            inbox.wake();
            // What it sent so far is dropped with it: its connection fails at the next poll.
            inbox.items.retain(|d| !d.is_arrival());
            return;
        }
        inbox.arrivals += 1;
        inbox.bytes += bytes;
    }
    inbox.push(delivery);
}
