//! `operator bench`: redis-benchmark's tests and flags (`-h -p -c -n -r -d -P -t --threads -q
//! --csv`), latency in an HDR histogram, reported as throughput and avg/min/p50/p99/p99.9/max;
//! `--server-cpu` adds the server's CPU time per request (see `server_cpu`).

mod progress;
mod runner;
mod server_cpu;
pub mod suite;
mod summary;
mod workload;

use std::io::IsTerminal;
use std::process::ExitCode;

pub use progress::{progress_text, Counters, PROGRESS_INTERVAL};
pub use runner::{run_test, RunConfig, TestOutcome};
pub use summary::{
    csv_header, new_histogram, LatencySummary, RunShape, TestReport, CSV_HEADER, LATENCY_US_MAX,
};
pub use workload::{payload, select, Request, Test, UnknownTest, MSET_KEYS, RAND_PLACEHOLDER};

use crate::connect_args::ConnectArgs;

/// Most connections (`-c`): each is a socket and a task.
pub const CLIENTS_MAX: usize = 10_000;
/// Deepest pipeline (`-P`): a batch is built in memory per connection.
pub const PIPELINE_MAX: usize = 100_000;
/// Largest value (`-d`), in bytes.
pub const PAYLOAD_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Most tokio worker threads (`--threads`).
pub const THREADS_MAX: usize = 256;
/// Most memory all connections' batches may take at once (`-c` x `-P` x request size): past
/// this the run is refused rather than exhausting memory.
pub const BATCH_BYTES_MAX: usize = 1024 * 1024 * 1024;

/// `operator bench` flags, as redis-benchmark spells them. `-h` is the host, so help is
/// `--help` only.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
#[command(disable_help_flag = true, args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Number of parallel connections.
    #[arg(short = 'c', default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=CLIENTS_MAX as u64))]
    pub clients: u64,
    /// Total number of requests per test.
    #[arg(short = 'n', default_value_t = 100_000)]
    pub requests: u64,
    /// Use random keys below this for __rand_int__ (SET/GET/INCR, SADD/HSET/ZADD elements).
    #[arg(short = 'r', value_name = "KEYSPACELEN", value_parser = clap::value_parser!(u64).range(1..))]
    pub keyspace: Option<u64>,
    /// Data size of SET/GET/LPUSH/... values in bytes.
    #[arg(short = 'd', default_value_t = 3, value_parser = clap::value_parser!(u64).range(0..=PAYLOAD_BYTES_MAX as u64))]
    pub data_size: u64,
    /// Pipeline <numreq> requests.
    #[arg(short = 'P', default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=PIPELINE_MAX as u64))]
    pub pipeline: u64,
    /// Only run the comma separated list of tests (names as in redis-benchmark).
    #[arg(short = 't', value_name = "TESTS")]
    pub tests: Option<String>,
    /// Tokio worker threads the connections are spread over.
    #[arg(long = "threads", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=THREADS_MAX as u64))]
    pub threads: u64,
    /// Quiet: just one line per test.
    #[arg(short = 'q')]
    pub quiet: bool,
    /// Output in CSV format.
    #[arg(long = "csv")]
    pub csv: bool,
    /// Also report the server's CPU time per request, from its INFO cpu read over an extra
    /// connection just before the first request and after the last reply.
    #[arg(long = "server-cpu")]
    pub server_cpu: bool,
    /// Show the progress line even when stderr is not a terminal.
    #[arg(long = "progress")]
    pub progress: bool,
    /// Print help.
    #[arg(long = "help", action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// A benchmark suite instead of a load run (`operator bench failover --help`).
    #[command(subcommand)]
    pub suite: Option<Box<suite::Suite>>,
}

/// Why a benchmark stopped.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    UnknownTest(#[from] UnknownTest),
    #[error("-c {clients} x -P {pipeline} x {request_bytes}-byte requests needs more than {max} bytes of batches")]
    BatchesTooLarge {
        clients: usize,
        pipeline: usize,
        request_bytes: usize,
        max: usize,
    },
    #[error("{test}: {source}")]
    Client {
        test: String,
        source: crate::client::ClientError,
    },
    #[error("could not start the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// Runs the selected tests and prints their reports on stdout. Exit code 0 on success, 1 when
/// the benchmark cannot run (bad flags, connection failure), 2 when it ran but the node
/// answered with error replies.
pub fn run(args: BenchArgs) -> ExitCode {
    if let Some(suite) = args.suite {
        return suite::run(*suite);
    }
    let progress = args.progress || std::io::stderr().is_terminal();
    match run_all(&args, progress, &mut |line| println!("{line}")) {
        Ok(reports) => {
            let errors: u64 = reports.iter().map(|r| r.errors).sum();
            if errors > 0 {
                eprintln!("{errors} error replies during the benchmark");
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs every selected test in a runtime with `--threads` workers, handing each output line to
/// `print` as soon as its test ends. Returns the reports.
pub fn run_all(
    args: &BenchArgs,
    progress: bool,
    print: &mut dyn FnMut(&str),
) -> Result<Vec<TestReport>, BenchError> {
    let data = payload(args.data_size as usize);
    let tests = select(args.tests.as_deref(), &data, args.keyspace.is_some())?;
    let shape = RunShape {
        clients: args.clients as usize,
        payload_bytes: data.len(),
        pipeline: args.pipeline as usize,
        threads: args.threads as usize,
    };
    let largest = tests.iter().map(|t| t.request.len()).max().unwrap_or(0);
    let batches = shape
        .clients
        .saturating_mul(shape.pipeline)
        .saturating_mul(largest);
    if batches > BATCH_BYTES_MAX {
        return Err(BenchError::BatchesTooLarge {
            clients: shape.clients,
            pipeline: shape.pipeline,
            request_bytes: largest,
            max: BATCH_BYTES_MAX,
        });
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(shape.threads)
        .enable_all()
        .build()
        .map_err(BenchError::Runtime)?;
    let config = RunConfig {
        options: args.connect.options(),
        clients: shape.clients,
        requests: args.requests,
        pipeline: shape.pipeline,
        keyspace: args.keyspace,
        progress,
        server_cpu: args.server_cpu,
    };
    if args.csv {
        print(&csv_header(args.server_cpu));
    }
    let mut reports = Vec::with_capacity(tests.len());
    for test in &tests {
        let outcome = runtime
            .block_on(run_test(test, &config))
            .map_err(|source| BenchError::Client {
                test: test.title.to_string(),
                source,
            })?;
        if let Some(first) = &outcome.first_error {
            eprintln!(
                "{}: {} error replies; the first: {first}",
                test.title, outcome.errors
            );
        }
        let report = TestReport {
            title: test.title.to_string(),
            requests: outcome.requests,
            errors: outcome.errors,
            elapsed: outcome.elapsed,
            latency: LatencySummary::from_histogram(&outcome.histogram),
            shape,
            server_cpu: outcome.server_cpu,
        };
        let line = if args.csv {
            report.csv_row()
        } else if args.quiet {
            report.quiet()
        } else {
            report.full()
        };
        print(&line);
        reports.push(report);
    }
    Ok(reports)
}
