//! Cluster mode on a lone node: identity, the CLUSTER commands, redirects, and the tools
//! that read them (`redis-cli -c`, `redis-cli --cluster check`). Method: start real node
//! processes with `--cluster-enabled yes` and compare replies with what redis-server 7.0.15
//! answers in the same situation.

use integration::{cmd, Node};
use redis::Value;
use std::process::Command;

const CLUSTER: &[&str] = &["--cluster-enabled", "yes"];

fn is_hex_id(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A cluster node owning every slot.
fn full_node() -> Node {
    let node = Node::start(CLUSTER);
    assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "OK");
    node
}

#[test]
fn standalone_refuses_cluster_commands() {
    let node = Node::start(&[]);
    let disabled = "ERR This instance has cluster support disabled";
    for args in [
        &["CLUSTER", "INFO"][..],
        &["CLUSTER", "KEYSLOT", "foo"],
        &["CLUSTER", "ADDSLOTS", "1"],
        &["READONLY"],
        &["READWRITE"],
        &["ASKING"],
    ] {
        assert_eq!(node.cli(args), disabled, "{args:?}");
    }
    assert_eq!(
        node.cli(&["CLUSTER"]),
        "ERR wrong number of arguments for 'cluster' command"
    );
    assert_eq!(
        node.cli(&["CLUSTER", "NOSUCH"]),
        "ERR unknown subcommand 'NOSUCH'. Try CLUSTER HELP."
    );
    assert!(node.cli(&["INFO", "cluster"]).contains("cluster_enabled:0"));
    // Without cluster mode keys are never redirected.
    assert_eq!(node.cli(&["SET", "foo", "bar"]), "OK");
}

#[test]
fn a_new_node_has_an_identity_and_no_slots() {
    let node = Node::start(CLUSTER);
    let id = node.cli(&["CLUSTER", "MYID"]);
    assert!(is_hex_id(&id), "{id}");
    let shard = node.cli(&["CLUSTER", "MYSHARDID"]);
    assert!(is_hex_id(&shard) && shard != id, "{shard}");
    let port = node.port;
    // Redis's line, with the fabric address of the node's bus as an aux field after the
    // (empty) hostname.
    let nodes = node.cli(&["CLUSTER", "NODES"]);
    let head = format!("{id} :{port}@{},,fabric-address=ofi/tcp/", port + 10000);
    assert!(nodes.starts_with(&head), "{nodes}");
    assert!(
        nodes.ends_with(" myself,master - 0 0 0 connected"),
        "{nodes}"
    );
    let info = node.cli(&["CLUSTER", "INFO"]);
    for line in [
        "cluster_state:fail",
        "cluster_slots_assigned:0",
        "cluster_known_nodes:1",
        "cluster_size:0",
        "cluster_stats_messages_sent:0",
    ] {
        assert!(info.contains(line), "{line} missing in {info}");
    }
    let all = node.cli(&["INFO"]);
    assert!(all.contains("cluster_enabled:1") && all.contains("redis_mode:cluster"));
    assert_eq!(
        node.cli(&["SET", "foo", "bar"]),
        "CLUSTERDOWN Hash slot not served"
    );
    assert_eq!(node.cli(&["PING"]), "PONG");
    assert_eq!(
        node.cli(&["CONFIG", "GET", "cluster-node-timeout"]),
        "cluster-node-timeout\n2000"
    );
    assert_eq!(
        node.cli(&["CONFIG", "GET", "cluster-enabled"]),
        "cluster-enabled\nyes"
    );
    assert!(node.dir.path().join("nodes.conf").exists());
    // Fixed at start: failure detection and the serving lease are set up with it once.
    assert!(node
        .cli(&["CONFIG", "SET", "cluster-node-timeout", "5000"])
        .contains("'cluster-node-timeout') - can't set immutable config"));
    assert!(node
        .cli(&["CONFIG", "SET", "cluster-enabled", "no"])
        .contains("can't set immutable config"));
    assert!(node
        .cli(&["CLUSTER", "HELP"])
        .starts_with("CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"));
}

/// `cluster-require-full-coverage no` keeps the served slots serving while others have no
/// owner; `cluster-allow-reads-when-down yes` answers reads (not writes) of a down cluster.
/// Both are CONFIG SET-able and take effect at once, as in Redis.
#[test]
fn coverage_and_reads_when_down_follow_config_set() {
    let node = Node::start(CLUSTER);
    // "foo" hashes to slot 12182; only slots 12000-12999 are served.
    assert_eq!(
        node.cli(&["CLUSTER", "ADDSLOTSRANGE", "12000", "12999"]),
        "OK"
    );
    assert!(node
        .cli(&["CLUSTER", "INFO"])
        .contains("cluster_state:fail"));
    assert_eq!(
        node.cli(&["SET", "foo", "bar"]),
        "CLUSTERDOWN The cluster is down"
    );

    assert_eq!(
        node.cli(&["CONFIG", "SET", "cluster-allow-reads-when-down", "yes"]),
        "OK"
    );
    assert_eq!(node.cli(&["GET", "foo"]), "");
    assert_eq!(
        node.cli(&["SET", "foo", "bar"]),
        "CLUSTERDOWN The cluster is down and only accepts read commands"
    );

    assert_eq!(
        node.cli(&["CONFIG", "SET", "cluster-require-full-coverage", "no"]),
        "OK"
    );
    assert!(node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"));
    assert_eq!(node.cli(&["SET", "foo", "bar"]), "OK");
    // "bar" hashes to slot 5061, which nobody serves.
    assert_eq!(
        node.cli(&["GET", "bar"]),
        "CLUSTERDOWN Hash slot not served"
    );
    assert_eq!(
        node.cli(&["CONFIG", "GET", "cluster-require-full-coverage"]),
        "cluster-require-full-coverage\nno"
    );
    assert!(node
        .cli(&["CONFIG", "SET", "cluster-require-full-coverage", "maybe"])
        .contains("cluster-require-full-coverage"));

    assert_eq!(
        node.cli(&["CONFIG", "SET", "cluster-require-full-coverage", "yes"]),
        "OK"
    );
    assert!(node
        .cli(&["CLUSTER", "INFO"])
        .contains("cluster_state:fail"));
}

#[test]
fn slot_commands_validate_as_redis() {
    let node = Node::start(CLUSTER);
    let cases: &[(&[&str], &str)] = &[
        (
            &["ADDSLOTS"],
            "ERR wrong number of arguments for 'cluster|addslots' command",
        ),
        (
            &["ADDSLOTS", "5", "5"],
            "ERR Slot 5 specified multiple times",
        ),
        (&["ADDSLOTS", "16384"], "ERR Invalid or out of range slot"),
        (&["ADDSLOTS", "1", "2", "3"], "OK"),
        (&["ADDSLOTS", "2"], "ERR Slot 2 is already busy"),
        (
            &["ADDSLOTSRANGE", "1", "2", "3"],
            "ERR wrong number of arguments for 'cluster|addslotsrange' command",
        ),
        (
            &["ADDSLOTSRANGE", "10", "5"],
            "ERR start slot number 10 is greater than end slot number 5",
        ),
        (&["ADDSLOTSRANGE", "10", "20"], "OK"),
        (&["DELSLOTS", "50"], "ERR Slot 50 is already unassigned"),
        (&["DELSLOTSRANGE", "1", "3"], "OK"),
        (
            &["DELSLOTSRANGE", "1", "3"],
            "ERR Slot 1 is already unassigned",
        ),
        (&["COUNTKEYSINSLOT", "16384"], "ERR Invalid slot"),
        (
            &["COUNTKEYSINSLOT", "x"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["GETKEYSINSLOT", "5", "-1"],
            "ERR Invalid slot or number of keys",
        ),
        (
            &["SETSLOT", "100", "bogus"],
            "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
        ),
        (&["SETSLOT", "100", "node", "abc"], "ERR Unknown node abc"),
        (&["KEYSLOT", "foo"], "12182"),
        (&["SAVECONFIG"], "OK"),
        (
            &["INFO", "x"],
            "ERR wrong number of arguments for 'cluster|info' command",
        ),
    ];
    for (args, want) in cases {
        let mut full = vec!["CLUSTER"];
        full.extend_from_slice(args);
        assert_eq!(node.cli(&full), *want, "{args:?}");
    }
    let id = node.cli(&["CLUSTER", "MYID"]);
    assert!(node
        .cli(&["CLUSTER", "NODES"])
        .ends_with(&format!("{} 10-20", "connected")));
    assert_eq!(node.cli(&["CLUSTER", "FLUSHSLOTS"]), "OK");
    assert!(node.cli(&["CLUSTER", "NODES"]).ends_with("connected"));
    // SETSLOT NODE to myself assigns the slot.
    assert_eq!(node.cli(&["CLUSTER", "SETSLOT", "7", "NODE", &id]), "OK");
    assert!(node.cli(&["CLUSTER", "NODES"]).ends_with("connected 7"));
}

#[test]
fn a_full_node_serves_redis_cli_c_and_counts_keys_by_slot() {
    let node = full_node();
    assert!(node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"));
    let out = Command::new("redis-cli")
        .args(["-c", "-p", &node.port.to_string(), "SET", "foo", "bar"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK");
    let out = Command::new("redis-cli")
        .args(["-c", "-p", &node.port.to_string(), "GET", "foo"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "bar");
    let mut c = node.client();
    cmd(&mut c, &["SET", "{foo}2", "x"]).unwrap();
    assert_eq!(
        cmd(&mut c, &["CLUSTER", "COUNTKEYSINSLOT", "12182"]).unwrap(),
        Value::Int(2)
    );
    let Value::Array(keys) = cmd(&mut c, &["CLUSTER", "GETKEYSINSLOT", "12182", "10"]).unwrap()
    else {
        panic!("GETKEYSINSLOT is an array");
    };
    let mut keys: Vec<String> = keys
        .into_iter()
        .map(|k| redis::from_redis_value(&k).unwrap())
        .collect();
    keys.sort();
    assert_eq!(keys, ["foo", "{foo}2"]);
    assert_eq!(
        cmd(&mut c, &["CLUSTER", "GETKEYSINSLOT", "12182", "1"]).unwrap(),
        Value::Array(vec![Value::BulkString(b"foo".to_vec())])
    );
    assert_eq!(node.cli(&["CLUSTER", "COUNTKEYSINSLOT", "5"]), "0");
    assert_eq!(
        node.cli(&["MSET", "foo", "1", "bar", "2"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(node.cli(&["MSET", "foo", "1", "{foo}x", "2"]), "OK");
    assert_eq!(
        node.cli(&["CLUSTER", "FLUSHSLOTS"]),
        "ERR DB must be empty to perform CLUSTER FLUSHSLOTS."
    );
    // CLUSTER SLOTS: one range, this node (ip unknown while alone, as Redis).
    let slots = cmd(&mut c, &["CLUSTER", "SLOTS"]).unwrap();
    let id = node.cli(&["CLUSTER", "MYID"]);
    assert_eq!(
        slots,
        Value::Array(vec![Value::Array(vec![
            Value::Int(0),
            Value::Int(16383),
            Value::Array(vec![
                Value::BulkString(Vec::new()),
                Value::Int(node.port as i64),
                Value::BulkString(id.into_bytes()),
                Value::Array(vec![]),
            ]),
        ])])
    );
    let shards = node.cli(&["CLUSTER", "SHARDS"]);
    assert!(
        shards.contains("master") && shards.contains("online"),
        "{shards}"
    );
    assert!(shards.contains("fabric-address\nofi:tcp:"), "{shards}");
    for flag in ["READONLY", "READWRITE", "ASKING"] {
        assert_eq!(node.cli(&[flag]), "OK");
    }
}

#[test]
fn redis_cli_cluster_check_passes_on_a_full_node() {
    let node = full_node();
    node.cli(&["SET", "foo", "bar"]);
    let out = Command::new("redis-cli")
        .args(["--cluster", "check", &format!("127.0.0.1:{}", node.port)])
        .output()
        .expect("redis-cli");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("[OK] All nodes agree about slots configuration."),
        "{text}"
    );
    assert!(text.contains("[OK] All 16384 slots covered."), "{text}");
    assert!(text.contains("1 keys | 16384 slots | 0 slaves"), "{text}");
}

#[test]
fn unserved_slots_answer_clusterdown() {
    let node = full_node();
    assert_eq!(node.cli(&["CLUSTER", "DELSLOTS", "12182"]), "OK");
    assert!(node
        .cli(&["CLUSTER", "INFO"])
        .contains("cluster_state:fail"));
    assert_eq!(
        node.cli(&["GET", "foo"]),
        "CLUSTERDOWN Hash slot not served"
    );
    assert_eq!(node.cli(&["GET", "bar"]), "CLUSTERDOWN The cluster is down");
    assert_eq!(
        node.cli(&["MGET", "foo", "bar"]),
        "CLUSTERDOWN Hash slot not served"
    );
    assert_eq!(
        node.cli(&["MGET", "bar", "foo"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(node.cli(&["DBSIZE"]), "0");
    // A redirect inside MULTI dooms the transaction.
    let mut c = node.client();
    cmd(&mut c, &["MULTI"]).unwrap();
    let e = cmd(&mut c, &["SET", "foo", "1"]).unwrap_err();
    assert!(e.to_string().contains("Hash slot not served"), "{e}");
    let e = cmd(&mut c, &["EXEC"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("Transaction discarded because of previous errors"),
        "{e}"
    );
    assert_eq!(node.cli(&["CLUSTER", "ADDSLOTS", "12182"]), "OK");
    assert_eq!(node.cli(&["SET", "foo", "1"]), "OK");
}

/// Goal: the CLUSTER subcommands that read the keyspace (FLUSHSLOTS and REPLICATE count the
/// node's keys; COUNTKEYSINSLOT, GETKEYSINSLOT, SETSLOT and SLOT-STATS read a slot) answer
/// inside MULTI/EXEC: EXEC holds every shard of the database, and reading by locking a shard
/// again deadlocked the connection's thread (and every client on it).
#[test]
fn key_counting_cluster_commands_answer_inside_exec() {
    let node = Node::start(CLUSTER);
    assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "OK");
    let c = redis::Client::open(format!("redis://127.0.0.1:{}/", node.port)).unwrap();
    let mut c = c.get_connection().unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    // "{06S}" hashes to slot 0.
    assert_eq!(cmd(&mut c, &["SET", "{06S}k", "v"]).unwrap(), Value::Okay);
    cmd(&mut c, &["MULTI"]).unwrap();
    for args in [
        &["CLUSTER", "COUNTKEYSINSLOT", "0"][..],
        &["CLUSTER", "GETKEYSINSLOT", "0", "10"],
        &["CLUSTER", "SLOT-STATS", "SLOTSRANGE", "0", "0"],
        &["CLUSTER", "SETSLOT", "0", "STABLE"],
        &["DEL", "{06S}k"],
    ] {
        assert_eq!(
            cmd(&mut c, args).unwrap(),
            Value::SimpleString("QUEUED".into()),
            "{args:?}"
        );
    }
    let Value::Array(replies) = cmd(&mut c, &["EXEC"]).expect("EXEC answers") else {
        panic!("EXEC is an array");
    };
    assert_eq!(replies[0], Value::Int(1));
    assert_eq!(
        replies[1],
        Value::Array(vec![Value::BulkString(b"{06S}k".to_vec())])
    );
    assert!(
        format!("{:?}", replies[2]).contains("key-count"),
        "{:?}",
        replies[2]
    );
    assert_eq!(replies[3], Value::Okay);
    assert_eq!(replies[4], Value::Int(1));
    cmd(&mut c, &["MULTI"]).unwrap();
    assert_eq!(
        cmd(&mut c, &["CLUSTER", "FLUSHSLOTS"]).unwrap(),
        Value::SimpleString("QUEUED".into())
    );
    assert_eq!(
        cmd(&mut c, &["EXEC"]).expect("EXEC answers"),
        Value::Array(vec![Value::Okay])
    );
    cmd(&mut c, &["MULTI"]).unwrap();
    let unknown = "0123456789012345678901234567890123456789";
    assert_eq!(
        cmd(&mut c, &["CLUSTER", "REPLICATE", unknown]).unwrap(),
        Value::SimpleString("QUEUED".into())
    );
    // The client library turns an error inside EXEC's reply into an error of the call.
    let e = cmd(&mut c, &["EXEC"]).expect_err("REPLICATE of an unknown node fails");
    assert!(e.to_string().contains("Unknown node"), "{e}");
    assert_eq!(node.cli(&["CLUSTER", "COUNTKEYSINSLOT", "5"]), "0");
    assert!(node.cli(&["CLUSTER", "NODES"]).ends_with("connected"));
}

#[test]
fn a_restarted_node_keeps_its_id_and_slots() {
    let node = Node::start(CLUSTER);
    let id = node.cli(&["CLUSTER", "MYID"]);
    let shard = node.cli(&["CLUSTER", "MYSHARDID"]);
    assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "99"]), "OK");
    let dir = node.into_dir();
    let conf = std::fs::read_to_string(dir.path().join("nodes.conf")).unwrap();
    assert!(
        conf.starts_with(&id) && conf.ends_with("vars currentEpoch 0 lastVoteEpoch 0\n"),
        "{conf}"
    );
    let node = Node::start_in(dir, CLUSTER);
    assert_eq!(node.cli(&["CLUSTER", "MYID"]), id);
    assert_eq!(node.cli(&["CLUSTER", "MYSHARDID"]), shard);
    assert!(node.cli(&["CLUSTER", "NODES"]).ends_with("connected 0-99"));
}

#[test]
fn a_corrupt_config_file_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nodes.conf"), "this is not a node line\n").unwrap();
    let (status, log) = Node::start_expecting_exit(dir.path(), CLUSTER);
    assert!(!status.success());
    assert!(
        log.contains("nodes.conf") && log.contains("line 1"),
        "{log}"
    );
}

/// `cluster-announce-port` / `cluster-announce-bus-port` are the ports the node gives its
/// peers and clients (NAT, containers), as in Redis; without them, the real ones.
#[test]
fn announced_ports_replace_the_real_ones_in_the_topology() {
    let mut args = CLUSTER.to_vec();
    args.extend([
        "--cluster-announce-port",
        "7777",
        "--cluster-announce-bus-port",
        "17777",
    ]);
    let node = Node::start(&args);
    let nodes = node.cli(&["CLUSTER", "NODES"]);
    assert!(nodes.contains(":7777@17777,"), "{nodes}");
    assert_eq!(
        node.cli(&["CONFIG", "GET", "cluster-announce-port"]),
        "cluster-announce-port\n7777"
    );
    let plain = Node::start(CLUSTER);
    let nodes = plain.cli(&["CLUSTER", "NODES"]);
    let real = format!(":{}@{},", plain.port, plain.port + 10000);
    assert!(nodes.contains(&real), "{nodes}");
}

/// Goal: SIGTERM and SIGINT run the node's own shutdown (final snapshot, exit 0) also when
/// libfabric is loaded: its psm provider pulls in libinfinipath, whose handler exited the
/// process with status 1 before the node could save.
/// Method: a cluster node whose bus runs on `ofi:tcp` (libfabric loaded), a key written,
/// the signal, then a restart over the same directory finds the key.
#[test]
fn stop_signals_save_and_exit_cleanly_with_libfabric_loaded() {
    for signal in ["TERM", "INT"] {
        let mut node = integration::cluster::cluster_node_with("s", &["--save", "3600 1"]);
        assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "OK");
        assert!(node.log().contains("cluster bus up"), "{}", node.log());
        assert_eq!(node.cli(&["SET", "kept", signal]), "OK");
        let status = node.signal_and_wait(signal);
        let log = node.log();
        assert!(status.success(), "SIG{signal}: {status:?}\n{log}");
        assert!(log.contains(&format!("received SIG{signal}")), "{log}");
        assert!(log.contains("DB saved on disk"), "{log}");
        let port = node.port;
        let node = integration::cluster::cluster_node_in(node.into_dir(), port, "s", &[]);
        assert_eq!(node.cli(&["GET", "kept"]), signal);
    }
}
