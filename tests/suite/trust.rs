//! Secure defaults (issue "Trust", item 5): every listener a node opens honours its bind
//! setting, cluster mode beyond loopback needs a cluster secret, and `operator cluster
//! create` refuses nodes that do not share one. Each test plays the careless operator or
//! the neighbour on a shared host.

use integration::cluster::{addr, run};
use integration::Node;
use std::process::Command;

/// The TCP sockets process `pid` listens on (`ss`), as "ip:port".
fn listening(pid: u32) -> Vec<String> {
    let out = Command::new("ss")
        .args(["-Hltnp"])
        .output()
        .expect("ss (iproute2) runs");
    let needle = format!("pid={pid},");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&needle))
        .filter_map(|l| l.split_whitespace().nth(3).map(String::from))
        .collect()
}

/// Goal: a node with every listener a node can have (clients over TCP and the fabric, the
/// cluster bus endpoint and its TCP rendezvous, the replication link listener) listens on
/// the `bind` address only, nothing on a wildcard, without `rdma-bind` set.
/// Method: a cluster-mode node on `ofi:tcp` with `rdma-port`, bound to 127.0.0.1 by the
/// harness; its listening sockets read with `ss`.
#[test]
fn every_listener_honours_bind() {
    let node = integration::cluster::cluster_node_with(
        "binds",
        &["--rdma-port", &integration::free_port().to_string()],
    );
    let log = node.log();
    assert!(
        log.contains("ready to accept connections (fabric)"),
        "{log}"
    );
    assert!(log.contains("accepting replication links"), "{log}");
    let sockets = listening(node.pid());
    // Client port, rendezvous (bus port), fabric listener, and libfabric's own sockets of
    // the fabric, replication and bus endpoints.
    assert!(sockets.len() >= 4, "{sockets:?}");
    for s in &sockets {
        assert!(
            s.starts_with("127.0.0.1:"),
            "{s} listens beyond bind: {sockets:?}"
        );
    }
}

/// Goal: cluster mode on an address other processes beyond the host can reach refuses to
/// start without a cluster secret (anyone reaching the bus could join and take slots);
/// on loopback it starts with a warning.
/// Method: starts with `--bind 0.0.0.0`, then with `rdma-bind` beyond loopback, no secret.
#[test]
fn cluster_mode_beyond_loopback_needs_a_secret() {
    for extra in [&["--bind", "0.0.0.0"][..], &["--rdma-bind", "0.0.0.0"]] {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["--cluster-enabled", "yes", "--fabric-provider", "ofi:tcp"];
        args.extend_from_slice(extra);
        let (status, log) = Node::start_expecting_exit(dir.path(), &args);
        assert!(!status.success(), "{extra:?}: started");
        assert!(log.contains("needs a cluster-secret"), "{extra:?}: {log}");
    }
    let node = Node::start(&["--cluster-enabled", "yes", "--fabric-provider", "ofi:tcp"]);
    assert!(
        node.log().contains("cluster-secret is empty"),
        "{}",
        node.log()
    );
}

/// Goal: `operator cluster create` does not form a cluster any local process could join:
/// nodes without a secret, or with different ones, are refused before anything changes;
/// `operator cluster secret` makes a fresh one that then works.
/// Method: three nodes without a secret; then three with two different secrets; then three
/// sharing a generated secret.
#[test]
fn operator_cluster_create_needs_one_shared_secret() {
    let create = |nodes: &[Node]| {
        let mut args = vec!["cluster".to_string(), "create".to_string()];
        args.extend(nodes.iter().map(addr));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&mut integration::operator(&args))
    };
    let bare: Vec<Node> = (0..3)
        .map(|_| Node::start(&["--cluster-enabled", "yes", "--fabric-provider", "ofi:tcp"]))
        .collect();
    let (ok, text) = create(&bare);
    assert!(!ok && text.contains("has no cluster-secret"), "{text}");
    let info = bare[0].cli(&["CLUSTER", "INFO"]);
    assert!(info.contains("cluster_slots_assigned:0"), "{info}");
    drop(bare);

    let mixed: Vec<Node> = ["a", "a", "b"]
        .iter()
        .map(|s| integration::cluster::cluster_node(s))
        .collect();
    let (ok, text) = create(&mixed);
    assert!(!ok && text.contains("different cluster secrets"), "{text}");
    drop(mixed);

    let (ok, secret) = run(&mut integration::operator(&["cluster", "secret"]));
    let secret = secret.trim().to_string();
    assert!(ok && secret.len() == 64, "{secret}");
    let shared: Vec<Node> = (0..3)
        .map(|_| integration::cluster::cluster_node(&secret))
        .collect();
    let (ok, text) = create(&shared);
    assert!(ok && text.contains("cluster of 3 nodes is ok"), "{text}");
}
