//! `operator bench vs-redis|fabric|replication|failover|reshard`: the benchmark suites whose reports
//! make BENCHMARKS.md. Each starts its own servers (redis-server, node) in a work dir, drives
//! them with this crate's client (and redis-benchmark where the comparison is redis-benchmark's
//! figures), bounds every wait, and replaces its own section of the report (vs-redis rewrites
//! the file but keeps the others' sections). `scripts/bench-*.sh` are thin wrappers.
//!
//! - [`vs_redis`]: node beside redis-server under redis-benchmark, server CPU, memory.
//! - [`fabric`]: one node driven over TCP and over fabric providers by `operator bench`.
//! - [`replication`]: replication stream throughput and replica lag, beside redis-server.
//! - [`failover`]: kill -9 of primaries under writes: failover time and lost writes.
//! - [`reshard`]: one primary's slots moved to another, ours beside `redis-cli --cluster
//!   reshard`: move time, write pauses, read-back.
//!
//! Shared parts: [`server_process`] (start, wait, stop servers), [`sync_client`] (the client
//! from plain threads), [`report_file`] (BENCHMARKS.md sections), [`stats`], [`machine`].

pub mod fabric;
pub mod failover;
pub mod machine;
pub mod replication;
pub mod report_file;
pub mod reshard;
pub mod rss_peak;
pub mod server_process;
pub mod stats;
pub mod sync_client;
pub mod vs_redis;

use std::path::{Path, PathBuf};

/// The suites.
#[derive(clap::Subcommand, Clone, Debug, PartialEq, Eq)]
pub enum Suite {
    /// Node beside redis-server under redis-benchmark: throughput, p50, server CPU, memory.
    VsRedis(vs_redis::VsRedisArgs),
    /// One node over TCP and over fabric providers: throughput, latency, server CPU.
    Fabric(fabric::FabricArgs),
    /// Replication stream bytes/s and replica lag under a write load, beside redis-server.
    Replication(replication::ReplicationArgs),
    /// kill -9 of primaries under writes: failover time, lost acknowledged writes.
    Failover(failover::FailoverArgs),
    /// One primary's slots moved to another: ours (MIGRATESLOTS) beside redis-cli reshard.
    Reshard(reshard::ReshardArgs),
}

pub fn run(suite: Suite) -> std::process::ExitCode {
    match suite {
        Suite::VsRedis(args) => vs_redis::run(args),
        Suite::Fabric(args) => fabric::run(args),
        Suite::Replication(args) => replication::run(args),
        Suite::Failover(args) => failover::run(args),
        Suite::Reshard(args) => reshard::run(args),
    }
}

/// A fresh work dir under the system's temp dir.
pub fn work_dir(prefix: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "{prefix}.{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    server_process::make_dir(&dir)
}

/// Removes the work dir unless asked to keep it (then says where it is).
pub fn finish_work_dir(dir: &Path, keep: bool) {
    if keep {
        eprintln!("bench: kept {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}
