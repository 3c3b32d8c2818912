//! Connection set-up over connectionless RDM endpoints.
//!
//! A connector opens its own endpoint and sends HELLO (its endpoint name and a nonce) to the
//! listener, then waits for ACCEPT. The listener answers each HELLO by adding the connector to
//! its hub (one RDM endpoint shared by the connections it accepts, see `hub.rs`; on shm one
//! per [`SHM_HUB_PEERS`] connections, see `OfiListener::current_hub`) and replying ACCEPT
//! with the hub's name.
//! Where HELLO and ACCEPT travel depends on the [`Rendezvous`]:
//! - `Fabric` (tcp, shm): the listener is an RDM endpoint bound where connectors can find it
//!   (tcp: the bind IP and port through `fi_getinfo(node, service, FI_SOURCE)`; shm: a name
//!   derived from the socket address). ACCEPT is sent from the hub, so the first fabric
//!   message also proves the path works.
//! - `TcpSocket` (the default for every provider): the listener is a TCP socket at the bind
//!   address; handshakes are read without blocking from a bounded table of pending sockets
//!   (`HANDSHAKE_PENDING_MAX`, each dropped after `HANDSHAKE_DEADLINE`), so idle or slow
//!   connections to the fabric port never keep a HELLO waiting.

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::config::EndpointConfig;
use crate::error::BusError;
use crate::provider::Listener;

use super::conn::OfiConnection;
use super::domain::Domain;
use super::handshake::{Handshake, Kind, HANDSHAKE_MAX};
use super::hub::{Hub, Mode, TxLimits};
use super::kind::{OfiKind, Rendezvous};
use super::open::{
    connection_sizes, listener_address, open_core, sockaddr_port, Bind, OFI_SEND_MAX,
};
use super::rdm::{CoreSizes, Event, RdmCore, BOUNCE_MAX};
use super::rendezvous_socket::{read_handshake, write_handshake, PendingHello};

/// HELLOs the listener can hold at once; more wait in the provider's unexpected-message queue.
const LISTENER_BOUNCE: usize = 16;
/// How long the listener keeps trying to send one ACCEPT (the connector waits for it).
const ACCEPT_SEND_TIMEOUT: Duration = Duration::from_secs(2);
/// First idle sleep while waiting for a handshake message over the fabric (a socket
/// rendezvous blocks on its sockets instead); doubled while nothing comes, up
/// to [`HANDSHAKE_SLEEP_MAX`]. A fixed 50 us sleep woke an idle listener 20,000 times a
/// second, CPU that every node paid for each of its fabric listeners.
const HANDSHAKE_SLEEP: Duration = Duration::from_micros(50);
/// Longest idle sleep: what a connect may wait at most on a quiet listener.
const HANDSHAKE_SLEEP_MAX: Duration = Duration::from_millis(2);
/// Pause after a failed `accept` of a handshake socket (out of descriptors): the refused
/// connection keeps the listening socket readable.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(10);
/// Longest a socket-rendezvous listener blocks on its sockets before it looks at the
/// pending handshakes' deadlines again.
const HANDSHAKE_RECHECK: Duration = Duration::from_millis(100);
/// Handshake sockets whose HELLO is still arriving; beyond it the oldest is dropped. Each
/// holds one descriptor and a 144-byte buffer for at most `HANDSHAKE_DEADLINE` (2 s), so a
/// flood of idle connections costs bounded memory and never blocks a real connector, which
/// sends its HELLO at once.
pub const HANDSHAKE_PENDING_MAX: usize = 256;
const _: () = assert!(HANDSHAKE_PENDING_MAX < crate::idle::WAIT_FDS_MAX);
/// Operations in flight on a listener's hub, all its connections together (beyond it a post
/// meets `Full`, back-pressure): 4,096 slots of about 100 bytes, or what the provider grants
/// an endpoint if less (tcp;ofi_rxm 1.17: 2,048; shm: 1,024), so that the shares below are
/// shares of what the provider will really take.
pub const HUB_TX_SLOTS: usize = 4096;
/// A hub's slots are split in this many shares: one connection may hold one share (or
/// `rdma-send-wr` if less), and one share is kept for connections that hold little
/// ([`hub::TX_FAIR_SHARE`](super::hub::TX_FAIR_SHARE)): connections that keep their
/// operations in flight take at most the other shares together.
pub const HUB_TX_SHARES: usize = 4;
/// Connections one shm hub serves over its life; the next one gets a new hub, and a hub
/// closes with its last connection. shm 1.17 cannot remove a peer safely (`hub::Mode`), so
/// a shm hub keeps every peer it had: this bounds its peer table (shm's own limit is 256
/// peers per address vector) and the regions of gone peers it keeps mapped.
///
/// Each hub costs the node a shm region of 16 MiB of which shm 1.17 touches ~8 MiB at once,
/// whatever the queue sizes asked: shared by 255 connections that is ~32 KiB each.
/// A gone peer holds nothing of a shared hub: every WRITE goes as injected pieces and every
/// SEND is injected (`ofi::piecewise`), so no operation waits on an answer from its peer.
/// Before that (SAR transfers and delivery-complete operations, which shm finishes only
/// when the peer answers, in one response queue per endpoint handled in order), a client
/// killed mid-stream stalled the hub's other connections.
pub const SHM_HUB_PEERS: usize = 255;
/// shm hubs of one listener open at once (the current one and used-up ones whose
/// connections are not all closed; an unresponsive one, `hub.rs`, stays open for good, since
/// the thread stuck in it never drops its connections, nor those of that thread's other
/// clients on other hubs), each a 16 MiB shm region: beyond it a HELLO is refused
/// (its handshake socket closed, the reason logged), so clients that stay cannot make the
/// node map shared memory without bound (at most 1 GiB of regions, 2,048 connections).
pub const SHM_HUBS_MAX: usize = 64;
/// Address-vector entries a hub starts with (it grows with its connections).
const HUB_AV_COUNT: usize = 256;
/// TCP connections taken from the kernel per `accept` round (the rest wait for the next):
/// enough to empty a flooded backlog in a few rounds, so a real connector's SYN finds room
/// (evicted sockets are closed at once).
const SOCKET_ACCEPTS_PER_ROUND: usize = 512;

enum Meeting {
    Fabric {
        core: Box<RdmCore>,
        events: VecDeque<Event>,
    },
    Socket {
        tcp: TcpListener,
        pending: VecDeque<PendingHello>,
    },
}

pub struct OfiListener {
    meeting: Meeting,
    /// The endpoint accepted connections share (on shm: the current one, see `current_hub`).
    hub: Arc<Hub>,
    /// shm: used-up hubs (and unresponsive ones), until their last connection closes.
    used_up: Vec<Weak<Hub>>,
    /// shm: connections one hub serves over its life ([`SHM_HUB_PEERS`] unless set lower).
    shm_hub_peers: usize,
    domain: Arc<Domain>,
    bind: SocketAddr,
    config: EndpointConfig,
    /// The idle back-off's next sleep (kept across `accept` calls).
    idle_sleep: Duration,
    /// Handshake sockets dropped: past their deadline, evicted from a full table, malformed.
    dropped_handshakes: u64,
}

impl std::fmt::Debug for OfiListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfiListener")
            .field("bind", &self.bind)
            .finish()
    }
}

fn listener_sizes() -> CoreSizes {
    CoreSizes {
        tx_slots: LISTENER_BOUNCE,
        bounce_count: LISTENER_BOUNCE,
        bounce_bytes: HANDSHAKE_MAX,
        staging_bytes: HANDSHAKE_MAX,
        cq_size: 4 * LISTENER_BOUNCE,
        av_count: LISTENER_BOUNCE,
    }
}

fn hub_sizes() -> CoreSizes {
    CoreSizes {
        tx_slots: HUB_TX_SLOTS,
        bounce_count: BOUNCE_MAX,
        bounce_bytes: OFI_SEND_MAX,
        staging_bytes: HANDSHAKE_MAX,
        cq_size: HUB_TX_SLOTS + BOUNCE_MAX,
        av_count: HUB_AV_COUNT,
    }
}

/// How a hub's transmit slots are shared: a listener's among its connections, a private
/// one's all for its connection.
pub(crate) fn tx_limits(config: &EndpointConfig, private: bool, granted: usize) -> TxLimits {
    match private {
        true => {
            let slots = connection_sizes(config).tx_slots;
            TxLimits {
                slots,
                per_connection: slots,
                reserve: 0,
            }
        }
        false => {
            let slots = HUB_TX_SLOTS.min(granted).max(HUB_TX_SHARES);
            TxLimits {
                slots,
                per_connection: (config.send_wr as usize).min(slots / HUB_TX_SHARES),
                reserve: slots / HUB_TX_SHARES,
            }
        }
    }
}

/// The hub of a listener at `bind`.
fn open_hub(
    domain: &Arc<Domain>,
    bind: SocketAddr,
    config: &EndpointConfig,
) -> Result<Arc<Hub>, BusError> {
    // On tcp, bind to the listener's IP (any port) so connections are reachable the same way
    // the listener is.
    let at = match domain.kind {
        OfiKind::Tcp if bind.is_ipv4() && !bind.ip().is_unspecified() => {
            Bind::At(SocketAddr::new(bind.ip(), 0))
        }
        _ => Bind::Any,
    };
    let core = open_core(domain, at, hub_sizes())?;
    let granted = domain.info.tx_attr().size;
    let mode = match domain.kind {
        OfiKind::Shm => Mode::SharedKeepingAddresses,
        OfiKind::Tcp | OfiKind::Efa => Mode::Shared,
    };
    Ok(Hub::new(core, tx_limits(config, false, granted), mode))
}

impl OfiListener {
    pub(crate) fn open(
        domain: &Arc<Domain>,
        rendezvous: Rendezvous,
        bind: SocketAddr,
        config: &EndpointConfig,
    ) -> Result<Self, BusError> {
        config.validate()?;
        let mut bind = bind;
        let meeting = match rendezvous {
            Rendezvous::Fabric => {
                let core = open_core(domain, Bind::At(bind), listener_sizes())?;
                if domain.kind == OfiKind::Tcp && bind.port() == 0 {
                    if let Some(port) = sockaddr_port(&core.ep.name) {
                        bind.set_port(port);
                    }
                }
                Meeting::Fabric {
                    core: Box::new(core),
                    events: VecDeque::new(),
                }
            }
            Rendezvous::TcpSocket => {
                let tcp = TcpListener::bind(bind)
                    .and_then(|l| l.set_nonblocking(true).map(|()| l))
                    .and_then(|l| super::rendezvous_socket::deepen_backlog(&l).map(|()| l))
                    .map_err(|e| BusError::Provider {
                        provider: domain.kind.name(),
                        call: "bind (handshake socket)",
                        reason: format!("{bind}: {e}"),
                    })?;
                if let Ok(local) = tcp.local_addr() {
                    bind = local;
                }
                Meeting::Socket {
                    tcp,
                    pending: VecDeque::new(),
                }
            }
        };
        let hub = open_hub(domain, bind, config)?;
        tracing::debug!(provider = domain.kind.name(), %bind, ?rendezvous, "ofi listening");
        Ok(OfiListener {
            meeting,
            hub,
            used_up: Vec::new(),
            shm_hub_peers: SHM_HUB_PEERS,
            domain: domain.clone(),
            bind,
            config: config.clone(),
            idle_sleep: HANDSHAKE_SLEEP,
            dropped_handshakes: 0,
        })
    }

    /// Answers one HELLO that came over the fabric: ACCEPT goes from the hub.
    fn answer_on_fabric(&mut self, hello: Handshake) -> Result<OfiConnection, BusError> {
        let conn = self.connection(&hello)?;
        let accept = Handshake {
            kind: Kind::Accept,
            nonce: hello.nonce,
            name: conn.hub().name().to_vec(),
        };
        conn.hub().send_until(
            &accept.encode(),
            conn.peer_fi(),
            Instant::now() + ACCEPT_SEND_TIMEOUT,
        )?;
        Ok(conn)
    }

    /// Answers one HELLO that came over a TCP socket: ACCEPT goes back over it.
    fn answer_on_socket(
        &mut self,
        socket: PendingHello,
        hello: Handshake,
    ) -> Result<OfiConnection, BusError> {
        if hello.kind != Kind::Hello {
            return Err(BusError::Protocol("ofi handshake: expected HELLO".into()));
        }
        let conn = self.connection(&hello)?;
        let accept = Handshake {
            kind: Kind::Accept,
            nonce: hello.nonce,
            name: conn.hub().name().to_vec(),
        };
        // On failure the connection is dropped, which detaches the peer again.
        socket.answer(&accept)?;
        Ok(conn)
    }

    /// The connection of the peer named in `hello`, attached to the listener's hub. A hub
    /// found unresponsive while attaching (shm: a call on it never returned, see `hub.rs`)
    /// is left for the next one, once.
    fn connection(&mut self, hello: &Handshake) -> Result<OfiConnection, BusError> {
        let mut hub = self.current_hub()?;
        let attached = match hub.attach(&hello.name) {
            Err(_) if hub.is_unresponsive() => {
                hub = self.current_hub()?;
                hub.attach(&hello.name)?
            }
            other => other?,
        };
        OfiConnection::new(
            hub,
            attached,
            &hello.name,
            self.config.max_inline,
            self.config.recv_wr as usize,
        )
    }

    /// shm: at most `peers` connections per hub over its life (1 to [`SHM_HUB_PEERS`]), the
    /// current hub included; tests use fewer than the default.
    pub fn set_shm_hub_peers(&mut self, peers: usize) {
        self.shm_hub_peers = peers.clamp(1, SHM_HUB_PEERS);
    }

    /// The hub the next connection joins. On shm, once the current one has served
    /// [`SHM_HUB_PEERS`] connections (or what `set_shm_hub_peers` set), or was found
    /// unresponsive (`hub.rs`), a new one is opened (the old one closes with its last
    /// connection); with [`SHM_HUBS_MAX`] still open, the connection is refused.
    fn current_hub(&mut self) -> Result<Arc<Hub>, BusError> {
        if self.domain.kind == OfiKind::Shm
            && (self.hub.attached_total() >= self.shm_hub_peers as u64
                || self.hub.is_unresponsive())
        {
            self.used_up.retain(|h| h.strong_count() > 0);
            if self.used_up.len() + 1 >= SHM_HUBS_MAX {
                return Err(BusError::Full {
                    what: "ofi:shm hubs of this listener (SHM_HUBS_MAX): too many connections",
                });
            }
            let next = open_hub(&self.domain, self.bind, &self.config)?;
            let old = std::mem::replace(&mut self.hub, next);
            self.used_up.push(Arc::downgrade(&old));
            tracing::debug!(
                open = self.used_up.len() + 1,
                "ofi:shm listener opened its next hub"
            );
        }
        Ok(self.hub.clone())
    }

    /// The endpoint the next accepted connection joins.
    pub fn hub(&self) -> Option<&Arc<Hub>> {
        Some(&self.hub)
    }

    /// One look for a HELLO over the fabric.
    fn try_accept_fabric(&mut self) -> Result<Option<OfiConnection>, BusError> {
        let Meeting::Fabric { core, events } = &mut self.meeting else {
            return Ok(None);
        };
        core.poll(events, LISTENER_BOUNCE)?;
        while let Some(event) = events.pop_front() {
            let Event::Received { bounce, len, .. } = event else {
                continue;
            };
            let mut buf = vec![0u8; len];
            let read = core.bounce_read(bounce, &mut buf);
            core.release_bounce(bounce)?;
            read?;
            match Handshake::decode(&buf) {
                // The rest of this batch stays in `events` for the next call.
                Ok(hello) if hello.kind == Kind::Hello => {
                    return self.answer_on_fabric(hello).map(Some)
                }
                Ok(other) => tracing::debug!(?other.kind, "ofi listener ignored a non-HELLO"),
                Err(e) => tracing::debug!(%e, "ofi listener ignored a bad message"),
            }
        }
        Ok(None)
    }

    /// One round of the handshake socket, never waiting on a peer: takes what connected
    /// (evicting the oldest pending socket beyond `HANDSHAKE_PENDING_MAX`), reads what each
    /// pending one sent, drops those past their deadline, and answers the first complete
    /// HELLO (the others wait in the table for the next round). A failed handshake is logged
    /// and dropped: it must not stop the listener.
    fn try_accept_socket(&mut self) -> Result<Option<OfiConnection>, BusError> {
        let Meeting::Socket { tcp, pending } = &mut self.meeting else {
            return Ok(None);
        };
        for _ in 0..SOCKET_ACCEPTS_PER_ROUND {
            match tcp.accept() {
                Ok((stream, from)) => match PendingHello::new(stream, from) {
                    Ok(p) => {
                        if pending.len() == HANDSHAKE_PENDING_MAX {
                            pending.pop_front();
                            self.dropped_handshakes += 1;
                        }
                        pending.push_back(p);
                    }
                    Err(e) => tracing::debug!(%from, %e, "ofi handshake socket refused"),
                },
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Out of descriptors (EMFILE) and the like: the pending ones still progress.
                // The connection stays in the backlog, so the listening socket stays
                // readable: back off here, or the wait on it would return at once, a spin.
                Err(e) => {
                    tracing::debug!(%e, "accept (handshake socket) failed");
                    std::thread::sleep(ACCEPT_ERROR_BACKOFF);
                    break;
                }
            }
        }
        let now = Instant::now();
        let mut i = 0;
        let mut hello = None;
        while i < pending.len() {
            match pending[i].advance() {
                Ok(Some(h)) => {
                    hello = pending.remove(i).map(|p| (p, h));
                    break;
                }
                Ok(None) if !pending[i].expired(now) => i += 1,
                Ok(None) => {
                    pending.remove(i);
                    self.dropped_handshakes += 1;
                }
                Err(e) => {
                    tracing::debug!(from = %pending[i].from, %e, "ofi handshake over TCP failed");
                    pending.remove(i);
                    self.dropped_handshakes += 1;
                }
            }
        }
        let Some((socket, hello)) = hello else {
            return Ok(None);
        };
        let from = socket.from;
        match self.answer_on_socket(socket, hello) {
            Ok(conn) => Ok(Some(conn)),
            Err(e) => {
                tracing::debug!(%from, %e, "ofi handshake over TCP failed");
                self.dropped_handshakes += 1;
                Ok(None)
            }
        }
    }
}

impl Listener for OfiListener {
    type Conn = OfiConnection;

    fn accept(&mut self, timeout: Duration) -> Result<Option<OfiConnection>, BusError> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = match self.meeting {
                Meeting::Fabric { .. } => self.try_accept_fabric()?,
                Meeting::Socket { .. } => self.try_accept_socket()?,
            };
            if found.is_some() {
                self.idle_sleep = HANDSHAKE_SLEEP;
                return Ok(found);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            if let Meeting::Socket { tcp, pending } = &self.meeting {
                // Nothing to poll but sockets: block on them (the listening socket and the
                // handshakes still arriving) instead of sleeping in steps. Woken at least
                // every HANDSHAKE_RECHECK, so an idle handshake's deadline is still seen.
                let mut fds = Vec::with_capacity(pending.len() + 1);
                fds.push(tcp.as_raw_fd());
                fds.extend(pending.iter().map(PendingHello::fd));
                let wait = HANDSHAKE_RECHECK.min(deadline - now);
                crate::idle::wait_readable(&fds, wait)?;
                continue;
            }
            std::thread::sleep(self.idle_sleep.min(deadline - now));
            self.idle_sleep = (self.idle_sleep * 2).min(HANDSHAKE_SLEEP_MAX);
        }
    }

    fn local_addr(&self) -> SocketAddr {
        self.bind
    }

    fn dropped_handshakes(&self) -> u64 {
        self.dropped_handshakes
    }
}

/// A nonce for one connection attempt (not secret: it only pairs an ACCEPT with its HELLO).
fn nonce() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// Where a connector's endpoint binds. On tcp: the local IP the kernel would route to `to`
/// from (found with a connected UDP socket, which sends nothing), so the address in our HELLO
/// is one the listener can reach; the provider's default is merely the first interface. Other
/// providers have no IP addresses.
fn connector_bind(kind: OfiKind, to: SocketAddr) -> Bind {
    if kind != OfiKind::Tcp {
        return Bind::Any;
    }
    let any: SocketAddr = if to.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let local =
        std::net::UdpSocket::bind(any).and_then(|s| s.connect(to).and_then(|()| s.local_addr()));
    match local {
        // The tcp domain is IPv4 (OfiKind::addr_format).
        Ok(local) if local.is_ipv4() => Bind::At(SocketAddr::new(local.ip(), 0)),
        Ok(_) => Bind::Any,
        Err(e) => {
            tracing::debug!(%e, %to, "no route found; binding the connector anywhere");
            Bind::Any
        }
    }
}

/// Connects to the listener at `to`: HELLO, then wait for the matching ACCEPT.
pub(crate) fn connect(
    domain: &Arc<Domain>,
    rendezvous: Rendezvous,
    to: SocketAddr,
    config: &EndpointConfig,
    timeout: Duration,
) -> Result<OfiConnection, BusError> {
    config.validate()?;
    let deadline = Instant::now() + timeout;
    let core = open_core(
        domain,
        connector_bind(domain.kind, to),
        connection_sizes(config),
    )?;
    let hello = Handshake {
        kind: Kind::Hello,
        nonce: nonce(),
        name: core.ep.name.clone(),
    };
    let (core, accept, early) = match rendezvous {
        Rendezvous::Fabric => meet_on_fabric(domain, core, to, &hello, deadline, timeout)?,
        Rendezvous::TcpSocket => meet_on_socket(core, to, &hello, deadline)?,
    };
    let hub = Hub::new(core, tx_limits(config, true, usize::MAX), Mode::Private);
    let attached = hub.attach(&accept.name)?;
    hub.absorb(early);
    OfiConnection::new(
        hub,
        attached,
        &accept.name,
        config.max_inline,
        config.recv_wr as usize,
    )
}

type Met = (RdmCore, Handshake, VecDeque<Event>);

fn meet_on_socket(
    core: RdmCore,
    to: SocketAddr,
    hello: &Handshake,
    deadline: Instant,
) -> Result<Met, BusError> {
    let timeout = deadline.saturating_duration_since(Instant::now());
    let mut stream = TcpStream::connect_timeout(&to, timeout.max(Duration::from_millis(1)))
        .map_err(|e| BusError::Closed(format!("handshake socket to {to}: {e}")))?;
    write_handshake(&mut stream, hello)?;
    let accept = read_handshake(&mut stream, deadline)?;
    if accept.kind != Kind::Accept || accept.nonce != hello.nonce {
        return Err(BusError::Protocol(format!(
            "ofi handshake: {to} answered {:?} with another nonce",
            accept.kind
        )));
    }
    Ok((core, accept, VecDeque::new()))
}

fn meet_on_fabric(
    domain: &Arc<Domain>,
    mut core: RdmCore,
    to: SocketAddr,
    hello: &Handshake,
    deadline: Instant,
    timeout: Duration,
) -> Result<Met, BusError> {
    let listener_raw = listener_address(domain, to)?;
    let listener_fi = core.ep.av_insert(&listener_raw)?;
    let mut events = VecDeque::new();
    core.send_bytes_until(&hello.encode(), listener_fi, deadline, &mut events)
        .map_err(|e| match e {
            BusError::Full { .. } => BusError::Timeout(timeout),
            e => e,
        })?;
    loop {
        core.poll(&mut events, 16)?;
        while let Some(event) = events.pop_front() {
            match event {
                Event::Received { bounce, len, .. } => {
                    let mut buf = vec![0u8; len];
                    let read = core.bounce_read(bounce, &mut buf);
                    core.release_bounce(bounce)?;
                    read?;
                    match Handshake::decode(&buf) {
                        Ok(h) if h.kind == Kind::Accept && h.nonce == hello.nonce => {
                            core.ep.av_remove(listener_fi);
                            // Messages behind the ACCEPT in this batch are the peer's first
                            // ones: the connection handles them first.
                            return Ok((core, h, events));
                        }
                        other => tracing::debug!(?other, "ofi connect ignored a message"),
                    }
                }
                Event::TxDone { status: Err(e), .. } => {
                    return Err(BusError::Closed(format!(
                        "HELLO to {to} ({}) failed: {e:?}",
                        domain.kind.name()
                    )))
                }
                _ => {}
            }
        }
        if Instant::now() >= deadline {
            return Err(BusError::Timeout(timeout));
        }
        std::thread::sleep(HANDSHAKE_SLEEP);
    }
}
