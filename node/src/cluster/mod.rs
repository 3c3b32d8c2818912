//! Cluster mode: identities, the topology (nodes, slot map, epochs), the operations that
//! change it with Redis's checks, the config file, the replies that describe it, the routing
//! decision (serve, MOVED, ASK...), the gossip core and the Raft topology log (no I/O), and
//! the bus transport that drives the gossip core over fabric datagrams.
//!
//! - [`id`]: 40-hex node and shard ids;
//! - [`flags`], [`node`]: one node as seen from here;
//! - [`slots`]: the slot owner map and open-slot markers;
//! - [`topology`]: the whole view, its state (ok/fail);
//! - [`ops`], [`setslot`]: slot assignment commands as methods;
//! - [`replicate`], [`forget`], [`reset`], [`config_epoch`]: REPLICATE/REPLICAS, FORGET,
//!   RESET, BUMPEPOCH/SET-CONFIG-EPOCH as methods;
//! - [`nodes_text`], [`config_file`], [`replies`]: CLUSTER NODES, nodes.conf, SLOTS/SHARDS/INFO;
//! - [`config_store`]: the config file's store, as a trait the server layer implements;
//! - [`secret`]: the saved cluster secret's text and which secret a start takes;
//! - [`routing`]: where a request is served;
//! - [`shared`]: the state a running node holds (routing applied to commands is the command
//!   framework's `redirect`);
//! - [`gossip`]: the cluster bus gossip and failure detection, as a core without I/O;
//! - [`migration`]: atomic slot migration's ledger and source state machine, no I/O;
//! - [`op_journal`]: the admin operations as the topology log records them, no I/O;
//! - [`consensus`]: the topology as a Raft-replicated state machine (raft-rs), no I/O;
//! - [`agent`]: this node's part in the topology group (founding, joining, proposals, the
//!   leader's upkeep), no I/O; [`core`]: gossip and agent as one core;
//! - [`transport`]: the bus thread (fabric datagrams), the bus-port rendezvous, CLUSTER MEET's
//!   lookups (the driver that joins it to the running node is `server::cluster_bus`).

pub mod agent;
pub mod config_epoch;
pub mod config_file;
pub mod config_store;
pub mod consensus;
pub mod core;
pub mod error;
pub mod flags;
pub mod forget;
pub mod gossip;
pub mod id;
pub mod migration;
pub mod node;
pub mod nodes_text;
pub mod op_journal;
pub mod ops;
pub mod replicate;
pub mod replies;
pub mod reset;
pub mod routing;
pub mod secret;
pub mod setslot;
pub mod shared;
pub mod slot_ops;
pub mod slots;
pub mod stats;
pub mod topology;
pub mod transport;

#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod routing_tests;

pub use error::ClusterError;
pub use id::{HexId, NodeId, ShardId};
pub use shared::Cluster;
pub use topology::{Settings, Topology};
