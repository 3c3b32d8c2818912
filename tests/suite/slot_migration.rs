//! Atomic slot migration across real nodes (issue "gRPC admin API and atomic slot
//! migration"): `CLUSTER MIGRATESLOTS` moves slots with their keys while clients write to
//! them; clients see only MOVED, once, and every acknowledged write reads back at the new
//! owner; a cancel or a killed target rolls back what had not committed.

use integration::cluster::{create_cluster, wait_until};
use integration::Node;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) fn info(n: &Node, field: &str) -> String {
    n.cli(&["CLUSTER", "INFO"])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Three primaries in one topology group, every node at one version.
pub(crate) fn three_primaries(secret: &str) -> Vec<Node> {
    let nodes = create_cluster(secret, 0);
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("one topology group with a leader", &refs, || {
        let groups: Vec<String> = nodes
            .iter()
            .map(|n| info(n, "cluster_topology_group"))
            .collect();
        groups[0] != "-"
            && groups.iter().all(|g| *g == groups[0])
            && nodes
                .iter()
                .all(|n| info(n, "cluster_topology_leader") != "-")
    });
    nodes
}

pub(crate) fn id(n: &Node) -> String {
    n.cli(&["CLUSTER", "MYID"])
}

/// The owner id of `slot` as node `n` sees it.
pub(crate) fn owner_of(n: &Node, slot: u16) -> Option<String> {
    n.cli(&["CLUSTER", "NODES"]).lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let owns = f.iter().skip(8).any(|r| match r.split_once('-') {
            Some((a, b)) => {
                a.parse::<u16>().is_ok_and(|a| a <= slot)
                    && b.parse::<u16>().is_ok_and(|b| slot <= b)
            }
            None => r.parse::<u16>() == Ok(slot),
        });
        owns.then(|| f[0].to_string())
    })
}

/// Every slot's owner id as node `n` sees it, read once (the last node claiming it).
pub(crate) fn owners(n: &Node) -> Vec<Option<String>> {
    claims(n)
        .into_iter()
        .map(|ids| ids.last().cloned())
        .collect()
}

/// Per slot, the ids of the nodes whose CLUSTER NODES line claims it, as `n` sees them.
pub(crate) fn claims(n: &Node) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new(); 16384];
    for l in n.cli(&["CLUSTER", "NODES"]).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        for r in f.iter().skip(8) {
            let (a, b) = match r.split_once('-') {
                Some((a, b)) => (a.parse::<usize>(), b.parse::<usize>()),
                None => (r.parse::<usize>(), r.parse::<usize>()),
            };
            if let (Ok(a), Ok(b)) = (a, b) {
                for slot in out.iter_mut().take(b + 1).skip(a) {
                    slot.push(f[0].to_string());
                }
            }
        }
    }
    out
}

pub(crate) fn node_owning(nodes: &[Node], slot: u16) -> &Node {
    let owner = owner_of(&nodes[0], slot).expect("slot assigned");
    nodes.iter().find(|n| id(n) == owner).unwrap()
}

/// Keys whose slots are in `lo..=hi`, `count` of them.
pub(crate) fn keys_in(lo: u16, hi: u16, count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("key:{i}"))
        .filter(|k| (lo..=hi).contains(&proto::slot::key_slot(k.as_bytes())))
        .take(count)
        .collect()
}

/// The migration's fields as GETSLOTMIGRATIONS lists them, found by request id.
pub(crate) fn migration(n: &Node, request_id: &str) -> Option<Vec<(String, String)>> {
    let mut con = n.client();
    let list: Vec<Vec<String>> = redis::cmd("CLUSTER")
        .arg("GETSLOTMIGRATIONS")
        .query(&mut con)
        .unwrap();
    list.into_iter()
        .map(|flat| {
            flat.chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect::<Vec<_>>()
        })
        .find(|fields| {
            fields
                .iter()
                .any(|(k, v)| k == "request_id" && v == request_id)
        })
}

/// `CLUSTER MIGRATESLOTS SLOTSRANGE lo hi NODE target REQUESTID request_id` on `source`,
/// which must answer OK.
pub(crate) fn start_migration(source: &Node, lo: u16, hi: u16, target_id: &str, request_id: &str) {
    let (lo, hi) = (lo.to_string(), hi.to_string());
    let answer = source.cli(&[
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        &lo,
        &hi,
        "NODE",
        target_id,
        "REQUESTID",
        request_id,
    ]);
    assert_eq!(answer, "OK", "MIGRATESLOTS {lo}-{hi} as {request_id}");
}

pub(crate) fn field(fields: &[(String, String)], name: &str) -> String {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

pub(crate) fn wait_for_end(n: &Node, request_id: &str) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(m) = migration(n, request_id) {
            if field(&m, "state") != "running" {
                return m;
            }
        }
        assert!(
            Instant::now() < deadline,
            "migration {request_id} still running: {:?}",
            migration(n, request_id)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sets every key of `keys` to "v", pipelined.
pub(crate) fn set_all(con: &mut redis::Connection, keys: &[String]) {
    for chunk in keys.chunks(500) {
        let mut pipe = redis::pipe();
        for k in chunk {
            pipe.cmd("SET").arg(k).arg("v").ignore();
        }
        let _: () = pipe.query(con).unwrap();
    }
}

/// Waits until `n` lists the migration named `request_id`.
pub(crate) fn wait_for_start(n: &Node, request_id: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while migration(n, request_id).is_none() {
        assert!(Instant::now() < deadline, "the migration never started");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until the target holds no key of slots 0-5000 it does not own (sampled).
pub(crate) fn wait_for_target_to_drop(target: &Node, target_id: &str, what: &str) {
    wait_until(what, &[target], || {
        let owner_now = owners(target);
        (0..5001u16).step_by(97).all(|slot| {
            owner_now[slot as usize].as_deref() == Some(target_id)
                || target.cli(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]) == "0"
        })
    });
}

/// What a writer ends with: each key's last acknowledged round, the errors it was
/// answered (MOVED aside), and how many MOVED it followed.
type Written = (Vec<(String, u64)>, Vec<String>, usize);

/// A client writing `key -> counter` in a loop to whichever node serves the key, following
/// MOVED only; anything else it is answered is recorded as an error.
struct Writer {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Written>,
}

impl Writer {
    fn start(keys: Vec<String>, source: &Node, target: &Node) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let (mut src, mut dst) = (source.client(), target.client());
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut acked: Vec<(String, u64)> = keys.iter().map(|k| (k.clone(), 0)).collect();
            let mut moved = vec![false; keys.len()];
            let mut errors = Vec::new();
            let mut redirects = 0;
            let mut round = 0u64;
            while !flag.load(Relaxed) {
                round += 1;
                for (i, key) in keys.iter().enumerate() {
                    let con = if moved[i] { &mut dst } else { &mut src };
                    let r: redis::RedisResult<()> =
                        redis::cmd("SET").arg(key).arg(round).query(con);
                    match r {
                        Ok(()) => acked[i].1 = round,
                        Err(e) if e.kind() == redis::ErrorKind::Moved && !moved[i] => {
                            redirects += 1;
                            moved[i] = true;
                            let r: redis::RedisResult<()> =
                                redis::cmd("SET").arg(key).arg(round).query(&mut dst);
                            match r {
                                Ok(()) => acked[i].1 = round,
                                Err(e) if errors.len() < 20 => errors.push(e.to_string()),
                                Err(_) => {}
                            }
                        }
                        Err(e) if errors.len() < 20 => errors.push(e.to_string()),
                        Err(_) => {}
                    }
                }
            }
            (acked, errors, redirects)
        });
        Writer { stop, thread }
    }

    fn finish(self) -> Written {
        self.stop.store(true, Relaxed);
        self.thread.join().unwrap()
    }
}

#[test]
fn slots_move_with_their_keys_under_writes_and_clients_see_only_moved() {
    let nodes = three_primaries("migrate-slots");
    let source = node_owning(&nodes, 0);
    let target = nodes.iter().find(|n| id(n) != id(source)).unwrap();
    // Keys in the moving slots, written before, plus a volatile one and a list.
    let moving = keys_in(0, 999, 3000);
    let mut con = source.client();
    for k in &moving[..2000] {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg("before")
            .query(&mut con)
            .unwrap();
    }
    let list_key = keys_in(0, 999, 3001)[3000].clone();
    let _: () = redis::cmd("RPUSH")
        .arg(&list_key)
        .arg(&["a", "b", "c"])
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("EXPIRE")
        .arg(&list_key)
        .arg(1000)
        .query(&mut con)
        .unwrap();
    // Keys staying behind.
    let staying = keys_in(1000, 1999, 200);
    for k in &staying {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg("stays")
            .query(&mut con)
            .unwrap();
    }
    // Four batches (the default batch holds 1024 slots): each pauses on its own.
    assert_eq!(
        source.cli(&["CONFIG", "SET", "cluster-migration-slots-per-batch", "256"]),
        "OK"
    );
    let writer = Writer::start(moving[1000..].to_vec(), source, target);
    std::thread::sleep(Duration::from_millis(300));
    let target_id = id(target);
    start_migration(source, 0, 999, &target_id, "move-1");
    let m = wait_for_end(source, "move-1");
    assert_eq!(field(&m, "state"), "success", "{m:?}");
    // The log says success at the last commit; the driver records the last pause a moment
    // later (after the target applied that commit too): read the figures once they settle.
    let deadline = Instant::now() + Duration::from_secs(10);
    let m = loop {
        let now = migration(source, "move-1").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let later = migration(source, "move-1").unwrap();
        if now == later || Instant::now() > deadline {
            break later;
        }
    };
    let (acked, errors, redirects) = writer.finish();
    // The source measured the move: every key copied, bytes on the link, at least one
    // write pause per batch (4 batches of at most 256 slots), percentiles in order.
    let number = |name: &str| -> f64 {
        field(&m, name)
            .parse()
            .unwrap_or_else(|_| panic!("{name} in {m:?}"))
    };
    assert!(number("keys_moved") >= 2001.0, "{m:?}");
    // At least the names and values of the keys written before (the writes during the move
    // add more, as many as the move's duration lets in: not a bound).
    let written_before: usize = moving[..2000]
        .iter()
        .map(|k| k.len() + "before".len())
        .sum();
    assert!(number("bytes_moved") > written_before as f64, "{m:?}");
    assert!(number("elapsed_ms") > 0.0, "{m:?}");
    assert!(number("write_pauses") >= 4.0, "{m:?}");
    // Neither end serves clients on the fabric: the data went over TCP.
    assert_eq!(field(&m, "link"), "tcp", "{m:?}");
    let (p50, p99, max) = (
        number("write_pause_p50_ms"),
        number("write_pause_p99_ms"),
        number("write_pause_max_ms"),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{m:?}");
    // Only the source measures.
    let seen_by_target = migration(target, "move-1").expect("the target lists it");
    assert_eq!(
        field(&seen_by_target, "keys_moved"),
        "0",
        "{seen_by_target:?}"
    );
    assert_eq!(field(&seen_by_target, "write_pauses"), "0");
    assert!(errors.is_empty(), "the writer was answered {errors:?}");
    assert!(redirects > 0, "the writer never followed a MOVED");

    // Every node sees the target own the slots; the source no longer holds their keys.
    for n in &nodes {
        for slot in [0, 500, 999] {
            assert_eq!(owner_of(n, slot), Some(target_id.clone()));
        }
        assert_eq!(owner_of(n, 1000), Some(id(source)));
    }
    let mut dst = target.client();
    for (k, round) in &acked {
        let v: String = redis::cmd("GET").arg(k).query(&mut dst).unwrap();
        assert!(
            v.parse::<u64>().unwrap() >= *round,
            "{k}: {v} read back, {round} acknowledged"
        );
    }
    for k in &moving[..1000] {
        let v: String = redis::cmd("GET").arg(k).query(&mut dst).unwrap();
        assert_eq!(v, "before", "{k}");
    }
    let list: Vec<String> = redis::cmd("LRANGE")
        .arg(&list_key)
        .arg(0)
        .arg(-1)
        .query(&mut dst)
        .unwrap();
    assert_eq!(list, ["a", "b", "c"]);
    let ttl: i64 = redis::cmd("TTL").arg(&list_key).query(&mut dst).unwrap();
    assert!((1..=1000).contains(&ttl), "ttl {ttl}");
    let mut src = source.client();
    for k in &staying {
        let v: String = redis::cmd("GET").arg(k).query(&mut src).unwrap();
        assert_eq!(v, "stays");
    }
    wait_until("the source dropped the moved keys", &[source], || {
        (0..1000u16)
            .step_by(37)
            .all(|slot| source.cli(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]) == "0")
    });
    // The same request id again names the same, finished migration.
    start_migration(source, 0, 999, &target_id, "move-1");
    // Slots the node does not own are refused at once.
    let refused = source.cli(&[
        "CLUSTER",
        "MIGRATESLOTS",
        "SLOTSRANGE",
        "0",
        "10",
        "NODE",
        &target_id,
    ]);
    assert!(
        refused.contains("not the owner of hash slot 0"),
        "{refused}"
    );
}

#[test]
fn a_killed_target_fails_the_migration_and_nothing_acknowledged_is_lost() {
    const DURABLE: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];
    let secret = "migrate-kill";
    let mut nodes = {
        let nodes = integration::cluster::create_cluster_with(secret, 0, &DURABLE);
        let refs: Vec<&Node> = nodes.iter().collect();
        wait_until("one topology group with a leader", &refs, || {
            nodes
                .iter()
                .all(|n| info(n, "cluster_topology_leader") != "-")
        });
        nodes
    };
    let source_index = nodes
        .iter()
        .position(|n| id(n) == id(node_owning(&nodes, 0)))
        .unwrap();
    let target_index = (source_index + 1) % 3;
    let source_id = id(&nodes[source_index]);
    let target_id = id(&nodes[target_index]);
    let keys = keys_in(0, 5000, 20000);
    {
        let mut con = nodes[source_index].client();
        set_all(&mut con, &keys);
    }
    start_migration(&nodes[source_index], 0, 5000, &target_id, "doomed");
    // Kill the target once the migration is under way.
    wait_for_start(&nodes[source_index], "doomed");
    std::thread::sleep(Duration::from_millis(30));
    nodes[target_index].signal("KILL");
    let _ = nodes[target_index].wait_exit();
    let m = wait_for_end(&nodes[source_index], "doomed");
    let state = field(&m, "state");
    assert!(
        state == "failed" || state == "success",
        "the migration ended {m:?}"
    );
    // The target comes back from its AOF; the cluster is whole again.
    let port = nodes[target_index].port;
    let dir = nodes.remove(target_index).into_dir();
    let restarted = integration::cluster::cluster_node_in(dir, port, secret, &DURABLE);
    nodes.insert(target_index, restarted);
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("cluster_state:ok after the restart", &refs, || {
        nodes
            .iter()
            .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"))
    });
    // Every key reads back at its slot's owner, whichever side of the cut its batch was.
    let (source, target) = (&nodes[source_index], &nodes[target_index]);
    let (mut src, mut dst) = (source.client(), target.client());
    let mut kept = 0;
    let owner = owners(source);
    for k in &keys {
        let slot = proto::slot::key_slot(k.as_bytes());
        let owner = owner[slot as usize].clone().expect("assigned");
        let con = match owner {
            o if o == source_id => {
                kept += 1;
                &mut src
            }
            o => {
                assert_eq!(o, target_id, "slot {slot}");
                &mut dst
            }
        };
        let v: Option<String> = redis::cmd("GET").arg(k).query(con).unwrap();
        assert_eq!(v.as_deref(), Some("v"), "{k} (slot {slot}) lost: {m:?}");
    }
    if state == "failed" {
        assert!(kept > 0, "nothing stayed with the source: {m:?}");
        // What the target had copied of the aborted batch goes.
        wait_for_target_to_drop(target, &target_id, "the target dropped the aborted batch");
    }
}

/// A cancel mid-way: the running batch is rolled back, committed ones stay moved, and every
/// key reads back at its slot's owner.
#[test]
fn a_cancelled_migration_keeps_every_key_at_its_slots_owner() {
    let nodes = three_primaries("migrate-cancel");
    let source = node_owning(&nodes, 0);
    let target = nodes.iter().find(|n| id(n) != id(source)).unwrap();
    let keys = keys_in(0, 5000, 20000);
    let mut con = source.client();
    set_all(&mut con, &keys);
    let target_id = id(target);
    start_migration(source, 0, 5000, &target_id, "cancel-me");
    wait_for_start(source, "cancel-me");
    assert_eq!(source.cli(&["CLUSTER", "CANCELSLOTMIGRATIONS"]), "1");
    let m = wait_for_end(source, "cancel-me");
    let state = field(&m, "state");
    assert!(
        state == "cancelled" || state == "success",
        "the migration ended {m:?}"
    );
    if state == "cancelled" {
        assert_eq!(field(&m, "message"), "cancelled", "{m:?}");
    }
    let (mut src, mut dst) = (source.client(), target.client());
    let owner_now = owners(source);
    for k in &keys {
        let slot = proto::slot::key_slot(k.as_bytes());
        let owner = owner_now[slot as usize].clone().expect("assigned");
        let con = if owner == target_id {
            &mut dst
        } else {
            &mut src
        };
        let v: Option<String> = redis::cmd("GET").arg(k).query(con).unwrap();
        assert_eq!(v.as_deref(), Some("v"), "{k} (slot {slot}): {m:?}");
    }
    wait_for_target_to_drop(target, &target_id, "the target dropped the cancelled batch");
}

/// The source killed mid-migration: its replica takes its slots over, the topology leader
/// aborts the migration (its source failed), and every acknowledged write reads back at
/// its slot's owner; the target drops what it had copied of the aborted batch.
#[test]
fn a_killed_source_fails_over_and_the_migration_rolls_back() {
    let mut nodes = integration::cluster::create_cluster_with_replicas(
        "migrate-source",
        &["--repl-sync-acks", "1"],
    );
    let source_id = owner_of(&nodes[0], 0).unwrap();
    let source_index = nodes.iter().position(|n| id(n) == source_id).unwrap();
    let target_id = owner_of(&nodes[0], 16383).unwrap();
    let keys = keys_in(0, 5000, 10000);
    {
        let mut con = nodes[source_index].client();
        set_all(&mut con, &keys);
    }
    start_migration(&nodes[source_index], 0, 5000, &target_id, "source-dies");
    wait_for_start(&nodes[source_index], "source-dies");
    nodes[source_index].signal("KILL");
    let _ = nodes[source_index].wait_exit();
    let dead = nodes.remove(source_index);
    let watcher = nodes.iter().find(|n| id(n) != target_id).unwrap();
    let m = wait_for_end(watcher, "source-dies");
    let state = field(&m, "state");
    assert!(
        state == "failed" || state == "success",
        "the migration ended {m:?}"
    );
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("cluster_state:ok after the failover", &refs, || {
        nodes
            .iter()
            .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"))
    });
    let owner_now = owners(watcher);
    let mut clients: std::collections::HashMap<String, redis::Connection> =
        nodes.iter().map(|n| (id(n), n.client())).collect();
    for k in &keys {
        let slot = proto::slot::key_slot(k.as_bytes());
        let owner = owner_now[slot as usize].clone().expect("assigned");
        assert_ne!(owner, id(&dead), "slot {slot} still the dead node's");
        let con = clients.get_mut(&owner).expect("a live owner");
        let v: Option<String> = redis::cmd("GET").arg(k).query(con).unwrap();
        assert_eq!(v.as_deref(), Some("v"), "{k} (slot {slot}): {m:?}");
    }
    if state == "failed" {
        let target = nodes.iter().find(|n| id(n) == target_id).unwrap();
        wait_for_target_to_drop(target, &target_id, "the target dropped the aborted batch");
    }
}

/// The first slot range `n` owns, from its own CLUSTER NODES line.
pub(crate) fn first_range_of(n: &Node) -> (u16, u16) {
    let nodes = n.cli(&["CLUSTER", "NODES"]);
    let line = nodes
        .lines()
        .find(|l| l.contains("myself"))
        .expect("own line");
    let range = line.split_whitespace().nth(8).expect("a slot range");
    match range.split_once('-') {
        Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
        None => (range.parse().unwrap(), range.parse().unwrap()),
    }
}

pub(crate) fn dbsize(n: &Node) -> usize {
    n.cli(&["DBSIZE"]).parse().expect("DBSIZE")
}

fn keyspace_keys(n: &Node) -> usize {
    let info = n.cli(&["INFO", "keyspace"]);
    info.lines()
        .find_map(|l| l.strip_prefix("db0:keys="))
        .and_then(|rest| rest.split(',').next())
        .map(|k| k.parse().expect("keys="))
        .unwrap_or(0)
}

fn all_keys(n: &Node) -> std::collections::BTreeSet<String> {
    let mut con = n.client();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    keys.into_iter().collect()
}

fn scanned_keys(n: &Node) -> std::collections::BTreeSet<String> {
    let mut con = n.client();
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(7)
            .query(&mut con)
            .unwrap();
        seen.extend(keys);
        if next == 0 {
            return seen;
        }
        cursor = next;
    }
}

/// Keys the target holds in `slots` (hidden or not): its per-slot count.
pub(crate) fn held_in(n: &Node, slots: std::ops::RangeInclusive<u16>) -> usize {
    slots
        .map(|s| {
            n.cli(&["CLUSTER", "COUNTKEYSINSLOT", &s.to_string()])
                .parse::<usize>()
                .unwrap()
        })
        .sum()
}

/// The target's walks show exactly `expected` (its own keys, or with the moved ones).
fn assert_target_shows(target: &Node, expected: &std::collections::BTreeSet<String>, when: &str) {
    assert_eq!(dbsize(target), expected.len(), "DBSIZE {when}");
    assert_eq!(
        keyspace_keys(target),
        expected.len(),
        "INFO keyspace {when}"
    );
    assert_eq!(&all_keys(target), expected, "KEYS {when}");
    assert_eq!(&scanned_keys(target), expected, "SCAN {when}");
    let mut con = target.client();
    for _ in 0..30 {
        let k: Option<String> = redis::cmd("RANDOMKEY").query(&mut con).unwrap();
        let k = k.expect("a key");
        assert!(expected.contains(&k), "RANDOMKEY drew {k} {when}");
    }
}

#[test]
fn the_targets_copy_is_invisible_until_the_commit() {
    // Goal (issue 17): while a batch is copied to its target, the target's DBSIZE, INFO
    // keyspace, KEYS, SCAN and RANDOMKEY show only the keys it owns; the copy shows at the
    // commit, in the same instant the target owns the slots, and an aborted copy never shows.
    // Method: hold the source's batch after its copy (`cluster-migration-debug-hold`, no
    // write pause, no commit) and look at the target; cancel that one, then migrate again
    // and release the hold.
    let nodes = three_primaries("migrate-hidden");
    let source = node_owning(&nodes, 0);
    let target = nodes.iter().find(|n| id(n) != id(source)).unwrap();
    let target_id = id(target);
    // The target's own keys, some volatile.
    let (lo, hi) = first_range_of(target);
    let own: std::collections::BTreeSet<String> = keys_in(lo, hi, 60).into_iter().collect();
    let mut dst = target.client();
    for (i, k) in own.iter().enumerate() {
        let mut cmd = redis::cmd("SET");
        cmd.arg(k).arg("own");
        if i % 3 == 0 {
            cmd.arg("EX").arg(1000);
        }
        let _: () = cmd.query(&mut dst).unwrap();
    }
    // The moving keys (slots 0-9), some volatile.
    let moving = keys_in(0, 9, 150);
    let mut src = source.client();
    for (i, k) in moving.iter().enumerate() {
        let mut cmd = redis::cmd("SET");
        cmd.arg(k).arg("moving");
        if i % 2 == 0 {
            cmd.arg("EX").arg(1000);
        }
        let _: () = cmd.query(&mut src).unwrap();
    }
    assert_eq!(
        source.cli(&["CONFIG", "SET", "cluster-migration-debug-hold", "yes"]),
        "OK"
    );
    let migrate = |request_id: &str| {
        source.cli(&[
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            "0",
            "9",
            "NODE",
            &target_id,
            "REQUESTID",
            request_id,
        ])
    };

    // 1. Held after the copy, then cancelled: the copy is never seen, then dropped.
    assert_eq!(migrate("hidden-1"), "OK");
    wait_until("the target holds the copy", &[target, source], || {
        held_in(target, 0..=9) == moving.len()
    });
    let m = migration(source, "hidden-1").expect("listed");
    assert_eq!(field(&m, "state"), "running", "{m:?}");
    assert_target_shows(target, &own, "while the copy is held");
    let r: redis::RedisResult<Option<String>> = redis::cmd("GET").arg(&moving[0]).query(&mut dst);
    assert!(
        r.as_ref()
            .is_err_and(|e| e.kind() == redis::ErrorKind::Moved),
        "GET of a copied key on the target: {r:?}"
    );
    assert_eq!(source.cli(&["CLUSTER", "CANCELSLOTMIGRATIONS"]), "1");
    let m = wait_for_end(source, "hidden-1");
    assert_eq!(field(&m, "state"), "cancelled", "{m:?}");
    wait_until("the target dropped the cancelled copy", &[target], || {
        assert_eq!(dbsize(target), own.len(), "DBSIZE after the abort");
        held_in(target, 0..=9) == 0
    });
    assert_target_shows(target, &own, "after the abort");

    // 2. Held again, a write streamed meanwhile, then released: shown at the commit.
    assert_eq!(migrate("hidden-2"), "OK");
    wait_until("the target holds the copy again", &[target, source], || {
        held_in(target, 0..=9) == moving.len()
    });
    let late = keys_in(0, 9, moving.len() + 1).pop().unwrap();
    let _: () = redis::cmd("SET")
        .arg(&late)
        .arg("late")
        .query(&mut src)
        .unwrap();
    wait_until("the late write reached the target", &[target], || {
        held_in(target, 0..=9) == moving.len() + 1
    });
    assert_target_shows(target, &own, "while the second copy is held");
    assert_eq!(
        source.cli(&["CONFIG", "SET", "cluster-migration-debug-hold", "no"]),
        "OK"
    );
    // Owner and shown keys change together, under one lock, when the target applies the
    // commit: a DBSIZE after a look that found the target owning the slots counts the
    // copy, one before a look that found the source owning them does not.
    let mut all = own.clone();
    all.extend(moving.iter().cloned());
    all.insert(late.clone());
    let target_owns = || owner_of(target, 0) == Some(target_id.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let owned_before = target_owns();
        let shown = dbsize(target);
        let owned_after = target_owns();
        if owned_before {
            assert_eq!(shown, all.len(), "DBSIZE once the target owns the slots");
            break;
        }
        if !owned_after {
            assert_eq!(shown, own.len(), "DBSIZE before the commit");
        }
        assert!(Instant::now() < deadline, "the commit never applied");
        std::thread::sleep(Duration::from_millis(5));
    }
    let m = wait_for_end(source, "hidden-2");
    assert_eq!(field(&m, "state"), "success", "{m:?}");
    assert_target_shows(target, &all, "after the commit");
    let v: String = redis::cmd("GET").arg(&late).query(&mut dst).unwrap();
    assert_eq!(v, "late");
    let ttl: i64 = redis::cmd("TTL").arg(&moving[0]).query(&mut dst).unwrap();
    assert!((1..=1000).contains(&ttl), "ttl {ttl}");
}
