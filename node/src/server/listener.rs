//! TCP listeners: bind as redis-server does (`bind` addresses, `-` marking optional ones),
//! accept with `maxclients` and protected mode, and hand each socket to a connection task
//! (on a TLS listener, after the handshake: `tls_admit`).

use super::connection::Connection;
use super::Server;
use crate::node_state::client::ClientShared;
use crate::node_state::stats::Stats;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// How a listener's sockets are served: as they come (`port`), or after a TLS handshake
/// (`tls-port`).
#[derive(Clone)]
pub enum Transport {
    Plain,
    Tls(TlsAcceptor),
}

impl Transport {
    pub fn name(&self) -> &'static str {
        match self {
            Transport::Plain => "tcp",
            Transport::Tls(_) => "tls",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("could not create server TCP listening socket {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("bad bind address '{0}'")]
    BadAddress(String),
    #[error("no address to listen on")]
    Nothing,
}

/// Binds every configured address. Addresses written with a leading `-` may fail to bind
/// (an IPv6 wildcard on a host without IPv6, say); others are fatal, as in redis-server.
pub fn bind_all(bind: &[String], port: u16, backlog: u32) -> Result<Vec<TcpListener>, ListenError> {
    let mut listeners = Vec::new();
    for spec in bind {
        let (optional, host) = match spec.strip_prefix('-') {
            Some(h) => (true, h),
            None => (false, spec.as_str()),
        };
        let ip: IpAddr = match host {
            "*" => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            "::*" => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
            other => other
                .parse()
                .map_err(|_| ListenError::BadAddress(spec.clone()))?,
        };
        match bind_one(SocketAddr::new(ip, port), backlog) {
            Ok(l) => listeners.push(l),
            Err(e) if optional => {
                tracing::debug!(addr = %spec, error = %e, "optional bind address skipped")
            }
            Err(source) => {
                return Err(ListenError::Bind {
                    addr: format!("{host}:{port}"),
                    source,
                })
            }
        }
    }
    if listeners.is_empty() {
        return Err(ListenError::Nothing);
    }
    Ok(listeners)
}

fn bind_one(addr: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    if addr.is_ipv6() {
        // Like Redis: the IPv6 socket takes only IPv6, so `*` and `::*` can share the port.
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog.max(1) as i32)?;
    TcpListener::from_std(socket.into())
}

/// The pause after a failed `accept` (EMFILE and friends: the error repeats at once, so a
/// loop that retried straight away would spin on it).
pub const ACCEPT_ERROR_BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);

/// Accepts clients on `listener` until shutdown. Each socket is admitted on its own task, so
/// a slow TLS handshake holds up no one else.
pub async fn accept_loop(server: Arc<Server>, listener: TcpListener, transport: Transport) {
    let mut shutdown = server.shutdown.subscribe();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
                continue;
            }
        };
        Stats::add(&server.stats.connections_received, 1);
        match &transport {
            Transport::Plain => tokio::spawn(admit(server.clone(), stream, peer)),
            Transport::Tls(acceptor) => tokio::spawn(super::tls_admit::admit(
                server.clone(),
                stream,
                peer,
                acceptor.clone(),
            )),
        };
    }
}

async fn admit(server: Arc<Server>, mut stream: TcpStream, peer: SocketAddr) {
    prepare_socket(&server, &stream, peer);
    if let Some(refusal) = refusal(&server, peer) {
        let _ = stream.write_all(refusal).await;
        return;
    }
    let local = stream.local_addr().unwrap_or(peer);
    let Some(socket) = register(stream) else {
        return;
    };
    serve(server, socket, peer, local).await;
}

/// TCP options every client socket gets, plain or TLS.
pub(super) fn prepare_socket(server: &Server, stream: &TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let keepalive = server.config.read().tcp_keepalive;
    if let Err(e) = set_keepalive(stream, keepalive) {
        tracing::debug!(%peer, error = %e, "tcp-keepalive not set");
    }
}

/// The socket registered for read readiness (see `socket.rs`).
pub(super) fn register(stream: TcpStream) -> Option<super::socket::ClientSocket> {
    match stream.into_std().and_then(super::socket::ClientSocket::new) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "could not register a client socket");
            None
        }
    }
}

/// Why a new client may not be served (counted in `rejected_connections`), as the error
/// line Redis sends before closing: `maxclients` reached (handshakes in flight count), or
/// protected mode refusing a remote peer.
pub(super) fn refusal(server: &Server, peer: SocketAddr) -> Option<&'static [u8]> {
    let refusal: &'static [u8] =
        if server.clients.count_with_pending() as u64 >= server.hot.maxclients.load(Relaxed) {
            MAXCLIENTS_REACHED
        } else if server.hot.protected_mode.load(Relaxed)
            && !server.acl.default_needs_auth()
            && !peer.ip().is_loopback()
        {
            PROTECTED_MODE_DENIAL
        } else {
            return None;
        };
    Stats::add(&server.stats.rejected_connections, 1);
    Some(refusal)
}

/// Registers the client and serves it until it leaves.
pub(super) async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    server: Arc<Server>,
    stream: S,
    peer: SocketAddr,
    local: SocketAddr,
) {
    let shared = Arc::new(ClientShared::new(server.clients.next_id(), peer, local));
    server.clients.add(shared.clone());
    Connection::new(server, stream, shared).run().await;
}

pub const MAXCLIENTS_REACHED: &[u8] = b"-ERR max number of clients reached\r\n";

pub const PROTECTED_MODE_DENIAL: &[u8] = b"-DENIED Running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers, you may adopt one of the following solutions: 1) Disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting from the same host the server is running, however MAKE SURE the server is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// `tcp-keepalive <seconds>` as Redis applies it to each client: probes after that long
/// idle, then every third of it, three unanswered ones close the connection; so a client
/// that vanished (host down, cable cut) stops holding a `maxclients` slot even with
/// `timeout 0`. 0 leaves the socket without keepalive.
fn set_keepalive(stream: &TcpStream, secs: u64) -> std::io::Result<()> {
    if secs == 0 {
        return Ok(());
    }
    let probes = socket2::TcpKeepalive::new()
        .with_time(std::time::Duration::from_secs(secs))
        .with_interval(std::time::Duration::from_secs((secs / 3).max(1)))
        .with_retries(3);
    socket2::SockRef::from(stream).set_tcp_keepalive(&probes)
}
