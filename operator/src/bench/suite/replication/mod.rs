//! `operator bench replication`: standalone replication under a redis-benchmark write load:
//! stream bytes per second and the replica's lag, our node over fabric providers (`ofi:shm`,
//! `ofi:tcp`) beside Debian's redis-server primary + replica (TCP replication) in one run.
//! Per round, per setup (the order rotates every round so drifts in machine load hit all
//! alike): a primary and a replica are started, then each test is measured ([`measure`]),
//! then the SET latency of one client with asynchronous and (our node) synchronous
//! replication ([`sync_latency`]), then both are stopped (only one pair runs at a time: an
//! idle fabric node still polls its completion queues). [`report`] writes the `replication`
//! section of BENCHMARKS.md.

pub mod measure;
pub mod report;
pub mod sync_latency;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;

use super::machine;
use super::server_process::{free_port, make_dir, pin, ServerProcess};
use measure::{Load, Measurement};
use sync_latency::{LatencyRun, Mode};

/// `operator bench replication` flags.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct ReplicationArgs {
    /// Setups: `redis` (redis-server) and/or fabric providers for our node.
    #[arg(long, value_delimiter = ',', default_value = "redis,ofi:shm,ofi:tcp")]
    pub setups: Vec<String>,
    /// redis-benchmark tests.
    #[arg(long, default_value = "set,incr,lpush")]
    pub tests: String,
    /// Requests per test.
    #[arg(short = 'n', long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: u64,
    /// redis-benchmark -P.
    #[arg(short = 'P', long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub pipeline: u64,
    /// redis-benchmark -c.
    #[arg(short = 'c', long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub clients: u64,
    /// Rounds; cells are medians over rounds.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub rounds: u64,
    /// SETs of the one-client latency runs (async and sync replication); 0 skips them.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub latency_requests: u64,
    /// Sampling interval in milliseconds.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub interval_ms: u64,
    /// repl-backlog-size of both primaries; "" = the servers' default (1mb). redis-server
    /// streams to a connected replica from its output buffer, not from the backlog; our
    /// primary ships from the backlog, and a replica further behind drops its link.
    #[arg(long, default_value = "64mb")]
    pub backlog: String,
    /// Extra flags for both redis-servers (split on whitespace).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub redis_args: String,
    /// Extra flags for both nodes (split on whitespace).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub node_args: String,
    /// taskset CPU lists; "" = not pinned.
    #[arg(long, default_value = "1")]
    pub primary_cpu: String,
    #[arg(long, default_value = "1")]
    pub replica_cpu: String,
    #[arg(long, default_value = "0")]
    pub bench_cpu: String,
    /// The node binary.
    #[arg(long, default_value = "target/release/node")]
    pub node_bin: PathBuf,
    /// The report whose `replication` section is replaced.
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub out: PathBuf,
    /// Keep the work dir (server logs).
    #[arg(long)]
    pub keep: bool,
}

pub fn run(args: ReplicationArgs) -> std::process::ExitCode {
    match run_all(&args) {
        Ok(_) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench replication: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A primary and its replica.
struct Pair {
    primary: ServerProcess,
    replica: ServerProcess,
    commands: Vec<String>,
}

fn start_pair(args: &ReplicationArgs, setup: &str, dir: &Path) -> anyhow::Result<Pair> {
    let (primary_port, replica_port, repl_port) = (free_port()?, free_port()?, free_port()?);
    let primary_dir = make_dir(&dir.join("primary"))?;
    let replica_dir = make_dir(&dir.join("replica"))?;
    let s = |v: &[&str]| v.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let backlog = if args.backlog.is_empty() {
        Vec::new()
    } else {
        s(&["--repl-backlog-size", &args.backlog])
    };
    let (mut primary_argv, mut replica_argv, extra) = if setup == "redis" {
        let mut p = pin(&args.primary_cpu);
        p.extend(s(&[
            "redis-server",
            "--port",
            &primary_port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--repl-diskless-sync-delay",
            "0",
            "--daemonize",
            "no",
            "--dir",
            &primary_dir.display().to_string(),
        ]));
        let mut r = pin(&args.replica_cpu);
        r.extend(s(&[
            "redis-server",
            "--port",
            &replica_port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--dir",
            &replica_dir.display().to_string(),
            "--replicaof",
            "127.0.0.1",
            &primary_port.to_string(),
        ]));
        (p, r, &args.redis_args)
    } else {
        let node = args.node_bin.display().to_string();
        let mut p = pin(&args.primary_cpu);
        p.extend(s(&[
            &node,
            "--port",
            &primary_port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            &primary_dir.display().to_string(),
            "--fabric-provider",
            setup,
            "--rdma-bind",
            "127.0.0.1",
            "--repl-fabric-port",
            &repl_port.to_string(),
        ]));
        let mut r = pin(&args.replica_cpu);
        r.extend(s(&[
            &node,
            "--port",
            &replica_port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            &replica_dir.display().to_string(),
            "--fabric-provider",
            setup,
            "--rdma-bind",
            "127.0.0.1",
            "--replicaof",
            &format!("127.0.0.1 {primary_port}"),
        ]));
        (p, r, &args.node_args)
    };
    primary_argv.extend(backlog);
    primary_argv.extend(extra.split_whitespace().map(str::to_string));
    replica_argv.extend(extra.split_whitespace().map(str::to_string));
    let names = [
        (primary_port.to_string(), "$PRIMARY_PORT".to_string()),
        (replica_port.to_string(), "$REPLICA_PORT".to_string()),
        (repl_port.to_string(), "$REPL_FABRIC_PORT".to_string()),
        (primary_dir.display().to_string(), "$DIR".to_string()),
        (replica_dir.display().to_string(), "$DIR".to_string()),
        (args.node_bin.display().to_string(), "node".to_string()),
        (
            format!("127.0.0.1 {primary_port}"),
            "'127.0.0.1 $PRIMARY_PORT'".to_string(),
        ),
    ];
    let names: Vec<(&str, &str)> = names
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let mut primary = ServerProcess::new(primary_port, primary_argv, dir.join("primary.log"));
    primary.start()?;
    if setup != "redis" {
        primary.wait_log("accepting replication links (fabric)")?;
    }
    let mut replica = ServerProcess::new(replica_port, replica_argv, dir.join("replica.log"));
    replica.start()?;
    let commands = vec![primary.shown(&names), replica.shown(&names)];
    Ok(Pair {
        primary,
        replica,
        commands,
    })
}

/// The measurements, after writing the report.
pub fn run_all(args: &ReplicationArgs) -> anyhow::Result<Vec<Measurement>> {
    let mut latencies: Vec<LatencyRun> = Vec::new();
    if args.setups.is_empty() || args.tests.split(',').all(str::is_empty) {
        bail!("--setups and --tests each need at least one value");
    }
    if args.setups.iter().any(|s| s != "redis") && !args.node_bin.is_file() {
        bail!("node binary {} not found", args.node_bin.display());
    }
    let work = super::work_dir("bench-replication")?;
    let load_start = machine::loadavg();
    let mut results = Vec::new();
    let mut commands: Vec<String> = Vec::new();
    for round in 1..=args.rounds {
        let shift = ((round - 1) as usize) % args.setups.len();
        let mut order = args.setups.clone();
        order.rotate_left(shift);
        for setup in &order {
            let dir = make_dir(&work.join(format!("r{round}-{}", setup.replace(':', "-"))))?;
            let mut pair = start_pair(args, setup, &dir)?;
            if round == 1 {
                commands.extend(pair.commands.clone());
            }
            for test in args.tests.split(',').filter(|t| !t.is_empty()) {
                eprintln!(
                    "bench replication: round {round} {setup} {test} -n {} -P {}",
                    args.requests, args.pipeline
                );
                let load = Load {
                    test: test.to_string(),
                    requests: args.requests,
                    pipeline: args.pipeline,
                    clients: args.clients,
                    interval: Duration::from_millis(args.interval_ms),
                    bench_prefix: pin(&args.bench_cpu),
                };
                let m = measure::measure(setup, pair.primary.port, pair.replica.port, &load)
                    .map_err(|e| {
                        anyhow::anyhow!("{setup} {test}: {e:#} (logs in {})", dir.display())
                    })?;
                if round == 1 {
                    let mut shown = m.command.clone();
                    if let Some(p) = shown
                        .iter_mut()
                        .find(|w| **w == pair.primary.port.to_string())
                    {
                        *p = "$PRIMARY_PORT".into();
                    }
                    commands.push(shown.join(" "));
                }
                results.push(m);
            }
            if args.latency_requests > 0 {
                let modes: &[Mode] = if setup == "redis" {
                    &[Mode::Async]
                } else {
                    &[Mode::Async, Mode::Sync]
                };
                for &mode in modes {
                    eprintln!(
                        "bench replication: round {round} {setup} SET latency, {}",
                        mode.name()
                    );
                    let run = sync_latency::measure(
                        setup,
                        pair.primary.port,
                        pair.replica.port,
                        mode,
                        args.latency_requests,
                        &pin(&args.bench_cpu),
                    )
                    .map_err(|e| {
                        anyhow::anyhow!("{setup} latency: {e:#} (logs in {})", dir.display())
                    })?;
                    if round == 1 {
                        let port = pair.primary.port.to_string();
                        let shown: Vec<String> = run
                            .command
                            .iter()
                            .map(|w| {
                                if *w == port {
                                    "$PRIMARY_PORT".into()
                                } else {
                                    w.clone()
                                }
                            })
                            .collect();
                        commands.push(shown.join(" "));
                    }
                    latencies.push(run);
                }
            }
            pair.replica.stop();
            pair.primary.stop();
        }
    }
    let mut seen = Vec::new();
    commands.retain(|c| {
        let new = !seen.contains(c);
        seen.push(c.clone());
        new
    });
    let pinned = |cpu: &str| {
        if cpu.is_empty() {
            "any".to_string()
        } else {
            cpu.to_string()
        }
    };
    let machine = vec![
        format!("nproc: {}", machine::nproc()),
        format!("cpu: {}", machine::cpu_model()),
        format!("kernel: {}", machine::kernel()),
        format!("redis-server: {}", machine::redis_version()),
        format!("libfabric: {}", machine::libfabric_version()),
        format!("git: {}", machine::git_rev()),
        format!("node binary: {}", args.node_bin.display()),
        format!(
            "load at start: {load_start}; at end: {}",
            machine::loadavg()
        ),
        format!(
            "placement: primary CPU {}, replica CPU {}, redis-benchmark CPU {}",
            pinned(&args.primary_cpu),
            pinned(&args.replica_cpu),
            pinned(&args.bench_cpu)
        ),
        format!(
            "requests: {} per test, -P {}, -c {}",
            args.requests, args.pipeline, args.clients
        ),
        format!("rounds: {}", args.rounds),
        format!("sampling: every {} s", args.interval_ms as f64 / 1000.0),
        format!(
            "repl-backlog-size: {}",
            if args.backlog.is_empty() {
                "server default"
            } else {
                &args.backlog
            }
        ),
        format!("date: {}", machine::utc_now()),
    ];
    let text = report::section(&results, &latencies, &machine, &commands);
    println!("{text}");
    super::report_file::replace_section(&args.out, "replication", &text)?;
    super::finish_work_dir(&work, args.keep);
    Ok(results)
}
