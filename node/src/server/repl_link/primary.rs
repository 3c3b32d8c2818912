//! The primary's side of replication links: a fabric listener on `repl-fabric-port` whose
//! accepted connections wait for their replica's `REPLCONF RDMA-LINK` (sent over TCP with the
//! replica's ring advert and PSYNC), and a shipper thread per linked replica.
//!
//! Matching: the replica names its fabric endpoint (`EndpointAddr` text) in the REPLCONF; the
//! accepted connection whose peer has that name is its link. The REPLCONF handler hands the
//! request to the accept thread (which owns the provider-typed connections) through the
//! [`LinkDesk`] and waits a bounded time for the `LinkAccept` bytes.

use super::peer_watch::PeerWatch;
use super::snapshot;
use crate::node_state::replication::{ReplicaAddr, ReplicaId};
use crate::node_state::stats::Stats;
use crate::replication::handshake::{LinkAccept, LinkDecision, LinkRequest};
use crate::replication::psync::{PsyncDecision, PsyncRequest};
use crate::replication::ship::{ShipStart, Shipper};
use crate::server::{unix_millis, Server};
use bus::select::{with_provider, WithProvider};
use bus::{Connection, EndpointConfig, Listener, Provider};
use parking_lot::Mutex;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Accepted connections waiting for their REPLCONF: replicas connect just before they send
/// it, so more than a few waiting means strays; the oldest is dropped. Nothing is registered
/// for them: a link's regions (ack and applied words) are registered once its REPLCONF was
/// accepted (authenticated connection; in cluster mode, proven by the cluster secret).
const PENDING_LINKS_MAX: usize = 16;
/// How long an accepted connection waits for its REPLCONF.
const PENDING_LINK_TTL: Duration = Duration::from_secs(10);
/// How long a REPLCONF RDMA-LINK waits for its connection and the shipper's setup (a full
/// sync's snapshot is built in this time).
pub const LINK_SETUP_TIMEOUT: Duration = Duration::from_secs(5);
/// Requests queued for the accept thread; more are refused (each holds a client waiting).
const LINK_ASKS_MAX: usize = 16;
/// How often the accept thread looks at requests and the shutdown flag.
const ACCEPT_POLL: Duration = Duration::from_millis(20);
pub use crate::node_state::services::replication_links::ReplicaNode;

/// Completions read per pending connection per round.
const PENDING_POLL_MAX: usize = 16;
/// A replica's request, on its way to the accept thread.
struct LinkAsk {
    peer: String,
    request: LinkRequest,
    addr: ReplicaAddr,
    node: ReplicaNode,
    deadline: Instant,
    reply: mpsc::SyncSender<Result<Vec<u8>, String>>,
}

/// Where REPLCONF RDMA-LINK hands requests to the running acceptor.
#[derive(Default)]
pub struct LinkDesk {
    inbox: Mutex<Option<mpsc::SyncSender<LinkAsk>>>,
    port: AtomicU16,
}

impl LinkDesk {
    /// The fabric port replicas link to; 0 when not listening.
    pub fn port(&self) -> u16 {
        self.port.load(Relaxed)
    }

    /// Links the replica whose fabric endpoint is `peer`; returns the encoded `LinkAccept`.
    /// Blocks the calling thread up to [`LINK_SETUP_TIMEOUT`].
    pub fn link(
        &self,
        peer: String,
        request: LinkRequest,
        addr: ReplicaAddr,
        node: ReplicaNode,
    ) -> Result<Vec<u8>, String> {
        let (reply, answer) = mpsc::sync_channel(1);
        let ask = LinkAsk {
            peer,
            request,
            addr,
            node,
            deadline: Instant::now() + LINK_SETUP_TIMEOUT,
            reply,
        };
        {
            let inbox = self.inbox.lock();
            let Some(inbox) = inbox.as_ref() else {
                return Err("ERR replication links are not accepted (repl-fabric-port 0)".into());
            };
            inbox
                .try_send(ask)
                .map_err(|_| "ERR too many replication links being set up".to_string())?;
        }
        answer
            .recv_timeout(LINK_SETUP_TIMEOUT + Duration::from_secs(1))
            .map_err(|_| "ERR replication link setup timed out".to_string())?
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReplListenError {
    #[error("replication link listener on {addr} ({provider}): {error}")]
    Listen {
        addr: SocketAddr,
        provider: String,
        error: bus::BusError,
    },
    #[error("fabric-provider {provider}: {error}")]
    Provider {
        provider: String,
        error: bus::BusError,
    },
    #[error("replication link accept thread: {0}")]
    Thread(std::io::Error),
}

/// Least queue depth of a replication link: the ring writer keeps up to `send_wr` WRITEs in
/// flight, and a node has a few links, so deep queues buy throughput for little memory.
/// `rdma-send-wr`/`rdma-recv-wr` size client connections (255 by default) and may raise
/// this, not lower it.
pub const REPL_LINK_WR_MIN: u64 = 1024;

/// The endpoint settings of replication links: the fabric listener's, with queues at least
/// [`REPL_LINK_WR_MIN`] deep.
pub fn endpoint_config(server: &Server) -> EndpointConfig {
    let fabric = server.config.read().fabric.clone();
    let send_wr = fabric.send_wr.max(REPL_LINK_WR_MIN);
    let recv_wr = fabric.recv_wr.max(REPL_LINK_WR_MIN);
    EndpointConfig {
        max_inline: fabric.max_inline as usize,
        send_wr: send_wr as u32,
        recv_wr: recv_wr as u32,
        cq_size: match fabric.cq_size {
            0 => (send_wr + recv_wr) as u32,
            n => (n.max(send_wr + recv_wr)) as u32,
        },
    }
}

/// Listens for replication links if `repl-fabric-port` is set or the node is in cluster mode,
/// on the first `rdma-bind` address (`bind`'s when unset; see `Config::fabric_bind_ip`).
pub fn start_configured(server: &Arc<Server>) -> Result<(), ReplListenError> {
    let (port, bind, provider, cluster_mode) = {
        let c = server.config.read();
        (
            c.repl_fabric_port,
            c.fabric_bind_ip(),
            c.fabric.provider.name().to_string(),
            c.cluster.enabled,
        )
    };
    // In cluster mode any node may become a primary (CLUSTER REPLICATE, a failover), so
    // every node listens: on a free port when none is set (replicas ask for it with
    // `REPLCONF RDMA-PORT` over TCP, so it need not be known in advance).
    if port == 0 && !cluster_mode {
        return Ok(());
    }
    // No address at all (an unreadable rdma-bind): loopback, never every interface.
    let ip = bind.unwrap_or(Ipv4Addr::LOCALHOST.into());
    let job = ListenJob {
        server: server.clone(),
        addr: SocketAddr::new(ip, port),
    };
    with_provider(&provider, job).map_err(|error| ReplListenError::Provider {
        provider: provider.clone(),
        error,
    })?
}

struct ListenJob {
    server: Arc<Server>,
    addr: SocketAddr,
}

impl WithProvider for ListenJob {
    type Output = Result<(), ReplListenError>;

    fn run<P: Provider>(self, provider: P) -> Self::Output {
        let config = endpoint_config(&self.server);
        let listener =
            provider
                .listen(self.addr, &config)
                .map_err(|error| ReplListenError::Listen {
                    addr: self.addr,
                    provider: provider.name().to_string(),
                    error,
                })?;
        let local = listener.local_addr();
        let (tx, rx) = mpsc::sync_channel(LINK_ASKS_MAX);
        *self.server.repl_links.inbox.lock() = Some(tx);
        self.server.repl_links.port.store(local.port(), Relaxed);
        let server = self.server.clone();
        std::thread::Builder::new()
            .name("node-repl-accept".into())
            .spawn(move || accept_loop::<P>(server, listener, rx, config))
            .map_err(ReplListenError::Thread)?;
        tracing::info!(addr = %local, "accepting replication links (fabric)");
        Ok(())
    }
}

fn accept_loop<P: Provider>(
    server: Arc<Server>,
    mut listener: P::Listener,
    asks: mpsc::Receiver<LinkAsk>,
    config: EndpointConfig,
) {
    let mut pending: Vec<(String, P::Conn, Instant)> = Vec::new();
    let mut scratch = Vec::with_capacity(PENDING_POLL_MAX);
    let mut waiting: Vec<LinkAsk> = Vec::new();
    let next_id = AtomicU64::new(1);
    // The running links by replica address: a replica that links again (its link dropped,
    // CLIENT KILL TYPE master) supersedes its older link, which stops at once rather than
    // after REPLICA_SILENCE_LIMIT. Entries of ended threads are pruned.
    let mut links: Vec<(ReplicaAddr, Arc<AtomicBool>)> = Vec::new();
    while !server.shutdown.is_triggered() {
        links.retain(|(_, stop)| Arc::strong_count(stop) > 1 && !stop.load(Relaxed));
        match listener.accept(ACCEPT_POLL) {
            Ok(Some(conn)) => {
                let peer = conn.peer().to_string();
                tracing::debug!(%peer, "replication link connection accepted");
                if pending.len() == PENDING_LINKS_MAX {
                    pending.remove(0);
                }
                pending.push((peer, conn, Instant::now()));
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "replication link accept failed");
                std::thread::sleep(ACCEPT_POLL);
            }
        }
        pending.retain(|(_, _, at)| at.elapsed() < PENDING_LINK_TTL);
        // Their provider progress runs like any connection's (on manual-progress providers a
        // connection nobody polls leaves its peer's traffic in limbo); what arrives is not
        // wanted, and a peer that sends past the bounds or breaks the connection is dropped.
        pending.retain_mut(|(peer, conn, _)| {
            scratch.clear();
            match conn.poll(&mut scratch, PENDING_POLL_MAX) {
                Ok(_) => true,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "pending replication connection dropped");
                    false
                }
            }
        });
        waiting.extend(asks.try_iter());
        let now = Instant::now();
        let mut still = Vec::new();
        for ask in waiting.drain(..) {
            let found = pending.iter().position(|(peer, _, _)| *peer == ask.peer);
            match found {
                Some(i) => {
                    let (_, conn, _) = pending.remove(i);
                    for (_, stop) in links.iter().filter(|(addr, _)| *addr == ask.addr) {
                        stop.store(true, Relaxed);
                    }
                    let id = next_id.fetch_add(1, Relaxed);
                    let stop = Arc::new(AtomicBool::new(false));
                    let answer = start_link::<P>(&server, conn, &config, id, &ask, &stop);
                    if answer.is_ok() {
                        links.push((ask.addr.clone(), stop));
                    }
                    let _ = ask.reply.send(answer);
                }
                None if now >= ask.deadline => {
                    let _ = ask
                        .reply
                        .send(Err("ERR no fabric connection from that endpoint".into()));
                }
                None => still.push(ask),
            }
        }
        waiting = still;
    }
    *server.repl_links.inbox.lock() = None;
}

/// INFO stats' sync counters, as Redis counts them: every full sync, every continued
/// history, and a full sync given to a replica that asked to continue one.
fn count_decision(server: &Server, request: &PsyncRequest, decision: &PsyncDecision) {
    let stats = &server.stats;
    match decision {
        PsyncDecision::Continue { .. } => Stats::add(&stats.sync_partial_ok, 1),
        PsyncDecision::FullResync { .. } => {
            Stats::add(&stats.sync_full, 1);
            if request.history.is_some() {
                Stats::add(&stats.sync_partial_err, 1);
            }
        }
    }
}

/// Decides the PSYNC, builds the shipper (with a snapshot for a full sync), attaches the
/// replica and starts its thread; returns the encoded `LinkAccept`.
fn start_link<P: Provider>(
    server: &Arc<Server>,
    conn: P::Conn,
    config: &EndpointConfig,
    id: ReplicaId,
    ask: &LinkAsk,
    stop: &Arc<AtomicBool>,
) -> Result<Vec<u8>, String> {
    // The backlog must exist before a snapshot's offset is read: the bytes after it are kept.
    server
        .replication
        .ensure_backlog()
        .map_err(|e| format!("ERR {e}"))?;
    let decision = server.replication.psync(&ask.request.psync);
    count_decision(server, &ask.request.psync, &decision);
    let (start, link_decision, last_applied) = match decision {
        PsyncDecision::Continue { from, .. } => (
            ShipStart::Continue { from },
            LinkDecision::from_psync(&decision, server.replication.history_claim()),
            from.saturating_sub(1),
        ),
        PsyncDecision::FullResync { replid, .. } => {
            let snap = snapshot::take(server);
            tracing::info!(
                replica = id,
                offset = snap.offset,
                bytes = snap.bytes.len(),
                "full sync: snapshot taken"
            );
            let offset = snap.offset;
            (
                ShipStart::FullSync {
                    offset,
                    snapshot: snap.bytes,
                },
                LinkDecision::FullResync {
                    replid,
                    offset,
                    claim: server.replication.history_claim(),
                },
                offset,
            )
        }
    };
    let shipper = Shipper::create(conn, ask.request.ring, config, start)
        .map_err(|e| format!("ERR replication link: {e}"))?;
    let (ring_ack, applied_word) = shipper
        .adverts()
        .map_err(|e| format!("ERR replication link: {e}"))?;
    let accept = LinkAccept {
        ring_ack,
        applied_word,
        decision: link_decision,
    };
    server
        .replication
        .attach_replica(id, ask.addr.clone(), 0, unix_millis())
        .map_err(|e| format!("ERR {e}"))?;
    // In cluster mode gossip says when the replica is dead or restarted (within the node
    // timeout, not `repl-timeout`).
    let watch = match (&server.cluster, ask.node.id) {
        (Some(cluster), Some(node)) => {
            let me = cluster.topology.read().myself().id;
            let timeout = server.config.read().cluster.node_timeout_ms;
            Some(PeerWatch::new(
                cluster,
                node,
                Some(me),
                ask.node.incarnation,
                timeout,
            ))
        }
        _ => None,
    };
    let thread_server = server.clone();
    let thread_stop = stop.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("node-repl-ship-{id}"))
        .spawn(move || {
            super::ship_thread::ship_loop(
                thread_server,
                shipper,
                id,
                last_applied,
                thread_stop,
                watch,
            )
        });
    if let Err(e) = spawned {
        server.replication.detach_replica(id);
        return Err(format!("ERR replication thread: {e}"));
    }
    // The fabric endpoint names the provider the link runs on (the verbs lane checks it).
    tracing::info!(
        replica = id,
        ip = %ask.addr.ip,
        port = ask.addr.port,
        peer = %ask.peer,
        "replica linked"
    );
    Ok(accept.encode())
}
