//! The Raft topology group across processes (issue "Cluster mode", item 4): nodes made a
//! cluster by `redis-cli --cluster create` found one group; every topology change is a
//! proposal committed by it, from whichever node it is sent to; a killed member restarts
//! into its group from its log; the group elects a new leader when its leader dies.

use integration::cluster::{addr, cluster_node, run, wait_until};
use integration::Node;
use std::process::Command;

/// A field of CLUSTER INFO.
fn info(n: &Node, field: &str) -> String {
    let text = n.cli(&["CLUSTER", "INFO"]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn version(n: &Node) -> u64 {
    info(n, "cluster_topology_version").parse().unwrap_or(0)
}

/// Waits until every node is in one group with one version, a leader and `voters` voters.
fn wait_for_one_group(nodes: &[&Node], voters: usize) -> String {
    let mut group = String::new();
    wait_until("one topology group on every node", nodes, || {
        let groups: Vec<String> = nodes
            .iter()
            .map(|n| info(n, "cluster_topology_group"))
            .collect();
        let versions: Vec<u64> = nodes.iter().map(|n| version(n)).collect();
        group = groups[0].clone();
        group != "-"
            && groups.iter().all(|g| *g == group)
            && versions.iter().all(|v| *v == versions[0] && *v > 0)
            && nodes
                .iter()
                .all(|n| info(n, "cluster_topology_leader") != "-")
            && info(nodes[0], "cluster_topology_voters") == voters.to_string()
    });
    group
}

fn leader_index(nodes: &[&Node]) -> usize {
    let leader = info(nodes[0], "cluster_topology_leader");
    nodes
        .iter()
        .position(|n| n.cli(&["CLUSTER", "MYID"]) == leader)
        .expect("the leader is one of the nodes")
}

/// The owner id of `slot` as node `n` sees it (CLUSTER NODES), None if unassigned.
fn owner_of(n: &Node, slot: u16) -> Option<String> {
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

#[test]
fn a_created_cluster_is_one_group_and_changes_commit_through_it_from_any_node() {
    let nodes = integration::cluster::create_cluster("group", 0);
    let refs: Vec<&Node> = nodes.iter().collect();
    let group = wait_for_one_group(&refs, 3);
    assert_eq!(group.len(), 40, "{group}");
    let leader = leader_index(&refs);
    let follower = (leader + 1) % 3;
    let before = version(&nodes[follower]);
    // A follower's change is forwarded to the leader, committed, applied everywhere, and
    // answered only once it applied on the follower.
    let slot0_owner = owner_of(&nodes[0], 0).expect("slot 0 is assigned");
    assert_eq!(nodes[follower].cli(&["CLUSTER", "DELSLOTS", "0"]), "OK");
    assert_eq!(owner_of(&nodes[follower], 0), None);
    assert!(version(&nodes[follower]) > before);
    wait_until("slot 0 unassigned everywhere", &refs, || {
        nodes.iter().all(|n| owner_of(n, 0).is_none())
    });
    // Redis's checks still answer first, with Redis's words, and change nothing.
    let busy = nodes[follower].cli(&["CLUSTER", "ADDSLOTS", "1"]);
    assert_eq!(busy, "ERR Slot 1 is already busy");
    // The slot goes back to its owner, proposed there.
    let owner = nodes
        .iter()
        .find(|n| n.cli(&["CLUSTER", "MYID"]) == slot0_owner)
        .unwrap();
    assert_eq!(owner.cli(&["CLUSTER", "ADDSLOTS", "0"]), "OK");
    wait_until("slot 0 back everywhere", &refs, || {
        nodes
            .iter()
            .all(|n| owner_of(n, 0).as_deref() == Some(&slot0_owner))
    });
    let (ok, text) = run(Command::new("redis-cli").args(["--cluster", "check", &addr(&nodes[2])]));
    assert!(ok && !text.contains("[ERR]"), "{text}");
}

#[test]
fn a_killed_member_restarts_into_its_group_and_catches_up() {
    let mut nodes = integration::cluster::create_cluster("restart", 0);
    let group = {
        let refs: Vec<&Node> = nodes.iter().collect();
        wait_for_one_group(&refs, 3)
    };
    let leader = {
        let refs: Vec<&Node> = nodes.iter().collect();
        leader_index(&refs)
    };
    let victim = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    let port = nodes[victim].port;
    let dir = nodes.remove(victim).into_dir();
    let (victim_after, other_after) = if victim < other {
        (victim, other - 1)
    } else {
        (victim, other)
    };
    // While it is down the others still commit (two of three voters).
    assert_eq!(
        nodes[other_after].cli(&["CLUSTER", "DELSLOTS", "16383"]),
        "OK"
    );
    let restarted = integration::cluster::cluster_node_in(dir, port, "restart", &[]);
    nodes.insert(victim_after, restarted);
    let refs: Vec<&Node> = nodes.iter().collect();
    assert_eq!(wait_for_one_group(&refs, 3), group);
    assert!(
        nodes[victim_after]
            .log()
            .contains("back in the topology group"),
        "{}",
        nodes[victim_after].log()
    );
    wait_until(
        "the restarted node sees the change made while it was down",
        &refs,
        || owner_of(&nodes[victim_after], 16383).is_none(),
    );
}

#[test]
fn the_group_elects_a_new_leader_when_its_leader_dies() {
    let mut nodes = integration::cluster::create_cluster("leader", 0);
    let leader = {
        let refs: Vec<&Node> = nodes.iter().collect();
        wait_for_one_group(&refs, 3);
        leader_index(&refs)
    };
    let old_leader = nodes[leader].cli(&["CLUSTER", "MYID"]);
    drop(nodes.remove(leader));
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_until("a new leader", &refs, || {
        nodes.iter().all(|n| {
            let l = info(n, "cluster_topology_leader");
            l != "-" && l != old_leader
        })
    });
    // The survivors still change the topology.
    assert_eq!(nodes[0].cli(&["CLUSTER", "DELSLOTS", "8000"]), "OK");
    wait_until("the change on both survivors", &refs, || {
        nodes.iter().all(|n| owner_of(n, 8000).is_none())
    });
}

/// A node met after the group was founded is taken in by the leader: it joins the group
/// and its own slots (given by hand before it met anyone) become the group's.
#[test]
fn a_node_met_later_is_taken_in_with_its_slots() {
    let nodes3 = integration::cluster::create_cluster("later", 0);
    let refs: Vec<&Node> = nodes3.iter().collect();
    wait_for_one_group(&refs, 3);
    assert_eq!(nodes3[0].cli(&["CLUSTER", "DELSLOTS", "100"]), "OK");
    let late = cluster_node("later");
    assert_eq!(late.cli(&["CLUSTER", "ADDSLOTS", "100"]), "OK");
    let port = late.port.to_string();
    assert_eq!(
        nodes3[1].cli(&["CLUSTER", "MEET", "127.0.0.1", &port]),
        "OK"
    );
    let late_id = late.cli(&["CLUSTER", "MYID"]);
    let mut all: Vec<&Node> = nodes3.iter().collect();
    all.push(&late);
    wait_for_one_group(&all, 4);
    wait_until("the late node's slot in the group", &all, || {
        all.iter()
            .all(|n| owner_of(n, 100).as_deref() == Some(&late_id))
    });
}

/// Resumes stopped nodes when dropped, so a failing assertion leaves no process stopped.
struct Stopped<'a>(Vec<&'a Node>);

impl<'a> Stopped<'a> {
    fn stop(nodes: Vec<&'a Node>) -> Self {
        for n in &nodes {
            n.signal("STOP");
        }
        Stopped(nodes)
    }
}

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        for n in &self.0 {
            // Not `Node::signal`: its assertion would abort a test already panicking.
            let _ = Command::new("kill")
                .args(["-CONT", &n.pid().to_string()])
                .status();
        }
    }
}

/// Three nodes made a cluster and one topology group, each with one io-thread: with more,
/// a client would be served by another thread even if a command held its own, and the
/// tests below could not fail.
fn one_io_thread_group(secret: &str) -> Vec<Node> {
    let nodes = integration::cluster::create_cluster_with(secret, 0, &["--io-threads", "1"]);
    wait_for_one_group(&nodes.iter().collect::<Vec<_>>(), 3);
    nodes
}

/// Whether the node has exactly one blocked client (INFO clients).
fn one_blocked_client(n: &Node) -> bool {
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query(&mut n.client())
        .unwrap();
    info.contains("blocked_clients:1")
}

/// The reply a waiting request finally gets (within 30 s).
fn late_reply(stream: &mut std::net::TcpStream) -> String {
    use std::io::Read;
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 256];
    let n = stream.read(&mut buf).expect("the request is answered");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// A topology change waits for its commit without holding the node's thread: with one
/// io-thread (the default on 2 cores) that thread is every TCP client's event loop, so
/// before, each CLUSTER SETSLOT of a reshard stalled all clients for a Raft round trip, and
/// for seconds without a majority.
#[test]
fn a_change_waiting_for_its_commit_does_not_stall_the_nodes_other_clients() {
    use std::io::{Read, Write};
    let nodes = one_io_thread_group("nostall");
    let refs: Vec<&Node> = nodes.iter().collect();
    let changer_node = &nodes[leader_index(&refs)];
    // Without the two others no majority commits anything: the change waits for its
    // whole proposal timeout (seconds).
    let others: Vec<&Node> = nodes
        .iter()
        .filter(|n| n.pid() != changer_node.pid())
        .collect();
    let stopped = Stopped::stop(others);
    let mut changer =
        std::net::TcpStream::connect(("127.0.0.1", changer_node.port)).expect("connect");
    changer
        .write_all(b"*3\r\n$7\r\nCLUSTER\r\n$8\r\nDELSLOTS\r\n$1\r\n0\r\n")
        .unwrap();
    let mut other = changer_node.client();
    // The change was read and waits (a blocked client), so the next replies overtake it.
    wait_until("the change to wait for its commit", &refs, || {
        one_blocked_client(changer_node)
    });
    let pong: String = redis::cmd("PING").query(&mut other).unwrap();
    assert_eq!(pong, "PONG");
    let echo: String = redis::cmd("ECHO").arg("served").query(&mut other).unwrap();
    assert_eq!(echo, "served");
    // Those were answered while the change still waits for its outcome.
    changer.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 256];
    let early = changer.read(&mut buf);
    assert!(
        matches!(&early, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the change was answered before the other client: {early:?}"
    );
    drop(stopped);
    // The change gets its answer: committed once the others are back, or failed.
    let reply = late_reply(&mut changer);
    assert!(
        reply == "+OK\r\n" || reply.starts_with("-ERR topology change not made"),
        "{reply:?}"
    );
    wait_for_one_group(&refs, 3);
}

/// A keyed command that finds its node's serving lease lapsed (the node cut off from the
/// majority) waits for it as a blocked client: before, it slept on the connection's thread
/// for up to a lease, and with one io-thread every client of the node waited with it.
#[test]
fn a_command_waiting_for_a_lapsed_lease_does_not_stall_the_nodes_other_clients() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    let nodes = one_io_thread_group("leasewait");
    let refs: Vec<&Node> = nodes.iter().collect();
    let primary = &nodes[0];
    let me = primary.cli(&["CLUSTER", "MYID"]);
    let key = (0..)
        .map(|i| format!("lease-{i}"))
        .find(|k| {
            let slot: u16 = primary.cli(&["CLUSTER", "KEYSLOT", k]).parse().unwrap();
            owner_of(primary, slot).as_deref() == Some(me.as_str())
        })
        .unwrap();
    let others: Vec<&Node> = nodes.iter().skip(1).collect();
    let stopped = Stopped::stop(others);
    let mut writer = std::net::TcpStream::connect(("127.0.0.1", primary.port)).unwrap();
    writer.set_nonblocking(true).unwrap();
    let set = format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$1\r\nv\r\n", key.len());
    let mut buf = [0u8; 256];
    // Served at once until the lease lapses; then the write waits, as a blocked client.
    let deadline = Instant::now() + Duration::from_secs(30);
    'writes: loop {
        assert!(Instant::now() < deadline, "the lease never lapsed");
        writer.write_all(set.as_bytes()).unwrap();
        loop {
            match writer.read(&mut buf) {
                Ok(n) => {
                    let reply = String::from_utf8_lossy(&buf[..n]).into_owned();
                    assert_eq!(
                        reply, "+OK\r\n",
                        "the write waited without being a blocked client"
                    );
                    std::thread::sleep(Duration::from_millis(50));
                    continue 'writes;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
            if one_blocked_client(primary) {
                break 'writes;
            }
        }
    }
    // Another client is served while the write waits.
    let mut other = primary.client();
    let pong: String = redis::cmd("PING").query(&mut other).unwrap();
    assert_eq!(pong, "PONG");
    // Back in touch with the others: the write runs, or answers CLUSTERDOWN if the lease
    // ran out first.
    drop(stopped);
    let reply = late_reply(&mut writer);
    assert!(
        reply == "+OK\r\n" || reply.starts_with("-CLUSTERDOWN"),
        "{reply:?}"
    );
    wait_for_one_group(&refs, 3);
}

/// Goal: a member whose topology files are lost or damaged refuses to start, naming the file
/// and the way to recover, instead of starting as if it had never been in the group (while
/// the group still counts its vote); the intact files start it again; temp files a crash
/// left are removed at start.
/// Method: a three-node group; one member killed; its Raft log cut to a torn first record,
/// then deleted, then deleted with its group file; each start must fail; then the files put
/// back, with stale temp files beside them, and the member rejoins.
#[test]
fn a_member_with_a_lost_or_damaged_raft_log_refuses_to_start() {
    let mut nodes = integration::cluster::create_cluster("damaged", 0);
    let group = {
        let refs: Vec<&Node> = nodes.iter().collect();
        wait_for_one_group(&refs, 3)
    };
    let port = nodes[2].port;
    let dir = nodes.remove(2).into_dir();
    let path = |name: &str| dir.path().join(name);
    let conf = std::fs::read_to_string(path("nodes.conf")).unwrap();
    assert!(conf.contains("topologyVersion "), "{conf}");
    let log = std::fs::read(path("topology-raft.log")).unwrap();
    let group_file = std::fs::read(path("topology-group")).unwrap();
    let args = [
        "--cluster-enabled",
        "yes",
        "--fabric-provider",
        "ofi:tcp",
        "--cluster-secret",
        "damaged",
    ];
    let refuses = |what: &str, names: &str| {
        let (status, text) = Node::start_expecting_exit(dir.path(), &args);
        assert!(!status.success(), "{what}: started");
        assert!(
            text.contains(names) && text.contains("Refusing to start"),
            "{what}: {text}"
        );
    };
    // The file header and a record cut short: the whole log is a torn tail, below what the
    // node applied.
    std::fs::write(path("topology-raft.log"), &log[..60]).unwrap();
    refuses("log cut short", "topology-raft.log");
    std::fs::remove_file(path("topology-raft.log")).unwrap();
    refuses("log deleted", "topology-raft.log");
    std::fs::remove_file(path("topology-group")).unwrap();
    refuses("log and group file deleted", "topology-group");

    std::fs::write(path("topology-raft.log"), &log).unwrap();
    std::fs::write(path("topology-group"), &group_file).unwrap();
    let stale = [
        path(".nodes.conf.tmp-4000000000"),
        path("temp-4000000000.snap"),
    ];
    for p in &stale {
        std::fs::write(p, b"left by a crash").unwrap();
    }
    let back = integration::cluster::cluster_node_in(dir, port, "damaged", &[]);
    for p in &stale {
        assert!(!p.exists(), "{} not removed", p.display());
    }
    nodes.push(back);
    let refs: Vec<&Node> = nodes.iter().collect();
    assert_eq!(wait_for_one_group(&refs, 3), group);
}

/// Each node's index by the slots it owns (CLUSTER NODES of `nodes[0]`), for routing keys
/// without depending on redirects.
fn slot_owners(nodes: &[Node]) -> impl Fn(&str) -> usize {
    let ids: Vec<String> = nodes.iter().map(|n| n.cli(&["CLUSTER", "MYID"])).collect();
    let mut owners = vec![usize::MAX; 16384];
    for line in nodes[0].cli(&["CLUSTER", "NODES"]).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(index) = ids.iter().position(|i| i == f[0]) else {
            continue;
        };
        for range in f.iter().skip(8) {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                owners[a..=b].iter_mut().for_each(|o| *o = index);
            }
        }
    }
    assert!(
        owners.iter().all(|&o| o != usize::MAX),
        "a slot without owner"
    );
    move |key: &str| owners[proto::slot::key_slot(key.as_bytes()) as usize]
}

/// Goal: a whole cluster stopped with SIGTERM and started again (same dirs and ports)
/// returns to `cluster_state:ok` without any manual command, with every key: the bus comes
/// back on new fabric addresses, and each node finds its peers again through their bus
/// ports. Before, the nodes kept pinging the old addresses and never came back.
/// Method: three primaries in a topology group, with save rules and `appendfsync always`;
/// before each stop 100 new keys; SIGTERM to all, all restarted, every node linked to every
/// other and ok within the harness's convergence deadline, every key read back from its
/// owner; then the same with kill -9 of all (the AOF keeps what was acknowledged).
#[test]
fn a_whole_cluster_restarted_returns_to_ok_with_every_key() {
    const KEYS: usize = 100;
    let args = [
        "--save",
        "3600 1",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ];
    let mut nodes = integration::cluster::create_cluster_with("whole", 0, &args);
    let group = {
        let refs: Vec<&Node> = nodes.iter().collect();
        wait_for_one_group(&refs, 3)
    };
    let owner = slot_owners(&nodes);
    let mut written = Vec::new();
    for stop in ["TERM", "KILL"] {
        for i in 0..KEYS {
            let key = format!("{stop}:{i}");
            assert_eq!(nodes[owner(&key)].cli(&["SET", &key, &i.to_string()]), "OK");
            written.push((key, i));
        }
        let mut stopped = Vec::new();
        for mut n in nodes.drain(..) {
            let port = n.port;
            if stop == "TERM" {
                assert!(n.signal_and_wait("TERM").success(), "{}", n.log());
            }
            stopped.push((port, n.into_dir()));
        }
        nodes = stopped
            .into_iter()
            .map(|(port, dir)| integration::cluster::cluster_node_in(dir, port, "whole", &args))
            .collect();
        let refs: Vec<&Node> = nodes.iter().collect();
        let started = std::time::Instant::now();
        // A restarted node says ok at once from its saved view; back means every node
        // hears every other again (at the address it found) and says ok.
        wait_until(
            &format!("every node linked and ok after SIG{stop}"),
            &refs,
            || {
                nodes.iter().all(|n| {
                    n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok")
                        && n.cli(&["CLUSTER", "NODES"])
                            .lines()
                            .all(|l| l.contains(" connected") && !l.contains("fail"))
                })
            },
        );
        eprintln!(
            "SIG{stop}: linked and ok {:?} after the restart",
            started.elapsed()
        );
        assert_eq!(wait_for_one_group(&refs, 3), group);
        // The ports, and so the order of `nodes`, are the same as before.
        for (key, i) in &written {
            assert_eq!(nodes[owner(key)].cli(&["GET", key]), i.to_string(), "{key}");
        }
    }
}
