//! Resharding through the admin API (issue 17's acceptance): 3 -> 4 -> 3 primaries with
//! `operator node add`, `operator rebalance` and `operator node drain` while redis-py's
//! RedisCluster writes and reads a key in every slot (tests/py/cluster_load.py): the client
//! sees no error, every key holds its last write, and no node ever answered ASK (atomic
//! migration moves a batch at once: MOVED only).

use crate::admin_api::text;
use integration::cluster::{addr, cluster_node_with, form_cluster, wait_until};
use integration::{free_port, operator, Node};
use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

const SECRET: &str = "admin-migration";
const TOKEN: &str = "admin-migration-token";

fn admin(port: u16, args: &[&str]) -> Output {
    let at = format!("127.0.0.1:{port}");
    let mut cmd = operator(args);
    cmd.args(["--admin", &at, "--token", TOKEN]);
    cmd.output().expect("running operator")
}

fn id(n: &Node) -> String {
    n.cli(&["CLUSTER", "MYID"])
}

fn info(n: &Node, field: &str) -> String {
    n.cli(&["CLUSTER", "INFO"])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Slots `n`'s own line in CLUSTER NODES lists (as node `at` sees it).
fn slot_count(at: &Node, node_id: &str) -> usize {
    at.cli(&["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.starts_with(node_id))
        .map(|l| {
            l.split_whitespace()
                .skip(8)
                .map(|r| match r.split_once('-') {
                    Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
                    None => 1,
                })
                .sum()
        })
        .unwrap_or(0)
}

fn succeeded(out: &Output) -> bool {
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains("SUCCEEDED")
}

#[test]
fn three_to_four_to_three_primaries_under_a_redis_py_cluster_load() {
    let port = free_port();
    let p = port.to_string();
    // A generous node timeout: nothing here needs failures found fast, and a node starved
    // of CPU on a loaded host must not be marked failing mid-move.
    let slow = ["--cluster-node-timeout", "10000"];
    let mut first_args = vec!["--admin-port", &p, "--admin-token", TOKEN];
    first_args.extend_from_slice(&slow);
    let nodes = vec![
        cluster_node_with(SECRET, &first_args),
        cluster_node_with(SECRET, &slow),
        cluster_node_with(SECRET, &slow),
    ];
    form_cluster(&nodes, 0);
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("one topology group with a leader", &refs, || {
        nodes
            .iter()
            .all(|n| info(n, "cluster_topology_leader") != "-")
    });

    let dir = tempfile::tempdir().unwrap();
    let stop = dir.path().join("stop");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/cluster_load.py");
    let mut load = Command::new("python3")
        .args([script, &nodes[0].port.to_string(), stop.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (scripts/install-deps.sh installs the redis package)");
    let mut stdout = BufReader::new(load.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert_eq!(first.trim(), "ready", "the python load did not start");

    // 3 -> 4: a fourth primary joins and takes its share.
    let fourth = cluster_node_with(SECRET, &slow);
    let out = admin(port, &["node", "add", &addr(&fourth)]);
    assert!(succeeded(&out), "{}", text(&out));
    let fourth_id = id(&fourth);
    let all: Vec<&Node> = nodes.iter().chain([&fourth]).collect();
    wait_until("the fourth node in the topology group", &all, || {
        info(&fourth, "cluster_topology_group") != "-"
            && all.iter().all(|n| {
                info(n, "cluster_topology_version") == info(&nodes[0], "cluster_topology_version")
            })
    });
    let out = admin(port, &["rebalance"]);
    assert!(succeeded(&out), "{}", text(&out));
    let share = slot_count(&nodes[0], &fourth_id);
    assert!(
        (3000..=5000).contains(&share),
        "the fourth primary holds {share} slots after the rebalance: {}",
        text(&out)
    );

    // 4 -> 3: the fourth is drained and forgotten.
    let out = admin(port, &["node", "drain", &fourth_id]);
    assert!(succeeded(&out), "{}", text(&out));
    wait_until("the others to forget the drained node", &refs, || {
        nodes
            .iter()
            .all(|n| !n.cli(&["CLUSTER", "NODES"]).contains(&fourth_id))
    });
    let covered: usize = nodes.iter().map(|n| slot_count(&nodes[0], &id(n))).sum();
    assert_eq!(covered, 16384);

    std::fs::write(&stop, b"").unwrap();
    let mut summary = String::new();
    stdout.read_line(&mut summary).unwrap();
    let status = load.wait().unwrap();
    assert!(status.success(), "the python load failed: {summary}");
    assert!(summary.contains("errors=0 wrong_at_end=0"), "{summary}");
    for n in nodes.iter().chain([&fourth]) {
        let stats = n.cli(&["INFO", "errorstats"]);
        assert!(
            !stats.contains("errorstat_ASK"),
            "a node answered ASK: {stats}"
        );
        assert!(!stats.contains("errorstat_TRYAGAIN"), "{stats}");
    }
}
