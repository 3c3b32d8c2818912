//! Goal: the benchmark suites that write BENCHMARKS.md (`operator bench vs-redis|fabric|
//! replication|failover`, issue "House redesign" part 5) keep working: each runs at a tiny
//! scale against real servers it starts itself and must write its report section with figures
//! in it (a run that produces no figures fails here, so the tooling cannot rot unnoticed).

use std::path::{Path, PathBuf};

use integration::{node_binary, operator};

/// Runs `operator bench <suite> ... --out <dir>/BENCHMARKS.md` and returns the report.
fn run_suite(dir: &Path, suite: &str, args: &[&str]) -> String {
    let out: PathBuf = dir.join("BENCHMARKS.md");
    let node = node_binary();
    let mut all = vec![
        "bench",
        suite,
        "--node-bin",
        node.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let output = operator(&all).output().expect("running operator bench");
    assert!(
        output.status.success(),
        "operator {}: {}\n{}",
        all.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read_to_string(out).expect("the report was written")
}

/// The body rows of the first table after `heading`, split into trimmed cells.
fn table(report: &str, heading: &str) -> Vec<Vec<String>> {
    let after = report
        .split_once(heading)
        .unwrap_or_else(|| panic!("no {heading:?} in:\n{report}"))
        .1;
    after
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// A figure as the reports print it ("1,234", "0.45", "12 (12)").
fn figure(cell: &str) -> f64 {
    let first = cell.split_whitespace().next().unwrap_or("");
    first
        .replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("not a figure: {cell:?}"))
}

#[test]
fn failover_suite_measures_failovers_and_checks_for_lost_writes() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_suite(
        dir.path(),
        "failover",
        &[
            "--servers",
            "node",
            "--timeouts",
            "1000",
            "--iterations",
            "1",
            "--write-rate",
            "500",
        ],
    );
    assert!(report.contains("<!-- BEGIN failover -->") && report.contains("<!-- END failover -->"));
    let rows = table(&report, "### Results");
    assert_eq!(rows.len(), 1, "{report}");
    let row = &rows[0];
    assert_eq!(
        (row[0].as_str(), row[1].as_str(), row[2].as_str()),
        ("1000", "node", "1")
    );
    // failover p50 and promoted p50 are real times; writes were acknowledged and checked,
    // none lost (repl-sync-acks 1), also at the final read-back.
    assert!(figure(&row[3]) > 0.0 && figure(&row[6]) > 0.0, "{row:?}");
    assert!(
        figure(&row[8]) > 0.0,
        "no acknowledged writes checked: {row:?}"
    );
    assert_eq!(
        (row[9].as_str(), row[10].as_str(), row[11].as_str()),
        ("0", "0", "0"),
        "{report}"
    );
    assert!(!report.contains("Runs that did not complete"), "{report}");
}

#[test]
fn replication_suite_measures_stream_and_lag() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_suite(
        dir.path(),
        "replication",
        &[
            "--setups", "ofi:tcp", "--tests", "set", "-n", "20000", "--rounds", "1",
        ],
    );
    let rows = table(&report, "### Results");
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(
        (rows[0][0].as_str(), rows[0][1].as_str()),
        ("SET", "node (ofi:tcp)")
    );
    assert!(
        figure(&rows[0][2]) > 0.0 && figure(&rows[0][3]) > 0.0,
        "{rows:?}"
    );
}

#[test]
fn fabric_suite_compares_tcp_and_the_fabric() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_suite(
        dir.path(),
        "fabric",
        &[
            "--providers",
            "ofi:tcp",
            "--tests",
            "get",
            "--n-p1",
            "500",
            "--n-p16",
            "4000",
            "--rounds",
            "1",
            "-c",
            "2",
            "--profile",
            "dev",
        ],
    );
    for p in [1, 16] {
        let rows = table(&report, &format!("### ofi:tcp vs TCP, -P {p}"));
        assert_eq!(rows.len(), 1, "{report}");
        assert_eq!(rows[0][0], "GET");
        // rps over both transports and the CPU per request over both.
        for i in [1, 2, 8, 9] {
            assert!(
                figure(&rows[0][i]) > 0.0,
                "-P {p} column {i}: {:?}",
                rows[0]
            );
        }
    }
}

#[test]
fn vs_redis_suite_compares_with_redis_server() {
    let dir = tempfile::tempdir().unwrap();
    // Another suite's section must survive the rewrite.
    let kept = "<!-- BEGIN failover -->\nkept\n<!-- END failover -->";
    std::fs::write(dir.path().join("BENCHMARKS.md"), format!("old\n\n{kept}\n")).unwrap();
    let report = run_suite(
        dir.path(),
        "vs-redis",
        &[
            "--quick",
            "--tests",
            "get",
            "--rounds",
            "1",
            "--n-p1",
            "1000",
            "--n-p16",
            "5000",
            "--mem-keys",
            "2000",
            "-c",
            "10",
        ],
    );
    assert!(
        report.starts_with("# Benchmarks") && report.contains(kept),
        "{report}"
    );
    let rows = table(&report, "## Throughput (requests/s)");
    assert_eq!(rows[0][0], "GET", "{report}");
    for i in 1..=6 {
        assert!(figure(&rows[0][i]) > 0.0, "column {i}: {:?}", rows[0]);
    }
    let cpu = table(&report, "## Server CPU per request (ns)");
    // redis-server's CPU per request must be there; the node's may read 0 on a loaded host:
    // it is CPU time less the wall time of its busy-poll turns, which a descheduled poller
    // stretches past the CPU it used.
    assert!(
        figure(&cpu[0][1]) > 0.0 && figure(&cpu[0][2]) >= 0.0,
        "{cpu:?}"
    );
    let memory = table(&report, "## Memory");
    assert_eq!(memory[0][1..3], ["2000", "2000"], "DBSIZE: {memory:?}");
}

#[test]
fn reshard_suite_moves_slots_on_both_and_reads_every_key_back() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_suite(dir.path(), "reshard", &["--keys", "3000", "--writers", "1"]);
    assert!(report.contains("<!-- BEGIN reshard -->") && report.contains("<!-- END reshard -->"));
    let rows = table(&report, "### Results");
    assert_eq!(rows.len(), 2, "{report}");
    for (row, server) in rows.iter().zip(["redis-server", "node"]) {
        assert_eq!(row[0], server, "{report}");
        // Every slot of the source moved, in a real time, and every key read back right.
        assert_eq!(row[2], "5461 of 5461", "{report}");
        assert!(figure(&row[3]) > 0.0, "{row:?}");
        assert_eq!(
            (row[9].as_str(), row[10].as_str()),
            ("3,000", "0"),
            "{report}"
        );
    }
    // Our source measured its write pauses: at least one per batch (5461 slots in batches of
    // the default cluster-migration-slots-per-batch, 1024: 6 batches).
    assert!(figure(&rows[1][5]) >= 6.0, "{report}");
    assert!(figure(&rows[1][7]) > 0.0, "{report}");
    assert!(report.contains("Move time node/redis"), "{report}");
    // The writers' acknowledged writes all read back, on both.
    let writers = table(&report, "### Writers during the move");
    assert_eq!(writers.len(), 2, "{report}");
    for row in &writers {
        assert!(figure(&row[2]) > 0.0, "{row:?}");
        assert_eq!(row[9], "0", "lost writes: {report}");
    }
}
