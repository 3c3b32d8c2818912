//! Starting and stopping a node.

mod open_files;
mod stop_signals;

pub use stop_signals::StopSignals;

use crate::config::Config;
use crate::server::{cron, listener, Server};
use anyhow::Context;
use std::sync::Arc;

/// Runs a node until SHUTDOWN, SIGTERM or SIGINT. Blocks the calling thread. `signals` were
/// installed by the caller before it started any thread (see [`StopSignals::install`]).
pub fn run(config: Config, signals: StopSignals) -> anyhow::Result<()> {
    open_files::raise_open_files_limit();
    crate::node_state::command_clock::calibrate();
    // tokio's multi-threaded scheduler even for one io-thread (the default on 2 cores): a
    // script that runs past `busy-reply-threshold` hands its worker's event loop to a fresh
    // thread (`block_in_place`, which the single-threaded scheduler cannot do) so that other
    // clients are answered BUSY and SCRIPT KILL is heard. Measured against the
    // single-threaded scheduler (scripts/ab-nodes.sh, 50 clients, pinned, LIFO slot off as
    // below): GET -P 1 within 1%, SET, GET and LPUSH -P 16 3-5% below on one machine; SET
    // 1.04 and GET 0.98 on another, within its noise (BENCHMARKS.md, "Work per request").
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // The multi-threaded scheduler polls the task woken last first (its LIFO slot): two
    // clients' requests that arrive together would run in the reverse order (an
    // UNSUBSCRIBE overtaken by another client's PUBLISH sent after it, as Redis's suite
    // caught). Without the slot, woken connections run in the order their events came, as
    // on Redis's event loop and tokio's single-threaded scheduler.
    #[cfg(tokio_unstable)]
    builder.disable_lifo_slot();
    let runtime = builder
        .worker_threads(config.io_threads.max(1))
        .thread_name("node-io")
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(serve(config, signals))
}

async fn serve(config: Config, mut signals: StopSignals) -> anyhow::Result<()> {
    let listeners = bind_listeners(&config)?;
    let admin_listeners = crate::server::admin::bind(&config).context("starting the admin API")?;
    let metrics_listeners =
        crate::server::metrics::bind(&config).context("starting the metrics endpoint")?;
    let pidfile = config.pidfile.clone();
    let mut config = config;
    if config.cluster.enabled {
        crate::server::persistence::cluster_secret_file::adopt(&mut config)
            .context("loading the cluster secret")?;
    }
    let cluster = if config.cluster.enabled {
        Some(
            crate::server::persistence::nodes_conf_file::start_cluster(&config)
                .context("starting cluster mode")?,
        )
    } else {
        None
    };
    crate::commands::install_table();
    let mut server = Server::new(config);
    server.cluster = cluster;
    let server = Arc::new(server);
    crate::commands::acl::load_at_start(server.as_ref())
        .map_err(|e| anyhow::anyhow!(e))
        .context("loading the ACL file")?;
    crate::server::persistence::load_at_start(&server).context("loading the dataset")?;
    if !pidfile.is_empty() {
        std::fs::write(&pidfile, format!("{}\n", std::process::id()))
            .with_context(|| format!("writing pidfile {pidfile}"))?;
    }
    let fabric_listeners = crate::server::fabric::start::start_configured(&server)
        .context("starting the fabric listener")?;
    if let Some(l) = fabric_listeners.first() {
        server
            .fabric_serving
            .set(crate::node_state::fabric_serving::FabricEndpoint {
                provider: l.provider.clone(),
                ip: l.local.ip(),
                port: l.local.port(),
            });
    }
    crate::server::cluster_bus::node_bus::start_node_bus(&server)
        .context("starting the cluster bus")?;
    crate::server::repl_link::primary::start_configured(&server)
        .context("starting the replication link listener")?;
    start_replicaof(&server)?;
    crate::server::slot_migration::supervisor::start(&server);
    let operations = Arc::new(crate::server::admin::operations::Operations::default());
    crate::server::admin::op_supervisor::start(&server, operations.clone());
    crate::server::admin::serve(server.clone(), admin_listeners, operations.clone())
        .await
        .context("starting the admin API")?;
    crate::server::metrics::serve(server.clone(), metrics_listeners, Some(operations));
    tokio::spawn(cron::run(server.clone()));
    let compacted = Arc::downgrade(&server);
    crate::db::compaction::spawn(move |step| match compacted.upgrade() {
        Some(server) => {
            step(server.dbs());
            true
        }
        None => false,
    })
    .context("starting the compaction thread")?;
    if server.config.read().io_threads <= 1 {
        let poller = server.clone();
        tokio::spawn(async move { poller.busy_poll.run(&poller.hot).await });
    }
    // TCP clients last, once the node is whole: the io runtime's workers run an accept loop
    // as soon as it is spawned, and a client's first command (CLUSTER MEET, REPLICAOF...)
    // must find the bus and the links started. Connections that came earlier wait in the
    // listen backlog.
    for (l, transport) in listeners {
        let addr = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
        tracing::info!(%addr, "ready to accept connections ({})", transport.name());
        tokio::spawn(listener::accept_loop(server.clone(), l, transport));
    }
    wait_for_stop(&server, &mut signals).await;
    tracing::info!("shutting down");
    for client in server.clients.all() {
        client.kill();
    }
    // The fabric threads see the shutdown flag and the kills; wait for them off the runtime.
    let _ = tokio::task::spawn_blocking(move || {
        for l in fabric_listeners {
            l.join();
        }
    })
    .await;
    crate::server::persistence::save_on_shutdown(&server);
    if !pidfile.is_empty() {
        let _ = std::fs::remove_file(&pidfile);
    }
    tracing::info!("bye");
    Ok(())
}

/// The client listeners: `port` (unless 0) and `tls-port` (unless 0) on every `bind`
/// address. The TLS context is built first, so a bad certificate or key refuses the start
/// before anything listens.
fn bind_listeners(
    config: &Config,
) -> anyhow::Result<Vec<(tokio::net::TcpListener, listener::Transport)>> {
    let tls = crate::tls::acceptor(&config.tls).context("setting up TLS")?;
    let mut listeners = Vec::new();
    if config.port != 0 {
        for l in listener::bind_all(&config.bind, config.port, config.tcp_backlog)? {
            listeners.push((l, listener::Transport::Plain));
        }
    }
    if let Some(acceptor) = tls {
        for l in listener::bind_all(&config.bind, config.tls.port, config.tcp_backlog)? {
            listeners.push((l, listener::Transport::Tls(acceptor.clone())));
        }
    }
    if listeners.is_empty() && config.fabric.port == 0 {
        anyhow::bail!("configured to not listen anywhere: port, tls-port and rdma-port are all 0");
    }
    Ok(listeners)
}

/// The `replicaof <host> <port>` directive: follow that primary from the start.
fn start_replicaof(server: &Arc<Server>) -> anyhow::Result<()> {
    let directive = server.config.read().replicaof.clone();
    let mut parts = directive.split_whitespace();
    let (Some(host), Some(port)) = (parts.next(), parts.next()) else {
        return Ok(());
    };
    if server.cluster.is_some() {
        anyhow::bail!("replicaof is not allowed in cluster mode");
    }
    let port: u16 = port.parse().context("replicaof port")?;
    crate::server::repl_link::follow(server, host, port).context("starting replication")?;
    Ok(())
}

async fn wait_for_stop(server: &Arc<Server>, signals: &mut StopSignals) {
    let signal = tokio::select! {
        signal = signals.next() => signal,
        _ = server.shutdown.wait() => return,
    };
    tracing::info!("received {signal}");
    // As SHUTDOWN without NOW: replicas get the last writes first, on a blocking thread so
    // that reads go on meanwhile; a second signal stops waiting.
    let waiting = server.clone();
    let wait = tokio::task::spawn_blocking(move || {
        crate::server::shutdown_replicas::wait_for_replicas(&waiting)
    });
    tokio::select! {
        _ = wait => {}
        signal = signals.next() => {
            tracing::warn!("second signal ({signal}): not waiting for replicas")
        }
    }
    server.shutdown.trigger(Default::default());
}
