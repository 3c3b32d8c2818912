//! SET latency with and without synchronous replication: one `redis-benchmark -t set -P 1`
//! client against a primary that has one replica, first with `repl-sync-acks 0` (a write is
//! answered once applied locally: asynchronous replication, Redis's default), then with
//! `repl-sync-acks 1` (answered once the replica acknowledged it). redis-server runs the
//! asynchronous case only, as the reference: it has no synchronous mode (`WAIT` is another
//! round trip, not a mode).

use std::time::Duration;

use anyhow::{anyhow, bail};

use super::super::server_process::{run_bounded, shell_line};
use super::super::sync_client::SyncClient;
use super::super::vs_redis::redis_benchmark::parse_csv;
use super::measure::{bench_argv, wait_in_sync};

const BENCH_TIMEOUT: Duration = Duration::from_secs(600);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a write waits for the replica's acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Async,
    Sync,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Async => "async (repl-sync-acks 0)",
            Mode::Sync => "sync (repl-sync-acks 1)",
        }
    }

    fn acks(self) -> &'static str {
        match self {
            Mode::Async => "0",
            Mode::Sync => "1",
        }
    }
}

/// One latency run's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyRun {
    pub setup: String,
    pub mode: Mode,
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub command: Vec<String>,
}

/// requests/s, p50 and p99 latency (ms) of the one row `redis-benchmark --csv` printed.
pub fn latency_row(csv: &str) -> anyhow::Result<(f64, f64, f64)> {
    let rows = parse_csv(csv)?;
    let row = rows
        .first()
        .ok_or_else(|| anyhow!("no result row in {csv:?}"))?;
    Ok((row.rps, row.p50_ms, row.p99_ms))
}

/// Runs one latency measurement; leaves a node primary at `repl-sync-acks 0`.
pub fn measure(
    setup: &str,
    primary_port: u16,
    replica_port: u16,
    mode: Mode,
    requests: u64,
    bench_prefix: &[String],
) -> anyhow::Result<LatencyRun> {
    let mut primary = SyncClient::connect(primary_port, CLIENT_TIMEOUT)?;
    let mut replica = SyncClient::connect(replica_port, CLIENT_TIMEOUT)?;
    let is_node = setup != "redis";
    if !is_node && mode == Mode::Sync {
        bail!("redis-server has no synchronous replication mode");
    }
    if is_node {
        let reply = primary.text(&["CONFIG", "SET", "repl-sync-acks", mode.acks()])?;
        if reply != "OK" {
            bail!("CONFIG SET repl-sync-acks {}: {reply}", mode.acks());
        }
    }
    primary.text(&["FLUSHALL"])?;
    wait_in_sync(&mut primary, &mut replica)?;
    // One client, no pipelining: each SET's own latency, not a queue's.
    let command = bench_argv(bench_prefix, primary_port, "set", requests, 1, 1);
    let outcome = (|| -> anyhow::Result<(f64, f64, f64)> {
        let bench = run_bounded(&command, BENCH_TIMEOUT)?;
        if !bench.success || bench.stderr.to_lowercase().contains("error") {
            bail!("{} failed:\n{}", shell_line(&command), bench.stderr);
        }
        latency_row(&bench.stdout)
    })();
    if is_node {
        primary.text(&["CONFIG", "SET", "repl-sync-acks", "0"])?;
    }
    let (rps, p50_ms, p99_ms) = outcome?;
    Ok(LatencyRun {
        setup: setup.to_string(),
        mode,
        rps,
        p50_ms,
        p99_ms,
        command,
    })
}

#[cfg(test)]
mod tests {
    use super::latency_row;

    #[test]
    fn reads_rps_and_percentiles_by_column_name() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\
                   \"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"SET\",\"8123.45\",\"0.120\",\"0.050\",\"0.111\",\"0.150\",\"0.207\",\"1.2\"\n";
        assert_eq!(latency_row(csv).unwrap(), (8123.45, 0.111, 0.207));
        assert!(latency_row("\"test\",\"rps\"\n\"SET\",\"1\"\n").is_err());
        assert!(latency_row("").is_err());
    }
}
