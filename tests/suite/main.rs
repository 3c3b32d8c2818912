//! One integration-test binary (one link), one module per area. Each test starts its own
//! node processes through the harness in `src/lib.rs`.

mod aof;
mod bench_suites;
mod bitmaps;
mod cluster;
mod cluster_admin;
mod cluster_bus;
mod cluster_replication;
mod cluster_restart;
mod compat;
mod connection;
mod datatypes_aof;
mod fabric;
mod geo;
mod hashes;
mod hyperloglog;
mod keys;
mod lists;
mod migrate;
mod module_knots;
mod operator_tools;
mod persistence;
mod protocol;
mod pubsub;
mod replication;
mod replication_forgery;
mod reply_compare;
mod server;
mod sets;
mod strings;
mod tls;
mod tools;
mod topology_group;
mod transactions;
mod trust;
mod zsets;
