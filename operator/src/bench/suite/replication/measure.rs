//! One replication measurement: a redis-benchmark write load against a primary that has one
//! replica, with both offsets sampled while it runs.
//!
//! 1. FLUSHALL on the primary, then wait until the replica's link is up and its applied
//!    offset (`slave_repl_offset`) has reached the primary's `master_repl_offset`.
//! 2. A sampler thread reads, every `interval`, the primary's offset, the replica's applied
//!    offset and the primary's offset again; the replica's lag in bytes is the mean of the two
//!    primary readings (the primary's offset when the replica was read, to within one round
//!    trip) minus the replica's offset, floored at 0.
//! 3. redis-benchmark runs (under a `taskset` prefix) until it exits.
//! 4. Catch-up: the primary's offset right after the load is the target; the replica is
//!    polled every millisecond until its applied offset reaches it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};

use super::super::server_process::{run_bounded, shell_line};
use super::super::stats::percentile;
use super::super::sync_client::SyncClient;

/// A replica not in sync after this is a failure (full sync included).
const SYNC_TIMEOUT: Duration = Duration::from_secs(60);
/// A replica that has not applied the load after this is a failure.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(60);
/// Catch-up resolution; polling faster would steal the replica's CPU.
const CATCH_UP_POLL: Duration = Duration::from_millis(1);
/// One redis-benchmark run.
const BENCH_TIMEOUT: Duration = Duration::from_secs(900);
/// Samples kept (50 ms samples: far beyond any run); bounds memory.
const SAMPLES_MAX: usize = 1_000_000;
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// The load of one measurement.
#[derive(Clone, Debug)]
pub struct Load {
    pub test: String,
    pub requests: u64,
    pub pipeline: u64,
    pub clients: u64,
    pub interval: Duration,
    /// argv prefix of redis-benchmark, e.g. `taskset -c 0`.
    pub bench_prefix: Vec<String>,
}

/// One measurement's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub setup: String,
    /// Upper-case, as redis-benchmark names it.
    pub test: String,
    pub rps: f64,
    pub load_s: f64,
    pub stream_bytes: i64,
    pub bytes_per_s: f64,
    pub samples: usize,
    pub lag_p50: f64,
    pub lag_p99: f64,
    pub lag_max: f64,
    pub catch_up_ms: f64,
    /// The redis-benchmark command line.
    pub command: Vec<String>,
}

fn primary_offset(c: &mut SyncClient) -> anyhow::Result<i64> {
    let info = c.info("replication")?;
    info.get("master_repl_offset")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("INFO replication has no master_repl_offset"))
}

/// The replica's applied offset: the last stream byte it executed (-1 when it has none).
fn replica_offset(c: &mut SyncClient) -> anyhow::Result<i64> {
    let info = c.info("replication")?;
    Ok(info
        .get("slave_repl_offset")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1))
}

pub(super) fn wait_in_sync(
    primary: &mut SyncClient,
    replica: &mut SyncClient,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + SYNC_TIMEOUT;
    loop {
        let r = replica.info("replication")?;
        let p = primary_offset(primary)?;
        let applied: i64 = r
            .get("slave_repl_offset")
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1);
        if r.get("master_link_status").is_some_and(|s| s == "up") && applied >= p {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "replica not in sync after {} s: primary offset {p}, replica {r:?}",
                SYNC_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// (time, primary offset, replica offset, primary offset again)
type Sample = (Instant, i64, i64, i64);

fn sample(
    primary_port: u16,
    replica_port: u16,
    interval: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<Vec<Sample>> {
    let mut p = SyncClient::connect(primary_port, CLIENT_TIMEOUT)?;
    let mut r = SyncClient::connect(replica_port, CLIENT_TIMEOUT)?;
    let mut samples = Vec::new();
    while !stop.load(Ordering::Relaxed) && samples.len() < SAMPLES_MAX {
        let t = Instant::now();
        let p1 = primary_offset(&mut p)?;
        let ro = replica_offset(&mut r)?;
        let p2 = primary_offset(&mut p)?;
        samples.push((t, p1, ro, p2));
        std::thread::sleep(interval.saturating_sub(t.elapsed()));
    }
    Ok(samples)
}

/// requests/s of the one test `redis-benchmark --csv` printed.
pub fn bench_rps(csv: &str) -> anyhow::Result<f64> {
    for line in csv.lines().skip(1) {
        let cells: Vec<&str> = line.split("\",\"").map(|c| c.trim_matches('"')).collect();
        if cells.len() >= 2 {
            return cells[1]
                .parse()
                .map_err(|_| anyhow!("bad rps in redis-benchmark output: {line}"));
        }
    }
    bail!("no result in redis-benchmark output: {csv:?}")
}

/// `prefix` (a taskset) then `redis-benchmark --csv` against `port` with these flags.
pub(super) fn bench_argv(
    prefix: &[String],
    port: u16,
    test: &str,
    requests: u64,
    pipeline: u64,
    clients: u64,
) -> Vec<String> {
    let mut argv = prefix.to_vec();
    argv.extend(
        [
            "redis-benchmark",
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            test,
            "-n",
            &requests.to_string(),
            "-P",
            &pipeline.to_string(),
            "-c",
            &clients.to_string(),
            "--csv",
        ]
        .map(String::from),
    );
    argv
}

/// Runs one measurement against a primary/replica pair already linked.
pub fn measure(
    setup: &str,
    primary_port: u16,
    replica_port: u16,
    load: &Load,
) -> anyhow::Result<Measurement> {
    let mut primary = SyncClient::connect(primary_port, CLIENT_TIMEOUT)?;
    let mut replica = SyncClient::connect(replica_port, CLIENT_TIMEOUT)?;
    primary.text(&["FLUSHALL"])?;
    wait_in_sync(&mut primary, &mut replica)?;

    let stop = Arc::new(AtomicBool::new(false));
    let start_offset = primary_offset(&mut primary)?;
    let sampler = {
        let stop = Arc::clone(&stop);
        let interval = load.interval;
        std::thread::spawn(move || sample(primary_port, replica_port, interval, &stop))
    };
    let command = bench_argv(
        &load.bench_prefix,
        primary_port,
        &load.test,
        load.requests,
        load.pipeline,
        load.clients,
    );
    let t0 = Instant::now();
    let bench = run_bounded(&command, BENCH_TIMEOUT);
    let t1 = Instant::now();
    let outcome = (|| -> anyhow::Result<(f64, i64, Instant)> {
        let bench = bench?;
        if !bench.success || bench.stderr.to_lowercase().contains("error") {
            bail!("{} failed:\n{}", shell_line(&command), bench.stderr);
        }
        let rps = bench_rps(&bench.stdout)?;
        let target = primary_offset(&mut primary)?;
        let deadline = t1 + CATCH_UP_TIMEOUT;
        while replica_offset(&mut replica)? < target {
            std::thread::sleep(CATCH_UP_POLL);
            if Instant::now() > deadline {
                bail!(
                    "replica did not catch up to {target} within {} s",
                    CATCH_UP_TIMEOUT.as_secs()
                );
            }
        }
        Ok((rps, target, Instant::now()))
    })();
    stop.store(true, Ordering::Relaxed);
    let samples = sampler
        .join()
        .map_err(|_| anyhow!("the sampler panicked"))?
        .map_err(|e| anyhow!("sampler failed: {e:#}"))?;
    let (rps, target, caught_up) = outcome?;
    let during: Vec<f64> = samples
        .iter()
        .filter(|(t, ..)| t0 <= *t && *t <= t1)
        .map(|&(_, p1, ro, p2)| ((p1 + p2).div_euclid(2) - ro).max(0) as f64)
        .collect();
    let load_s = (t1 - t0).as_secs_f64();
    let stream_bytes = target - start_offset;
    Ok(Measurement {
        setup: setup.to_string(),
        test: load.test.to_uppercase(),
        rps,
        load_s,
        stream_bytes,
        bytes_per_s: stream_bytes as f64 / load_s,
        samples: during.len(),
        lag_p50: percentile(&during, 0.5),
        lag_p99: percentile(&during, 0.99),
        lag_max: during.iter().copied().fold(0.0, f64::max),
        catch_up_ms: (caught_up - t1).as_secs_f64() * 1000.0,
        command,
    })
}

#[cfg(test)]
mod tests {
    use super::bench_rps;

    #[test]
    fn reads_redis_benchmark_csv() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\"\n\"SET\",\"123456.78\",\"0.1\"\n";
        assert_eq!(bench_rps(csv).unwrap(), 123456.78);
        assert!(bench_rps("\"test\",\"rps\"\n").is_err());
    }
}
