//! Connection set-up over connectionless RDM endpoints.
//!
//! The listener is an RDM endpoint bound where connectors can find it (tcp: the bind IP and
//! port through `fi_getinfo(node, service, FI_SOURCE)`; shm: a name derived from the socket
//! address). A connector opens its own endpoint, sends HELLO (its name and a nonce) to the
//! listener and waits for ACCEPT. The listener answers each HELLO by opening a fresh endpoint
//! for the connection (see `conn.rs` for why) and sending ACCEPT from it, so the connector
//! learns the connection endpoint's address from the message's contents.

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::EndpointConfig;
use crate::error::BusError;
use crate::provider::Listener;

use super::conn::OfiConnection;
use super::domain::Domain;
use super::handshake::{Handshake, Kind, HANDSHAKE_MAX};
use super::kind::OfiKind;
use super::open::{connection_sizes, listener_address, open_core, sockaddr_port, Bind};
use super::rdm::{CoreSizes, Event, RdmCore};

/// HELLOs the listener can hold at once; more wait in the provider's unexpected-message queue.
const LISTENER_BOUNCE: usize = 16;
/// How long the listener keeps trying to send one ACCEPT (the connector waits for it).
const ACCEPT_SEND_TIMEOUT: Duration = Duration::from_secs(2);
/// Idle sleep while waiting for a handshake message.
const HANDSHAKE_SLEEP: Duration = Duration::from_micros(50);

pub struct OfiListener {
    core: RdmCore,
    bind: SocketAddr,
    config: EndpointConfig,
    events: VecDeque<Event>,
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

impl OfiListener {
    pub(crate) fn open(
        domain: &Arc<Domain>,
        bind: SocketAddr,
        config: &EndpointConfig,
    ) -> Result<Self, BusError> {
        config.validate()?;
        let core = open_core(domain, Bind::At(bind), listener_sizes())?;
        let mut bind = bind;
        if domain.kind == OfiKind::Tcp && bind.port() == 0 {
            if let Some(port) = sockaddr_port(&core.ep.name) {
                bind.set_port(port);
            }
        }
        tracing::debug!(provider = domain.kind.name(), %bind, "ofi listening");
        Ok(OfiListener {
            core,
            bind,
            config: config.clone(),
            events: VecDeque::new(),
        })
    }

    /// Opens the connection endpoint for one HELLO and sends ACCEPT from it.
    fn answer(&mut self, hello: Handshake) -> Result<OfiConnection, BusError> {
        let domain = self.core.domain().clone();
        // Bind the connection's endpoint to the listener's IP (any port) so that it is
        // reachable the same way the listener is.
        let bind = match domain.kind {
            OfiKind::Tcp if !self.bind.ip().is_unspecified() => {
                Bind::At(SocketAddr::new(self.bind.ip(), 0))
            }
            _ => Bind::Any,
        };
        let mut core = open_core(&domain, bind, connection_sizes(&self.config))?;
        let peer_fi = core.ep.av_insert(&hello.name)?;
        let accept = Handshake {
            kind: Kind::Accept,
            nonce: hello.nonce,
            name: core.ep.name.clone(),
        };
        let mut events = VecDeque::new();
        core.send_bytes_until(
            &accept.encode(),
            peer_fi,
            Instant::now() + ACCEPT_SEND_TIMEOUT,
            &mut events,
        )?;
        // Whatever the polls found (the ACCEPT's completion, perhaps the peer's first
        // messages) goes to the connection.
        OfiConnection::new(
            core,
            peer_fi,
            &hello.name,
            self.config.max_inline,
            self.config.recv_wr as usize,
            events,
        )
    }
}

impl Listener for OfiListener {
    type Conn = OfiConnection;

    fn accept(&mut self, timeout: Duration) -> Result<Option<OfiConnection>, BusError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.core.poll(&mut self.events, LISTENER_BOUNCE)?;
            while let Some(event) = self.events.pop_front() {
                let Event::Received { bounce, len } = event else {
                    continue;
                };
                let mut buf = vec![0u8; len];
                let read = self.core.bounce_read(bounce, &mut buf);
                self.core.release_bounce(bounce)?;
                read?;
                match Handshake::decode(&buf) {
                    Ok(hello) if hello.kind == Kind::Hello => {
                        // The rest of this batch stays in self.events for the next call.
                        let conn = self.answer(hello)?;
                        return Ok(Some(conn));
                    }
                    Ok(other) => {
                        tracing::debug!(?other.kind, "ofi listener ignored a non-HELLO message")
                    }
                    Err(e) => tracing::debug!(%e, "ofi listener ignored a bad message"),
                }
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(HANDSHAKE_SLEEP);
        }
    }

    fn local_addr(&self) -> SocketAddr {
        self.bind
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

/// Connects to the listener at `to`: HELLO, then wait for the matching ACCEPT.
pub(crate) fn connect(
    domain: &Arc<Domain>,
    to: SocketAddr,
    config: &EndpointConfig,
    timeout: Duration,
) -> Result<OfiConnection, BusError> {
    config.validate()?;
    let deadline = Instant::now() + timeout;
    let listener_raw = listener_address(domain, to)?;
    let mut core = open_core(domain, Bind::Any, connection_sizes(config))?;
    let listener_fi = core.ep.av_insert(&listener_raw)?;
    let nonce = nonce();
    let hello = Handshake {
        kind: Kind::Hello,
        nonce,
        name: core.ep.name.clone(),
    };
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
                Event::Received { bounce, len } => {
                    let mut buf = vec![0u8; len];
                    let read = core.bounce_read(bounce, &mut buf);
                    core.release_bounce(bounce)?;
                    read?;
                    match Handshake::decode(&buf) {
                        Ok(h) if h.kind == Kind::Accept && h.nonce == nonce => {
                            let peer_fi = core.ep.av_insert(&h.name)?;
                            core.ep.av_remove(listener_fi);
                            // Messages behind the ACCEPT in this batch are the peer's first
                            // ones: the connection handles them first.
                            return OfiConnection::new(
                                core,
                                peer_fi,
                                &h.name,
                                config.max_inline,
                                config.recv_wr as usize,
                                events,
                            );
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
