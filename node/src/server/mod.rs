//! The running node: shared state, the TCP listener, per-connection loops and the cron.

pub mod admin;
pub mod blocking;
pub mod busy_poll;
pub mod client;
pub mod clients;
pub mod cluster_bus;
pub mod command_stats;
pub mod connection;
pub mod cron;
pub mod error_stats;
pub mod fabric;
pub mod hot;
pub mod input_buffer;
pub mod latency_monitor;
#[cfg(test)]
mod lease_wait_tests;
pub mod listener;
pub mod metrics;
pub mod migrate_links;
pub mod persistence;
pub mod pubsub;
pub mod repl_link;
pub mod replica_of;
pub mod replication;
#[cfg(test)]
mod replication_tests;
pub mod reply_mode;
pub mod session;
pub mod shutdown;
pub mod shutdown_replicas;
pub mod slowlog;
pub mod socket;
pub mod stats;
pub mod sync_acks;
pub mod tls_admit;
pub mod watch;
pub mod write_stream;

pub use crate::clock::{lru_clock, unix_millis};
pub use client::{Client, ClientShared};

use crate::config::Config;
use crate::db::memory::MemoryGauge;
use crate::db::Keyspace;
use crate::server::persistence::SnapshotState;
use parking_lot::RwLock;
use std::time::Instant;

/// Everything the connections of one node share.
pub struct Server {
    pub keyspace: Keyspace,
    pub config: RwLock<Config>,
    /// Config values read on every command, mirrored as atomics.
    pub hot: hot::HotConfig,
    pub stats: stats::Stats,
    /// Per-command calls, time, refusals and latency (INFO commandstats, latencystats).
    pub command_stats: command_stats::CommandStats,
    /// Slow events for LATENCY LATEST/HISTORY (`latency-monitor-threshold`).
    pub latency_monitor: latency_monitor::LatencyMonitor,
    pub clients: clients::ClientRegistry,
    pub watches: watch::Watches,
    pub blocking: blocking::Blocking,
    pub pubsub: pubsub::PubSub,
    pub memory: MemoryGauge,
    pub snapshot: SnapshotState,
    pub slowlog: slowlog::SlowLog,
    pub shutdown: shutdown::Shutdown,
    pub started: Instant,
    pub started_unix_ms: u64,
    /// 40 hex characters, new at every start (INFO `run_id`).
    pub run_id: String,
    /// Cluster mode state; None unless `cluster-enabled yes` (set once at start).
    pub cluster: Option<crate::cluster::Cluster>,
    /// MIGRATE's cached connections to target nodes.
    pub migrate_links: migrate_links::MigrateLinks,
    /// Replication ids, backlog, replicas' acknowledgements, WAITing clients.
    pub replication: replication::Replication,
    /// The primary this node follows (REPLICAOF), if any.
    pub replica_of: replica_of::ReplicaOf,
    /// The primary's replication-link acceptor, once `repl-fabric-port` listens.
    pub repl_links: crate::server::repl_link::primary::LinkDesk,
    /// The single-threaded event loop's polling after reads (`io-busy-poll-us`).
    pub busy_poll: busy_poll::BusyPoll,
    /// The append-only file: the log, its rewrites, its files.
    pub aof: crate::server::persistence::aof::Aof,
    /// What the start found of the previous run's replication (identity, exact history).
    pub loaded_history: parking_lot::Mutex<crate::server::persistence::identity::LoadedHistory>,
}

impl Server {
    pub fn new(config: Config) -> Self {
        crate::commands::install_table();
        let hot = hot::HotConfig::from(&config);
        let replication = replication::Replication::new(
            crate::replication::ids::ReplicationIds::new(&mut rand::thread_rng()),
            config.repl_backlog_size as usize,
        );
        if config.repl_backlog_eager {
            if let Err(e) = replication.ensure_backlog() {
                tracing::error!(error = %e, "cannot create the replication backlog");
            }
        }
        let aof = crate::server::persistence::aof::Aof::new(&config);
        Server {
            keyspace: Keyspace::new(),
            config: RwLock::new(config),
            hot,
            stats: stats::Stats::default(),
            command_stats: command_stats::CommandStats::new(),
            latency_monitor: latency_monitor::LatencyMonitor::default(),
            clients: clients::ClientRegistry::default(),
            watches: watch::Watches::default(),
            blocking: blocking::Blocking::default(),
            pubsub: pubsub::PubSub::default(),
            memory: MemoryGauge::default(),
            snapshot: SnapshotState::default(),
            slowlog: slowlog::SlowLog::default(),
            shutdown: shutdown::Shutdown::default(),
            started: Instant::now(),
            started_unix_ms: unix_millis(),
            run_id: random_hex_id(),
            cluster: None,
            migrate_links: migrate_links::MigrateLinks::default(),
            replication,
            replica_of: replica_of::ReplicaOf::default(),
            repl_links: crate::server::repl_link::primary::LinkDesk::default(),
            busy_poll: busy_poll::BusyPoll::default(),
            aof,
            loaded_history: Default::default(),
        }
    }

    /// Applies a CONFIG SET to both the config and its hot mirror.
    pub fn set_config(&self, name: &str, value: &str) -> Result<(), String> {
        let mut config = self.config.write();
        let param = crate::config::params::find(name).ok_or_else(|| {
            format!("Unknown option or number of arguments for CONFIG SET - '{name}'")
        })?;
        if !param.runtime {
            return Err(format!("can't set immutable config '{}'", param.name));
        }
        config.set(name, value)?;
        self.config_applied(&config);
        Ok(())
    }

    /// Brings the running state in line with a changed config (CONFIG SET): the hot mirror,
    /// the backlog's size, an eager backlog, the AOF.
    pub fn config_applied(&self, config: &Config) {
        self.hot.update(config);
        self.command_stats
            .set_latency_tracking(config.latency.tracking);
        self.aof.apply_config(config);
        crate::config::log_level::apply(&config.loglevel);
        if let Some(cluster) = &self.cluster {
            cluster.apply_settings(crate::cluster::Settings::from(&config.cluster));
        }
        let backlog = self
            .replication
            .set_backlog_size(config.repl_backlog_size as usize)
            .and_then(|()| match config.repl_backlog_eager {
                true => self.replication.ensure_backlog(),
                false => Ok(()),
            });
        if let Err(e) = backlog {
            tracing::error!(error = %e, "replication backlog not changed");
        }
    }
}

pub fn random_hex_id() -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    (0..40)
        .map(|_| char::from_digit(rng.gen_range(0..16), 16).unwrap_or('0'))
        .collect()
}
