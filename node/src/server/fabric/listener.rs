//! The fabric listener for clients: accepts connections on `rdma-bind`:`rdma-port` with any
//! provider, wraps each in a server-side Stream (Valkey-over-RDMA framing) and hands it to a
//! polling thread, round-robin.

use super::client::FabricClient;
use super::poller::Admission;
use super::pollers::{self, PollerThread, Pollers};
use super::preauth::{PreAuth, FABRIC_AUTH_DEADLINE, FABRIC_PREAUTH_BUFFER};
use crate::node_state::client::ClientShared;
use crate::node_state::stats::Stats;
use crate::server::session::Session;
use crate::server::Server;
use bus::stream::Stream;
use bus::{EndpointConfig, Listener, Provider};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// libfabric's RDM endpoints (and the simulator) keep no connection state, so a killed client
/// is invisible there; verbs RC reports it through the QP and rdma_cm, and Valkey clients send
/// no keepalives, so verbs gets no limit.
fn needs_silence_limit(provider: &str) -> bool {
    provider != "verbs"
}

/// How often the accept thread looks at the shutdown flag.
const ACCEPT_POLL: Duration = Duration::from_millis(100);

/// The running fabric listener: its accept thread (which owns the pollers), joined on
/// shutdown.
pub struct FabricListener {
    pub local: SocketAddr,
    pub provider: String,
    accept: JoinHandle<Vec<PollerThread>>,
}

impl FabricListener {
    /// Waits for the accept thread and the pollers to finish (after shutdown was triggered
    /// and the clients were killed), except pollers stuck for good.
    pub fn join(self) {
        if let Ok(pollers) = self.accept.join() {
            pollers::join_all(pollers);
        }
    }
}

/// Binds and starts serving on the provider `P`.
pub fn start<P: Provider>(
    server: Arc<Server>,
    provider: P,
    bind: SocketAddr,
) -> Result<FabricListener, bus::BusError> {
    let fabric = server.config.read().fabric.clone();
    let endpoint = EndpointConfig {
        max_inline: fabric.max_inline as usize,
        send_wr: fabric.send_wr as u32,
        recv_wr: fabric.recv_wr as u32,
        cq_size: match fabric.cq_size {
            // With a receive pool any of its receives may complete on any client's CQ.
            0 => (fabric.send_wr + fabric.recv_wr.max(fabric.srq_depth)) as u32,
            n => n as u32,
        },
    };
    endpoint.validate()?;
    let mut listener = provider.listen(bind, &endpoint)?;
    // Every connection becomes a client's Stream: verbs gives them one receive pool (or,
    // with `rdma-srq-depth 0`, posts each one's first receives before it answers the
    // client): no RNR NAK for the client's first message either way.
    if listener.serve_streams(fabric.srq_depth as u32) {
        tracing::info!(
            depth = fabric.srq_depth,
            "fabric clients share a receive pool"
        );
        server
            .stats
            .fabric_shared_receives
            .store(fabric.srq_depth, Relaxed);
    }
    let local = listener.local_addr();
    let name = provider.name().to_string();
    let thread_error = |what: &'static str, e: std::io::Error| bus::BusError::Invalid {
        what,
        reason: e.to_string(),
    };
    let pollers = Pollers::start(server.clone(), fabric.poll_threads)
        .map_err(|e| thread_error("fabric poller thread", e))?;
    let rx_size = fabric.rx_size as usize;
    let accept_server = server.clone();
    let accept = std::thread::Builder::new()
        .name("node-fabric-accept".into())
        .spawn(move || accept_loop(accept_server, provider, listener, pollers, rx_size, local))
        .map_err(|e| thread_error("fabric accept thread", e))?;
    Ok(FabricListener {
        local,
        provider: name,
        accept,
    })
}

fn accept_loop<P: Provider>(
    server: Arc<Server>,
    provider: P,
    mut listener: P::Listener,
    mut pollers: Pollers<P::Conn>,
    rx_size: usize,
    local: SocketAddr,
) -> Vec<PollerThread> {
    let mut preauth = PreAuth::default();
    let unauthenticated_closed = &server.stats.fabric_unauthenticated_closed;
    while !server.shutdown.is_triggered() {
        pollers.watch();
        preauth.expire(FABRIC_AUTH_DEADLINE, unauthenticated_closed);
        server
            .stats
            .fabric_handshakes_dropped
            .store(listener.dropped_handshakes(), Relaxed);
        if let Some(posted) = listener.shared_receives_posted() {
            server
                .stats
                .fabric_shared_receives_posted
                .store(posted as u64, Relaxed);
        }
        let conn = match listener.accept(ACCEPT_POLL) {
            Ok(Some(c)) => c,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "fabric accept failed");
                std::thread::sleep(ACCEPT_POLL);
                continue;
            }
        };
        Stats::add(&server.stats.connections_received, 1);
        Stats::add(&server.stats.fabric_connections_received, 1);
        let peer = bus::Connection::peer(&conn).clone();
        // Decided before anything is registered: a refused or unproven peer gets only the
        // pre-auth window (about 45 KiB), never `rdma-rx-size`.
        let over_limit = server.clients.count() as u64 >= server.hot.maxclients.load(Relaxed);
        // Protected mode as on TCP, judged by the listener's address because not every
        // provider tells the peer's IP: without a password only a loopback listener serves.
        let unprotected = server.hot.protected_mode.load(Relaxed)
            && !server.acl.default_needs_auth()
            && !local.ip().is_loopback();
        let needs_auth = server.acl.default_needs_auth();
        let small = over_limit || unprotected || needs_auth;
        let opened = if small {
            Stream::server_preauth(conn, rx_size)
        } else {
            Stream::server(conn, rx_size)
        };
        let stream = match opened {
            Ok(mut s) => {
                if needs_silence_limit(provider.name()) {
                    // A client silent this long on a provider that cannot report a dead peer
                    // is taken as gone.
                    s.set_peer_silence_limit(Some(bus::stream::PEER_SILENCE_MAX));
                }
                s
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "fabric stream setup failed");
                continue;
            }
        };
        // Fabric peers have no IP address of their own in every provider; CLIENT LIST shows
        // the unspecified address and the listener's.
        let peer_addr = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0);
        let shared = Arc::new(ClientShared::new(
            server.clients.next_id(),
            peer_addr,
            local,
        ));
        let session = if small {
            Session::with_buffers(server.clone(), shared.clone(), FABRIC_PREAUTH_BUFFER)
        } else {
            Session::new(server.clone(), shared.clone())
        };
        let mut client = FabricClient::new(stream, session);
        if over_limit {
            Stats::add(&server.stats.rejected_connections, 1);
            client.reject(b"-ERR max number of clients reached\r\n");
        } else if unprotected {
            Stats::add(&server.stats.rejected_connections, 1);
            client.reject(crate::server::listener::PROTECTED_MODE_DENIAL);
        } else if needs_auth {
            let max = server.config.read().fabric.unauthenticated_max as usize;
            client.await_proof(preauth.admit(shared.clone(), max, unauthenticated_closed));
        }
        server.clients.add(shared);
        tracing::debug!(%peer, "fabric client accepted");
        pollers.admit(Admission { client });
    }
    pollers.close()
}
