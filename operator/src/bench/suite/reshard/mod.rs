//! `operator bench reshard`: one primary's slots moved to another, with N keys of 100 bytes
//! (issue 17: our move in at most 0.2x the time of `redis-cli --cluster reshard
//! --cluster-pipeline 1000` on a Redis Cluster with the same data, and a write pause per
//! slot batch of at most 50 ms at p99). Per server kind, one after the other in one run:
//! three primaries made a cluster ([`cluster`]), the keys loaded ([`keys`]), optional
//! writers started on the moving slots ([`writers`]), the first primary's slots moved to the
//! second ([`moves`]: CLUSTER MIGRATESLOTS on our node, `redis-cli --cluster reshard` on
//! redis-server), then every key and every acknowledged write read back. [`report`] writes
//! the `reshard` section of BENCHMARKS.md.

pub mod cluster;
pub mod keys;
pub mod moves;
pub mod report;
pub mod writers;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};

use super::failover::ServerKind;
use super::machine;
use super::server_process::make_dir;
use super::sync_client::SyncClient;

/// How long a setup call may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// How long after the move the target may take to show it owns every moved slot.
const SETTLE_MAX: Duration = Duration::from_secs(10);

/// `operator bench reshard` flags.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct ReshardArgs {
    /// Keys loaded before the move (`key:<i>`, 100-byte values).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=50_000_000))]
    pub keys: u64,
    /// Writers on the moving slots during the move (0: none).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=64))]
    pub writers: u64,
    /// Server kinds, in order: redis (Debian's redis-server) and/or node.
    #[arg(long, value_delimiter = ',', default_value = "redis,node")]
    pub servers: Vec<ServerKind>,
    /// redis-cli's `--cluster-pipeline` (keys per MIGRATE).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub pipeline: u64,
    /// Our node's `cluster-migration-slots-per-batch` for the move (unset: its default).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=16384))]
    pub slots_per_batch: Option<u64>,
    /// What carries our node's migration data (`cluster-migration-link`): fabric (each node
    /// serves clients on `ofi:tcp` too, `--rdma-port`), tcp, or auto.
    #[arg(long, default_value = "fabric", value_parser = ["fabric", "tcp", "auto"])]
    pub migration_link: String,
    /// Longest a move may take, in seconds.
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub move_timeout: u64,
    /// The node binary.
    #[arg(long, default_value = "target/release/node")]
    pub node_bin: PathBuf,
    /// The report whose `reshard` section is replaced.
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub out: PathBuf,
    /// Keep the work dir (server logs).
    #[arg(long)]
    pub keep: bool,
}

/// The writers' figures of one run.
#[derive(Clone, Debug, Default)]
pub struct WriterFigures {
    pub writers: u64,
    pub writes: u64,
    pub failed: u64,
    pub redirects: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub checked: u64,
    pub lost: u64,
    pub first_error: Option<String>,
}

/// One server kind's run.
#[derive(Clone, Debug)]
pub struct Run {
    pub server: ServerKind,
    /// One server's command line, ports and paths by name.
    pub command: String,
    pub load_seconds: f64,
    /// Loaded keys whose slots moved.
    pub keys_moved: u64,
    /// Slots the source had, and how many the target owns after the move.
    pub slots: (usize, usize),
    pub moved: moves::Moved,
    pub read_back: keys::ReadBack,
    pub writers: Option<WriterFigures>,
}

/// Runs every server kind and writes the report. Exit code 1 when a run failed or a key or
/// acknowledged write did not read back.
pub fn run(args: ReshardArgs) -> std::process::ExitCode {
    match run_all(&args) {
        Ok(runs) if runs.iter().all(Result::is_ok) => std::process::ExitCode::SUCCESS,
        Ok(_) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bench reshard: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The runs (a failed one as its reason), after writing the report.
pub fn run_all(args: &ReshardArgs) -> anyhow::Result<Vec<Result<Run, (ServerKind, String)>>> {
    if args.servers.is_empty() {
        bail!("--servers needs at least one value");
    }
    if args.servers.contains(&ServerKind::Node) && !args.node_bin.is_file() {
        bail!("node binary {} not found", args.node_bin.display());
    }
    let work = super::work_dir("bench-reshard")?;
    let load_start = machine::loadavg();
    let mut runs = Vec::new();
    for &server in &args.servers {
        eprintln!("bench reshard: {}, {} keys", server.name(), args.keys);
        let dir = make_dir(&work.join(format!("{server:?}").to_lowercase()))?;
        let run = run_one(args, server, &dir).map_err(|e| {
            let reason = format!("{e:#}");
            eprintln!("bench reshard: {}: FAILED: {reason}", server.name());
            (server, reason)
        });
        let good = run.as_ref().is_ok_and(|r| {
            r.read_back.wrong == 0
                && r.slots.0 == r.slots.1
                && r.writers.as_ref().is_none_or(|w| w.lost == 0)
        });
        runs.push(match (run, good) {
            (Ok(r), false) => {
                let why = format!(
                    "after the move: {} of {} keys wrong {:?}, {} of {} slots at the target, writers {:?}",
                    r.read_back.wrong, r.read_back.checked, r.read_back.examples, r.slots.1, r.slots.0, r.writers
                );
                eprintln!("bench reshard: {}: FAILED: {why}", server.name());
                Err((server, why))
            }
            (run, _) => run,
        });
    }
    let machine = vec![
        format!("nproc: {}", machine::nproc()),
        format!("cpu: {}", machine::cpu_model()),
        format!("kernel: {}", machine::kernel()),
        format!("redis-server: {}", machine::redis_version()),
        format!("redis-cli: {}", machine::sh("redis-cli --version")),
        format!("git: {}", machine::git_rev()),
        format!(
            "load at start: {load_start}; at end: {}",
            machine::loadavg()
        ),
        format!(
            "keys: {} x {} B values; writers during the move: {}",
            args.keys,
            keys::VALUE_BYTES,
            args.writers
        ),
        format!("node binary: {}", args.node_bin.display()),
        format!("date: {}", machine::utc_now()),
    ];
    let text = report::section(&runs, &machine, args);
    println!("{text}");
    super::report_file::replace_section(&args.out, "reshard", &text)?;
    super::finish_work_dir(&work, args.keep);
    Ok(runs)
}

fn run_one(args: &ReshardArgs, kind: ServerKind, work: &Path) -> anyhow::Result<Run> {
    let mut cluster = cluster::start(kind, &args.node_bin, work, &args.migration_link)?;
    let result = drive(args, &cluster);
    cluster.stop();
    result
}

fn drive(args: &ReshardArgs, cluster: &cluster::Cluster) -> anyhow::Result<Run> {
    let label = cluster.kind.name();
    let nodes = cluster.nodes()?;
    let owner = |slot: u16| {
        nodes
            .iter()
            .find(|n| n.has_flag("master") && n.owns(slot))
            .cloned()
            .ok_or_else(|| anyhow!("no primary owns slot {slot}"))
    };
    // `redis-cli --cluster create` gives the first primary 0-5460 and the second 5461-...
    let (source, target) = (owner(0)?, owner(5461)?);
    let map = cluster.slot_map(cluster.ports[0])?;
    let loading = Instant::now();
    keys::load(args.keys, &map)?;
    let load_seconds = loading.elapsed().as_secs_f64();
    eprintln!(
        "bench reshard: {label}: {} keys loaded in {load_seconds:.1} s",
        args.keys
    );
    let writers = (args.writers > 0)
        .then(|| writers::Writers::start(args.writers as usize, |s| source.owns(s), &map));
    let timeout = Duration::from_secs(args.move_timeout);
    let moved = match cluster.kind {
        ServerKind::Node => {
            if let Some(n) = args.slots_per_batch {
                let mut c = SyncClient::connect(source.port(), CHECK_TIMEOUT)?;
                let n = n.to_string();
                c.text(&["CONFIG", "SET", "cluster-migration-slots-per-batch", &n])?;
            }
            moves::migrate_slots(&source, &target, timeout)
        }
        ServerKind::Redis => {
            moves::redis_cli_reshard(cluster.ports[0], &source, &target, args.pipeline, timeout)
        }
    };
    let written = writers.map(writers::Writers::finish);
    let moved = moved?;
    eprintln!(
        "bench reshard: {label}: {} slots moved in {:.2} s",
        source.slots, moved.seconds
    );
    // The source reports success once it applied the last commit; the target applies it a
    // moment later.
    let settled = Instant::now() + SETTLE_MAX;
    let (after, at_target) = loop {
        let after = cluster.slot_map(target.port())?;
        let at_target = source
            .slot_ranges
            .iter()
            .flat_map(|&(a, b)| a..=b)
            .filter(|&s| after[usize::from(s)] == target.port())
            .count();
        if at_target == source.slots || Instant::now() > settled {
            break (after, at_target);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let keys_moved = (0..args.keys)
        .filter(|&i| source.owns(proto::slot::key_slot(keys::key(i).as_bytes())))
        .count() as u64;
    let read_back = keys::read_back(args.keys, &after)?;
    let writers = match written {
        None => None,
        Some(written) => {
            let (checked, lost) =
                writers::read_back(&written, &after).map_err(anyhow::Error::msg)?;
            Some(writer_figures(args.writers, &written, checked, lost))
        }
    };
    Ok(Run {
        server: cluster.kind,
        command: cluster.command.clone(),
        load_seconds,
        keys_moved,
        slots: (source.slots, at_target),
        moved,
        read_back,
        writers,
    })
}

fn writer_figures(
    count: u64,
    written: &[writers::Written],
    checked: u64,
    lost: u64,
) -> WriterFigures {
    let latencies: Vec<f64> = written
        .iter()
        .flat_map(|w| w.latencies_us.iter().map(|&us| us as f64 / 1000.0))
        .collect();
    WriterFigures {
        writers: count,
        writes: written.iter().map(|w| w.writes).sum(),
        failed: written.iter().map(|w| w.failed).sum(),
        redirects: written.iter().map(|w| w.redirects).sum(),
        p50_ms: super::stats::percentile(&latencies, 0.5),
        p99_ms: super::stats::percentile(&latencies, 0.99),
        max_ms: written.iter().map(|w| w.max_us).max().unwrap_or(0) as f64 / 1000.0,
        checked,
        lost,
        first_error: written.iter().find_map(|w| w.first_error.clone()),
    }
}
