//! `operator bench fabric`: the same node driven over TCP and over fabric providers by
//! `operator bench` (run in this process): throughput, p50, p99 and the node's CPU seconds per
//! 100k requests, from its own CPU clock (INFO cpu), read just before the first request and
//! after the last reply (`--server-cpu`: connecting the clients, which costs a fabric far more
//! than TCP, is not counted). Per provider one node with a TCP and a fabric listener; for each
//! -P and test the TCP run and the fabric run follow each other (the order swaps every round),
//! each test its own run so that the CPU delta belongs to it alone. [`report`] writes the
//! `fabric` section of BENCHMARKS.md.

pub mod report;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail};

use super::super::BenchArgs;
use super::machine;
use super::rss_peak::{vmrss_kb, RssPeak};
use super::server_process::{free_port, make_dir, ServerProcess};
use super::sync_client::SyncClient;
use crate::connect_args::ConnectArgs;

/// `operator bench fabric` flags.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct FabricArgs {
    /// Fabric providers, one node each.
    #[arg(long, value_delimiter = ',', default_value = "ofi:shm,ofi:tcp")]
    pub providers: Vec<String>,
    /// `operator bench -t`.
    #[arg(long, default_value = "set,get,incr,lpush,lpop,sadd,hset")]
    pub tests: String,
    /// `operator bench -c`.
    #[arg(short = 'c', long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=crate::bench::CLIENTS_MAX as u64))]
    pub clients: u64,
    /// Requests per test at -P 1.
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub n_p1: u64,
    /// Requests per test at -P 16.
    #[arg(long, default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub n_p16: u64,
    /// Interleaved rounds; cells are medians over rounds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub rounds: u64,
    /// Extra node flags (split on whitespace).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub node_args: String,
    /// The node binary.
    #[arg(long, default_value = "target/release/node")]
    pub node_bin: PathBuf,
    /// The cargo profile the binaries were built with (shown in the report).
    #[arg(long, default_value = "release")]
    pub profile: String,
    /// The report whose `fabric` section is replaced.
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub out: PathBuf,
    /// Keep the work dir (node logs).
    #[arg(long)]
    pub keep: bool,
}

/// One run of one test over one transport.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub provider: String,
    pub pipeline: u64,
    pub test: String,
    /// "tcp" or the provider.
    pub transport: String,
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub cpu_s_per_100k: f64,
    /// (the node's peak VmRSS during the run - its VmRSS just before) / clients, in KiB: what
    /// a busy client costs the node (buffers grown, the provider's per-peer state).
    pub rss_kib_per_client: f64,
}

pub fn run(args: FabricArgs) -> std::process::ExitCode {
    match run_all(&args) {
        Ok(_) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench fabric: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// What one run drives: `operator bench -t test -n requests -P pipeline -c clients`.
struct Load<'a> {
    test: &'a str,
    requests: u64,
    pipeline: u64,
    clients: u64,
}

/// One `operator bench ... --server-cpu` run of `load` against `port` (over TCP, or over the
/// fabric when `transport` is a provider) of the node `node_pid`; its cells.
fn bench_once(
    node_pid: Option<u32>,
    port: u16,
    load: Load<'_>,
    provider: &str,
    transport: &str,
) -> anyhow::Result<Vec<Cell>> {
    let Load {
        test,
        requests,
        pipeline,
        clients,
    } = load;
    let bench = BenchArgs {
        connect: ConnectArgs {
            host: "127.0.0.1".into(),
            port,
            password: None,
            user: None,
            resp3: false,
            rdma: false,
            fabric: (transport != "tcp").then(|| transport.to_string()),
        },
        clients,
        requests,
        keyspace: None,
        data_size: 3,
        pipeline,
        tests: Some(test.to_string()),
        threads: 1,
        quiet: false,
        csv: true,
        server_cpu: true,
        progress: false,
        help: None,
        suite: None,
    };
    let node_pid = node_pid.ok_or_else(|| anyhow!("the node has no process id"))?;
    let rss_before_kb =
        vmrss_kb(node_pid).ok_or_else(|| anyhow!("cannot read the node's VmRSS"))?;
    let rss_peak = RssPeak::start(node_pid);
    let reports = super::super::run_all(&bench, false, &mut |_| {})
        .map_err(|e| anyhow!("operator bench -t {test} over {transport}: {e}"))?;
    let rss_growth_kb = rss_peak.finish().saturating_sub(rss_before_kb);
    reports
        .iter()
        .map(|r| {
            if r.errors != 0 {
                bail!("{} over {transport}: {} errors", r.title, r.errors);
            }
            let cpu_us = r
                .server_cpu_us_per_request()
                .ok_or_else(|| anyhow!("{} over {transport}: no server CPU", r.title))?;
            Ok(Cell {
                provider: provider.to_string(),
                pipeline,
                test: r.title.clone(),
                transport: transport.to_string(),
                rps: r.rps(),
                p50_ms: r.latency.p50_ms,
                p99_ms: r.latency.p99_ms,
                // 1 us per request = 0.1 s per 100k requests.
                cpu_s_per_100k: cpu_us / 10.0,
                rss_kib_per_client: rss_growth_kb as f64 / clients as f64,
            })
        })
        .collect()
}

/// The cells, after writing the report.
pub fn run_all(args: &FabricArgs) -> anyhow::Result<Vec<Cell>> {
    if !args.node_bin.is_file() {
        bail!("node binary {} not found", args.node_bin.display());
    }
    if args.providers.is_empty() || args.tests.split(',').all(str::is_empty) {
        bail!("--providers and --tests each need at least one value");
    }
    let work = super::work_dir("bench-fabric")?;
    let mut cells = Vec::new();
    let mut commands: Vec<String> = Vec::new();
    let note = |commands: &mut Vec<String>, c: String| {
        if !commands.contains(&c) {
            commands.push(c);
        }
    };
    for provider in &args.providers {
        let (port, rdma_port) = (free_port()?, free_port()?);
        let dir = make_dir(&work.join(format!("node-{}", provider.replace(':', "-"))))?;
        let mut argv: Vec<String> = [
            &args.node_bin.display().to_string(),
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            &dir.display().to_string(),
            "--rdma-port",
            &rdma_port.to_string(),
            "--rdma-bind",
            "127.0.0.1",
            "--fabric-provider",
            provider,
        ]
        .iter()
        .map(|w| w.to_string())
        .collect();
        argv.extend(args.node_args.split_whitespace().map(str::to_string));
        let mut node = ServerProcess::new(port, argv, dir.join("node.log"));
        note(
            &mut commands,
            node.shown(&[
                (&port.to_string(), "$PORT"),
                (&rdma_port.to_string(), "$RDMA_PORT"),
                (&dir.display().to_string(), "$DIR"),
                (&args.node_bin.display().to_string(), "node"),
            ]),
        );
        node.spawn()?;
        node.wait_log("ready to accept connections (fabric)")?;
        let mut flusher = SyncClient::connect(port, Duration::from_secs(10))?;
        for round in 1..=args.rounds {
            for p in [1u64, 16] {
                let n = if p == 1 { args.n_p1 } else { args.n_p16 };
                for test in args.tests.split(',').filter(|t| !t.is_empty()) {
                    let order = if (round + p) % 2 == 0 {
                        ["tcp", provider.as_str()]
                    } else {
                        [provider.as_str(), "tcp"]
                    };
                    for transport in order {
                        eprintln!(
                            "bench fabric: round {round} {provider} -P {p} {test} over {transport}"
                        );
                        let shown_port = if transport == "tcp" {
                            "-p $PORT".to_string()
                        } else {
                            format!("--fabric {transport} -p $RDMA_PORT")
                        };
                        note(
                            &mut commands,
                            format!(
                                "operator bench {shown_port} -t {test} -n {n} -P {p} -c {} --csv \
                                 --server-cpu",
                                args.clients
                            ),
                        );
                        node.check_alive()?;
                        flusher.text(&["FLUSHALL"])?;
                        let target = if transport == "tcp" { port } else { rdma_port };
                        cells.extend(bench_once(
                            node.pid(),
                            target,
                            Load {
                                test,
                                requests: n,
                                pipeline: p,
                                clients: args.clients,
                            },
                            provider,
                            transport,
                        )?);
                    }
                }
            }
        }
        node.stop();
    }
    let machine = vec![
        ("nproc", machine::nproc()),
        ("cpu", machine::cpu_model()),
        ("kernel", machine::kernel()),
        ("libfabric", machine::libfabric_version()),
        ("load", machine::loadavg()),
        ("git", machine::git_rev()),
        ("profile", args.profile.clone()),
        ("clients", args.clients.to_string()),
        ("n_p1", args.n_p1.to_string()),
        ("n_p16", args.n_p16.to_string()),
        ("rounds", args.rounds.to_string()),
        ("date", machine::utc_now()),
    ];
    let text = report::section(&cells, &machine, &commands);
    println!("{text}");
    super::report_file::replace_section(&args.out, "fabric", &text)?;
    super::finish_work_dir(&work, args.keep);
    Ok(cells)
}
