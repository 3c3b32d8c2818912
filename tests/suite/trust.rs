//! Secure defaults (issue "Trust", item 5): every listener a node opens honours its bind
//! setting, cluster mode beyond loopback needs a cluster secret, and `operator cluster
//! create` gives nodes without one a generated one and refuses nodes that disagree. Each test plays the careless operator or
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

/// Goal: `operator cluster create` never makes a cluster without a shared secret: nodes
/// started without one get a generated one (kept in their dir across a restart), nodes that
/// have different ones are refused, and a node's secret cannot be replaced afterwards.
/// Method: three bare cluster-mode nodes on loopback, created by the operator; one restarted
/// (kill -9, same dir and port) must rejoin; a node without the secret asks to meet them.
#[test]
fn operator_cluster_create_gives_nodes_without_a_secret_a_generated_one() {
    use integration::cluster::wait_until;
    let create = |nodes: &[Node]| {
        let mut args = vec!["cluster".to_string(), "create".to_string()];
        args.extend(nodes.iter().map(addr));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&mut integration::operator(&args))
    };
    let bare_args = ["--cluster-enabled", "yes", "--fabric-provider", "ofi:tcp"];
    let mut bare: Vec<Node> = (0..3).map(|_| Node::start(&bare_args)).collect();
    let (ok, text) = create(&bare);
    assert!(
        ok && text.contains("generated a cluster secret and gave 3 node(s)"),
        "{text}"
    );
    assert!(text.contains("cluster of 3 nodes is ok"), "{text}");
    let secrets: Vec<String> = bare
        .iter()
        .map(|n| n.cli(&["CONFIG", "GET", "cluster-secret"]))
        .collect();
    let secret = secrets[0].lines().nth(1).unwrap_or("").to_string();
    assert_eq!(secret.len(), 64, "{secrets:?}");
    assert!(secrets.iter().all(|s| s == &secrets[0]), "{secrets:?}");
    assert!(bare[1]
        .cli(&["CLUSTER", "SET-SECRET", "another-secret-of-enough-length"])
        .contains("already has a cluster secret"));

    // Kept in the dir, private: a restarted node still talks to its cluster.
    let restarted = bare.remove(2);
    let port = restarted.port;
    let dir = restarted.into_dir();
    let file = dir.path().join("cluster-secret");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let back = Node::start_in_on_port(dir, port, &bare_args);
    let got = back.cli(&["CONFIG", "GET", "cluster-secret"]);
    assert_eq!(got.lines().nth(1), Some(secret.as_str()), "{got}");
    wait_until(
        "the restarted node is back in an ok cluster",
        &[&back, &bare[0]],
        || {
            back.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok")
                && bare[0]
                    .cli(&["CLUSTER", "NODES"])
                    .lines()
                    .filter(|l| l.contains("connected"))
                    .count()
                    == 3
        },
    );

    // A neighbour without the secret cannot join.
    let rogue = Node::start(&bare_args);
    let _ = rogue.cli(&["CLUSTER", "MEET", "127.0.0.1", &bare[0].port.to_string()]);
    std::thread::sleep(std::time::Duration::from_secs(3));
    let info = bare[0].cli(&["CLUSTER", "INFO"]);
    assert!(info.contains("cluster_known_nodes:3"), "{info}");

    let mixed: Vec<Node> = [
        "a-secret-of-enough-len",
        "a-secret-of-enough-len",
        "b-secret-of-enough-len",
    ]
    .iter()
    .map(|s| integration::cluster::cluster_node(s))
    .collect();
    let (ok, text) = create(&mixed);
    assert!(!ok && text.contains("different cluster secrets"), "{text}");
}
