//! Cluster helpers the cluster suites share: nodes whose bus runs on `ofi:tcp`, a cluster of
//! three primaries made by `redis-cli --cluster create`, and a bounded wait for gossip.

use crate::Node;
use std::process::Command;
use std::time::{Duration, Instant};

/// Bound on waiting for gossip to converge or a failure to be agreed (node timeout 2 s). A
/// bound against hanging, not a timing assertion.
pub const CONVERGE_DEADLINE: Duration = Duration::from_secs(60);

/// A cluster-mode node whose bus runs on `ofi:tcp` with `secret`.
pub fn cluster_node(secret: &str) -> Node {
    cluster_node_with(secret, &[])
}

/// A cluster node with `extra` arguments after the cluster ones.
pub fn cluster_node_with(secret: &str, extra: &[&str]) -> Node {
    Node::start(&cluster_args(secret, extra))
}

/// A cluster node started in `dir` on `port` (a restart over its saved `nodes.conf`, or a
/// node whose port was handed out before it started).
pub fn cluster_node_in(dir: tempfile::TempDir, port: u16, secret: &str, extra: &[&str]) -> Node {
    Node::start_in_on_port(dir, port, &cluster_args(secret, extra))
}

/// The arguments of a cluster node on `ofi:tcp` with `secret`, then `extra`.
fn cluster_args<'a>(secret: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--cluster-enabled",
        "yes",
        "--fabric-provider",
        "ofi:tcp",
        "--cluster-secret",
        secret,
    ];
    args.extend_from_slice(extra);
    args
}

/// `127.0.0.1:PORT` of a node.
pub fn addr(n: &Node) -> String {
    format!("127.0.0.1:{}", n.port)
}

/// Runs a tool; whether it succeeded, and its stdout then stderr.
pub fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().expect("running a redis tool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Polls `done` until it holds; past [`CONVERGE_DEADLINE`] panics with the nodes' logs.
pub fn wait_until(what: &str, nodes: &[&Node], done: impl FnMut() -> bool) {
    wait_until_described(what, nodes, done, String::new)
}

/// As [`wait_until`], and on a timeout the panic also carries `describe()` (the state the
/// wait was looking at), before the logs.
pub fn wait_until_described(
    what: &str,
    nodes: &[&Node],
    mut done: impl FnMut() -> bool,
    describe: impl Fn() -> String,
) {
    let deadline = Instant::now() + CONVERGE_DEADLINE;
    while !done() {
        if Instant::now() > deadline {
            let logs: Vec<String> = nodes.iter().map(|n| n.log()).collect();
            let state = describe();
            // The summary again after the logs: CI keeps only the head and the tail of a
            // long failure, and the logs would push the first copy out of both.
            panic!(
                "timed out waiting for {what}; state:\n{state}\nlogs:\n{}\n---- end of logs; timed out waiting for {what}; state:\n{state}",
                logs.join("\n----\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Three primaries made a cluster by `redis-cli --cluster create`, then `extra` empty nodes
/// met by the first; returns once every node knows every node and says `cluster_state:ok`.
pub fn create_cluster(secret: &str, extra: usize) -> Vec<Node> {
    create_cluster_with(secret, extra, &[])
}

/// [`create_cluster`] with `node_args` given to every node.
pub fn create_cluster_with(secret: &str, extra: usize, node_args: &[&str]) -> Vec<Node> {
    let mut nodes: Vec<Node> = (0..3)
        .map(|_| cluster_node_with(secret, node_args))
        .collect();
    let mut args = vec!["--cluster".to_string(), "create".to_string()];
    args.extend(nodes.iter().map(addr));
    args.push("--cluster-yes".into());
    let (ok, text) = run(Command::new("redis-cli").args(&args));
    assert!(ok, "redis-cli --cluster create failed:\n{text}");
    assert!(
        text.contains("[OK] All 16384 slots covered."),
        "create output:\n{text}"
    );
    for _ in 0..extra {
        let n = cluster_node_with(secret, node_args);
        let port = n.port.to_string();
        assert_eq!(nodes[0].cli(&["CLUSTER", "MEET", "127.0.0.1", &port]), "OK");
        nodes.push(n);
    }
    let total = nodes.len();
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("every node to know every node", &refs, || {
        nodes.iter().all(|n| {
            let view = n.cli(&["CLUSTER", "NODES"]);
            view.lines().count() == total && !view.contains("handshake")
        })
    });
    wait_until("cluster_state:ok on every node", &refs, || {
        nodes
            .iter()
            .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"))
    });
    nodes
}

/// Makes `nodes` (started by the caller, e.g. with different flags each) a cluster with
/// `redis-cli --cluster create` and `replicas` per primary; returns once every node knows
/// every node and says `cluster_state:ok`.
pub fn form_cluster(nodes: &[Node], replicas: usize) {
    let mut args = vec!["--cluster".to_string(), "create".to_string()];
    args.extend(nodes.iter().map(addr));
    args.extend([
        "--cluster-replicas".into(),
        replicas.to_string(),
        "--cluster-yes".into(),
    ]);
    let (ok, text) = run(Command::new("redis-cli").args(&args));
    assert!(ok, "redis-cli --cluster create failed:\n{text}");
    assert!(
        text.contains("[OK] All 16384 slots covered."),
        "create output:\n{text}"
    );
    let refs: Vec<&Node> = nodes.iter().collect();
    // The topology group forms after the slots are covered: callers that act through it
    // (failover, watch by version) need it formed, with a leader, on every node.
    let formed = |info: &str| {
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or("")
                .trim()
                .to_string()
        };
        field("cluster_topology_version:")
            .parse::<u64>()
            .unwrap_or(0)
            > 0
            && !matches!(field("cluster_topology_leader:").as_str(), "" | "-")
    };
    wait_until(
        "cluster_state:ok, every node everywhere, the group formed",
        &refs,
        || {
            nodes.iter().all(|n| {
                let view = n.cli(&["CLUSTER", "NODES"]);
                let info = n.cli(&["CLUSTER", "INFO"]);
                view.lines().count() == nodes.len()
                    && !view.contains("handshake")
                    && info.contains("cluster_state:ok")
                    && formed(&info)
            })
        },
    );
}

/// Six nodes made a cluster by `redis-cli --cluster create --cluster-replicas 1` (three
/// primaries, each with one replica), with `extra` node arguments (e.g. a node timeout);
/// returns as [`form_cluster`] does (all six known everywhere, `cluster_state:ok`, the
/// topology group formed with a leader on every node).
pub fn create_cluster_with_replicas(secret: &str, extra: &[&str]) -> Vec<Node> {
    let mut base = vec![
        "--cluster-enabled",
        "yes",
        "--fabric-provider",
        "ofi:tcp",
        "--cluster-secret",
        secret,
    ];
    base.extend_from_slice(extra);
    let nodes: Vec<Node> = (0..6).map(|_| Node::start(&base)).collect();
    form_cluster(&nodes, 1);
    nodes
}

/// A field of a node's INFO (any section), "" when absent.
pub fn info_field(n: &Node, field: &str) -> String {
    let text = n.cli(&["INFO", "everything"]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}
