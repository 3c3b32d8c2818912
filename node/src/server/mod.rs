//! The running node: listeners, per-connection loops, the cron, persistence I/O, replication
//! links, the cluster bus thread, the fabric listener, and the [`Server`] that owns the
//! shared state ([`NodeState`]) together with the I/O objects commands reach through
//! `node_state::services`.

pub mod admin;
pub mod cluster_bus;
pub mod connection;
pub mod cron;
pub mod fabric;
pub mod input_buffer;
#[cfg(test)]
mod lease_wait_tests;
pub mod listener;
pub mod metrics;
pub mod migrate_link;
#[cfg(test)]
mod migration_pause_route_tests;
pub mod persistence;
pub mod repl_link;
#[cfg(test)]
mod replication_tests;
pub mod services;
pub mod session;
pub mod shutdown_replicas;
pub mod slot_migration;
pub mod socket;
pub mod sync_acks;
pub mod tcp_replica;
pub mod tls_admit;
mod warm_ahead;
pub mod write_stream;

pub use crate::clock::{lru_clock, unix_millis};
pub use crate::node_state::{random_hex_id, Client, ClientShared, NodeState};

use crate::config::Config;
use crate::node_state::identity::LoadedHistory;
use crate::server::persistence::aof::Aof;
use crate::server::repl_link::primary::LinkDesk;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock, Weak};

/// The running node: the shared state and the I/O objects of this layer. Derefs to the
/// state, so that this layer's code reads `server.keyspace` as commands do.
pub struct Server {
    state: NodeState,
    /// The primary's replication-link acceptor, once `repl-fabric-port` listens.
    pub repl_links: LinkDesk,
    /// The append-only file: the log, its rewrites, its files.
    pub aof: Aof,
    /// What the start found of the previous run's replication (identity, exact history).
    pub loaded_history: parking_lot::Mutex<LoadedHistory>,
    /// The node itself, for the threads a `&Server` starts (set by `attach`).
    owner: OnceLock<Weak<Server>>,
    /// Connections serving the replication stream over TCP (SYNC, PSYNC), at most
    /// [`tcp_replica::TCP_REPLICAS_MAX`].
    pub tcp_replicas: std::sync::atomic::AtomicUsize,
    /// The slot migrations this node drives as their source.
    pub slot_migrations: slot_migration::Registry,
}

impl Deref for Server {
    type Target = NodeState;
    fn deref(&self) -> &NodeState {
        &self.state
    }
}

impl DerefMut for Server {
    fn deref_mut(&mut self) -> &mut NodeState {
        &mut self.state
    }
}

impl Server {
    /// A node with `config`. The command table must be installed first
    /// (`commands::install_table`): INFO commandstats counts its entries.
    pub fn new(config: Config) -> Self {
        let aof = Aof::new(&config);
        Server {
            state: NodeState::new(
                config,
                crate::command_framework::table::counted(),
                &mut rand::thread_rng(),
            ),
            repl_links: LinkDesk::default(),
            aof,
            loaded_history: Default::default(),
            owner: OnceLock::new(),
            tcp_replicas: Default::default(),
            slot_migrations: Default::default(),
        }
    }

    /// Remembers the node so that background threads can be started from a `&Server`.
    pub fn attach(&self, server: &Arc<Server>) {
        let _ = self.owner.set(Arc::downgrade(server));
    }

    /// The node as an `Arc`, once attached (not while it is being started or stopped).
    pub fn owner(&self) -> Option<Arc<Server>> {
        self.owner.get().and_then(Weak::upgrade)
    }

    /// Applies a CONFIG SET to the config, the state that mirrors it, and the AOF.
    pub fn set_config(&self, name: &str, value: &str) -> Result<(), String> {
        self.state.set_config(name, value)?;
        self.aof.apply_config(&self.config.read());
        Ok(())
    }
}
