//! The server side of one TLS handshake, bounded in time: a client that connects and then
//! says nothing, or dribbles its hello, must not hold a socket and a task for long.

use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Longest handshake allowed (a handshake on a live network takes a few round trips; ten
/// seconds allow for a slow one).
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("TLS handshake not done within {0:?}")]
    TimedOut(Duration),
    /// Not TLS (plaintext on the TLS port), a certificate refused, a protocol error, or the
    /// peer leaving.
    #[error("TLS handshake failed: {0}")]
    Failed(std::io::Error),
}

/// Runs the handshake on `stream` within `limit`.
pub async fn handshake<S>(
    acceptor: &TlsAcceptor,
    stream: S,
    limit: Duration,
) -> Result<TlsStream<S>, HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match tokio::time::timeout(limit, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Ok(tls),
        Ok(Err(e)) => Err(HandshakeError::Failed(e)),
        Err(_) => Err(HandshakeError::TimedOut(limit)),
    }
}
