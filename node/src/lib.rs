//! The node: a Redis-compatible server. `app::run` starts one from a [`config::Config`].
//!
//! Layers, each depending only on those above it:
//! - [`config`]: parameters from file, flags and CONFIG SET;
//! - [`db`]: the keyspace (shards of hash slots), values, expiry, eviction;
//! - [`command`]: the command table, dispatch rules, and the context handlers run in;
//! - [`commands`]: one file per command family;
//! - [`cluster`]: cluster mode's identity, topology, routing (no network);
//! - [`persistence`]: snapshots (SAVE/BGSAVE/load, DUMP/RESTORE payloads);
//! - [`replication`]: replication ids, backlog, PSYNC, propagation, offsets (no I/O);
//! - [`tls`]: the TLS server context for clients (rustls), built from the `tls-*` settings;
//! - [`server`]: listeners, connections, clients, cron, shutdown.

pub mod app;
pub mod clock;
pub mod cluster;
pub mod command;
pub mod commands;
pub mod config;
pub mod fabric;
pub use config::load::Invocation;
pub mod db;
pub mod persistence;
pub mod repl_link;
pub mod replication;
pub mod server;
pub mod stale_files;
pub mod tls;
