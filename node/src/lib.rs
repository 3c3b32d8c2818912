//! The node: a Redis-compatible server. `app::run` starts one from a [`config::Config`].
//!
//! Layers, bottom first; each may import only those listed before it (node/DESIGN.md has the
//! picture and the rules; `tests/suite/module_knots.rs` fails on an import loop):
//! - [`clock`], [`atomic_file`], [`stale_files`], [`tls`]: leaves (wall clock, the atomic
//!   replacement of small files, stale temp files, TLS context);
//! - [`db`]: the keyspace (shards of hash slots), values, expiry, the eviction core;
//! - [`snapshot_format`]: the bytes of snapshots, AOF bases and DUMP payloads;
//! - [`config`]: parameters from file, flags and CONFIG SET;
//! - [`cluster`]: cluster mode's cores: identity, topology, slots, gossip, consensus (no I/O
//!   but the bus transport's endpoint);
//! - [`replication`]: replication ids, backlog, PSYNC, propagation, offsets (no I/O);
//! - [`node_state`]: the state every connection and command shares, and the traits through
//!   which commands reach the node's I/O (`node_state::services`);
//! - [`command_framework`]: the command table, context, dispatch, the slot-ownership check
//!   (MOVED/ASK) and eviction before a command;
//! - [`commands`]: the command implementations, one file per command family;
//! - [`server`]: the running node: listeners, sessions, cron, persistence I/O, replication
//!   links, the cluster bus thread, the fabric listener; implements `node_state::services`;
//! - [`app`]: start and stop (installs the command table before the node starts).

pub mod app;
pub mod atomic_file;
pub mod clock;
pub mod cluster;
pub mod command_framework;
pub mod commands;
pub mod config;
pub mod node_state;
pub use config::load::Invocation;
pub mod db;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod snapshot_format;
pub mod stale_files;
pub mod tls;
