//! Prometheus metrics on `metrics-port` (text exposition over HTTP, `GET /metrics`), bound to
//! `metrics-bind` (127.0.0.1 by default) and, when `metrics-token` is set, only for scrapers
//! that send `Authorization: Bearer <token>`; a non-loopback bind without a token refuses
//! the start, as the admin port does.
//!
//! - [`collect`]: what a scrape shows (redis_exporter's names where they exist);
//! - [`exposition`]: the text format;
//! - [`http`]: the one request a scraper sends, read within limits;
//! - [`migrations`]: the slot migrations this node drove.

pub mod collect;
pub mod exposition;
pub mod http;
pub mod migrations;

use crate::config::Config;
use crate::server::admin::auth::BearerCheck;
use crate::server::admin::operations::Operations;
use crate::server::Server;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Pending connections per metrics listener.
const METRICS_BACKLOG: u32 = 64;
/// Scrapes served at once; more get 503 at once (a scraper retries at its next interval).
pub const METRICS_CONNECTIONS_MAX: usize = 8;
/// How long a scraper may take to send its request head.
pub const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum MetricsStartError {
    #[error("metrics-bind {bind:?} reaches beyond loopback and metrics-token is empty: set metrics-token or bind the metrics port to 127.0.0.1; refusing to start")]
    NoTokenBeyondLoopback { bind: Vec<String> },
    #[error("metrics-port {port}: {source}")]
    Listen {
        port: u16,
        source: crate::server::listener::ListenError,
    },
}

/// Binds `metrics-port` on every `metrics-bind` address (none when the port is 0).
pub fn bind(config: &Config) -> Result<Vec<TcpListener>, MetricsStartError> {
    let m = &config.metrics;
    if m.port == 0 {
        return Ok(Vec::new());
    }
    if m.token.is_empty() && config.metrics_beyond_loopback() {
        return Err(MetricsStartError::NoTokenBeyondLoopback {
            bind: m.bind.clone(),
        });
    }
    crate::server::listener::bind_all(&m.bind, m.port, METRICS_BACKLOG).map_err(|source| {
        MetricsStartError::Listen {
            port: m.port,
            source,
        }
    })
}

/// Serves scrapes on `listeners` until the node shuts down.
pub fn serve(
    server: Arc<Server>,
    listeners: Vec<TcpListener>,
    operations: Option<Arc<Operations>>,
) {
    let check = BearerCheck::new(&server.config.read().metrics.token);
    let slots = Arc::new(tokio::sync::Semaphore::new(METRICS_CONNECTIONS_MAX));
    for listener in listeners {
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        tracing::info!(%addr, "metrics (Prometheus) ready");
        let (server, check, slots, operations) = (
            server.clone(),
            check.clone(),
            slots.clone(),
            operations.clone(),
        );
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    _ = server.shutdown.wait() => return,
                };
                let Ok((stream, _)) = accepted else {
                    continue;
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    tokio::spawn(answer_busy(stream));
                    continue;
                };
                let (server, check, operations) =
                    (server.clone(), check.clone(), operations.clone());
                tokio::spawn(async move {
                    scrape(server, check, operations, stream).await;
                    drop(slot);
                });
            }
        });
    }
}

async fn answer_busy(mut stream: TcpStream) {
    let reply = http::response(
        "503 Service Unavailable",
        "text/plain",
        b"too many scrapes at once\n",
        "Retry-After: 1\r\n",
    );
    let _ = tokio::time::timeout(REQUEST_READ_TIMEOUT, stream.write_all(&reply)).await;
}

async fn scrape(
    server: Arc<Server>,
    check: BearerCheck,
    operations: Option<Arc<Operations>>,
    mut stream: TcpStream,
) {
    let head = match tokio::time::timeout(REQUEST_READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(head)) => head,
        Ok(Err(e)) => {
            let reply = http::response(
                "400 Bad Request",
                "text/plain",
                format!("{e}\n").as_bytes(),
                "",
            );
            let _ = stream.write_all(&reply).await;
            return;
        }
        Err(_) => return,
    };
    let reply = if head.method != "GET" {
        http::response(
            "405 Method Not Allowed",
            "text/plain",
            b"GET only\n",
            "Allow: GET\r\n",
        )
    } else if head.path != "/metrics" && !head.path.starts_with("/metrics?") {
        http::response("404 Not Found", "text/plain", b"try /metrics\n", "")
    } else if !check.admits(head.authorization.as_deref().map(str::as_bytes)) {
        http::response(
            "401 Unauthorized",
            "text/plain",
            b"missing or wrong metrics token (send Authorization: Bearer <metrics-token>)\n",
            "WWW-Authenticate: Bearer\r\n",
        )
    } else {
        // A scrape may walk slot tables (metrics-slot-detail): off the runtime's threads.
        let body =
            tokio::task::spawn_blocking(move || collect::render(&server, operations.as_deref()))
                .await
                .unwrap_or_default();
        http::response(
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            body.as_bytes(),
            "",
        )
    };
    let _ = tokio::time::timeout(REQUEST_READ_TIMEOUT, stream.write_all(&reply)).await;
    let _ = stream.shutdown().await;
}

/// Reads up to the end of the request head, within [`http::REQUEST_HEAD_MAX`].
async fn read_head(stream: &mut TcpStream) -> Result<http::RequestHead, http::HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|_| http::HeadError::Malformed("connection closed"))?;
        if n == 0 {
            return Err(http::HeadError::Malformed("connection closed"));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = http::head_end(&buf) {
            return http::parse_head(&buf[..end]);
        }
        if buf.len() > http::REQUEST_HEAD_MAX {
            return Err(http::HeadError::TooLong);
        }
    }
}
