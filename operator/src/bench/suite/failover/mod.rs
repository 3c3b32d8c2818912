//! `operator bench failover`: failover under writes. Per server kind (Debian's redis-server,
//! our node) and `cluster-node-timeout`: a 6-node cluster (3 primaries with one replica each,
//! by `redis-cli --cluster create --cluster-replicas 1`) takes continuous writes
//! ([`writer`]); ITERATIONS times the primary of the next shard is killed with kill -9, its
//! replica probed until a write succeeds ([`probe`]), the killed node restarted as soon as
//! its replica is promoted (it must rejoin as a replica), the cluster waited for until healthy
//! ([`health`]), and every write acknowledged since the previous check read back
//! ([`lost_writes`]). At the end every acknowledged write is read back once more. Every wait
//! is bounded; a step that does not happen ends that run with its reason, never a hang.
//! [`report`] writes the `failover` section of BENCHMARKS.md.

pub mod health;
pub mod lost_writes;
pub mod probe;
pub mod report;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};

use super::machine;
use super::server_process::{free_cluster_port, make_dir, run_bounded, ServerProcess};
use super::sync_client::SyncClient;
use health::{cluster_nodes, wait_healthy, SHARDS};
use writer::{WriterConfig, WriterState};

/// Where `redis-cli --cluster create` starts each shard.
const SHARD_FIRST_SLOTS: [u16; SHARDS] = [0, 5461, 10923];
const CREATE_TIMEOUT: Duration = Duration::from_secs(120);
/// Healthy again after a restart (full sync included).
const HEALTH_TIMEOUT: Duration = Duration::from_secs(120);
/// Writes keep going this long before a check.
const SETTLE_AFTER_HEALTHY: Duration = Duration::from_millis(500);

/// `operator bench failover` flags.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct FailoverArgs {
    /// Server kinds, in order: redis (Debian's redis-server) and/or node.
    #[arg(long, value_delimiter = ',', default_value = "redis,node")]
    pub servers: Vec<ServerKind>,
    /// cluster-node-timeout values in ms.
    #[arg(long, value_delimiter = ',', default_value = "1000,200",
          value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub timeouts: Vec<u64>,
    /// Kills per server and timeout.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub iterations: u64,
    /// The node binary.
    #[arg(long, default_value = "target/release/node")]
    pub node_bin: PathBuf,
    /// Our node's fabric provider (cluster bus and replication).
    #[arg(long, default_value = "ofi:tcp")]
    pub fabric: String,
    /// Extra node flags (split on whitespace); by default a write is answered once a replica
    /// acknowledged it.
    #[arg(long, default_value = "--repl-sync-acks 1", allow_hyphen_values = true)]
    pub node_args: String,
    /// redis-server: `WAIT 1 <ms>` after each acknowledged SET; 0 = no WAIT.
    #[arg(long, default_value_t = 100)]
    pub wait_ms: u64,
    /// Writes per second of the writer; 0 = unpaced.
    #[arg(long, default_value_t = 2000)]
    pub write_rate: u64,
    /// The report whose `failover` section is replaced.
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub out: PathBuf,
    /// Keep the work dir (server logs).
    #[arg(long)]
    pub keep: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum ServerKind {
    Redis,
    Node,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Redis => "redis-server",
            ServerKind::Node => "node",
        }
    }
}

/// One iteration's figures.
#[derive(Clone, Debug)]
pub struct Iteration {
    pub victim_port: u16,
    pub promoted_ms: f64,
    pub failover_ms: f64,
    pub restart_at_ms: f64,
    pub healthy_after_restart_ms: f64,
    pub acked_checked: u64,
    pub acked_synced_checked: u64,
    pub acked_during_iteration: u64,
    pub lost: u64,
    pub lost_synced: u64,
    pub lost_examples: Vec<String>,
    pub write_failures: u64,
}

/// How a run ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    Completed {
        acked: u64,
        acked_synced: u64,
        final_lost: u64,
        final_lost_synced: u64,
        lost_examples: Vec<String>,
        write_failures: u64,
    },
    Failed {
        reason: String,
        acked: u64,
    },
}

/// One server kind at one timeout.
#[derive(Clone, Debug)]
pub struct Run {
    pub server: ServerKind,
    pub timeout_ms: u64,
    /// One server's command line, ports and paths by name.
    pub command: Option<String>,
    pub iterations: Vec<Iteration>,
    pub outcome: Outcome,
}

/// Runs every server kind at every timeout and writes the report section. Exit code 1 when
/// the suite could not run at all or a run did not complete.
pub fn run(args: FailoverArgs) -> std::process::ExitCode {
    match run_all(&args) {
        Ok(runs)
            if runs
                .iter()
                .all(|r| matches!(r.outcome, Outcome::Completed { .. })) =>
        {
            std::process::ExitCode::SUCCESS
        }
        Ok(_) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bench failover: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The runs, after writing the report.
pub fn run_all(args: &FailoverArgs) -> anyhow::Result<Vec<Run>> {
    if args.servers.is_empty() || args.timeouts.is_empty() {
        bail!("--servers and --timeouts each need at least one value");
    }
    if args.servers.contains(&ServerKind::Node) && !args.node_bin.is_file() {
        bail!("node binary {} not found", args.node_bin.display());
    }
    let work = super::work_dir("bench-failover")?;
    let load_start = machine::loadavg();
    let mut runs = Vec::new();
    for &timeout_ms in &args.timeouts {
        for &server in &args.servers {
            eprintln!(
                "bench failover: {}, cluster-node-timeout {timeout_ms} ms, {} kills",
                server.name(),
                args.iterations
            );
            let dir = make_dir(&work.join(format!("{server:?}-{timeout_ms}").to_lowercase()))?;
            runs.push(run_one(args, server, timeout_ms, &dir));
        }
    }
    let machine = vec![
        format!("nproc: {}", machine::nproc()),
        format!("cpu: {}", machine::cpu_model()),
        format!("kernel: {}", machine::kernel()),
        format!("redis-server: {}", machine::redis_version()),
        format!("git: {}", machine::git_rev()),
        format!(
            "load at start: {load_start}; at end: {}",
            machine::loadavg()
        ),
        format!("kills per server and timeout: {}", args.iterations),
        format!(
            "writer: {} writes/s, one at a time; redis-server: WAIT 1 {} after each SET",
            args.write_rate, args.wait_ms
        ),
        format!("node: --fabric-provider {} {}", args.fabric, args.node_args),
        format!("node binary: {}", args.node_bin.display()),
        format!("date: {}", machine::utc_now()),
    ];
    let text = report::section(&runs, &machine, args);
    println!("{text}");
    super::report_file::replace_section(&args.out, "failover", &text)?;
    super::finish_work_dir(&work, args.keep);
    Ok(runs)
}

/// A server's argv, and the values its report line shows by name (value, name).
type ServerLine = (Vec<String>, Vec<(String, String)>);

/// The command line of one cluster member.
fn server_argv(
    args: &FailoverArgs,
    kind: ServerKind,
    port: u16,
    dir: &Path,
    timeout_ms: u64,
    taken: &mut Vec<u16>,
) -> anyhow::Result<ServerLine> {
    let mut names = vec![
        (port.to_string(), "$PORT".to_string()),
        (dir.display().to_string(), "$DIR".to_string()),
    ];
    let words = |s: &[&str]| s.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let argv = match kind {
        ServerKind::Redis => words(&[
            "redis-server",
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &timeout_ms.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
            "--repl-diskless-sync-delay",
            "0",
            "--daemonize",
            "no",
            "--dir",
            &dir.display().to_string(),
        ]),
        ServerKind::Node => {
            let repl_port = free_cluster_port(taken)?;
            names.push((repl_port.to_string(), "$REPL_FABRIC_PORT".to_string()));
            names.push((args.node_bin.display().to_string(), "node".to_string()));
            let mut argv = words(&[
                &args.node_bin.display().to_string(),
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dir",
                &dir.display().to_string(),
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                &timeout_ms.to_string(),
                "--cluster-secret",
                "bench-failover",
                "--fabric-provider",
                &args.fabric,
                "--rdma-bind",
                "127.0.0.1",
                "--repl-fabric-port",
                &repl_port.to_string(),
            ]);
            argv.extend(args.node_args.split_whitespace().map(str::to_string));
            argv
        }
    };
    Ok((argv, names))
}

fn run_one(args: &FailoverArgs, kind: ServerKind, timeout_ms: u64, work: &Path) -> Run {
    let mut run = Run {
        server: kind,
        timeout_ms,
        command: None,
        iterations: Vec::new(),
        outcome: Outcome::Failed {
            reason: String::new(),
            acked: 0,
        },
    };
    let state = Arc::new(WriterState::default());
    let mut servers = Vec::new();
    let mut writer = None;
    let result = drive(
        args,
        kind,
        timeout_ms,
        work,
        &mut run,
        &state,
        &mut servers,
        &mut writer,
    );
    state.stop.store(true, Ordering::Relaxed);
    if let Some(handle) = writer {
        let _ = handle.join();
    }
    for server in &mut servers {
        server.stop();
    }
    match result {
        Ok(outcome) => run.outcome = outcome,
        Err(e) => {
            let reason = format!("{e:#}");
            eprintln!(
                "bench failover: {} timeout {timeout_ms} ms: FAILED: {reason}",
                kind.name()
            );
            run.outcome = Outcome::Failed {
                reason,
                acked: state.acked_len() as u64,
            };
        }
    }
    run
}

#[allow(clippy::too_many_arguments)]
fn drive(
    args: &FailoverArgs,
    kind: ServerKind,
    timeout_ms: u64,
    work: &Path,
    run: &mut Run,
    state: &Arc<WriterState>,
    servers: &mut Vec<ServerProcess>,
    writer: &mut Option<std::thread::JoinHandle<()>>,
) -> anyhow::Result<Outcome> {
    let label = format!("{} timeout {timeout_ms} ms", kind.name());
    let mut taken = Vec::new();
    for i in 0..health::NODES {
        let port = free_cluster_port(&mut taken)?;
        let dir = make_dir(&work.join(format!("n{i}-{port}")))?;
        let (argv, names) = server_argv(args, kind, port, &dir, timeout_ms, &mut taken)?;
        let server = ServerProcess::new(port, argv, dir.join("server.log"));
        if i == 0 {
            let names: Vec<(&str, &str)> = names
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            run.command = Some(server.shown(&names));
        }
        servers.push(server);
    }
    for server in servers.iter_mut() {
        server.start()?;
    }
    let ports: Vec<u16> = servers.iter().map(|s| s.port).collect();
    let mut create = vec!["redis-cli".to_string(), "--cluster".into(), "create".into()];
    create.extend(ports.iter().map(|p| format!("127.0.0.1:{p}")));
    create.extend(["--cluster-replicas", "1", "--cluster-yes"].map(String::from));
    let out = run_bounded(&create, CREATE_TIMEOUT)?;
    if !out.success || !out.stdout.contains("[OK] All 16384 slots covered.") {
        bail!(
            "redis-cli --cluster create failed:\n{}{}",
            out.stdout,
            out.stderr
        );
    }
    let took = wait_healthy(&ports, HEALTH_TIMEOUT, "after create")?;
    eprintln!(
        "bench failover: {label}: cluster healthy {:.1} s after create",
        took.as_secs_f64()
    );

    let config = WriterConfig {
        ports: ports.clone(),
        wait_ms: (kind == ServerKind::Redis && args.wait_ms > 0).then_some(args.wait_ms),
        rate: args.write_rate as f64,
    };
    *writer = Some(writer::spawn(config, Arc::clone(state)));
    std::thread::sleep(Duration::from_secs(1));
    let mut checked = 0usize;
    for it in 0..args.iterations as usize {
        if let Some(error) = state.error.lock().unwrap().clone() {
            bail!("writer failed: {error}");
        }
        let view_port = if servers[0].check_alive().is_ok() {
            ports[0]
        } else {
            ports[1]
        };
        let view = cluster_nodes(&mut SyncClient::connect(view_port, Duration::from_secs(2))?)?;
        let first = SHARD_FIRST_SLOTS[it % SHARDS];
        let primary = view
            .iter()
            .find(|n| n.has_flag("master") && n.owns(first))
            .ok_or_else(|| anyhow!("iteration {}: no primary owns slot {first}", it + 1))?;
        let replica = view
            .iter()
            .find(|n| n.primary == primary.id)
            .ok_or_else(|| {
                anyhow!(
                    "iteration {}: primary {} has no replica",
                    it + 1,
                    primary.port()
                )
            })?;
        let victim = ports
            .iter()
            .position(|&p| p == primary.port())
            .ok_or_else(|| anyhow!("primary port {} is not ours", primary.port()))?;
        let probe_key = (0..100_000)
            .map(|j| format!("probe:{j}"))
            .find(|k| primary.owns(proto::slot::key_slot(k.as_bytes())))
            .ok_or_else(|| anyhow!("no probe key for primary {}", primary.port()))?;
        let acked_before = state.acked_len();
        let killed_at = Instant::now();
        servers[victim].kill9();
        let timeout = probe::failover_timeout(timeout_ms);
        let (times, restart_at, restarted) = std::thread::scope(|scope| {
            let mut victim_server = Some(&mut servers[victim]);
            let mut restart_at = None;
            let mut handle = None;
            let times = {
                // In the background: probing goes on while the killed node starts.
                let mut restart = || {
                    if let Some(server) = victim_server.take() {
                        restart_at = Some(killed_at.elapsed());
                        handle = Some(scope.spawn(move || server.start()));
                    }
                };
                probe::probe_failover(
                    replica.port(),
                    ports[victim],
                    &probe_key,
                    timeout,
                    killed_at,
                    &mut restart,
                )
            };
            let restarted = handle.map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("panicked"))));
            (times, restart_at, restarted)
        });
        let times = times?;
        if let Some(Err(e)) = restarted {
            bail!("iteration {}: restarting the killed node: {e:#}", it + 1);
        }
        let healthy = wait_healthy(&ports, HEALTH_TIMEOUT, &format!("iteration {}", it + 1))?;
        std::thread::sleep(SETTLE_AFTER_HEALTHY);
        let upto = state.acked_len();
        let entries = state.acked_range(checked, upto);
        let lost = lost_writes::read_back(&ports, &entries)?;
        let iteration = Iteration {
            victim_port: ports[victim],
            promoted_ms: times.promoted.as_secs_f64() * 1000.0,
            failover_ms: times.wrote.as_secs_f64() * 1000.0,
            restart_at_ms: restart_at.unwrap_or_default().as_secs_f64() * 1000.0,
            healthy_after_restart_ms: healthy.as_secs_f64() * 1000.0,
            acked_checked: entries.len() as u64,
            acked_synced_checked: entries.iter().filter(|e| e.synced).count() as u64,
            acked_during_iteration: (upto - acked_before) as u64,
            lost: lost.lost,
            lost_synced: lost.lost_synced,
            lost_examples: lost.examples,
            write_failures: state.failed(),
        };
        eprintln!(
            "bench failover: {label}: iteration {}: failover {:.0} ms, lost {} of {}",
            it + 1,
            iteration.failover_ms,
            iteration.lost,
            iteration.acked_checked
        );
        run.iterations.push(iteration);
        checked = upto;
    }
    state.stop.store(true, Ordering::Relaxed);
    if let Some(handle) = writer.take() {
        let _ = handle.join();
    }
    let all = state.acked_range(0, state.acked_len());
    let lost = lost_writes::read_back(&ports, &all)?;
    Ok(Outcome::Completed {
        acked: all.len() as u64,
        acked_synced: all.iter().filter(|e| e.synced).count() as u64,
        final_lost: lost.lost,
        final_lost_synced: lost.lost_synced,
        lost_examples: lost.examples,
        write_failures: state.failed(),
    })
}
