//! One redis-benchmark run against one server, with the server's CPU time around it: the
//! output must be pure CSV (stderr only `WARNING:` lines, which go to the report), the server
//! is watched while it runs (redis-benchmark spins forever if its server dies), and a timeout
//! backstops both.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use super::super::server_process::ServerProcess;

/// One row of `redis-benchmark --csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvRow {
    pub test: String,
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// What one run left.
#[derive(Clone, Debug)]
pub struct BenchRun {
    pub rows: Vec<CsvRow>,
    pub warnings: Vec<String>,
}

/// The rows of a `redis-benchmark --csv` output (columns found by the header's names).
pub fn parse_csv(text: &str) -> anyhow::Result<Vec<CsvRow>> {
    let split = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('"')
            .split("\",\"")
            .map(str::to_string)
            .collect()
    };
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = split(lines.next().ok_or_else(|| anyhow!("empty CSV"))?);
    let col = |name: &str| {
        header.iter().position(|h| h == name).ok_or_else(|| {
            anyhow!("unexpected CSV header {header:?} (no {name:?}); has redis-benchmark's --csv format changed?")
        })
    };
    let (it, ir, ip, i99) = (
        col("test")?,
        col("rps")?,
        col("p50_latency_ms")?,
        col("p99_latency_ms")?,
    );
    let rows = lines
        .map(|line| {
            let cells = split(line);
            let cell = |i: usize| cells.get(i).ok_or_else(|| anyhow!("malformed row {line}"));
            Ok(CsvRow {
                test: cell(it)?.clone(),
                rps: cell(ir)?
                    .parse()
                    .map_err(|_| anyhow!("malformed row {line}"))?,
                p50_ms: cell(ip)?
                    .parse()
                    .map_err(|_| anyhow!("malformed row {line}"))?,
                p99_ms: cell(i99)?
                    .parse()
                    .map_err(|_| anyhow!("malformed row {line}"))?,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if rows.is_empty() {
        bail!("no result rows");
    }
    Ok(rows)
}

/// Runs `argv` (redis-benchmark with its flags) while watching `server`.
pub fn run(
    argv: &[String],
    server: &mut ServerProcess,
    timeout: Duration,
    scratch: &Path,
) -> anyhow::Result<BenchRun> {
    let (out_path, err_path) = (scratch.join("part.csv"), scratch.join("part.err"));
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(File::create(&out_path)?)
        .stderr(File::create(&err_path)?)
        .spawn()
        .with_context(|| format!("starting {}", argv[0]))?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if let Err(e) = server.check_alive() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("timed out after {} s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    server.check_alive()?;
    let stdout = std::fs::read_to_string(&out_path)?;
    let stderr = std::fs::read_to_string(&err_path)?;
    let bad: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("WARNING: "))
        .chain(stdout.lines().filter(|l| !l.starts_with('"')))
        .take(20)
        .collect();
    if !status.success() || !bad.is_empty() {
        bail!("reported errors ({status}):\n{}", bad.join("\n"));
    }
    let rows = parse_csv(&stdout).map_err(|e| anyhow!("wrote no results: {e:#}"))?;
    Ok(BenchRun {
        rows,
        warnings: stderr.lines().map(str::to_string).collect(),
    })
}

/// CPU time the process has used, in ns: the sum over its live threads of the scheduler's run
/// time (`/proc/PID/task/TID/schedstat`, first field), precise where /proc/PID/stat counts
/// 10 ms ticks. Both servers keep their threads for their whole life; a thread that exited
/// during a run would take its CPU time with it.
pub fn cpu_ns(pid: u32) -> anyhow::Result<u64> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = task?.path().join("schedstat");
        if let Ok(text) = std::fs::read_to_string(path) {
            total += text
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_benchmark_csv() {
        let text = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                    \"PING_INLINE\",\"98039.22\",\"0.279\",\"0.080\",\"0.263\",\"0.423\",\"0.583\",\"1.183\"\n\
                    \"LPUSH (needed to benchmark LRANGE)\",\"1000.0\",\"0.3\",\"0.1\",\"0.271\",\"0.4\",\"0.5\",\"0.9\"\n";
        let rows = parse_csv(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0],
            CsvRow {
                test: "PING_INLINE".into(),
                rps: 98039.22,
                p50_ms: 0.263,
                p99_ms: 0.583
            }
        );
        assert_eq!(rows[1].test, "LPUSH (needed to benchmark LRANGE)");
        assert!(
            parse_csv("\"test\",\"rps\"\n\"SET\",\"1\"\n").is_err(),
            "no p50 column"
        );
        assert!(
            parse_csv(&text[..text.find('\n').unwrap()]).is_err(),
            "no rows"
        );
    }
}
