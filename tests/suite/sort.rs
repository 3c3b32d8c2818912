//! SORT and SORT_RO. Method: the same commands against a node and redis-server 7.0.15,
//! replies compared frame by frame in RESP2 and RESP3; in cluster mode, both servers in
//! cluster mode with every slot on themselves.

use crate::reply_compare::{assert_same_replies, connect, reference_with, replies, script};
use integration::Node;

#[test]
fn sort_replies_match_redis_server() {
    let node = Node::start(&[]);
    let commands = script(&[
        "RPUSH l 3 1 2 10 -1.5 1e2",
        "SORT l",
        "SORT l DESC",
        "SORT l ALPHA",
        "SORT l ALPHA DESC",
        "SORT l LIMIT 1 2",
        "SORT l LIMIT -5 2",
        "SORT l LIMIT 5 10",
        "SORT l LIMIT 6 1",
        "SORT l LIMIT 0 0",
        "SORT l LIMIT 2 -1",
        "SORT l LIMIT x 1",
        "SORT l LIMIT 1",
        "SORT l BOGUS",
        "SORT_RO l DESC LIMIT 0 3",
        "SORT_RO l STORE dst",
        // BY and GET patterns: string keys, hash fields, `#`, missing keys.
        "MSET w_3 30 w_1 10 w_2 -20 w_10 5 o_1 one o_2 two o_3 three",
        "HSET h_1 f x1 g 9",
        "HSET h_2 f x2 g 1",
        "SORT l BY w_*",
        "SORT l BY w_* DESC GET o_* GET #",
        "SORT l BY w_* GET h_*->f GET h_*->g GET #",
        "SORT l BY h_*->g GET #",
        "SORT l BY w_* ALPHA",
        "SORT l BY o_* ALPHA GET o_*",
        "SORT l BY nosort",
        "SORT l BY nosort GET o_* LIMIT 1 2",
        "SORT l GET nostar",
        "SORT l GET h_*->",
        "SORT l BY o_*",
        // STORE: a list, the result's length, empty results delete the destination.
        "SORT l STORE dst",
        "LRANGE dst 0 -1",
        "SORT l BY w_* GET o_* STORE dst",
        "LRANGE dst 0 -1",
        "SET dst2 x EX 100",
        "SORT l LIMIT 0 2 STORE dst2",
        "TTL dst2",
        "SORT nokey STORE dst2",
        "EXISTS dst2",
        "SORT nokey",
        // Sets (sorted: their own order is not Redis's), sorted sets (nosort keeps scores).
        "SADD s 5 3 9 1",
        "SORT s",
        "SORT s DESC LIMIT 1 2",
        "SORT s BY nosort STORE dst3",
        "LRANGE dst3 0 -1",
        "ZADD z 1 c 2 a 3 b",
        "SORT z ALPHA",
        "SORT z BY nosort",
        "SORT z BY nosort DESC",
        "SORT z BY nosort LIMIT 1 5",
        "SORT z BY nosort DESC LIMIT 0 2",
        "SORT z",
        "SET str x",
        "SORT str",
        "HSET hh a b",
        "SORT hh",
        // Ties compare the elements' bytes; weights as strtod reads them.
        "RPUSH t b a c",
        "MSET v_a 1 v_b 1 v_c 0",
        "SORT t BY v_*",
        "SORT t BY v_* DESC",
        "RPUSH bad 1 x 2",
        "SORT bad",
        "SORT bad ALPHA",
        "MSET x_1 inf x_2 -inf x_3 1e400",
        "RPUSH ww 1 2",
        "SORT ww BY x_*",
        "SORT ww BY x_* GET x_*",
    ]);
    assert_same_replies("sort_replies_match_redis_server", &node, &commands);
}

#[test]
fn sort_store_wakes_blocked_clients_and_replays_from_the_aof() {
    const AOF: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];
    let node = Node::start(AOF);
    assert_eq!(node.cli(&["RPUSH", "src", "2", "1", "3"]), "3");
    let mut blocked = connect(node.port, false);
    blocked.send(&["BLPOP", "dst", "10"]);
    // The BLPOP is parked before SORT stores (the node answers in order per connection,
    // and CLIENT LIST shows the blocked command).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !node.cli(&["CLIENT", "LIST"]).contains("cmd=blpop") {
        assert!(std::time::Instant::now() < deadline, "BLPOP never blocked");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(node.cli(&["SORT", "src", "STORE", "dst"]), "3");
    let woke = format!("{:?}", blocked.read());
    assert!(woke.contains("dst") && woke.contains('1'), "{woke}");
    assert_eq!(node.cli(&["LRANGE", "dst", "0", "-1"]), "2\n3");
    let node = Node::start_in(node.into_dir(), AOF);
    assert_eq!(node.cli(&["LRANGE", "dst", "0", "-1"]), "2\n3");
}

#[test]
fn sort_in_cluster_mode_answers_as_redis_cluster() {
    let node = Node::start(&["--cluster-enabled", "yes"]);
    assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "OK");
    let commands = script(&[
        "RPUSH {k}l 3 1 2",
        "SORT {k}l",
        "SORT {k}l BY w_*",
        "SORT {k}l GET #",
        "SORT {k}l GET o_*",
        "SORT {k}l BY nosort",
        "SORT {k}l STORE {k}d",
        "SORT {k}l STORE other",
        "SORT_RO {k}l BY w_*",
        "SORT_RO {k}l DESC",
    ]);
    let Some(redis) = reference_with(
        "sort_in_cluster_mode_answers_as_redis_cluster",
        &["--cluster-enabled", "yes"],
    ) else {
        return;
    };
    let mut admin = connect(redis.port, false);
    admin.call(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    // Redis serves once its cluster state is ok.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !format!("{:?}", admin.call(&["CLUSTER", "INFO"])).contains("cluster_state:ok") {
        assert!(
            std::time::Instant::now() < deadline,
            "redis cluster never ok"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for resp3 in [false, true] {
        for port in [node.port, redis.port] {
            connect(port, false).call(&["FLUSHALL"]);
        }
        let ours = replies(node.port, resp3, &commands);
        let theirs = replies(redis.port, resp3, &commands);
        for ((args, o), t) in commands.iter().zip(&ours).zip(&theirs) {
            assert_eq!(o, t, "{args:?} (resp3: {resp3})");
        }
    }
}

/// SORT_RO is flagged `movablekeys` as in Redis (its BY and GET patterns name keys that no
/// key spec locates), like SORT.
#[test]
fn sort_ro_is_marked_with_movablekeys() {
    let node = Node::start(&[]);
    let mut c = node.client();
    for name in ["SORT", "SORT_RO"] {
        let info: redis::Value = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(name)
            .query(&mut c)
            .unwrap();
        let redis::Value::Array(commands) = info else {
            panic!("COMMAND INFO gives an array: {info:?}");
        };
        let redis::Value::Array(fields) = &commands[0] else {
            panic!("{name}: no entry: {commands:?}");
        };
        let redis::Value::Array(flags) = &fields[2] else {
            panic!("{name}: no flags: {fields:?}");
        };
        assert!(
            flags.contains(&redis::Value::SimpleString("movablekeys".into())),
            "{name}: {flags:?}"
        );
    }
}
