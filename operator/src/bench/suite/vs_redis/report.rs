//! BENCHMARKS.md as the former scripts/bench_report.py wrote it: summary, machine, method, commands,
//! throughput, latency, server CPU and memory tables, warnings; then the sections other suites
//! own, verbatim.

use anyhow::bail;

use super::super::machine::sh;
use super::super::stats::{geomean, median, thousands, thousands_1};
use super::{Aggregation, Results, SERVERS};

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("n/a".to_string(), |r| format!("{r:.2}"))
}

fn ratio(node: f64, redis: f64) -> Option<f64> {
    (redis > 0.0).then(|| node / redis)
}

fn mib(bytes: f64) -> String {
    format!("{} MiB", thousands_1(bytes / (1024.0 * 1024.0)))
}

fn md_table(headers: &[String], rows: &[Vec<String>]) -> String {
    let mut lines = vec![
        format!("| {} |", headers.join(" | ")),
        format!(
            "| {} |",
            std::iter::once("---")
                .chain(std::iter::repeat_n("---:", headers.len() - 1))
                .collect::<Vec<_>>()
                .join(" | ")
        ),
    ];
    lines.extend(rows.iter().map(|r| format!("| {} |", r.join(" | "))));
    lines.join("\n")
}

/// The summary bullets of a written report (printed on stdout).
pub fn summary(markdown: &str) -> String {
    markdown
        .split("## Summary")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// A `--keyspace` run's report as BENCHMARKS.md's `keyspace` section: the whole report from
/// its summary on, headings one level down, between the section's markers.
pub fn keyspace_section(markdown: &str, keys: u64) -> String {
    let (begin, end) = super::super::report_file::markers(super::KEYSPACE_SECTION);
    let body = markdown
        .find("## Summary")
        .map_or(markdown, |at| &markdown[at..]);
    let mut lines = vec![
        begin,
        String::new(),
        format!(
            "## Keyspace at scale: `-r {}` over a preloaded table",
            thousands(keys as f64)
        ),
        String::new(),
        "Written by `operator bench vs-redis --keyspace N` (`KEYSPACE=N \
         scripts/bench-vs-redis.sh`), which replaces only this section."
            .to_string(),
        String::new(),
    ];
    lines.extend(body.trim_end().lines().map(|l| {
        if l.starts_with("## ") {
            format!("#{l}")
        } else {
            l.to_string()
        }
    }));
    lines.extend([String::new(), end]);
    lines.join("\n")
}

/// The whole report.
pub fn markdown(results: &Results, owned: &[String]) -> anyhow::Result<String> {
    let agg = if results.param("agg") == "best" {
        Aggregation::Best
    } else {
        Aggregation::Median
    };
    let mut order: Vec<String> = Vec::new();
    let mut pipelines: Vec<u64> = Vec::new();
    for r in &results.rows {
        if !order.contains(&r.test) {
            order.push(r.test.clone());
        }
        if !pipelines.contains(&r.pipeline) {
            pipelines.push(r.pipeline);
        }
    }
    pipelines.sort_unstable();
    if results.rows.is_empty() {
        bail!("no redis-benchmark results");
    }
    let pick = |server: &str, p: u64, test: &str, rps: bool| -> Option<f64> {
        let values: Vec<f64> = results
            .rows
            .iter()
            .filter(|r| r.server == server && r.pipeline == p && r.test == test)
            .map(|r| if rps { r.rps } else { r.p50_ms })
            .collect();
        if values.is_empty() {
            return None;
        }
        Some(match agg {
            Aggregation::Median => median(&values),
            Aggregation::Best if rps => values.iter().copied().fold(f64::MIN, f64::max),
            Aggregation::Best => values.iter().copied().fold(f64::MAX, f64::min),
        })
    };
    // Both servers must have answered every test at every depth, or the ratios would compare
    // different things.
    for &p in &pipelines {
        for s in SERVERS {
            let missing: Vec<&str> = order
                .iter()
                .filter(|t| pick(s, p, t, true).is_none())
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                bail!("{s} P{p}: no result for {}", missing.join(", "));
            }
        }
    }
    let mut headers = vec!["test".to_string()];
    for p in &pipelines {
        headers.extend([
            format!("redis P{p}"),
            format!("node P{p}"),
            format!("node/redis P{p}"),
        ]);
    }
    let (mut thr_rows, mut lat_rows) = (Vec::new(), Vec::new());
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); pipelines.len()];
    for t in &order {
        let (mut tr, mut lr) = (vec![t.clone()], vec![t.clone()]);
        for (k, &p) in pipelines.iter().enumerate() {
            let (r, n) = (
                pick("redis", p, t, true).unwrap(),
                pick("node", p, t, true).unwrap(),
            );
            let q = ratio(n, r);
            if let Some(q) = q {
                ratios[k].push(q);
            }
            tr.extend([thousands(r), thousands(n), fmt_ratio(q)]);
            let (rl, nl) = (
                pick("redis", p, t, false).unwrap(),
                pick("node", p, t, false).unwrap(),
            );
            lr.extend([
                format!("{rl:.3}"),
                format!("{nl:.3}"),
                fmt_ratio(ratio(nl, rl)),
            ]);
        }
        thr_rows.push(tr);
        lat_rows.push(lr);
    }
    let gm: Vec<Option<f64>> = ratios.iter().map(|r| geomean(r)).collect();
    let geomean_row = |gm: &[Option<f64>]| {
        let mut row = vec!["geometric mean".to_string()];
        for g in gm {
            row.extend([String::new(), String::new(), fmt_ratio(*g)]);
        }
        row
    };
    thr_rows.push(geomean_row(&gm));

    // Server CPU per request, per -t test (lrange_100's includes its LPUSH).
    let mut cpu_tests: Vec<String> = Vec::new();
    for c in &results.cpu {
        if !cpu_tests.contains(&c.test) {
            cpu_tests.push(c.test.clone());
        }
    }
    let mut cpu_headers = vec!["test (-t)".to_string()];
    let (mut cpu_rows, mut cpu_gm) = (Vec::new(), Vec::new());
    if !cpu_tests.is_empty() {
        cpu_headers.extend(headers[1..].iter().cloned());
        let mut cpu_ratios: Vec<Vec<f64>> = vec![Vec::new(); pipelines.len()];
        for t in &cpu_tests {
            let mut row = vec![t.clone()];
            for (k, &p) in pipelines.iter().enumerate() {
                let values = |s: &str| -> Vec<f64> {
                    results
                        .cpu
                        .iter()
                        .filter(|c| c.server == s && c.pipeline == p && &c.test == t)
                        .map(|c| c.ns_per_request)
                        .collect()
                };
                let (r, n) = (values("redis"), values("node"));
                if r.is_empty() || n.is_empty() {
                    bail!("P{p} {t}: server CPU missing for redis or node");
                }
                let (r, n) = (median(&r), median(&n));
                if let Some(q) = ratio(n, r) {
                    cpu_ratios[k].push(q);
                }
                row.extend([thousands(r), thousands(n), fmt_ratio(ratio(n, r))]);
            }
            cpu_rows.push(row);
        }
        cpu_gm = cpu_ratios.iter().map(|r| geomean(r)).collect();
        cpu_rows.push(geomean_row(&cpu_gm));
    }

    // Memory.
    let mut mem_rows = Vec::new();
    let mut mem_ratio = None;
    let (mut keys, mut value_size) = (0u64, 0usize);
    if let Some(mem) = &results.memory {
        keys = mem.keys;
        value_size = mem.value_size;
        let (r, n) = (&mem.servers[0], &mem.servers[1]);
        mem_ratio = ratio(n.used_memory as f64, r.used_memory as f64);
        let row = |label: &str, r: Option<f64>, n: Option<f64>, fmt: &dyn Fn(f64) -> String| {
            let q = match (r, n) {
                (Some(r), Some(n)) if r != 0.0 => Some(n / r),
                _ => None,
            };
            vec![
                label.to_string(),
                r.map_or("n/a".into(), fmt),
                n.map_or("n/a".into(), fmt),
                fmt_ratio(q),
            ]
        };
        let per_key = |s: &super::memory::ServerMemory| {
            (keys > 0).then(|| (s.used_memory as f64 - s.used_memory_empty as f64) / keys as f64)
        };
        let rss = |s: &super::memory::ServerMemory| s.vmrss_kb.map(|kb| kb as f64 * 1024.0);
        mem_rows = vec![
            vec![
                "DBSIZE".into(),
                r.dbsize.to_string(),
                n.dbsize.to_string(),
                String::new(),
            ],
            row(
                "used_memory (INFO memory)",
                Some(r.used_memory as f64),
                Some(n.used_memory as f64),
                &mib,
            ),
            row(
                "used_memory per key, minus empty server",
                per_key(r),
                per_key(n),
                &|x| format!("{} B", thousands_1(x)),
            ),
            row(
                "VmRSS of the process (/proc/PID/status)",
                rss(r),
                rss(n),
                &mib,
            ),
        ];
    }

    let p = |k: &str| results.param(k);
    let nproc = {
        let n = sh("nproc");
        if n.is_empty() {
            "?".to_string()
        } else {
            n
        }
    };
    let redis_bin = if p("redis_bin").is_empty() {
        "redis-server".to_string()
    } else {
        p("redis_bin")
    };
    let machine = [
        "$ nproc".to_string(),
        nproc.clone(),
        "$ lscpu | grep 'Model name'".into(),
        sh("lscpu | grep 'Model name'"),
        "$ free -g".into(),
        sh("free -g"),
        "$ uname -r".into(),
        sh("uname -r"),
        format!("$ {redis_bin} --version"),
        sh(&format!("{redis_bin} --version")),
        "$ redis-benchmark --version".into(),
        sh("redis-benchmark --version"),
    ]
    .join("\n");
    let agg_name = p("agg");
    let mut md: Vec<String> = vec![
        "# Benchmarks".into(),
        String::new(),
        "Our `node` against Debian's `redis-server`, side by side in one run on loopback, both \
         driven by the same `redis-benchmark` binary. Generated by `scripts/bench-vs-redis.sh` \
         (`operator bench vs-redis`), which rewrites this whole file except the sections at the \
         end that the other suites own (`scripts/bench-fabric.sh`, \
         `scripts/bench-replication.sh`, `scripts/bench-failover.sh`, \
         `scripts/bench-reshard.sh`, `scripts/redis-suite.sh`, `scripts/memory-per-key.sh`) \
         or that were written by hand (fabric notes, scripting); do not edit the rest by hand."
            .into(),
        String::new(),
    ];
    if p("quick") == "1" {
        md.extend([
            "> **QUICK smoke run (QUICK=1): tiny request counts, the numbers mean nothing.** Run \
             without QUICK for real results."
                .into(),
            String::new(),
        ]);
    }
    md.extend([
        format!(
            "> **Read these as ratios measured in one run, not as absolute numbers.** The machine \
             is a shared {nproc}-core box: `redis-benchmark` itself competes with the server under \
             test for the same {nproc} cores, and other work on the machine (e.g. builds) adds \
             noise. Ratios are node/redis: for throughput > 1 means node is faster, for latency \
             < 1 means node is faster."
        ),
        String::new(),
        "## Summary".into(),
        String::new(),
        format!("- Date (UTC): {}", p("date")),
    ]);
    for (k, pp) in pipelines.iter().enumerate() {
        md.push(format!(
            "- Throughput at `-P {pp}`, geometric mean of node/redis over all tests: **{}**",
            fmt_ratio(gm[k])
        ));
    }
    for (k, pp) in pipelines.iter().enumerate().take(cpu_gm.len()) {
        md.push(format!(
            "- Server CPU per request at `-P {pp}`, geometric mean of node/redis: **{}** (< 1: node uses less)",
            fmt_ratio(cpu_gm[k])
        ));
    }
    if !mem_rows.is_empty() {
        md.push(format!(
            "- Memory, `used_memory` with {} keys x {value_size} B values, node/redis: **{}**",
            thousands(keys as f64),
            fmt_ratio(mem_ratio)
        ));
    }
    let pin_text = if p("pin") == "1" {
        "Both servers are pinned to CPU 1 and `redis-benchmark` to CPU 0 (`taskset`), so client \
         and server never share a core and both servers get the same placement."
    } else {
        "Nothing is pinned to a core."
    };
    md.extend([
        String::new(),
        "## Machine".into(),
        String::new(),
        "```".into(),
        machine,
        "```".into(),
        String::new(),
        format!("- node binary: `{}` (git {})", p("node_bin"), p("git_rev")),
        format!(
            "- Load average (1/5/15 min) at start: {}; at end: {}",
            p("loadavg_start"),
            p("loadavg_end")
        ),
        String::new(),
        "## Method".into(),
        String::new(),
        format!(
            "- Both servers run at once, each on its own loopback port, persistence off, in a temp \
             dir; node uses its own thread count, redis its defaults. {pin_text}"
        ),
        format!(
            "- `redis-benchmark` with {} clients; `-n {}` at `-P 1` and `-n {}` at `-P 16`.",
            p("clients"),
            p("n_p1"),
            p("n_p16")
        ),
        format!(
            "- Runs are interleaved one test at a time so drifts in machine load hit both servers \
             alike: per round, per pipeline depth, per test, redis then node (even rounds: node \
             then redis). {} round(s); each cell is the **{agg_name}** over rounds{}",
            p("rounds"),
            if agg == Aggregation::Best {
                " (max rps, min p50)."
            } else {
                " (rps and p50 taken separately)."
            }
        ),
        if p("keyspace") == "?" {
            "- `FLUSHALL` on the server before and after each of its runs.".into()
        } else {
            format!(
                "- `-r {keyspace}`: before the runs, each server is loaded with all {keyspace} keys \
                 `redis-benchmark` draws from (`key:` and 12 digits, 3-byte values) through \
                 `redis-cli --pipe`, and it is not flushed between runs, so every run works on a \
                 table of that many keys (GET always hits, SET overwrites).",
                keyspace = p("keyspace")
            )
        },
        "- Server CPU per request: the server process's CPU time (sum of its threads' \
         `/proc/PID/task/TID/schedstat` run time) over one `redis-benchmark` run, divided by the \
         requests it sent; it includes accepting the 50 connections. The node's time spent busy \
         polling with nothing to read (INFO stats `io_busy_poll_usec`, see README) is taken out: \
         it is waiting, not work. Unlike requests/s it does not depend on whether \
         `redis-benchmark`, which has one core of its own, is the bottleneck (it often is: \
         checked with `perf stat`, its CPU time about equals the run's wall time at `-P 16` GET)."
            .into(),
        format!(
            "- Memory: `FLUSHALL`, read `used_memory` of the empty server, then load exactly {} \
             `SET key:<i> <{value_size} bytes>` through `redis-cli --pipe`, check `DBSIZE`, read \
             `INFO memory` and the process's VmRSS{}.",
            thousands(keys as f64),
            if p("keyspace") == "?" {
                ""
            } else {
                " (on the fresh servers, before the preload and the runs)"
            }
        ),
        String::new(),
        "## Commands".into(),
        String::new(),
        "```sh".into(),
    ]);
    md.extend(results.commands.iter().cloned());
    md.extend([
        "```".into(),
        String::new(),
        "## Throughput (requests/s)".into(),
        String::new(),
        md_table(&headers, &thr_rows),
        String::new(),
        "## Latency p50 (ms)".into(),
        String::new(),
        md_table(&headers, &lat_rows),
        String::new(),
    ]);
    if !cpu_rows.is_empty() {
        md.extend([
            "## Server CPU per request (ns)".into(),
            String::new(),
            md_table(&cpu_headers, &cpu_rows),
            String::new(),
        ]);
    }
    if !mem_rows.is_empty() {
        let mem_headers: Vec<String> = ["memory", "redis", "node", "node/redis"]
            .map(String::from)
            .to_vec();
        md.extend([
            "## Memory".into(),
            String::new(),
            md_table(&mem_headers, &mem_rows),
            String::new(),
        ]);
    }
    if !results.warnings.is_empty() {
        md.extend(["## Warnings".into(), String::new(), "```".into()]);
        md.extend(results.warnings.iter().cloned());
        md.extend(["```".into(), String::new()]);
    }
    for section in owned {
        md.extend([section.clone(), String::new()]);
    }
    Ok(md.join("\n"))
}
