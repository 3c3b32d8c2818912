//! TLS for the admin API (`admin-tls-cert-file`, `admin-tls-key-file`,
//! `admin-tls-ca-cert-file`): the rustls context, built once at start with the same code as
//! the client port's (`crate::tls`), and the stream of handshaken connections the gRPC server
//! takes in place of plain sockets.
//!
//! With a CA file the API is mutual TLS: a caller without a certificate that CA signed is
//! dropped in the handshake, before any gRPC byte (the bearer token is still asked after).
//! gRPC clients (grpcio, grpc-go) insist that the server picks ALPN `h2`, so it is offered.

use crate::config::params::AdminConfig;
use crate::tls::settings::{SettingNames, TlsAuthClients, TlsConfig};
use crate::tls::{handshake, TlsSetupError, TLS_HANDSHAKE_TIMEOUT};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;

/// The settings the admin context is read from (errors name them).
pub const ADMIN_TLS_SETTINGS: SettingNames = SettingNames {
    port: "admin-port",
    cert_file: "admin-tls-cert-file",
    key_file: "admin-tls-key-file",
    ca_cert_file: "admin-tls-ca-cert-file",
    // No directory form for the admin API: one CA file is what its callers carry.
    ca_cert_dir: "admin-tls-ca-cert-file",
};

/// Handshakes in progress at once per admin listener: the API serves a handful of tools, so
/// more than this many half-open connections is someone holding sockets; the excess is
/// closed at once.
pub const ADMIN_HANDSHAKES_MAX: usize = 64;
/// Handshaken connections waiting for the gRPC server to take them.
const ACCEPTED_QUEUE: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum AdminTlsError {
    #[error("admin-tls-ca-cert-file is set but admin-tls-cert-file and admin-tls-key-file are not (mutual TLS needs the server's own certificate)")]
    CaWithoutCertificate,
    #[error("admin API TLS: {0}")]
    Setup(#[from] TlsSetupError),
}

/// The acceptor for the admin port, or None when the admin API is plain (no certificate
/// and key set; one without the other is an error, named).
pub fn acceptor(admin: &AdminConfig) -> Result<Option<TlsAcceptor>, AdminTlsError> {
    if admin.tls_cert_file.is_empty() && admin.tls_key_file.is_empty() {
        if !admin.tls_ca_cert_file.is_empty() {
            return Err(AdminTlsError::CaWithoutCertificate);
        }
        return Ok(None);
    }
    let settings = TlsConfig {
        port: admin.port,
        cert_file: admin.tls_cert_file.clone(),
        key_file: admin.tls_key_file.clone(),
        ca_cert_file: admin.tls_ca_cert_file.clone(),
        auth_clients: match admin.tls_ca_cert_file.is_empty() {
            true => TlsAuthClients::No,
            false => TlsAuthClients::Yes,
        },
        ..TlsConfig::default()
    };
    let mut context = crate::tls::context::server_config(&settings, &ADMIN_TLS_SETTINGS)?;
    context.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(TlsAcceptor::from(Arc::new(context))))
}

/// The connections of `listener` once their handshake is done, as the gRPC server's
/// incoming stream. Handshakes run in their own tasks (a slow one holds nobody up), at most
/// [`ADMIN_HANDSHAKES_MAX`] at once and each within [`TLS_HANDSHAKE_TIMEOUT`]; failed ones
/// are logged and dropped. The accept loop ends when the server drops the stream.
pub fn incoming(
    listener: TcpListener,
    acceptor: TlsAcceptor,
) -> ReceiverStream<std::io::Result<TlsStream<TcpStream>>> {
    let (tx, rx) = mpsc::channel(ACCEPTED_QUEUE);
    let slots = Arc::new(Semaphore::new(ADMIN_HANDSHAKES_MAX));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = tx.closed() => return,
            };
            let (socket, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "admin API: accept failed");
                    tokio::time::sleep(crate::server::listener::ACCEPT_ERROR_BACKOFF).await;
                    continue;
                }
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                tracing::warn!(%peer, "admin API: too many TLS handshakes in progress; connection closed");
                continue;
            };
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let _slot = slot;
                match handshake(&acceptor, socket, TLS_HANDSHAKE_TIMEOUT).await {
                    Ok(tls) => {
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Err(e) => tracing::info!(%peer, error = %e, "admin API: TLS handshake refused"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}
