//! Starting and stopping a node.

use crate::config::Config;
use crate::server::{cron, listener, Server};
use anyhow::Context;
use std::sync::Arc;

/// Runs a node until SHUTDOWN, SIGTERM or SIGINT. Blocks the calling thread.
pub fn run(config: Config) -> anyhow::Result<()> {
    let threads = config.io_threads;
    // One io-thread (the default on 2 cores) gets tokio's single-threaded scheduler: the
    // same event loop shape as redis-server, without work-stealing bookkeeping per wake-up.
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    let runtime = builder
        .thread_name("node-io")
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(serve(config))
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let listeners = listener::bind_all(&config.bind, config.port, config.tcp_backlog)?;
    let pidfile = config.pidfile.clone();
    let cluster = if config.cluster.enabled {
        Some(crate::cluster::Cluster::start(&config).context("starting cluster mode")?)
    } else {
        None
    };
    let mut server = Server::new(config);
    server.cluster = cluster;
    let server = Arc::new(server);
    crate::persistence::load_at_start(&server).context("loading the dataset")?;
    if !pidfile.is_empty() {
        std::fs::write(&pidfile, format!("{}\n", std::process::id()))
            .with_context(|| format!("writing pidfile {pidfile}"))?;
    }
    for l in listeners {
        let addr = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
        tracing::info!(%addr, "ready to accept connections (tcp)");
        tokio::spawn(listener::accept_loop(server.clone(), l));
    }
    let fabric_listeners =
        crate::fabric::start::start_configured(&server).context("starting the fabric listener")?;
    crate::cluster::transport::node_bus::start_node_bus(&server)
        .context("starting the cluster bus")?;
    crate::repl_link::primary::start_configured(&server)
        .context("starting the replication link listener")?;
    start_replicaof(&server)?;
    tokio::spawn(cron::run(server.clone()));
    if server.config.read().io_threads <= 1 {
        let poller = server.clone();
        tokio::spawn(async move { poller.busy_poll.run(&poller.hot).await });
    }
    wait_for_stop(&server).await;
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
    crate::persistence::save_on_shutdown(&server);
    if !pidfile.is_empty() {
        let _ = std::fs::remove_file(&pidfile);
    }
    tracing::info!("bye");
    Ok(())
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
    crate::repl_link::follow(server, host, port).context("starting replication")?;
    Ok(())
}

async fn wait_for_stop(server: &Arc<Server>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        server.shutdown.wait().await;
        return;
    };
    let signal = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
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
        _ = term.recv() => tracing::warn!("second signal: not waiting for replicas"),
        _ = int.recv() => tracing::warn!("second signal: not waiting for replicas"),
    }
    server.shutdown.trigger(Default::default());
}
