//! Cluster mode across processes (issue "Cluster mode", done-when items): real node
//! processes whose cluster bus runs on fabric datagrams (`ofi:tcp`), formed by
//! `redis-cli --cluster create`, checked by `redis-cli --cluster check`, used by `redis-cli -c`
//! and `redis-benchmark --cluster`; a killed node is failed by the others; a node with another
//! cluster secret cannot join.

use integration::cluster::{addr, cluster_node, run, wait_until, CONVERGE_DEADLINE};
use integration::Node;
use std::process::Command;
use std::time::{Duration, Instant};

/// Three primaries made a cluster by `redis-cli --cluster create`.
fn create_cluster(secret: &str) -> Vec<Node> {
    integration::cluster::create_cluster(secret, 0)
}

#[test]
fn redis_cli_creates_checks_and_uses_a_cluster_over_the_fabric_bus() {
    let nodes = create_cluster("the-secret");
    let (ok, text) = run(Command::new("redis-cli").args(["--cluster", "check", &addr(&nodes[0])]));
    assert!(ok, "redis-cli --cluster check failed:\n{text}");
    assert!(
        text.contains("[OK] All nodes agree about slots configuration."),
        "{text}"
    );
    assert!(
        !text.contains("[ERR]") && !text.contains("[WARNING]"),
        "{text}"
    );
    // Every node knows all three, each with its fabric bus address recorded.
    for n in &nodes {
        let view = n.cli(&["CLUSTER", "NODES"]);
        assert_eq!(view.lines().count(), 3, "{view}");
        assert!(view.lines().all(|l| l.contains(" connected")), "{view}");
        assert!(
            view.lines().all(|l| l.contains(",fabric-address=ofi/tcp/")),
            "{view}"
        );
        let shards = n.cli(&["CLUSTER", "SHARDS"]);
        assert_eq!(shards.matches("fabric-address").count(), 3, "{shards}");
    }
    // redis-cli -c follows MOVED across the three.
    for i in 0..30 {
        let key = format!("key:{i}");
        let port = nodes[i % 3].port.to_string();
        let (ok, out) = run(Command::new("redis-cli").args(["-c", "-p", &port, "SET", &key, "v"]));
        assert!(ok && out.trim() == "OK", "SET {key}: {out}");
    }
    for i in 0..30 {
        let key = format!("key:{i}");
        let port = nodes[(i + 1) % 3].port.to_string();
        let (ok, out) = run(Command::new("redis-cli").args(["-c", "-p", &port, "GET", &key]));
        assert!(ok && out.trim() == "v", "GET {key}: {out}");
    }
    // redis-benchmark --cluster completes without errors.
    let port = nodes[0].port.to_string();
    let (ok, text) = run(Command::new("redis-benchmark").args([
        "--cluster",
        "-p",
        &port,
        "-n",
        "3000",
        "-c",
        "10",
        "-t",
        "set,get",
        "-q",
    ]));
    assert!(ok, "redis-benchmark --cluster failed:\n{text}");
    assert!(!text.to_lowercase().contains("error"), "{text}");
    assert!(text.contains("SET:") && text.contains("GET:"), "{text}");
}

/// PUBLISH on one node reaches subscribers on the others through the bus, as in Redis Cluster;
/// the reply counts this node's receivers only.
#[test]
fn publish_reaches_subscribers_on_other_nodes() {
    let nodes = create_cluster("pubsub");
    let mut subscriber = nodes[2].client();
    subscriber
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut pubsub = subscriber.as_pubsub();
    pubsub.subscribe("news").unwrap();
    let deadline = Instant::now() + CONVERGE_DEADLINE;
    loop {
        // Receivers on the publishing node: none.
        assert_eq!(nodes[0].cli(&["PUBLISH", "news", "hello from 0"]), "0");
        match pubsub.get_message() {
            Ok(m) => {
                assert_eq!(m.get_channel_name(), "news");
                assert_eq!(m.get_payload::<String>().unwrap(), "hello from 0");
                break;
            }
            Err(e) if e.is_timeout() => {
                assert!(Instant::now() < deadline, "no message arrived");
            }
            Err(e) => panic!("{e}"),
        }
    }
    // A message one bus message cannot carry is refused before anything is delivered; a
    // large one that fits arrives whole (on a channel of its own: copies of the greeting
    // above may still be on their way).
    pubsub.subscribe("big").unwrap();
    let mut publisher = nodes[0].client();
    let refused = redis::cmd("PUBLISH")
        .arg("big")
        .arg(vec![b'x'; 2 << 20])
        .query::<i64>(&mut publisher)
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("too large for the cluster bus"),
        "{refused}"
    );
    let big = vec![b'y'; 1 << 20];
    let _: i64 = redis::cmd("PUBLISH")
        .arg("big")
        .arg(&big)
        .query(&mut publisher)
        .unwrap();
    subscriber_gets(&mut pubsub, &big);
    let stats = nodes[0].cli(&["INFO", "stats"]);
    assert!(
        stats
            .lines()
            .any(|l| l.trim() == "cluster_publish_dropped:0"),
        "{stats}"
    );
}

/// The next message on channel "big" (within the converge deadline) carries `payload`.
fn subscriber_gets(pubsub: &mut redis::PubSub<'_>, payload: &[u8]) {
    let deadline = Instant::now() + CONVERGE_DEADLINE;
    loop {
        match pubsub.get_message() {
            Ok(m) if m.get_channel_name() == "big" => {
                assert_eq!(m.get_payload_bytes(), payload);
                return;
            }
            Ok(_) => {}
            Err(e) if e.is_timeout() => {
                assert!(Instant::now() < deadline, "no message arrived");
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn a_killed_primary_is_failed_by_the_others() {
    let mut nodes = create_cluster("s");
    let victim = nodes.pop().unwrap();
    let id = victim.cli(&["CLUSTER", "MYID"]);
    drop(victim);
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("FAIL of the killed node on both survivors", &refs, || {
        nodes.iter().all(|n| {
            n.cli(&["CLUSTER", "NODES"])
                .lines()
                .any(|l| l.starts_with(&id) && l.contains("master,fail "))
        })
    });
    // Its slots are unserved, so with full coverage required the cluster is down.
    for n in &nodes {
        assert!(n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:fail"));
    }
}

#[test]
fn a_node_with_another_secret_cannot_join() {
    let a = cluster_node("one secret");
    let b = cluster_node("another secret");
    let b_id = b.cli(&["CLUSTER", "MYID"]);
    let b_port = b.port.to_string();
    assert_eq!(a.cli(&["CLUSTER", "MEET", "127.0.0.1", &b_port]), "OK");
    // A MEET's handshake gets five windows of max(node timeout, 1 s) each, then is given up.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut view = a.cli(&["CLUSTER", "NODES"]);
    while view.lines().count() != 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        view = a.cli(&["CLUSTER", "NODES"]);
    }
    assert_eq!(view.lines().count(), 1, "{view}");
    assert!(!view.contains(&b_id), "{view}");
    assert_eq!(b.cli(&["CLUSTER", "NODES"]).lines().count(), 1);
}

#[test]
fn cluster_meet_rejects_bad_addresses_as_redis_does() {
    let a = cluster_node("s");
    assert_eq!(
        a.cli(&["CLUSTER", "MEET", "127.0.0.1", "notaport"]),
        "ERR Invalid base port specified: notaport"
    );
    assert_eq!(
        a.cli(&["CLUSTER", "MEET", "127.0.0.1", "7000", "x"]),
        "ERR Invalid bus port specified: x"
    );
    assert_eq!(
        a.cli(&["CLUSTER", "MEET", "nohost", "7000"]),
        "ERR Invalid node address specified: nohost:7000"
    );
    assert!(a
        .cli(&["CLUSTER", "MEET", "garbage"])
        .starts_with("ERR Invalid fabric address specified"));
}

/// `redis-cli --cluster reshard` moves 1000 slots (with their keys) while the Python `redis`
/// package's RedisCluster writes and reads a key in every slot through pipelines: the client
/// sees no error (redirects are followed inside it; a batch that ran into redis-py's limit of
/// 16 redirections, a MOVED loop while a slot's move applies on its source before its
/// target, is retried once, as an application would) and every key holds its last write.
#[test]
fn a_reshard_of_1000_slots_under_a_redis_py_cluster_load_loses_nothing() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    // Nothing here needs failures found fast; a node timeout of 10 s (not the default 2 s)
    // keeps a node starved of CPU on a loaded host from being marked failing mid-reshard
    // (the source then answered MIGRATE with CLUSTERDOWN).
    let nodes = integration::cluster::create_cluster_with(
        "reshard",
        0,
        &["--cluster-node-timeout", "10000"],
    );
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
    if first.trim() != "ready" {
        let out = load.wait_with_output().unwrap();
        panic!(
            "the python load did not start: {first}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let from = nodes[0].cli(&["CLUSTER", "MYID"]);
    let to = nodes[1].cli(&["CLUSTER", "MYID"]);
    let version_before = topology_version(&nodes[2]);
    let (ok, text) = run(Command::new("redis-cli").args([
        "--cluster",
        "reshard",
        &addr(&nodes[0]),
        "--cluster-from",
        &from,
        "--cluster-to",
        &to,
        "--cluster-slots",
        "1000",
        "--cluster-yes",
    ]));
    assert!(ok, "reshard failed:\n{text}");
    // The load goes on over the new layout for a while before it stops.
    std::thread::sleep(Duration::from_secs(2));
    std::fs::write(&stop, b"").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let out = load.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the python load saw failures: {rest}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(rest.contains("errors=0 wrong_at_end=0"), "{rest}");
    let (ok, text) = run(Command::new("redis-cli").args(["--cluster", "check", &addr(&nodes[2])]));
    assert!(
        ok && !text.contains("[ERR]"),
        "check after reshard:\n{text}"
    );
    let owned_by_to = nodes[2]
        .cli(&["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.starts_with(&to))
        .map(|l| l.to_string())
        .unwrap();
    // 5461..10922 (5462 slots) plus the 1000 moved from node 0.
    let count: usize = owned_by_to
        .split_whitespace()
        .skip(8)
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum();
    assert_eq!(count, 6462, "{owned_by_to}");
    // Each moved slot was bound by a Raft entry (SETSLOT NODE as a proposal), which every
    // node applied: a third node's topology version moved by at least the 1000 slots.
    wait_until(
        "every node at one topology version",
        &nodes.iter().collect::<Vec<_>>(),
        || {
            let v = topology_version(&nodes[0]);
            nodes.iter().all(|n| topology_version(n) == v)
        },
    );
    let moved = topology_version(&nodes[2]) - version_before;
    assert!(moved >= 1000, "topology version moved by {moved}");
}

fn topology_version(n: &Node) -> u64 {
    n.cli(&["CLUSTER", "INFO"])
        .lines()
        .find_map(|l| l.strip_prefix("cluster_topology_version:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// `operator cluster create` forms the same cluster redis-cli would (checked by
/// `redis-cli --cluster check`), and `operator cluster status` shows it with fabric addresses.
#[test]
fn operator_cluster_create_and_status() {
    let nodes: Vec<Node> = (0..3).map(|_| cluster_node("op")).collect();
    let addrs: Vec<String> = nodes.iter().map(addr).collect();
    let mut args = vec!["cluster", "create"];
    args.extend(addrs.iter().map(String::as_str));
    let (ok, text) = run(&mut integration::operator(&args));
    assert!(ok, "{text}");
    assert!(text.contains("cluster of 3 nodes is ok"), "{text}");
    let (ok, check) = run(Command::new("redis-cli").args(["--cluster", "check", &addrs[1]]));
    assert!(
        ok && check.contains("[OK] All 16384 slots covered."),
        "{check}"
    );
    assert!(!check.contains("[ERR]"), "{check}");
    let (ok, status) = run(&mut integration::operator(&[
        "cluster", "status", &addrs[2],
    ]));
    assert!(ok, "{status}");
    assert!(status.starts_with("cluster_state: ok"), "{status}");
    assert!(
        status
            .lines()
            .next()
            .unwrap()
            .contains("topology: version "),
        "{status}"
    );
    let rows: Vec<&str> = status.lines().skip(2).collect();
    assert_eq!(rows.len(), 3, "{status}");
    assert!(rows
        .iter()
        .all(|r| r.contains("ofi:tcp:") && r.contains("primary")));
    // A node that is already in a cluster is refused.
    let (ok, refused) = run(&mut integration::operator(&args));
    assert!(
        !ok && refused.contains("already knows other nodes"),
        "{refused}"
    );
}

/// `operator cluster create --replicas 1` on six nodes: three primaries with the slots, each
/// followed by one replica, as every node and `redis-cli --cluster check` see it.
#[test]
fn operator_cluster_create_with_replicas() {
    let nodes: Vec<Node> = (0..6).map(|_| cluster_node("replicas")).collect();
    let addrs: Vec<String> = nodes.iter().map(addr).collect();
    let mut args = vec!["cluster", "create", "--replicas", "1"];
    args.extend(addrs.iter().map(String::as_str));
    let (ok, text) = run(&mut integration::operator(&args));
    assert!(ok, "{text}");
    assert_eq!(text.matches("replica ").count(), 3, "{text}");
    let primary_ids: Vec<String> = nodes[..3]
        .iter()
        .map(|n| n.cli(&["CLUSTER", "MYID"]))
        .collect();
    for (i, replica) in nodes[3..].iter().enumerate() {
        let me = replica.cli(&["CLUSTER", "NODES"]);
        let line = me.lines().find(|l| l.contains("myself")).unwrap();
        assert!(
            line.contains("myself,slave") && line.contains(&primary_ids[i]),
            "{me}"
        );
    }
    let (ok, check) = run(Command::new("redis-cli").args(["--cluster", "check", &addrs[0]]));
    assert!(ok && !check.contains("[ERR]"), "{check}");
    assert!(check.contains("1 slaves"), "{check}");
    let (ok, status) = run(&mut integration::operator(&[
        "cluster", "status", &addrs[4],
    ]));
    assert!(ok, "{status}");
    assert_eq!(status.matches(" replica ").count(), 3, "{status}");
}

/// A key of another node's slot is redirected before NOREPLICAS is considered (Redis checks
/// the cluster redirect first), so a client follows MOVED instead of failing on a node that
/// would not serve the key anyway.
#[test]
fn moved_comes_before_noreplicas() {
    let nodes = integration::cluster::create_cluster("order", 0);
    let mut answers = Vec::new();
    for n in &nodes {
        assert_eq!(
            n.cli(&["CONFIG", "SET", "min-replicas-to-write", "1"]),
            "OK"
        );
        answers.push(n.cli(&["SET", "foo", "bar"]));
    }
    let moved = answers
        .iter()
        .filter(|a| a.starts_with("MOVED 12182 "))
        .count();
    let refused = answers
        .iter()
        .filter(|a| a.starts_with("NOREPLICAS"))
        .count();
    assert_eq!((moved, refused), (2, 1), "{answers:?}");
}

/// A CLUSTER MEET given before the other node listens (a pod still starting) joins the two
/// once it does: the lookup of its bus address is retried, as Redis keeps a handshake node.
#[test]
fn a_meet_waits_for_a_node_that_is_still_starting() {
    let a = cluster_node("late");
    let port = integration::free_cluster_port();
    assert_eq!(
        a.cli(&["CLUSTER", "MEET", "127.0.0.1", &port.to_string()]),
        "OK"
    );
    std::thread::sleep(Duration::from_secs(1));
    let b = integration::cluster::cluster_node_in(tempfile::tempdir().unwrap(), port, "late", &[]);
    wait_until("the late node to be met", &[&a, &b], || {
        [&a, &b].iter().all(|n| {
            n.cli(&["CLUSTER", "INFO"])
                .contains("cluster_known_nodes:2")
        })
    });
}
