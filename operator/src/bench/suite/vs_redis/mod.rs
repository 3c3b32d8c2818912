//! `operator bench vs-redis`: our node beside Debian's redis-server, both running at once on
//! loopback, driven by the same redis-benchmark binary ([`redis_benchmark`]), interleaved one
//! test at a time (per round, per pipeline depth, per test, both servers back to back, the
//! order alternating between rounds) so that drifts in machine load hit both alike; the
//! servers' CPU per request; memory after loading an exact number of keys ([`memory`]).
//! [`report`] rewrites BENCHMARKS.md but the sections other suites own.

pub mod memory;
pub mod redis_benchmark;
pub mod report;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail};

use super::machine;
use super::server_process::{free_port, make_dir, pin, shell_line, ServerProcess};
use super::sync_client::SyncClient;

/// `operator bench vs-redis` flags.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct VsRedisArgs {
    /// The node binary.
    #[arg(long, default_value = "target/release/node")]
    pub node_bin: PathBuf,
    /// Extra node flags (split on whitespace).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub node_args: String,
    /// The reference server.
    #[arg(long, default_value = "redis-server")]
    pub redis_bin: String,
    /// Extra redis-server flags (split on whitespace).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub redis_args: String,
    /// Smoke run: tiny request counts (flags given explicitly still win); the report says so.
    #[arg(long)]
    pub quick: bool,
    /// Requests per test at -P 1 [200000; quick: 2000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub n_p1: Option<u64>,
    /// Requests per test at -P 16 [2000000; quick: 20000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub n_p16: Option<u64>,
    /// redis-benchmark -c.
    #[arg(short = 'c', long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub clients: u64,
    /// redis-benchmark -t, and `eval` (not a redis-benchmark test: see [`EVAL_TEST`]).
    #[arg(
        long,
        default_value = "ping,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset,eval"
    )]
    pub tests: String,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub rounds: u64,
    /// Pin each server to CPU 1 and redis-benchmark to CPU 0 [on with 2 or more CPUs].
    #[arg(long)]
    pub pin: Option<bool>,
    /// Per-test aggregation over rounds.
    #[arg(long, value_enum, default_value = "median")]
    pub agg: Aggregation,
    /// Keys loaded for the memory comparison [1000000; quick: 100000].
    #[arg(long)]
    pub mem_keys: Option<u64>,
    /// redis-benchmark -r: keys drawn from this many. Both servers are first loaded with every
    /// one of them (redis-benchmark's key names, its 3-byte values) by `redis-cli --pipe` and
    /// are not flushed between tests, so each test runs against a table of this many keys.
    /// The report then goes to BENCHMARKS.md's `keyspace` section, not the whole file.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub keyspace: Option<u64>,
    /// Value bytes for the memory comparison.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub value_size: u64,
    /// Seconds before one redis-benchmark run is killed [1800; quick: 300].
    #[arg(long)]
    pub bench_timeout: Option<u64>,
    /// The report.
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub out: PathBuf,
    /// Keep the work dir (server logs).
    #[arg(long)]
    pub keep: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Aggregation {
    /// Median over rounds (rps and p50 taken separately).
    Median,
    /// Max rps, min p50.
    Best,
}

/// The two servers, in report order.
pub const SERVERS: [&str; 2] = ["redis", "node"];

/// One redis-benchmark row of one round.
#[derive(Clone, Debug)]
pub struct Row {
    pub server: &'static str,
    pub pipeline: u64,
    pub test: String,
    pub rps: f64,
    pub p50_ms: f64,
}

/// Server CPU over one redis-benchmark run (one `-t` test).
#[derive(Clone, Debug)]
pub struct CpuRow {
    pub server: &'static str,
    pub pipeline: u64,
    pub test: String,
    pub ns_per_request: f64,
}

/// Everything the report needs.
#[derive(Clone, Debug, Default)]
pub struct Results {
    pub params: Vec<(&'static str, String)>,
    pub rows: Vec<Row>,
    pub cpu: Vec<CpuRow>,
    pub memory: Option<memory::Memory>,
    pub commands: Vec<String>,
    pub warnings: Vec<String>,
}

impl Results {
    pub fn param(&self, key: &str) -> String {
        self.params
            .iter()
            .find(|(k, _)| *k == key)
            .map_or("?".to_string(), |(_, v)| v.clone())
    }

    fn note_command(&mut self, command: String) {
        if !self.commands.contains(&command) {
            self.commands.push(command);
        }
    }
}

/// The section of BENCHMARKS.md a `--keyspace` run writes.
pub const KEYSPACE_SECTION: &str = "keyspace";

/// Value bytes of redis-benchmark's SET (its -d default), used for the preloaded keys.
const BENCHMARK_VALUE_BYTES: usize = 3;

/// Loads `key:000000000000` .. `key:<keys - 1>` (redis-benchmark's names for -r keys) into both
/// servers with `redis-cli --pipe` and checks DBSIZE.
fn preload(
    servers: &mut [ServerProcess],
    clients: &mut [SyncClient],
    keys: u64,
    work: &std::path::Path,
    commands: &mut Vec<String>,
) -> anyhow::Result<()> {
    let input = work.join("keyspace-load.resp");
    let value = vec![b'x'; BENCHMARK_VALUE_BYTES];
    memory::write_set_commands(&input, keys, |i| format!("key:{i:012}"), &value)?;
    for (i, name) in SERVERS.iter().enumerate() {
        flushall(&mut clients[i], name)?;
        eprintln!("bench vs-redis: preloading {keys} keys into {name}");
        commands.push(format!(
            "redis-cli -h 127.0.0.1 -p {} --pipe < keyspace-load.resp  # {keys} x SET \
             key:<i, 12 digits> xxx",
            servers[i].port
        ));
        memory::pipe_load(servers[i].port, &input, name)?;
        let dbsize: u64 = clients[i].text(&["DBSIZE"])?.parse()?;
        if dbsize != keys {
            bail!("{name}: DBSIZE is {dbsize} after preloading {keys} keys");
        }
    }
    let _ = std::fs::remove_file(&input);
    Ok(())
}

pub fn run(args: VsRedisArgs) -> std::process::ExitCode {
    match run_all(&args) {
        Ok(_) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench vs-redis: ERROR: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn busy_poll_usec(c: &mut SyncClient) -> anyhow::Result<u64> {
    Ok(c.info("stats")?
        .get("io_busy_poll_usec")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

fn flushall(c: &mut SyncClient, name: &str) -> anyhow::Result<()> {
    let reply = c.text(&["FLUSHALL"])?;
    if reply != "OK" {
        bail!("FLUSHALL on {name} failed: {reply}");
    }
    Ok(())
}

/// The results, after writing the report.
pub fn run_all(args: &VsRedisArgs) -> anyhow::Result<Results> {
    if !args.node_bin.is_file() {
        bail!("node binary {} not found", args.node_bin.display());
    }
    if args.tests.split(',').all(str::is_empty) {
        bail!("--tests names no test");
    }
    let pick =
        |v: Option<u64>, full: u64, quick: u64| v.unwrap_or(if args.quick { quick } else { full });
    let n_p1 = pick(args.n_p1, 200_000, 2_000);
    let n_p16 = pick(args.n_p16, 2_000_000, 20_000);
    let mem_keys = pick(args.mem_keys, 1_000_000, 100_000);
    let bench_timeout = Duration::from_secs(pick(args.bench_timeout, 1800, 300));
    let pinned = args
        .pin
        .unwrap_or_else(|| machine::nproc().parse::<u32>().unwrap_or(1) >= 2);
    let (server_pin, bench_pin) = if pinned {
        (pin("1"), pin("0"))
    } else {
        (Vec::new(), Vec::new())
    };

    let work = super::work_dir("bench-vs-redis")?;
    let mut results = Results::default();
    let mut servers: Vec<ServerProcess> = Vec::new();
    for name in SERVERS {
        let port = free_port()?;
        let dir = make_dir(&work.join(name))?;
        let mut argv = server_pin.clone();
        let (bin, extra) = if name == "redis" {
            (args.redis_bin.clone(), &args.redis_args)
        } else {
            (args.node_bin.display().to_string(), &args.node_args)
        };
        argv.extend([
            bin,
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
        ]);
        if name == "redis" {
            argv.extend(["--appendonly", "no", "--daemonize", "no"].map(String::from));
        }
        argv.extend(["--dir".into(), dir.display().to_string()]);
        argv.extend(extra.split_whitespace().map(str::to_string));
        results.note_command(shell_line(&argv));
        let mut server = ServerProcess::new(port, argv, work.join(format!("{name}.log")));
        server.spawn()?;
        servers.push(server);
    }
    for server in &mut servers {
        server.wait_ready()?;
    }
    eprintln!(
        "bench vs-redis: redis-server on port {}, node on port {}; work dir {}",
        servers[0].port,
        servers[1].port,
        work.display()
    );
    let mut git_rev = machine::git_rev();
    if !machine::sh("git status --porcelain --untracked-files=no 2>/dev/null").is_empty() {
        git_rev += " + uncommitted changes";
    }
    results.params = vec![
        ("date", machine::utc_now()),
        ("quick", if args.quick { "1" } else { "0" }.into()),
        ("rounds", args.rounds.to_string()),
        ("pin", if pinned { "1" } else { "0" }.into()),
        ("agg", format!("{:?}", args.agg).to_lowercase()),
        ("clients", args.clients.to_string()),
        ("n_p1", n_p1.to_string()),
        ("n_p16", n_p16.to_string()),
        ("node_bin", args.node_bin.display().to_string()),
        (
            "redis_bin",
            machine::sh(&format!("command -v {}", args.redis_bin)),
        ),
        ("git_rev", git_rev),
        ("loadavg_start", machine::loadavg()),
    ];
    let mut clients: Vec<SyncClient> = servers
        .iter()
        .map(|s| SyncClient::connect(s.port, Duration::from_secs(60)))
        .collect::<anyhow::Result<_>>()?;

    let value_size = args.value_size as usize;
    if let Some(keys) = args.keyspace {
        // Memory first, on servers that have held nothing yet; then the benchmark's keyspace.
        results.memory = Some(memory::measure(
            &mut servers,
            &mut clients,
            mem_keys,
            value_size,
            &mut results.commands,
            &work,
        )?);
        preload(
            &mut servers,
            &mut clients,
            keys,
            &work,
            &mut results.commands,
        )?;
        results.params.push(("keyspace", keys.to_string()));
    }
    let tests: Vec<&str> = args.tests.split(',').filter(|t| !t.is_empty()).collect();
    for round in 1..=args.rounds {
        let order: [usize; 2] = if round % 2 == 1 { [0, 1] } else { [1, 0] };
        for p in [1u64, 16] {
            let n = if p == 1 { n_p1 } else { n_p16 };
            for test in &tests {
                for &i in &order {
                    let name = SERVERS[i];
                    let server = &mut servers[i];
                    let mut argv = bench_pin.clone();
                    argv.extend(
                        [
                            "redis-benchmark",
                            "-h",
                            "127.0.0.1",
                            "-p",
                            &server.port.to_string(),
                            "-c",
                            &args.clients.to_string(),
                            "-n",
                            &n.to_string(),
                            "-P",
                            &p.to_string(),
                            "--csv",
                        ]
                        .map(String::from),
                    );
                    if let Some(keys) = args.keyspace {
                        argv.extend(["-r".to_string(), keys.to_string()]);
                    }
                    argv.extend(test_arguments(test));
                    results.note_command(shell_line(&argv));
                    let started = std::time::Instant::now();
                    if args.keyspace.is_none() {
                        flushall(&mut clients[i], name)?;
                    }
                    let pid = server
                        .pid()
                        .ok_or_else(|| anyhow!("{name} is not running"))?;
                    let poll_before = busy_poll_usec(&mut clients[i])?;
                    let cpu_before = redis_benchmark::cpu_ns(pid)?;
                    let run =
                        redis_benchmark::run(&argv, server, bench_timeout, &work).map_err(|e| {
                            anyhow!("redis-benchmark -t {test} against {name} (P{p}): {e:#}")
                        })?;
                    let cpu_after = redis_benchmark::cpu_ns(pid)?;
                    let poll_after = busy_poll_usec(&mut clients[i])?;
                    // Polling time is wall time of idle turns: waiting, not work (never below 0).
                    let cpu =
                        (cpu_after - cpu_before).saturating_sub((poll_after - poll_before) * 1000);
                    // One -t test can run several (lrange_100 also runs its LPUSH), each -n.
                    let requests = n * run.rows.len() as u64;
                    results.cpu.push(CpuRow {
                        server: name,
                        pipeline: p,
                        test: test.to_string(),
                        ns_per_request: cpu as f64 / requests as f64,
                    });
                    for row in run.rows {
                        results.rows.push(Row {
                            server: name,
                            pipeline: p,
                            test: row_name(test, row.test),
                            rps: row.rps,
                            p50_ms: row.p50_ms,
                        });
                    }
                    for w in run.warnings {
                        let w = format!("{name}: {w}");
                        if !results.warnings.contains(&w) {
                            results.warnings.push(w);
                        }
                    }
                    if args.keyspace.is_none() {
                        flushall(&mut clients[i], name)?;
                    }
                    eprintln!(
                        "bench vs-redis: round {round}/{}  -P {p}  {test}  {name}  done in {}s",
                        args.rounds,
                        started.elapsed().as_secs()
                    );
                }
            }
        }
    }
    if args.keyspace.is_none() {
        results.memory = Some(memory::measure(
            &mut servers,
            &mut clients,
            mem_keys,
            value_size,
            &mut results.commands,
            &work,
        )?);
    }
    results.params.push(("loadavg_end", machine::loadavg()));
    if let Some(keys) = args.keyspace {
        let markdown = report::markdown(&results, &[])?;
        let section = report::keyspace_section(&markdown, keys);
        super::report_file::replace_section(&args.out, KEYSPACE_SECTION, &section)?;
        println!("{}", report::summary(&markdown));
    } else {
        let markdown = report::markdown(&results, &super::report_file::owned_sections(&args.out))?;
        super::report_file::write_atomically(&args.out, &markdown)?;
        println!("{}", report::summary(&markdown));
    }
    println!("wrote {}", args.out.display());
    for server in &mut servers {
        server.stop();
    }
    super::finish_work_dir(&work, args.keep);
    Ok(results)
}

/// The `eval` test: a script that runs one SET on its declared key, the shape of the scripts
/// applications run most (locks, rate limiters, compare-and-set), as a redis-benchmark
/// custom command (`__rand_int__` draws the key when `-r` is given).
pub const EVAL_TEST: [&str; 5] = [
    "EVAL",
    "return redis.call('SET', KEYS[1], ARGV[1])",
    "1",
    "key:__rand_int__",
    "value",
];

/// redis-benchmark's arguments for one test of `--tests`.
fn test_arguments(test: &str) -> Vec<String> {
    if test == "eval" {
        EVAL_TEST.iter().map(|a| a.to_string()).collect()
    } else {
        vec!["-t".to_string(), test.to_string()]
    }
}

/// The name a result row is reported under: redis-benchmark names a custom command's row by
/// the whole command line; the report names it by the test.
fn row_name(test: &str, csv_name: String) -> String {
    if test == "eval" {
        "EVAL (one SET)".to_string()
    } else {
        csv_name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_runs_as_a_custom_command_and_is_reported_by_name() {
        assert_eq!(test_arguments("get"), ["-t", "get"]);
        let eval = test_arguments("eval");
        assert_eq!(eval[0], "EVAL");
        assert_eq!(eval.len(), 5);
        assert_eq!(row_name("get", "GET".into()), "GET");
        assert_eq!(
            row_name("eval", "EVAL return redis.call(...)".into()),
            "EVAL (one SET)"
        );
    }
}
