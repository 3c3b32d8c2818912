//! `operator bench failover`: failover under writes. Per server kind (Debian's redis-server,
//! our node) and `cluster-node-timeout`: a 6-node cluster (3 primaries with one replica each,
//! by `redis-cli --cluster create --cluster-replicas 1`) takes continuous writes
//! ([`writer`]); per run ([`one_run`]), ITERATIONS times the primary of the next shard is
//! killed with kill -9, its replica probed until a write succeeds ([`probe`]), the killed
//! node restarted as soon as its replica is promoted (it must rejoin as a replica), the
//! cluster waited for until healthy ([`health`]), and every write acknowledged since the
//! previous check read back ([`lost_writes`]). At the end every acknowledged write is read
//! back once more. Every wait is bounded; a step that does not happen ends that run with its
//! reason, never a hang. [`report`] writes the `failover` section of BENCHMARKS.md.

pub mod health;
pub mod lost_writes;
pub mod one_run;
pub mod probe;
pub mod report;
pub mod writer;

use std::path::PathBuf;

use anyhow::bail;

use super::machine;
use super::server_process::make_dir;

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
            runs.push(one_run::run_one(args, server, timeout_ms, &dir));
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
