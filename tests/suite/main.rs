//! One integration-test binary (one link), one module per area. Each test starts its own
//! node processes through the harness in `src/lib.rs`.

mod admin_api;
mod aof;
mod bench_suites;
mod cluster;
mod cluster_admin;
mod cluster_bus;
mod cluster_replication;
mod cluster_restart;
mod connection;
mod fabric;
mod hashes;
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
mod server;
mod sets;
mod strings;
mod tls;
mod tools;
mod topology_group;
mod transactions;
mod trust;
mod zsets;
