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
//! a connection of this hub (never inserted, or removed on close) is dropped at once. Each
//! connection's inbox is bounded ([`InboxLimits`]); a peer that sends past it (more than its
//! posted receives allow) gets its connection failed with a protocol error at its next poll,
//! while the other peers' arrivals go on being routed.
//!
//! Any connection's `poll` drives the whole endpoint and routes what it finds to everyone's
//! inbox, so peers progress whichever connection the caller polls. The endpoint sits behind a
//! mutex: connections of one hub polled from several threads take turns.
//!
//! A connector's connection has a private hub with its one peer (`private`): everything that
//! arrives on it is that peer's, as before hubs existed (the handshake's ACCEPT and the
//! messages behind it come from an address not yet in the vector).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard};

use crate::error::BusError;
use crate::provider::{Op, WorkError};

use super::domain::Domain;
use super::rdm::{Event, RdmCore, IMM_NOTE_LEN};
use super::sys::{self, FiAddr};

/// Completions read from the endpoint per poll of any of its connections.
const HUB_POLL_BATCH: usize = 32;

/// How much one connection's inbox may hold before its peer counts as flooding.
#[derive(Clone, Copy, Debug)]
pub struct InboxLimits {
    /// Arrivals (SENDs, IMM notes, failed receives) waiting for the connection's next poll.
    pub arrivals: usize,
    /// Bytes of SEND payload among them.
    pub bytes: usize,
}

/// Bytes of SEND payload one connection may have waiting (in its inbox, or arrived before a
/// receive was posted): a peer that keeps within its posted receives (control messages of
/// 32 bytes, at most `rdma-recv-wr` of them) never comes near it.
pub const ARRIVAL_BYTES_MAX: usize = 64 * 1024;

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

#[derive(Default)]
struct Inbox {
    items: VecDeque<Delivery>,
    arrivals: usize,
    bytes: usize,
    /// Set when the peer sent past the limits; what it sends after is dropped.
    overflowed: bool,
}

struct HubState {
    core: RdmCore,
    /// Connection inboxes by owner id.
    inboxes: HashMap<u64, Inbox>,
    /// Owner id of each peer address.
    owner_of: HashMap<FiAddr, u64>,
    next_owner: u64,
    limits: InboxLimits,
    private: bool,
    scratch: VecDeque<Event>,
    /// Arrivals dropped because no connection of this hub had sent them.
    strays: u64,
}

pub struct Hub {
    state: Mutex<HubState>,
    domain: Arc<Domain>,
    /// The endpoint's name: what peers address.
    name: Vec<u8>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

/// The endpoint of a hub, locked for posting operations.
pub struct Locked<'a>(MutexGuard<'a, HubState>);

impl Locked<'_> {
    pub fn core(&mut self) -> &mut RdmCore {
        &mut self.0.core
    }
}

impl Hub {
    /// A hub over `core`. `private`: one peer only, which owns every arrival.
    pub fn new(core: RdmCore, limits: InboxLimits, private: bool) -> Arc<Hub> {
        Arc::new(Hub {
            domain: core.domain().clone(),
            name: core.ep.name.clone(),
            state: Mutex::new(HubState {
                core,
                inboxes: HashMap::new(),
                owner_of: HashMap::new(),
                next_owner: 1,
                limits,
                private,
                scratch: VecDeque::new(),
                strays: 0,
            }),
        })
    }

    pub fn domain(&self) -> &Arc<Domain> {
        &self.domain
    }

    pub fn name(&self) -> &[u8] {
        &self.name
    }

    pub fn lock(&self) -> Locked<'_> {
        Locked(self.state.lock())
    }

    /// Adds the peer at raw address `peer` and gives it an inbox: its owner id and address.
    /// A peer address already connected to this hub is refused (two connections cannot
    /// share one sender address: arrivals could not be told apart).
    pub fn attach(&self, peer: &[u8]) -> Result<(u64, FiAddr), BusError> {
        let mut s = self.state.lock();
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
        s.owner_of.insert(fi_addr, owner);
        s.inboxes.insert(owner, Inbox::default());
        Ok((owner, fi_addr))
    }

    /// Removes a connection: its inbox, what is queued for it, and its peer's address (so
    /// whatever the peer sends afterwards is dropped as a stray).
    ///
    /// Its operations still in flight keep their slots, and the regions they name, until the
    /// provider finishes them: the provider may still read those regions and hand back
    /// those contexts, so neither may be reused before. Their completions are then dropped.
    /// tcp;ofi_rxm finishes them (flushed) once the peer's connection goes; shm 1.17 waits
    /// for a response from the peer even after `fi_av_remove`, so with a peer that died they
    /// would stay until the hub closes (which is one reason shm listeners do not share
    /// endpoints: `listener.rs`). [`Hub::orphaned`] counts them.
    pub fn detach(&self, owner: u64, fi_addr: FiAddr) {
        let mut s = self.state.lock();
        let left = s.core.tx_in_flight_of(|o| o == owner);
        if left > 0 {
            tracing::debug!(
                owner,
                left,
                "ofi connection detached with operations in flight"
            );
        }
        s.inboxes.remove(&owner);
        if s.owner_of.get(&fi_addr) == Some(&owner) {
            s.owner_of.remove(&fi_addr);
            s.core.forget_peer(fi_addr, owner);
            s.core.ep.av_remove(fi_addr);
        }
    }

    /// Hands `owner`'s waiting deliveries to `out` after one read of the endpoint (which is
    /// what drives progress, for every connection of the hub). Fails with a protocol error
    /// once its peer sent past the inbox limits.
    pub fn poll(&self, owner: u64, out: &mut VecDeque<Delivery>) -> Result<(), BusError> {
        let mut guard = self.state.lock();
        let s = &mut *guard;
        let mut events = std::mem::take(&mut s.scratch);
        let mut result = s.core.poll(&mut events, HUB_POLL_BATCH).map(|_| ());
        // Every event read is routed even if one fails (they are gone from the CQ).
        while let Some(event) = events.pop_front() {
            let routed = route(s, event);
            if result.is_ok() {
                result = routed;
            }
        }
        s.scratch = events;
        result?;
        let Some(inbox) = s.inboxes.get_mut(&owner) else {
            return Err(BusError::Closed("ofi connection detached".into()));
        };
        if inbox.overflowed {
            return Err(BusError::Protocol(format!(
                "peer sent more than {} messages or {} bytes beyond its posted receives",
                s.limits.arrivals, s.limits.bytes
            )));
        }
        out.extend(inbox.items.drain(..));
        inbox.arrivals = 0;
        inbox.bytes = 0;
        Ok(())
    }

    /// Sends internal bytes (a handshake) to `to`, retrying until `deadline` while the
    /// provider is busy; what the retries' polls find is routed as usual.
    pub fn send_until(&self, bytes: &[u8], to: FiAddr, deadline: Instant) -> Result<(), BusError> {
        let mut guard = self.state.lock();
        let s = &mut *guard;
        let mut events = VecDeque::new();
        let sent = s.core.send_bytes_until(bytes, to, deadline, &mut events);
        s.route_all(events);
        sent
    }

    /// Routes events read before the hub existed (a connector's handshake: the peer's first
    /// messages may sit behind its ACCEPT).
    pub fn absorb(&self, events: VecDeque<Event>) {
        self.state.lock().route_all(events);
    }

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

    /// Connections attached.
    pub fn peers(&self) -> usize {
        self.state.lock().inboxes.len()
    }
}

impl HubState {
    fn route_all(&mut self, mut events: VecDeque<Event>) {
        while let Some(event) = events.pop_front() {
            if let Err(e) = route(self, event) {
                tracing::debug!(%e, "ofi hub could not route an event");
            }
        }
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
                inbox.items.push_back(Delivery::Done { wr_id, op, status });
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
    let limits = s.limits;
    let Some(inbox) = owner.and_then(|o| s.inboxes.get_mut(&o)) else {
        return;
    };
    if inbox.overflowed {
        return;
    }
    let bytes = match &delivery {
        Delivery::Send(b) => b.len(),
        _ => 0,
    };
    if delivery.is_arrival() {
        if inbox.arrivals + 1 > limits.arrivals || inbox.bytes + bytes > limits.bytes {
            inbox.overflowed = true;
            // What it sent so far is dropped with it: its connection fails at the next poll.
            inbox.items.retain(|d| !d.is_arrival());
            return;
        }
        inbox.arrivals += 1;
        inbox.bytes += bytes;
    }
    inbox.items.push_back(delivery);
}
