//! Accepting rdma_cm connections. Acceptance is incremental, so `accept` never blocks past its
//! timeout and a short timeout never loses a connection: a request gets its QP and
//! `rdma_accept` at once, and becomes a connection when its ESTABLISHED event arrives, on this
//! or a later call.
//!
//! Events of accepted connections arrive on the listener's channel (rdma_cm gives new
//! identifiers their listener's channel), so the listener also delivers their disconnect
//! notices: the node keeps calling `accept` while it serves connections.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use sideway::ibverbs::queue_pair::QueuePairState;
use sideway::rdmacm::communication_manager::{
    Event, EventChannel, EventType, Identifier, PortSpace,
};

use sideway::ibverbs::protection_domain::ProtectionDomain;

use super::cm;
use super::conn::{conn_param, ends_connection, CmLink, VerbsConnection};
use super::cq::Cq;
use super::device::Device;
use super::lib_error;
use super::peer_gone::PeerGone;
use super::qp::{check_srq_fits, RcQp};
use super::receive_pool::ReceivePool;
use super::srq::SrqShared;
use crate::addr::EndpointAddr;
use crate::config::EndpointConfig;
use crate::error::Result;
use crate::provider::Listener;

/// Connection requests read but not yet answered; more are refused (their identifiers are
/// destroyed, so the peer sees a reject or a timeout).
pub const ACCEPT_QUEUE_MAX: usize = 64;
/// Answered requests waiting for ESTABLISHED; further requests wait in the queue meanwhile.
pub const ACCEPTING_MAX: usize = 64;
/// How long an answered request may wait for ESTABLISHED before it is dropped (generous: the
/// peer may be slow, e.g. under emulation, but a vanished peer must not hold resources).
pub const ESTABLISH_WAIT_MAX: Duration = Duration::from_secs(120);
/// Established connections not yet handed out by `accept`.
pub const READY_MAX: usize = 64;
/// rdma_listen backlog (the kernel's queue of requests not yet read by us).
const LISTEN_BACKLOG: i32 = 64;

/// A request that was answered with `rdma_accept` and awaits ESTABLISHED: its connection is
/// built (and, for Streams, its first receives posted) before the answer.
struct Accepting {
    conn: VerbsConnection,
    since: Instant,
}

/// Listens for rdma_cm connections on one address.
pub struct VerbsListener {
    ready: VecDeque<VerbsConnection>,
    accepting: Vec<Accepting>,
    queued: VecDeque<Arc<Identifier>>,
    /// Handed-out connections' identifiers and close flags. Entries of dropped connections are
    /// pruned on every hand-out, so this holds live connections only.
    accepted: Vec<(Weak<Identifier>, Arc<PeerGone>)>,
    // The listening identifier before the channel every identifier here uses.
    _id: Arc<Identifier>,
    channel: Arc<EventChannel>,
    dev: Arc<Device>,
    config: EndpointConfig,
    /// The SRQ accepted connections take their receives from, if any (a raw one given to
    /// `listen_with_srq`, or the pool's).
    srq: Option<Arc<SrqShared>>,
    /// The receive pool Stream connections share (`serve_streams` with a depth).
    pool: Option<Arc<ReceivePool>>,
    /// Post a Stream's first command receives on each connection before answering its peer
    /// (see [`Listener::serve_streams`]).
    prepost_stream_receives: bool,
    bind: SocketAddr,
}

impl std::fmt::Debug for VerbsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsListener")
            .field("bind", &self.bind)
            .field("accepting", &self.accepting.len())
            .finish()
    }
}

pub(crate) fn listen(
    dev: &Arc<Device>,
    bind: SocketAddr,
    config: &EndpointConfig,
    srq: Option<&Arc<SrqShared>>,
) -> Result<VerbsListener> {
    config.validate()?;
    if let Some(srq) = srq {
        // A mismatch found now, not on every accepted request.
        check_srq_fits(dev, config, srq)?;
    }
    let channel = cm::channel()?;
    let id = channel
        .create_id(PortSpace::Tcp)
        .map_err(|e| lib_error("rdma_create_id", &e))?;
    id.bind_addr(bind)
        .map_err(|e| lib_error("rdma_bind_addr", &e))?;
    id.listen(LISTEN_BACKLOG)
        .map_err(|e| lib_error("rdma_listen", &e))?;
    Ok(VerbsListener {
        ready: VecDeque::new(),
        accepting: Vec::new(),
        queued: VecDeque::new(),
        accepted: Vec::new(),
        _id: id,
        channel,
        dev: Arc::clone(dev),
        config: config.clone(),
        srq: srq.cloned(),
        pool: None,
        prepost_stream_receives: false,
        bind,
    })
}

impl VerbsListener {
    /// Answers queued requests while there is room among the accepting ones.
    fn answer_queued(&mut self) -> Result<()> {
        while self.accepting.len() < ACCEPTING_MAX {
            let Some(id) = self.queued.pop_front() else {
                return Ok(());
            };
            let (mut qp, cq, pd) = RcQp::create(&self.dev, &self.config, self.srq.as_ref())?;
            if let Err(e) = qp.bring_up(&self.dev, &cq, &id) {
                // This request's route is unusable; the others may be fine.
                tracing::warn!(error = %e, "verbs listener: cannot set up a QP for a request");
                continue;
            }
            let param = conn_param(&qp);
            let mut conn = self.connection((qp, cq, pd), Arc::clone(&id));
            if let Some(pool) = &self.pool {
                // The pool's receives are posted already: the first message finds one.
                conn.attach_pool(Arc::clone(pool), self.config.recv_wr);
            } else if self.prepost_stream_receives && self.srq.is_none() {
                // Before the answer: the peer's first message (its RX advert) then finds a
                // receive posted, instead of an RNR NAK and a retry (`qp.rs` MIN_RNR_TIMER).
                if let Err(e) = conn.prepost_stream_receives() {
                    tracing::warn!(error = %e, "verbs listener: cannot post a request's receives");
                    continue;
                }
            }
            if let Err(e) = id.accept(param) {
                tracing::warn!(error = %e, "verbs listener: rdma_accept failed");
                continue;
            }
            self.accepting.push(Accepting {
                conn,
                since: Instant::now(),
            });
        }
        Ok(())
    }

    /// The connection of an answered request (its QP brought up to RTS).
    fn connection(
        &self,
        (qp, cq, pd): (RcQp, Cq, Arc<ProtectionDomain>),
        id: Arc<Identifier>,
    ) -> VerbsConnection {
        let peer_qpn = id
            .get_qp_attr(QueuePairState::ReadyToReceive)
            .map(|a| a.dest_qp_num())
            .unwrap_or(0);
        // rdma_cm does not expose the peer's address through sideway; the QP's address vector
        // holds the GID (and LID) the peer sends from, which is what its own connection reports
        // as `local()`: callers match accepted connections to peers by that text.
        let (gid, lid) = qp.remote_gid_lid().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "verbs listener: peer address unknown");
            ([0; 16], 0)
        });
        let peer = EndpointAddr::Verbs {
            gid,
            qpn: peer_qpn,
            qkey: 0,
            lid,
        };
        let link = CmLink {
            id,
            channel: Arc::clone(&self.channel),
            own_channel: false,
            closed: Arc::new(PeerGone::default()),
        };
        VerbsConnection::new(&self.dev, (qp, cq, pd), link, &self.config, peer)
    }

    /// Turns an accepting entry into a ready connection.
    fn established(&mut self, index: usize) {
        let a = self.accepting.swap_remove(index);
        if self.ready.len() >= READY_MAX {
            tracing::warn!("verbs listener: too many unclaimed connections; dropping one");
            return;
        }
        self.accepted.retain(|(weak, _)| weak.strong_count() > 0);
        self.accepted.push((a.conn.cm_id(), a.conn.peer_gone()));
        self.ready.push_back(a.conn);
    }

    /// Routes one event: new requests are queued, ESTABLISHED completes an accept, failures
    /// drop an accepting entry, disconnects set a handed-out connection's close flag.
    fn route(&mut self, event: Event) {
        let kind = event.event_type();
        if kind == EventType::ConnectRequest {
            match event.cm_id() {
                Some(id) if self.queued.len() < ACCEPT_QUEUE_MAX => self.queued.push_back(id),
                _ => tracing::warn!("verbs listener: request queue full; refusing a request"),
            }
            return;
        }
        let Some(id) = event.cm_id() else {
            return;
        };
        if let Some(i) = self.accepting.iter().position(|a| a.conn.is_for(&id)) {
            match kind {
                EventType::Established => self.established(i),
                EventType::AddressChange | EventType::TimewaitExit => {}
                other => {
                    tracing::debug!(?other, status = event.status(), "verbs accept failed");
                    self.accepting.swap_remove(i);
                }
            }
            return;
        }
        let handed_out = self
            .accepted
            .iter()
            .find(|(weak, _)| weak.upgrade().is_some_and(|a| Arc::ptr_eq(&a, &id)));
        if let Some((_, closed)) = handed_out {
            if ends_connection(&kind) {
                closed.mark();
            }
        }
    }

    fn expire_accepting(&mut self) {
        let before = self.accepting.len();
        self.accepting
            .retain(|a| a.since.elapsed() < ESTABLISH_WAIT_MAX);
        if self.accepting.len() < before {
            tracing::warn!(
                dropped = before - self.accepting.len(),
                "verbs listener: peers never completed the connection"
            );
        }
    }
}

impl Listener for VerbsListener {
    type Conn = VerbsConnection;

    fn accept(&mut self, timeout: Duration) -> Result<Option<VerbsConnection>> {
        let deadline = cm::deadline_after(timeout);
        loop {
            if let Some(conn) = self.ready.pop_front() {
                return Ok(Some(conn));
            }
            self.expire_accepting();
            self.answer_queued()?;
            match cm::next_event(&self.channel, deadline)? {
                Some(event) => self.route(event),
                None => return Ok(None),
            }
        }
    }

    fn local_addr(&self) -> SocketAddr {
        self.bind
    }

    fn shared_receives_posted(&self) -> Option<usize> {
        self.pool.as_ref().map(|pool| pool.posted())
    }

    fn serve_streams(&mut self, shared_receives: u32) -> bool {
        self.prepost_stream_receives = true;
        if shared_receives == 0 || self.srq.is_some() || self.pool.is_some() {
            return self.pool.is_some();
        }
        let pool = ReceivePool::new(&self.dev, shared_receives).and_then(|pool| {
            check_srq_fits(&self.dev, &self.config, pool.srq())?;
            Ok(pool)
        });
        match pool {
            Ok(pool) => {
                self.srq = Some(Arc::clone(pool.srq()));
                self.pool = Some(pool);
                true
            }
            Err(e) => {
                // Each connection posts its own receives instead, as with no pool.
                tracing::warn!(error = %e, "verbs listener: no shared receive pool");
                false
            }
        }
    }
}
