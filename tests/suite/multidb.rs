//! Numbered databases in standalone mode (issue 18): SELECT, MOVE, SWAPDB, COPY ... DB,
//! FLUSHDB against FLUSHALL, DBSIZE and INFO keyspace per database, a replica and a restart
//! (snapshot and AOF) that keep each key in its database, and a blocked client that only its
//! own database's push wakes. Against real node processes, with Redis 7.0.15's answers.

use integration::{cmd, free_port, Node};
use redis::Value;
use std::time::{Duration, Instant};

fn text(v: redis::RedisResult<Value>) -> String {
    match v {
        Ok(Value::Okay) => "OK".into(),
        Ok(Value::Int(n)) => n.to_string(),
        Ok(Value::Nil) => "(nil)".into(),
        Ok(Value::BulkString(b)) => String::from_utf8_lossy(&b).into_owned(),
        Ok(Value::SimpleString(s)) => s,
        Ok(other) => format!("{other:?}"),
        Err(e) => e.to_string(),
    }
}

fn run(c: &mut redis::Connection, args: &[&str]) -> String {
    text(cmd(c, args))
}

/// The `dbN:...` lines of INFO keyspace.
fn keyspace_lines(c: &mut redis::Connection) -> Vec<String> {
    let info: String = redis::cmd("INFO").arg("keyspace").query(c).unwrap();
    info.lines()
        .filter(|l| l.starts_with("db"))
        .map(str::to_string)
        .collect()
}

/// Goal: each client works in the database it selected; MOVE, COPY ... DB, SWAPDB and the
/// flushes act on the databases Redis's do, with its answers and error texts.
#[test]
fn select_move_copy_swapdb_and_flushes_act_per_database() {
    let node = Node::start(&[]);
    let mut a = node.client();
    let mut b = node.client();
    let databases: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("databases")
        .query(&mut a)
        .unwrap();
    assert_eq!(databases, ["databases", "16"]);
    assert_eq!(run(&mut a, &["SET", "k", "zero"]), "OK");
    assert_eq!(run(&mut b, &["SELECT", "9"]), "OK");
    assert_eq!(run(&mut b, &["GET", "k"]), "(nil)");
    assert_eq!(run(&mut b, &["SET", "k", "nine"]), "OK");
    assert_eq!(run(&mut a, &["GET", "k"]), "zero");
    assert_eq!(run(&mut b, &["DBSIZE"]), "1");
    let list = run(&mut b, &["CLIENT", "INFO"]);
    assert!(list.contains(" db=9 "), "{list}");

    // Redis 7.0.15's texts for indexes out of range or not ints.
    for (args, expect) in [
        (&["SELECT", "16"][..], "DB index is out of range"),
        (&["SELECT", "-1"], "DB index is out of range"),
        (
            &["SELECT", "abc"],
            "value is not an integer or out of range",
        ),
        (&["MOVE", "k", "16"], "DB index is out of range"),
        (
            &["MOVE", "k", "0"],
            "source and destination objects are the same",
        ),
        (&["SWAPDB", "0", "abc"], "invalid second DB index"),
        (&["SWAPDB", "abc", "0"], "invalid first DB index"),
        (&["SWAPDB", "0", "16"], "DB index is out of range"),
        (&["COPY", "k", "k2", "DB", "16"], "DB index is out of range"),
        (&["CONFIG", "SET", "databases", "4"], "immutable"),
    ] {
        let got = run(&mut a, args);
        assert!(got.contains(expect), "{args:?}: {got}");
    }

    // MOVE: absent here or present there moves nothing.
    assert_eq!(run(&mut a, &["MOVE", "k", "9"]), "0");
    assert_eq!(run(&mut a, &["MOVE", "nokey", "9"]), "0");
    assert_eq!(run(&mut a, &["SET", "m", "v"]), "OK");
    assert_eq!(run(&mut a, &["EXPIRE", "m", "1000"]), "1");
    assert_eq!(run(&mut a, &["MOVE", "m", "9"]), "1");
    assert_eq!(run(&mut a, &["EXISTS", "m"]), "0");
    assert_eq!(run(&mut b, &["GET", "m"]), "v");
    let ttl: i64 = redis::cmd("TTL").arg("m").query(&mut b).unwrap();
    assert!(ttl > 900, "the TTL moves with the key: {ttl}");

    // COPY ... DB: into another database, REPLACE over an existing key.
    assert_eq!(run(&mut a, &["COPY", "k", "k", "DB", "9"]), "0");
    assert_eq!(run(&mut a, &["COPY", "k", "k", "DB", "9", "REPLACE"]), "1");
    assert_eq!(run(&mut b, &["GET", "k"]), "zero");
    assert_eq!(run(&mut a, &["COPY", "k", "c", "DB", "3"]), "1");
    assert_eq!(
        keyspace_lines(&mut a),
        [
            "db0:keys=1,expires=0,avg_ttl=0",
            "db3:keys=1,expires=0,avg_ttl=0",
            "db9:keys=2,expires=1,avg_ttl=0",
        ]
    );

    // SWAPDB: a client of database 9 now sees database 0's keys.
    assert_eq!(run(&mut a, &["SWAPDB", "0", "9"]), "OK");
    assert_eq!(run(&mut b, &["DBSIZE"]), "1");
    assert_eq!(run(&mut b, &["GET", "k"]), "zero");
    assert_eq!(run(&mut a, &["GET", "m"]), "v");
    assert_eq!(run(&mut a, &["DBSIZE"]), "2");

    // KEYS and RANDOMKEY see the client's database only.
    assert_eq!(run(&mut b, &["RANDOMKEY"]), "k");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut b).unwrap();
    assert_eq!(keys, ["k"]);

    // FLUSHDB empties the selected database, FLUSHALL every one.
    assert_eq!(run(&mut b, &["FLUSHDB"]), "OK");
    assert_eq!(run(&mut b, &["DBSIZE"]), "0");
    assert_eq!(run(&mut a, &["DBSIZE"]), "2");
    assert_eq!(run(&mut a, &["FLUSHALL"]), "OK");
    assert!(keyspace_lines(&mut a).is_empty());

    // RESET goes back to database 0.
    assert_eq!(run(&mut b, &["SET", "r", "1"]), "OK");
    assert_eq!(run(&mut b, &["RESET"]), "RESET");
    assert_eq!(run(&mut b, &["GET", "r"]), "(nil)");
}

/// Goal: SELECT inside MULTI and inside a script, as Redis 7: the transaction's later
/// commands run in the new database (which stays selected); a script's SELECT lasts for the
/// script only.
#[test]
fn select_inside_a_transaction_and_a_script() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("t")
        .arg("zero")
        .cmd("SELECT")
        .arg("2")
        .cmd("SET")
        .arg("t")
        .arg("two")
        .query(&mut c)
        .unwrap();
    assert_eq!(replies.len(), 3);
    assert_eq!(run(&mut c, &["GET", "t"]), "two");
    assert_eq!(run(&mut c, &["SELECT", "0"]), "OK");
    assert_eq!(run(&mut c, &["GET", "t"]), "zero");
    let script =
        "redis.call('select', 5); redis.call('set', 's', 'five'); return redis.call('get', 's')";
    assert_eq!(run(&mut c, &["EVAL", script, "0"]), "five");
    assert_eq!(run(&mut c, &["GET", "s"]), "(nil)");
    assert_eq!(run(&mut c, &["SELECT", "5"]), "OK");
    assert_eq!(run(&mut c, &["GET", "s"]), "five");
}

/// Goal: a client blocked on a list of database 1 is not served by a push to the same key
/// in database 0, and is by one in database 1.
#[test]
fn a_push_in_another_database_does_not_serve_a_blocked_client() {
    let node = Node::start(&[]);
    let mut waiter = node.client();
    assert_eq!(run(&mut waiter, &["SELECT", "1"]), "OK");
    let handle = std::thread::spawn(move || {
        let popped: Option<(String, String)> = redis::cmd("BLPOP")
            .arg("q")
            .arg(0)
            .query(&mut waiter)
            .unwrap();
        popped
    });
    let mut c = node.client();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !run(&mut c, &["INFO", "clients"]).contains("blocked_clients:1") {
        assert!(Instant::now() < deadline, "the client never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(run(&mut c, &["RPUSH", "q", "db0"]), "1");
    // The push in database 0 stays there: nobody popped it.
    assert_eq!(run(&mut c, &["LLEN", "q"]), "1");
    assert!(run(&mut c, &["INFO", "clients"]).contains("blocked_clients:1"));
    assert_eq!(run(&mut c, &["SELECT", "1"]), "OK");
    assert_eq!(run(&mut c, &["RPUSH", "q", "db1"]), "1");
    assert_eq!(
        handle.join().unwrap(),
        Some(("q".to_string(), "db1".to_string()))
    );
    assert_eq!(run(&mut c, &["SELECT", "0"]), "OK");
    assert_eq!(run(&mut c, &["LPOP", "q"]), "db0");
}

/// Keys in databases 0, 3 and 7 written through one client: (db, key, value).
const SPREAD: [(&str, &str, &str); 4] = [
    ("0", "a", "zero"),
    ("3", "a", "three"),
    ("3", "b", "three-b"),
    ("7", "a", "seven"),
];

fn write_spread(c: &mut redis::Connection) {
    for (db, key, value) in SPREAD {
        assert_eq!(run(c, &["SELECT", db]), "OK");
        assert_eq!(run(c, &["SET", key, value]), "OK");
    }
    assert_eq!(run(c, &["SELECT", "0"]), "OK");
}

fn assert_spread(c: &mut redis::Connection, what: &str) {
    for (db, key, value) in SPREAD {
        assert_eq!(run(c, &["SELECT", db]), "OK");
        assert_eq!(run(c, &["GET", key]), value, "{what}: {key} in db {db}");
    }
    assert_eq!(run(c, &["SELECT", "0"]), "OK");
    assert_eq!(run(c, &["DBSIZE"]), "1", "{what}: db 0 holds its key only");
}

/// Goal: a restart from the snapshot keeps each key in its database.
#[test]
fn a_restart_from_the_snapshot_keeps_keys_in_their_databases() {
    let node = Node::start(&[]);
    let mut c = node.client();
    write_spread(&mut c);
    assert_eq!(run(&mut c, &["SAVE"]), "OK");
    drop(c);
    let node = Node::start_in(node.into_dir(), &[]);
    assert_spread(&mut node.client(), "after the snapshot");
}

/// Goal: a restart from the AOF (its increment, then again after a rewrite into a base)
/// keeps each key in its database.
#[test]
fn a_restart_from_the_aof_keeps_keys_in_their_databases() {
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let node = Node::start(&args);
    let mut c = node.client();
    write_spread(&mut c);
    drop(c);
    let node = Node::start_in(node.into_dir(), &args);
    let mut c = node.client();
    assert_spread(&mut c, "after replaying the increment");
    assert!(!run(&mut c, &["BGREWRITEAOF"]).starts_with("ERR"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !run(&mut c, &["INFO", "persistence"]).contains("aof_rewrite_in_progress:0") {
        assert!(Instant::now() < deadline, "the rewrite never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A write after the rewrite lands in the new increment.
    assert_eq!(run(&mut c, &["SELECT", "7"]), "OK");
    assert_eq!(run(&mut c, &["SET", "late", "seven"]), "OK");
    drop(c);
    let node = Node::start_in(node.into_dir(), &args);
    let mut c = node.client();
    assert_spread(&mut c, "after the rewrite's base");
    assert_eq!(run(&mut c, &["SELECT", "7"]), "OK");
    assert_eq!(run(&mut c, &["GET", "late"]), "seven");
}

const FABRIC: [&str; 4] = ["--fabric-provider", "ofi:tcp", "--rdma-bind", "127.0.0.1"];

/// A primary accepting replicas over ofi:tcp and a node to become its replica.
fn fabric_primary_and_replica() -> (Node, Node) {
    let repl_port = free_port().to_string();
    let mut args = FABRIC.to_vec();
    args.extend(["--repl-fabric-port", &repl_port]);
    (Node::start(&args), Node::start(&FABRIC))
}

/// REPLICAOF `primary` through `r`, retried until accepted or `deadline`.
fn follow(r: &mut redis::Connection, primary: &Node, deadline: Instant) {
    while run(r, &["REPLICAOF", "127.0.0.1", &primary.port.to_string()]) != "OK" {
        assert!(Instant::now() < deadline, "REPLICAOF refused");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Goal: what a full sync carries and what the stream carries after it reach the replica in
/// their databases (a write in db 3 lands in db 3, not db 0).
#[test]
fn a_replica_keeps_each_write_in_its_database() {
    let (primary, replica) = fabric_primary_and_replica();
    let mut p = primary.client();
    // Before the link: carried by the full sync.
    assert_eq!(run(&mut p, &["SELECT", "5"]), "OK");
    assert_eq!(run(&mut p, &["SET", "synced", "five"]), "OK");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut r = replica.client();
    follow(&mut r, &primary, deadline);
    write_spread(&mut p);
    assert_eq!(run(&mut p, &["SELECT", "3"]), "OK");
    assert_eq!(run(&mut p, &["INCR", "n"]), "1");
    assert_eq!(run(&mut p, &["SELECT", "0"]), "OK");
    assert_eq!(run(&mut p, &["MOVE", "a", "9"]), "1");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ready = run(&mut r, &["SELECT", "9"]) == "OK" && run(&mut r, &["GET", "a"]) == "zero";
        if ready {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stream did not reach the replica; replica log:\n{}",
            replica.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(run(&mut r, &["SELECT", "5"]), "OK");
    assert_eq!(run(&mut r, &["GET", "synced"]), "five");
    assert_eq!(run(&mut r, &["SELECT", "3"]), "OK");
    assert_eq!(run(&mut r, &["GET", "a"]), "three");
    assert_eq!(run(&mut r, &["GET", "n"]), "1");
    assert_eq!(run(&mut r, &["SELECT", "7"]), "OK");
    assert_eq!(run(&mut r, &["GET", "a"]), "seven");
    assert_eq!(run(&mut r, &["SELECT", "0"]), "OK");
    assert_eq!(run(&mut r, &["DBSIZE"]), "0", "db 0's key moved to db 9");
    assert_eq!(run(&mut r, &["EXISTS", "n"]), "0");
}

/// The `name:value` field of INFO stats, or "" when absent.
fn stats_field(c: &mut redis::Connection, name: &str) -> String {
    let info: String = redis::cmd("INFO").arg("stats").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Goal: the primary's stream selects a database only when it changes (as Redis's does), so
/// a replica that reconnects and continues the stream (partial resync) in the middle of
/// writes to database 5 keeps applying them to database 5, not 0.
#[test]
fn a_replica_that_continues_the_stream_stays_in_its_database() {
    let (primary, replica) = fabric_primary_and_replica();
    let mut p = primary.client();
    let mut r = replica.client();
    let deadline = Instant::now() + Duration::from_secs(20);
    follow(&mut r, &primary, deadline);
    assert_eq!(run(&mut p, &["SELECT", "5"]), "OK");
    assert_eq!(run(&mut r, &["SELECT", "5"]), "OK");
    let wait_for = |r: &mut redis::Connection, key: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while run(r, &["EXISTS", key]) != "1" {
            assert!(
                Instant::now() < deadline,
                "{key} did not reach db 5 of the replica; replica log:\n{}",
                replica.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    assert_eq!(run(&mut p, &["SET", "before", "1"]), "OK");
    wait_for(&mut r, "before");
    let full_syncs = stats_field(&mut p, "sync_full");
    // The link drops; the replica continues the stream where it was, in database 5.
    let _ = replica.cli(&["CLIENT", "KILL", "TYPE", "master"]);
    assert_eq!(run(&mut p, &["SET", "after", "2"]), "OK");
    wait_for(&mut r, "after");
    assert_eq!(
        stats_field(&mut p, "sync_full"),
        full_syncs,
        "a partial resync, not a full one"
    );
    assert_eq!(run(&mut r, &["GET", "after"]), "2");
    assert_eq!(run(&mut r, &["SELECT", "0"]), "OK");
    assert_eq!(run(&mut r, &["DBSIZE"]), "0", "nothing landed in db 0");
}

/// Goal: cluster mode keeps database 0 only.
#[test]
fn cluster_mode_refuses_other_databases() {
    let node = Node::start(&["--cluster-enabled", "yes"]);
    assert_eq!(
        node.cli(&["SELECT", "1"]),
        "ERR SELECT is not allowed in cluster mode"
    );
    assert_eq!(
        node.cli(&["SWAPDB", "0", "1"]),
        "ERR SWAPDB is not allowed in cluster mode"
    );
}
