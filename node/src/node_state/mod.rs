//! The node's shared state, as every connection and command sees it: the keyspace handle,
//! config and its hot mirror, statistics, clients, WATCH, blocked clients, pub/sub, the
//! slow log, replication state, the primary followed, the shutdown flag.
//!
//! Below `command_framework` and `commands`, above the cores: it imports nothing of the
//! layers that run commands or do the node's I/O. What commands need from those (saves,
//! the AOF, replication links, failover, the shutdown's wait for replicas) is reached
//! through the traits of [`services`], which `server` implements.

pub mod acl;
pub mod blocking;
pub mod busy_poll;
pub mod client;
pub mod client_pause;
pub mod client_unblock;
pub mod clients;
pub mod command_clock;
pub mod command_stats;
pub mod error_stats;
pub mod fabric_serving;
pub mod functions;
pub mod glob;
pub mod hot;
pub mod identity;
pub mod keyspace_events;
pub mod latency_monitor;
pub mod migrate_links;
pub mod monitors;
pub mod pubsub;
pub mod replica_of;
pub mod replication;
pub mod reply_mode;
pub mod scripts;
pub mod services;
pub mod shutdown;
pub mod slowlog;
pub mod snapshot_state;
pub mod stats;
pub mod stream_consumers;
pub mod tracking;
pub mod watch;

pub use client::{Client, ClientShared};
pub use services::NodeServices;

use crate::clock::unix_millis;
use crate::config::Config;
use crate::db::memory::MemoryGauge;
use crate::db::Keyspace;
use command_stats::CountedCommand;
use parking_lot::RwLock;
use snapshot_state::SnapshotState;
use std::time::Instant;

/// Everything the connections of one node share.
pub struct NodeState {
    /// Database 0 (the only one in cluster mode).
    pub keyspace: Keyspace,
    /// Databases 1 and up of a standalone node (`databases`), created on first use.
    pub extra_dbs: crate::db::databases::ExtraDatabases,
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
    /// CLIENT PAUSE: what clients' commands are held, until when.
    pub client_pause: client_pause::ClientPause,
    pub pubsub: pubsub::PubSub,
    /// CLIENT TRACKING: the tracking table, BCAST prefixes, tracking clients.
    pub tracking: tracking::Tracking,
    /// Clients in MONITOR mode.
    pub monitors: monitors::Monitors,
    pub memory: MemoryGauge,
    /// Dirty counter, the running save, save outcomes (the saving itself is `server`'s).
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
    /// The single io-thread's polling after reads (`io-busy-poll-us`).
    pub busy_poll: busy_poll::BusyPoll,
    /// ACL users, their rules and the ACL LOG.
    pub acl: acl::Acl,
    /// EVALSHA's script cache.
    pub scripts: scripts::ScriptCache,
    /// The script running now (BUSY, SCRIPT KILL).
    pub running_script: scripts::RunningScript,
    /// FUNCTION LOAD's libraries.
    pub functions: functions::FunctionLibraries,
    /// Where this node serves clients on the fabric, once it does.
    pub fabric_serving: fabric_serving::FabricServing,
}

impl NodeState {
    /// Every database, for the walks over the whole dataset.
    pub fn dbs(&self) -> crate::db::databases::Dbs<'_> {
        crate::db::databases::Dbs {
            first: &self.keyspace,
            extra: Some(&self.extra_dbs),
        }
    }

    /// Database `index`, created on first use; None past `databases`.
    pub fn db(&self, index: usize) -> Option<&Keyspace> {
        self.dbs().get_or_create(index)
    }

    /// Whether more than database 0 can exist (standalone mode, `databases` > 1).
    pub fn multi_db(&self) -> bool {
        self.extra_dbs.count() > 1
    }

    /// Clients being served (INFO `connected_clients`): the registered ones less the
    /// `fabric_stranded_clients`, those of a fabric poller the watchdog found silent inside
    /// one call (a provider call that never returns; or one very long command, until it
    /// returns). They stay registered, and so count against `maxclients`, because the stuck
    /// thread still holds them. Saturating: a client of a poller running again may leave the
    /// registry a moment before the watchdog's next look moves it back from the stranded count.
    pub fn connected_clients(&self) -> u64 {
        let stranded = stats::Stats::get(&self.stats.fabric_stranded_clients);
        (self.clients.count() as u64).saturating_sub(stranded)
    }

    /// The state of a node starting with `config`; `commands` are the command table's
    /// entries, counted by INFO commandstats; `rng` draws the run id and the first
    /// replication id (the server layer's random source: this layer reads none itself).
    pub fn new(
        config: Config,
        commands: Vec<&'static dyn CountedCommand>,
        rng: &mut impl rand::Rng,
    ) -> Self {
        let hot = hot::HotConfig::from(&config);
        let replication = replication::Replication::new(
            crate::replication::ids::ReplicationIds::new(rng),
            config.repl_backlog_size as usize,
        );
        if config.repl_backlog_eager {
            if let Err(e) = replication.ensure_backlog() {
                tracing::error!(error = %e, "cannot create the replication backlog");
            }
        }
        let acl = acl::Acl::new(config.requirepass.as_deref());
        NodeState {
            acl,
            keyspace: Keyspace::new(),
            extra_dbs: crate::db::databases::ExtraDatabases::new(if config.cluster.enabled {
                1
            } else {
                config.databases as usize
            }),
            config: RwLock::new(config),
            hot,
            stats: stats::Stats::default(),
            command_stats: command_stats::CommandStats::new(commands),
            latency_monitor: latency_monitor::LatencyMonitor::default(),
            clients: clients::ClientRegistry::default(),
            watches: watch::Watches::default(),
            blocking: blocking::Blocking::default(),
            client_pause: client_pause::ClientPause::default(),
            pubsub: pubsub::PubSub::default(),
            tracking: tracking::Tracking::default(),
            monitors: monitors::Monitors::default(),
            memory: MemoryGauge::new(std::time::Instant::now()),
            snapshot: SnapshotState::default(),
            slowlog: slowlog::SlowLog::default(),
            shutdown: shutdown::Shutdown::default(),
            started: Instant::now(),
            started_unix_ms: unix_millis(),
            run_id: random_hex_id(rng),
            cluster: None,
            migrate_links: migrate_links::MigrateLinks::default(),
            replication,
            replica_of: replica_of::ReplicaOf::default(),
            busy_poll: busy_poll::BusyPoll::default(),
            scripts: scripts::ScriptCache::default(),
            running_script: scripts::RunningScript::default(),
            functions: functions::FunctionLibraries::default(),
            fabric_serving: Default::default(),
        }
    }

    /// Applies a CONFIG SET to the config and the state that mirrors it (the AOF, which is
    /// `server`'s, follows through [`services::Persistence::apply_config`]).
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
        self.param_set(&config, param.name);
        Ok(())
    }

    /// What setting one parameter changes beyond the config: `requirepass` is the default
    /// user's password, as in Redis (setting it replaces the user's passwords; an empty one
    /// makes it `nopass`); a lower `acllog-max-len` drops the oldest ACL LOG entries.
    pub fn param_set(&self, config: &Config, name: &str) {
        match name {
            "requirepass" => self.acl.set_default_password(config.requirepass.as_deref()),
            "acllog-max-len" => self.acl.log.trim(config.acllog_max_len as usize),
            _ => {}
        }
    }

    /// Brings the state in line with a changed config (CONFIG SET): the hot mirror, the
    /// backlog's size, an eager backlog, the log level, the cluster's settings.
    pub fn config_applied(&self, config: &Config) {
        self.hot.update(config);
        self.command_stats
            .set_latency_tracking(config.latency.tracking);
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

/// 40 random hex digits (a run id) drawn from `rng`.
pub fn random_hex_id(rng: &mut impl rand::Rng) -> String {
    (0..40)
        .map(|_| char::from_digit(rng.gen_range(0..16), 16).unwrap_or('0'))
        .collect()
}
