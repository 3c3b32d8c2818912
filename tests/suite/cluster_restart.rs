//! Restart safety in cluster mode: a primary killed and restarted before anyone fails it
//! over never serves with less than it acknowledged (the restart fence hands its slots to
//! the replica that holds more), one without replicas serves what it loaded, and one
//! stopped cleanly serves again as itself.

use crate::cluster_replication::{cluster_info, wait_for_pairs};
use integration::cluster::{
    cluster_node_in, create_cluster_with, create_cluster_with_replicas, info_field, wait_until,
};
use integration::Node;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a writer's request may take before the writer gives up on it (not acknowledged).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// Counters the writer INCRs, spread over slots (and so over shards).
const COUNTERS: usize = 12;

/// A client that follows MOVED to the owner and reports every other outcome: what a cluster
/// client that retries does, with every reply kept apart.
struct Writer {
    ports: Vec<u16>,
    cons: HashMap<u16, redis::Connection>,
}

impl Writer {
    fn new(ports: Vec<u16>) -> Self {
        Writer {
            ports,
            cons: HashMap::new(),
        }
    }

    /// Sends `args` once (following up to 4 MOVED); Err for anything else than a reply.
    fn call(&mut self, args: &[&str]) -> redis::RedisResult<redis::Value> {
        let mut port = self.ports[0];
        for _ in 0..5 {
            let con = match self.cons.entry(port) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
                    let con = client.get_connection_with_timeout(REQUEST_TIMEOUT)?;
                    con.set_read_timeout(Some(REQUEST_TIMEOUT))?;
                    con.set_write_timeout(Some(REQUEST_TIMEOUT))?;
                    v.insert(con)
                }
            };
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            match cmd.query::<redis::Value>(con) {
                Err(e) if e.kind() == redis::ErrorKind::Moved => {
                    let (owner, _) = e.redirect_node().expect("a MOVED target");
                    port = owner.rsplit(':').next().unwrap().parse().unwrap();
                }
                Err(e) => {
                    // The connection may be broken (a killed node): a new one next time.
                    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                        self.cons.remove(&port);
                        // Another entry point, in case this one is the node that died.
                        self.ports.rotate_left(1);
                    }
                    return Err(e);
                }
                ok => return ok,
            }
        }
        Err(redis::RedisError::from((
            redis::ErrorKind::ClientError,
            "too many redirects",
        )))
    }
}

/// What the writer got acknowledged: every key it SET with its value, and the highest
/// value each counter's INCR answered.
#[derive(Default)]
struct Acknowledged {
    keys: Vec<(String, String)>,
    counters: HashMap<String, i64>,
    refused: usize,
}

/// Writes until `stop`: a new key per SET, and INCRs of the counters, round robin.
fn write_until(ports: Vec<u16>, stop: Arc<AtomicBool>, run: usize) -> Acknowledged {
    let mut w = Writer::new(ports);
    let mut acked = Acknowledged::default();
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("w{run}:{i}");
        let value = format!("v{i}");
        match w.call(&["SET", &key, &value]) {
            Ok(redis::Value::Okay) => acked.keys.push((key, value)),
            Ok(other) => panic!("SET answered {other:?}"),
            Err(_) => acked.refused += 1,
        }
        let counter = format!("c:{}", i % COUNTERS);
        match w.call(&["INCR", &counter]) {
            Ok(redis::Value::Int(n)) => {
                let best = acked.counters.entry(counter).or_insert(n);
                *best = (*best).max(n);
            }
            Ok(other) => panic!("INCR answered {other:?}"),
            Err(_) => acked.refused += 1,
        }
        i += 1;
        if acked.refused > 0 && acked.refused % 50 == 0 {
            // The cluster is settling (fence, hand-over): do not spin on refusals.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    acked
}

/// Reads back through the cluster: every acknowledged key with its value, every counter at
/// least at its last acknowledged value.
fn assert_acknowledged(ports: Vec<u16>, acked: &Acknowledged, trial: usize) {
    let mut w = Writer::new(ports);
    let mut read = |key: &str| -> Option<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match w.call(&["GET", key]) {
                Ok(redis::Value::BulkString(b)) => return Some(String::from_utf8(b).unwrap()),
                Ok(redis::Value::Nil) => return None,
                Ok(other) => panic!("GET {key} answered {other:?}"),
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("GET {key}: {e}"),
            }
        }
    };
    let lost: Vec<&String> = acked
        .keys
        .iter()
        .filter(|(k, v)| read(k).as_ref() != Some(v))
        .map(|(k, _)| k)
        .collect();
    assert!(
        lost.is_empty(),
        "trial {trial}: {} of {} acknowledged keys lost: {:?}",
        lost.len(),
        acked.keys.len(),
        &lost[..lost.len().min(10)]
    );
    for (counter, at_least) in &acked.counters {
        let now: i64 = read(counter).map_or(0, |v| v.parse().unwrap());
        assert!(
            now >= *at_least,
            "trial {trial}: {counter} is {now}, {at_least} was acknowledged"
        );
    }
}

/// Trials of the first test: `RESTART_TRIALS` (the bar is 20), else 3.
fn trials() -> usize {
    std::env::var("RESTART_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// Goal: the case. A primary killed with SIGKILL under synchronous writes and
/// restarted 300 ms later (before any failover) loses no acknowledged write: it comes back
/// fenced, its replica (which holds every acknowledged write) takes its slots, and it
/// rejoins as that replica's replica.
/// Method: six real nodes on `ofi:tcp`, `--cluster-node-timeout 1000 --repl-sync-acks 1`;
/// a writer thread SETs new keys and INCRs counters through a MOVED-following client the
/// whole time; per trial a primary is killed and restarted on its dir and port after
/// 300 ms; once the cluster has three linked pairs again, everything acknowledged is read
/// back. `RESTART_TRIALS=20` runs the 20 trials.
#[test]
fn a_primary_restarted_before_failover_never_serves_less_than_it_acknowledged() {
    let args = ["--cluster-node-timeout", "1000", "--repl-sync-acks", "1"];
    let mut nodes = create_cluster_with_replicas("fence", &args);
    wait_for_pairs(&nodes);
    for trial in 0..trials() {
        let pairs = wait_for_pairs(&nodes);
        let (p, _) = pairs[trial % pairs.len()];
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || write_until(ports, stop, trial))
        };
        std::thread::sleep(Duration::from_millis(500));
        let port = nodes[p].port;
        let dir = nodes.remove(p).into_dir();
        std::thread::sleep(Duration::from_millis(300));
        nodes.insert(p, cluster_node_in(dir, port, "fence", &args));
        wait_for_pairs(&nodes);
        // It came back fenced, and its replica, ahead of it, took its slots.
        assert!(
            nodes[p].log().contains("fenced (no keyed command"),
            "trial {trial}: {}\n(trial {trial}: the restarted primary did not log its fence)",
            nodes[p].log()
        );
        assert_eq!(info_field(&nodes[p], "role"), "slave", "trial {trial}");
        // Writes on the settled cluster too, then the read-back.
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        let acked = writer.join().expect("the writer");
        assert!(
            acked.keys.len() > 10,
            "trial {trial}: only {} writes acknowledged",
            acked.keys.len()
        );
        let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
        assert_acknowledged(ports, &acked, trial);
        eprintln!(
            "trial {trial}: {} keys and {} counters acknowledged, all there ({} refused)",
            acked.keys.len(),
            acked.counters.len(),
            acked.refused
        );
    }
}

/// Goal: a primary without replicas, killed and restarted, has nothing that could hold
/// more: it lifts its fence at once and serves what it loaded (nothing, without save
/// rules), and the cluster is whole again.
/// Method: three primaries (no replicas) on `ofi:tcp`, `--cluster-node-timeout 1000`; one
/// killed with SIGKILL and restarted after 300 ms on its dir and port.
#[test]
fn a_crashed_primary_without_replicas_serves_what_it_loaded() {
    let args = ["--cluster-node-timeout", "1000"];
    let mut nodes = create_cluster_with("fence-alone", 0, &args);
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("a topology group with a leader", &refs, || {
        nodes
            .iter()
            .all(|n| cluster_info(n, "cluster_topology_leader") != "-")
    });
    let port = nodes[1].port;
    let dir = nodes.remove(1).into_dir();
    std::thread::sleep(Duration::from_millis(300));
    nodes.insert(1, cluster_node_in(dir, port, "fence-alone", &args));
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("the restarted primary serving", &refs, || {
        cluster_info(&nodes[1], "cluster_restart_fence") == "0"
            && nodes
                .iter()
                .all(|n| cluster_info(n, "cluster_state") == "ok")
    });
    assert!(
        nodes[1].log().contains("restart fence lifted"),
        "{}",
        nodes[1].log()
    );
    let mut w = Writer::new(nodes.iter().map(|n| n.port).collect());
    for i in 0..30 {
        let key = format!("after:{i}");
        assert_eq!(w.call(&["SET", &key, "v"]).unwrap(), redis::Value::Okay);
    }
    assert_eq!(info_field(&nodes[1], "role"), "master");
}

/// Goal: a primary stopped cleanly (SIGTERM: its replica caught up, final save, identity
/// `stopped`) is covered at restart: no fence, no failover, its id still owns its slots and
/// every key is there.
/// Method: six real nodes on `ofi:tcp` with `--save "3600 1"` and a 5 s node timeout; the
/// owner of a key compared in CLUSTER NODES before and after.
#[test]
fn a_cleanly_stopped_primary_serves_again_without_a_failover() {
    let args = ["--save", "3600 1", "--cluster-node-timeout", "5000"];
    let mut nodes = create_cluster_with_replicas("fence-clean", &args);
    let pairs = wait_for_pairs(&nodes);
    let (p, _) = pairs[0];
    let id = nodes[p].cli(&["CLUSTER", "MYID"]);
    let mut w = Writer::new(nodes.iter().map(|n| n.port).collect());
    for i in 0..100 {
        let key = format!("k:{i}");
        assert_eq!(w.call(&["SET", &key, "v"]).unwrap(), redis::Value::Okay);
    }
    let port = nodes[p].port;
    let mut stopped = nodes.remove(p);
    assert!(
        stopped.signal_and_wait("TERM").success(),
        "{}",
        stopped.log()
    );
    nodes.insert(
        p,
        cluster_node_in(stopped.into_dir(), port, "fence-clean", &args),
    );
    assert_eq!(cluster_info(&nodes[p], "cluster_restart_fence"), "0");
    assert_eq!(nodes[p].cli(&["CLUSTER", "MYID"]), id);
    wait_for_pairs(&nodes);
    let view = nodes[p].cli(&["CLUSTER", "NODES"]);
    let mine = view.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(
        mine.contains("master") && mine.split(' ').count() > 8,
        "{view}"
    );
    assert!(!nodes[p].log().contains("fenced"), "{}", nodes[p].log());
    // New connections: the old ones went with the stopped process.
    let mut w = Writer::new(nodes.iter().map(|n| n.port).collect());
    for i in 0..100 {
        let key = format!("k:{i}");
        let v = w.call(&["GET", &key]).unwrap();
        assert_eq!(v, redis::Value::BulkString(b"v".to_vec()), "{key}");
    }
}
