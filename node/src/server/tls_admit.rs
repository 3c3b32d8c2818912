//! Admitting a client on the TLS port: the handshake on the connection's own task, within
//! `TLS_HANDSHAKE_TIMEOUT` and counted against `maxclients` while it runs, then the same
//! checks and service as a plain client.
//!
//! The socket is the same read-registered `ClientSocket` as a plain client's, under rustls.

use super::listener::{prepare_socket, refusal, register, serve};
use super::Server;
use crate::node_state::stats::Stats;
use crate::tls::{handshake, TLS_HANDSHAKE_TIMEOUT};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

pub async fn admit(
    server: Arc<Server>,
    stream: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
) {
    prepare_socket(&server, &stream, peer);
    // No slot, not even for a handshake: closed without a word, since a TLS client would
    // read a plaintext error line as a broken handshake anyway.
    if server.clients.count_with_pending() as u64 >= server.hot.maxclients.load(Relaxed) {
        Stats::add(&server.stats.rejected_connections, 1);
        tracing::debug!(%peer, "TLS connection closed: max number of clients reached");
        return;
    }
    let pending = server.clients.pending_admission();
    let local = stream.local_addr().unwrap_or(peer);
    let Some(socket) = register(stream) else {
        return;
    };
    let mut tls = match handshake(&acceptor, socket, TLS_HANDSHAKE_TIMEOUT).await {
        Ok(tls) => tls,
        Err(e) => {
            // Plaintext on the TLS port, an unknown or missing client certificate, a
            // silent peer: the socket closes when dropped here.
            tracing::info!(%peer, error = %e, "TLS client refused");
            return;
        }
    };
    drop(pending);
    // Past the handshake the refusals are readable, so they are sent as to a plain client.
    if let Some(refusal) = refusal(&server, peer) {
        let _ = tls.write_all(refusal).await;
        let _ = tls.flush().await;
        return;
    }
    serve(server, tls, peer, local).await;
}
