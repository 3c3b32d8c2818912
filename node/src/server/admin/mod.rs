//! The admin gRPC API (`proto/admin.proto`, service `admin.v1.Admin`) on `admin-port`, with
//! `grpc.health.v1.Health` and server reflection beside it. The RPCs are thin: they read the
//! topology and keyspace, or start an operation that drives the existing cluster machinery
//! (CLUSTER MEET / REPLICATE / FAILOVER on the node concerned) and report it through the
//! [`operations`] registry.
//!
//! - [`auth`]: the bearer token check, and the rule that keeps a non-loopback admin port
//!   from starting without one;
//! - [`cluster_view`]: the topology as a `Cluster` message; [`watch_cluster`]: its stream;
//! - [`slot_stats`]: keys, bytes and ops/s per slot;
//! - [`operations`]: the coordinator's registry (ids, request_id idempotency, progress,
//!   watch, cancel); [`op_log`]: the same operations in the topology log's journal, which
//!   every node reads; [`op_supervisor`]: records their ends, passes cancels on, and has the
//!   leader adopt and resume an operation whose coordinator failed;
//! - [`failover_op`], [`add_node_op`]: the operations implemented so far; [`peer`]: the
//!   RESP connection they use to ask another node;
//! - [`service`]: the `Admin` trait over all of it.

pub mod add_node_op;
pub mod auth;
pub mod cluster_view;
pub mod failover_op;
pub mod op_log;
pub mod op_supervisor;
pub mod operations;
pub mod peer;
pub mod service;
pub mod slot_moves_plan;
pub mod slot_moves_run;
pub mod slot_stats;
pub mod stream_limit;
pub mod tls;
pub mod watch_cluster;

use crate::config::Config;
use crate::server::Server;
use proto::admin::v1::admin_server::AdminServer;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Pending connections per admin listener: the API is called by a handful of tools.
const ADMIN_BACKLOG: u32 = 64;

#[derive(Debug, thiserror::Error)]
pub enum AdminStartError {
    #[error(transparent)]
    Auth(#[from] auth::NoTokenBeyondLoopback),
    #[error("admin-port {port}: {source}")]
    Listen {
        port: u16,
        source: crate::server::listener::ListenError,
    },
    #[error("admin reflection service: {0}")]
    Reflection(String),
    #[error(transparent)]
    Tls(#[from] tls::AdminTlsError),
}

/// The admin port's listening sockets and, when `admin-tls-*` is set, its TLS context.
pub struct AdminListeners {
    sockets: Vec<TcpListener>,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

/// Binds `admin-port` on every `admin-bind` address (none when the port is 0), after the
/// token rule and with the TLS context read; a refusal stops the node's start.
pub fn bind(config: &Config) -> Result<AdminListeners, AdminStartError> {
    if config.admin.port == 0 {
        return Ok(AdminListeners {
            sockets: Vec::new(),
            tls: None,
        });
    }
    auth::check_start(config)?;
    let tls = tls::acceptor(&config.admin)?;
    if tls.is_none() && config.admin_beyond_loopback() {
        tracing::warn!(
            "the admin API reaches beyond loopback without TLS: its token travels in clear (set admin-tls-cert-file and admin-tls-key-file)"
        );
    }
    let sockets =
        crate::server::listener::bind_all(&config.admin.bind, config.admin.port, ADMIN_BACKLOG)
            .map_err(|source| AdminStartError::Listen {
                port: config.admin.port,
                source,
            })?;
    Ok(AdminListeners { sockets, tls })
}

/// Serves the admin API on `listeners` until the node shuts down.
pub async fn serve(
    server: Arc<Server>,
    listeners: AdminListeners,
    operations: Arc<operations::Operations>,
) -> Result<(), AdminStartError> {
    if listeners.sockets.is_empty() {
        return Ok(());
    }
    let token = server.config.read().admin.token.clone();
    let auth = auth::BearerCheck::new(&token);
    let service = service::AdminService::new(server.clone(), operations);
    let admin = AdminServer::with_interceptor(service, auth.clone());
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<AdminServer<service::AdminService>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::admin::v1::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| AdminStartError::Reflection(e.to_string()))?;
    // Reflection tells the schema only, but it is a door like any other: behind the token.
    // Health stays open, for orchestrators' probes that send no headers.
    let reflection = tonic::service::interceptor::InterceptedService::new(reflection, auth);
    tokio::spawn(slot_stats::sample_rates(server.clone()));
    for listener in listeners.sockets {
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let tls = listeners.tls.clone();
        tracing::info!(%addr, tls = tls.is_some(), "admin API (gRPC) ready");
        let router = tonic::transport::Server::builder()
            .add_service(health.clone())
            .add_service(reflection.clone())
            .add_service(admin.clone());
        let stopping = server.clone();
        tokio::spawn(async move {
            let stop = async move { stopping.shutdown.wait().await };
            let served = match tls {
                Some(acceptor) => {
                    let incoming = tls::incoming(listener, acceptor);
                    router.serve_with_incoming_shutdown(incoming, stop).await
                }
                None => {
                    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
                    router.serve_with_incoming_shutdown(incoming, stop).await
                }
            };
            if let Err(e) = served {
                tracing::error!(%addr, error = %e, "admin API stopped");
            }
        });
    }
    Ok(())
}
