//! Moving keys between servers: MIGRATE, DUMP, RESTORE and RESTORE-ASKING. Method: the same
//! script of commands runs against two nodes and against two Debian redis-servers
//! (7.0.15), and the replies must match line for line (payload bytes differ by design, so
//! scripts only show replies that do not contain them); then node-only checks (TTLs kept,
//! a cluster slot moved with IMPORTING/MIGRATING and answered with ASK afterwards).

use integration::reference::RedisServer;
use integration::{free_port, Node};
use redis::Value;

/// A server the script talks to through `redis-cli`.
type Cli<'a> = &'a dyn Fn(&[&str]) -> String;

/// Runs commands and records `who args -> reply` lines.
#[derive(Default)]
struct Transcript {
    lines: Vec<String>,
}

impl Transcript {
    fn run(&mut self, who: &str, cli: Cli<'_>, args: &[&str]) -> String {
        let out = cli(args);
        self.lines.push(format!("{who} {args:?} -> {out}"));
        out
    }
}

/// The MIGRATE script: `source` moves keys to the target on `target_port` (password `pw`),
/// and `target` reads them back. `closed_port` has nothing listening.
fn migrate_script(
    source: Cli<'_>,
    target: Cli<'_>,
    target_port: u16,
    closed_port: u16,
) -> Vec<String> {
    let mut t = Transcript::default();
    let tp = target_port.to_string();
    let cp = closed_port.to_string();
    let h = "127.0.0.1";
    for setup in [
        &["SET", "s1", "v"][..],
        &["RPUSH", "l", "a", "b", "c"],
        &["HSET", "h", "f", "v"],
        &["SADD", "st", "m"],
        &["ZADD", "z", "1.5", "m"],
        &["SET", "ttl", "v", "PX", "100000"],
    ] {
        t.run("S", source, setup);
    }
    // One key, then the KEYS form with a missing key among them.
    t.run(
        "S",
        source,
        &["MIGRATE", h, &tp, "s1", "0", "5000", "AUTH", "pw"],
    );
    t.run("T", target, &["GET", "s1"]);
    t.run("S", source, &["EXISTS", "s1"]);
    t.run(
        "S",
        source,
        &[
            "MIGRATE", h, &tp, "", "0", "5000", "AUTH", "pw", "KEYS", "l", "h", "st", "z", "ttl",
            "nosuch",
        ],
    );
    t.run("T", target, &["LRANGE", "l", "0", "-1"]);
    t.run("T", target, &["HGETALL", "h"]);
    t.run("T", target, &["SMEMBERS", "st"]);
    t.run("T", target, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]);
    t.run("T", target, &["TYPE", "ttl"]);
    t.run("S", source, &["EXISTS", "l", "h", "st", "z", "ttl"]);
    // Nothing to move.
    t.run(
        "S",
        source,
        &["MIGRATE", h, &tp, "nosuch", "0", "5000", "AUTH", "pw"],
    );
    t.run(
        "S",
        source,
        &["MIGRATE", h, &tp, "", "0", "5000", "AUTH", "pw", "KEYS"],
    );
    // COPY keeps the source; then the target's BUSYKEY comes back; REPLACE overwrites.
    t.run("S", source, &["SET", "c", "v"]);
    t.run(
        "S",
        source,
        &["MIGRATE", h, &tp, "c", "0", "5000", "COPY", "AUTH", "pw"],
    );
    t.run("S", source, &["GET", "c"]);
    t.run("T", target, &["GET", "c"]);
    t.run(
        "S",
        source,
        &["MIGRATE", h, &tp, "c", "0", "5000", "AUTH", "pw"],
    );
    t.run("S", source, &["EXISTS", "c"]);
    t.run("S", source, &["SET", "c", "v2"]);
    t.run(
        "S",
        source,
        &["MIGRATE", h, &tp, "c", "0", "5000", "REPLACE", "AUTH", "pw"],
    );
    t.run("T", target, &["GET", "c"]);
    t.run("S", source, &["EXISTS", "c"]);
    // The target refuses the password; the key stays.
    t.run("S", source, &["SET", "d", "v"]);
    t.run(
        "S",
        source,
        &["MIGRATE", h, &tp, "d", "0", "5000", "AUTH", "wrong"],
    );
    t.run("S", source, &["EXISTS", "d"]);
    // Errors found before any I/O.
    t.run("S", source, &["MIGRATE", h, &tp, "d", "0", "5000", "bogus"]);
    t.run("S", source, &["MIGRATE", h, &tp, "d", "0", "5000", "AUTH"]);
    t.run(
        "S",
        source,
        &["MIGRATE", h, &tp, "d", "0", "5000", "AUTH2", "u"],
    );
    t.run(
        "S",
        source,
        &["MIGRATE", h, &tp, "d", "0", "5000", "KEYS", "d"],
    );
    t.run("S", source, &["MIGRATE", h, &tp, "d", "0", "abc"]);
    t.run("S", source, &["MIGRATE", h, &tp, "d", "x", "5000"]);
    t.run("S", source, &["MIGRATE", h, &tp, "d", "0"]);
    // A key named twice: the first RESTORE lands (and the key is deleted here), the second
    // gets BUSYKEY.
    t.run(
        "S",
        source,
        &[
            "MIGRATE", h, &tp, "", "0", "5000", "AUTH2", "default", "pw", "KEYS", "d", "d",
        ],
    );
    t.run("S", source, &["EXISTS", "d"]);
    t.run("T", target, &["GET", "d"]);
    // Nobody listening.
    t.run("S", source, &["SET", "e", "v"]);
    t.run("S", source, &["MIGRATE", h, &cp, "e", "0", "500"]);
    t.run("S", source, &["EXISTS", "e"]);
    t.lines
}

/// A port with nothing listening on it.
fn closed_port() -> u16 {
    free_port()
}

fn with_password<'a>(cli: &'a dyn Fn(&[&str]) -> String) -> impl Fn(&[&str]) -> String + 'a {
    move |args: &[&str]| {
        let mut full = vec!["-a", "pw", "--no-auth-warning"];
        full.extend_from_slice(args);
        cli(&full)
    }
}

#[test]
fn migrate_replies_as_redis_between_two_servers() {
    let closed = closed_port();
    let (ns, nt) = (Node::start(&[]), Node::start(&["--requirepass", "pw"]));
    let node_source = |a: &[&str]| ns.cli(a);
    let node_target_plain = |a: &[&str]| nt.cli(a);
    let node_target = with_password(&node_target_plain);
    let ours = migrate_script(&node_source, &node_target, nt.port, closed);

    let (rs, rt) = (
        RedisServer::start(&[]),
        RedisServer::start(&["--requirepass", "pw"]),
    );
    let redis_source = |a: &[&str]| rs.cli(a);
    let redis_target_plain = |a: &[&str]| rt.cli(a);
    let redis_target = with_password(&redis_target_plain);
    let theirs = migrate_script(&redis_source, &redis_target, rt.port, closed);

    for (i, (o, r)) in ours.iter().zip(&theirs).enumerate() {
        let o = o.replace(&nt.port.to_string(), "TARGET");
        let r = r.replace(&rt.port.to_string(), "TARGET");
        assert_eq!(o, r, "line {i}: node vs redis-server");
    }
    assert_eq!(ours.len(), theirs.len());
    // The script did move things (not two servers failing alike).
    assert!(ours
        .iter()
        .any(|l| l.ends_with("-> OK") && l.contains("MIGRATE")));
}

#[test]
fn migrate_keeps_ttls_and_reuses_its_link() {
    let (source, target) = (Node::start(&[]), Node::start(&[]));
    let tp = target.port.to_string();
    assert_eq!(source.cli(&["SET", "k", "v", "PX", "100000"]), "OK");
    assert_eq!(source.cli(&["SET", "p", "v"]), "OK");
    assert_eq!(
        source.cli(&[
            "MIGRATE",
            "127.0.0.1",
            &tp,
            "",
            "0",
            "5000",
            "KEYS",
            "k",
            "p"
        ]),
        "OK"
    );
    let ttl: i64 = target.cli(&["PTTL", "k"]).parse().unwrap();
    assert!((90_000..=100_000).contains(&ttl), "{ttl}");
    assert_eq!(target.cli(&["PTTL", "p"]), "-1");
    // The second MIGRATE rides the cached link: the target sees one MIGRATE client.
    assert_eq!(source.cli(&["SET", "q", "v"]), "OK");
    assert_eq!(
        source.cli(&["MIGRATE", "127.0.0.1", &tp, "q", "0", "5000"]),
        "OK"
    );
    let clients = target.cli(&["CLIENT", "LIST"]);
    assert_eq!(clients.lines().count(), 2, "{clients}");
    let stats = source.cli(&["INFO", "stats"]);
    assert!(
        stats
            .lines()
            .any(|l| l.trim() == "migrate_cached_sockets:1"),
        "{stats}"
    );
    // A database past the target's 16: the target says so through the source.
    assert_eq!(source.cli(&["SET", "r", "v"]), "OK");
    assert_eq!(
        source.cli(&["MIGRATE", "127.0.0.1", &tp, "r", "16", "5000"]),
        "ERR Target instance replied with error: ERR DB index is out of range"
    );
    assert_eq!(source.cli(&["EXISTS", "r"]), "1");
}

/// The reference server and the node agree on RESTORE-ASKING's and RESTORE's refusals, and
/// each refuses the other's payloads as foreign.
#[test]
fn restore_asking_and_foreign_payloads_as_redis() {
    let node = Node::start(&[]);
    let redis = RedisServer::start(&[]);
    let script = |cli: Cli<'_>| {
        let mut t = Transcript::default();
        t.run("", cli, &["SET", "y", "v"]);
        t.run("", cli, &["RESTORE-ASKING", "x", "0", "garbage"]);
        t.run("", cli, &["RESTORE-ASKING", "y", "0", "garbage"]);
        t.run(
            "",
            cli,
            &["RESTORE-ASKING", "y", "-1", "garbage", "REPLACE"],
        );
        t.run("", cli, &["RESTORE-ASKING", "y", "0", "garbage", "BOGUS"]);
        t.run("", cli, &["RESTORE-ASKING", "y", "0"]);
        t.run("", cli, &["RESTORE", "y", "x", "garbage", "REPLACE"]);
        t.run("", cli, &["MIGRATE", "127.0.0.1", "1", "k", "0"]);
        t.run(
            "",
            cli,
            &[
                "COMMAND", "GETKEYS", "MIGRATE", "h", "1", "k", "0", "5", "COPY",
            ],
        );
        t.run(
            "",
            cli,
            &[
                "COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "5", "AUTH", "keys", "KEYS",
                "a", "b",
            ],
        );
        t.run(
            "",
            cli,
            &["COMMAND", "GETKEYS", "RESTORE-ASKING", "k", "0", "p"],
        );
        t.lines
    };
    let ours = script(&|a: &[&str]| node.cli(a));
    let theirs = script(&|a: &[&str]| redis.cli(a));
    assert_eq!(ours, theirs);
    // COMMAND INFO's name, arity, flags and key range, before the parts the node
    // derives differently (tips, key specs).
    for (name, lines) in [
        ("restore-asking", 11),
        ("migrate", 10),
        ("restore", 10),
        ("dump", 9),
    ] {
        let head = |s: String| s.lines().take(lines).collect::<Vec<_>>().join("\n");
        assert_eq!(
            head(node.cli(&["COMMAND", "INFO", name])),
            head(redis.cli(&["COMMAND", "INFO", name])),
            "{name}"
        );
    }
    let mut nc = node.client();
    let mut rc = redis.client();
    for c in [&mut nc, &mut rc] {
        let _: () = redis::cmd("SET").arg("k").arg("v").query(c).unwrap();
    }
    let ours: Vec<u8> = redis::cmd("DUMP").arg("k").query(&mut nc).unwrap();
    let theirs: Vec<u8> = redis::cmd("DUMP").arg("k").query(&mut rc).unwrap();
    // DUMP writes Redis 7.0's payload format: each restores the other's.
    for (c, payload) in [(&mut nc, &theirs), (&mut rc, &ours)] {
        let restored: Value = redis::cmd("RESTORE")
            .arg("crossed")
            .arg(0)
            .arg(payload)
            .query(c)
            .unwrap();
        assert_eq!(restored, Value::Okay);
        let v: String = redis::cmd("GET").arg("crossed").query(c).unwrap();
        assert_eq!(v, "v");
    }
    // Each restores its own.
    let restored: Value = redis::cmd("RESTORE-ASKING")
        .arg("k2")
        .arg(0)
        .arg(&ours)
        .query(&mut nc)
        .unwrap();
    assert_eq!(restored, Value::Okay);
}

/// "CODE detail" of an error reply.
fn error_text(e: redis::RedisError) -> String {
    format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))
}

/// Two cluster nodes that know each other from their `nodes.conf`: A owns every slot, B
/// none. Returns (A, B, A's id, B's id).
fn two_node_cluster() -> (Node, Node, String, String) {
    let (pa, pb) = (
        integration::free_cluster_port(),
        integration::free_cluster_port(),
    );
    let (ida, idb) = ("a1".repeat(20), "b2".repeat(20));
    let conf = |a_is_me: bool| {
        let (fa, fb) = if a_is_me {
            ("myself,master", "master")
        } else {
            ("master", "myself,master")
        };
        format!(
            "{ida} 127.0.0.1:{pa}@{ca} {fa} - 0 0 1 connected 0-16383\n\
             {idb} 127.0.0.1:{pb}@{cb} {fb} - 0 0 2 connected\n\
             vars currentEpoch 2 lastVoteEpoch 0\n",
            ca = pa + 10000,
            cb = pb + 10000,
        )
    };
    let start = |port: u16, a_is_me: bool| {
        let dir = tempfile::Builder::new()
            .prefix("node-test-")
            .tempdir()
            .expect("temp dir");
        std::fs::write(dir.path().join("nodes.conf"), conf(a_is_me)).expect("nodes.conf");
        Node::start_in_on_port(dir, port, &["--cluster-enabled", "yes"])
    };
    let (a, b) = (start(pa, true), start(pb, false));
    // The config files name each other without a fabric bus address: a MEET gives them one,
    // after which both list the other as a connected primary with an address.
    assert_eq!(
        a.cli(&["CLUSTER", "MEET", "127.0.0.1", &pb.to_string()]),
        "OK"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let linked = |n: &Node| {
        let view = n.cli(&["CLUSTER", "NODES"]);
        view.lines().count() == 2
            && view
                .lines()
                .all(|l| l.contains(" connected") && !l.contains("noaddr"))
    };
    while !(linked(&a) && linked(&b)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the two nodes never linked: {}\n{}",
            a.cli(&["CLUSTER", "NODES"]),
            b.cli(&["CLUSTER", "NODES"])
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    (a, b, ida, idb)
}

/// What `redis-cli --cluster reshard` does for one slot, by hand: the target IMPORTING, the
/// source MIGRATING, MIGRATE of the slot's keys (sent as RESTORE-ASKING), then SETSLOT NODE.
/// Meanwhile the source answers ASK for keys that moved and TRYAGAIN for a split multi-key
/// request, the target serves them after ASKING only, and MIGRATE itself runs on the source
/// whatever keys are left.
#[test]
fn migrate_moves_a_slot_between_cluster_nodes() {
    let (a, b, ida, idb) = two_node_cluster();
    assert_eq!(a.cli(&["CLUSTER", "NODES"]).lines().count(), 2);
    let slot = a.cli(&["CLUSTER", "KEYSLOT", "{k}"]);
    for (k, v) in [("{k}1", "v1"), ("{k}2", "v2"), ("{k}3", "v3")] {
        assert_eq!(a.cli(&["SET", k, v]), "OK");
    }
    assert_eq!(a.cli(&["PEXPIRE", "{k}3", "100000"]), "1");
    let a_addr = format!("127.0.0.1:{}", a.port);
    let b_addr = format!("127.0.0.1:{}", b.port);
    let bp = b.port.to_string();

    assert_eq!(
        b.cli(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &ida]),
        "OK"
    );
    assert_eq!(
        a.cli(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &idb]),
        "OK"
    );

    // The target: a plain RESTORE is redirected to the owner, RESTORE-ASKING is served.
    let mut ac = a.client();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("{k}1").query(&mut ac).unwrap();
    let mut bc = b.client();
    let plain = redis::cmd("RESTORE")
        .arg("{k}x")
        .arg(0)
        .arg(&payload)
        .query::<Value>(&mut bc)
        .unwrap_err();
    assert_eq!(error_text(plain), format!("MOVED {slot} {a_addr}"));
    let asking: Value = redis::cmd("RESTORE-ASKING")
        .arg("{k}x")
        .arg(0)
        .arg(&payload)
        .query(&mut bc)
        .unwrap();
    assert_eq!(asking, Value::Okay);
    // RESTORE-ASKING did not leave an ASKING flag behind.
    let after = redis::cmd("GET")
        .arg("{k}x")
        .query::<Value>(&mut bc)
        .unwrap_err();
    assert_eq!(error_text(after), format!("MOVED {slot} {a_addr}"));

    // Destination database must be 0 in cluster mode; missing keys answer NOKEY first, as
    // Redis does (the suite's MONITOR redaction test migrates a missing key to db 9).
    assert_eq!(
        a.cli(&["MIGRATE", "127.0.0.1", &bp, "{k}1", "1", "5000"]),
        "ERR destination-db must be 0 in cluster mode"
    );
    assert_eq!(
        a.cli(&["MIGRATE", "127.0.0.1", &bp, "{k}missing", "9", "5000"]),
        "NOKEY"
    );
    let keys = a.cli(&["CLUSTER", "GETKEYSINSLOT", &slot, "10"]);
    assert_eq!(keys.lines().count(), 3, "{keys}");
    assert_eq!(
        a.cli(&[
            "MIGRATE",
            "127.0.0.1",
            &bp,
            "",
            "0",
            "5000",
            "KEYS",
            "{k}1",
            "{k}2"
        ]),
        "OK"
    );
    // The source: moved keys are asked for at the target, a split request is retried,
    // a key still here is served, and MIGRATE of a moved key runs here (NOKEY, not ASK).
    assert_eq!(a.cli(&["GET", "{k}1"]), format!("ASK {slot} {b_addr}"));
    assert_eq!(
        a.cli(&["MGET", "{k}1", "{k}3"]),
        "TRYAGAIN Multiple keys request during rehashing of slot"
    );
    assert_eq!(a.cli(&["GET", "{k}3"]), "v3");
    assert_eq!(
        a.cli(&["MIGRATE", "127.0.0.1", &bp, "{k}1", "0", "5000"]),
        "NOKEY"
    );
    // The target serves the moved keys after ASKING only; redis-cli -c follows the ASK.
    assert_eq!(b.cli(&["GET", "{k}1"]), format!("MOVED {slot} {a_addr}"));
    let (_, v): (Value, String) = redis::pipe()
        .cmd("ASKING")
        .cmd("GET")
        .arg("{k}2")
        .query(&mut bc)
        .unwrap();
    assert_eq!(v, "v2");
    assert_eq!(a.cli(&["-c", "GET", "{k}1"]), "v1");

    // The last key keeps its TTL on the way.
    assert_eq!(
        a.cli(&["MIGRATE", "127.0.0.1", &bp, "{k}3", "0", "5000"]),
        "OK"
    );
    let (_, ttl): (Value, i64) = redis::pipe()
        .cmd("ASKING")
        .cmd("PTTL")
        .arg("{k}3")
        .query(&mut bc)
        .unwrap();
    assert!((90_000..=100_000).contains(&ttl), "{ttl}");
    assert_eq!(a.cli(&["CLUSTER", "COUNTKEYSINSLOT", &slot]), "0");

    // Ownership changes hands: now MOVED from the source, served by the target.
    for node in [&b, &a] {
        assert_eq!(node.cli(&["CLUSTER", "SETSLOT", &slot, "NODE", &idb]), "OK");
    }
    assert_eq!(a.cli(&["GET", "{k}1"]), format!("MOVED {slot} {b_addr}"));
    assert_eq!(b.cli(&["GET", "{k}1"]), "v1");
    assert_eq!(b.cli(&["CLUSTER", "COUNTKEYSINSLOT", &slot]), "4");
}

/// `redis-cli --cluster reshard` moves slots with their keys from one node to the other, and
/// `--cluster check` agrees afterwards.
#[test]
fn redis_cli_cluster_reshard_moves_slots_and_keys() {
    let (a, b, ida, idb) = two_node_cluster();
    // Reshard takes the lowest slots first: keys below MOVED move, 20 more stay.
    const MOVED: u16 = 100;
    let slot_of = |k: &String| proto::slot::key_slot(k.as_bytes());
    let mut keys: Vec<String> = (0..20_000)
        .map(|i| format!("key:{i}"))
        .filter(|k| slot_of(k) < MOVED)
        .take(60)
        .collect();
    keys.extend(
        (0..20)
            .map(|i| format!("stay:{i}"))
            .filter(|k| slot_of(k) >= MOVED),
    );
    for k in &keys {
        assert_eq!(a.cli(&["SET", k, k]), "OK");
    }
    let out = std::process::Command::new("redis-cli")
        .args(["--cluster", "reshard", &format!("127.0.0.1:{}", a.port)])
        .args(["--cluster-from", &ida, "--cluster-to", &idb])
        .args(["--cluster-slots", &MOVED.to_string(), "--cluster-yes"])
        .output()
        .expect("redis-cli");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nodes = b.cli(&["CLUSTER", "NODES"]);
    let mine = nodes
        .lines()
        .find(|l| l.contains("myself"))
        .unwrap_or_default()
        .to_string();
    assert!(mine.ends_with(&format!(" 0-{}", MOVED - 1)), "{nodes}");
    // Every key is where its slot now is, and all of them are still there.
    let (mut on_a, mut on_b) = (0, 0);
    for k in &keys {
        let slot = slot_of(k);
        let holder = if slot < MOVED { &b } else { &a };
        assert_eq!(holder.cli(&["GET", k]), *k, "{k} in slot {slot}");
        if slot < MOVED {
            on_b += 1;
        } else {
            on_a += 1;
        }
    }
    assert_eq!((on_b, on_a), (60, 20));
    assert_eq!(b.cli(&["DBSIZE"]), on_b.to_string());
    assert_eq!(a.cli(&["DBSIZE"]), on_a.to_string());
    let check = a.cli(&["--cluster", "check", &format!("127.0.0.1:{}", a.port)]);
    assert!(check.contains("[OK] All 16384 slots covered."), "{check}");
}

/// MIGRATE's passwords never reach SLOWLOG (Redis shows them as `(redacted)` too).
#[test]
fn migrate_passwords_are_redacted_in_the_slowlog() {
    let (source, target) = (Node::start(&[]), Node::start(&["--requirepass", "s3cret"]));
    let tp = target.port.to_string();
    assert_eq!(
        source.cli(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        "OK"
    );
    assert_eq!(source.cli(&["SET", "k", "v"]), "OK");
    assert_eq!(
        source.cli(&[
            "MIGRATE",
            "127.0.0.1",
            &tp,
            "k",
            "0",
            "5000",
            "AUTH2",
            "default",
            "s3cret"
        ]),
        "OK"
    );
    let log = source.cli(&["SLOWLOG", "GET", "2"]);
    assert!(
        log.contains("MIGRATE") && log.contains("(redacted)"),
        "{log}"
    );
    assert!(!log.contains("s3cret") && !log.contains("default"), "{log}");
}

/// A RESTORE payload is one argument, so `proto-max-bulk-len` caps it before anything is
/// decoded: over the limit the request is refused as a protocol error, as redis-server does.
#[test]
fn restore_payloads_are_capped_by_proto_max_bulk_len() {
    let node = Node::start(&[]);
    let redis = RedisServer::start(&[]);
    // Incompressible (redis-server compresses DUMP strings with LZF).
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let big: Vec<u8> = (0..1536 * 1024)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect();
    for (mut c, name) in [(node.client(), "node"), (redis.client(), "redis-server")] {
        let _: () = redis::cmd("SET")
            .arg("big")
            .arg(&big)
            .query(&mut c)
            .unwrap();
        let payload: Vec<u8> = redis::cmd("DUMP").arg("big").query(&mut c).unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("proto-max-bulk-len")
            .arg("1mb")
            .query(&mut c)
            .unwrap();
        let r = redis::cmd("RESTORE")
            .arg("copy")
            .arg(0)
            .arg(&payload)
            .query::<Value>(&mut c);
        let e = r.expect_err(name);
        // Both servers answer the protocol error and close while the client may still be
        // sending the rest of the payload: the client then sees the reset, not the reply.
        let refused = e.to_string().contains("invalid bulk length") || e.is_io_error();
        assert!(refused, "{name}: {e}");
    }
    assert_eq!(node.cli(&["EXISTS", "copy"]), "0");
    assert_eq!(node.cli(&["STRLEN", "big"]), big.len().to_string());
}

/// With several io-threads, a MIGRATE waiting on a silent target does not stall the node's
/// other clients (its worker hands them over before blocking); it still times out with
/// Redis's IOERR and keeps the key.
#[test]
fn a_slow_migrate_leaves_other_clients_served_with_io_threads() {
    let source = Node::start(&["--io-threads", "2"]);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    assert_eq!(source.cli(&["SET", "k", "v"]), "OK");
    let started = std::time::Instant::now();
    let migrate = std::thread::scope(|s| {
        let running = s.spawn(|| source.cli(&["MIGRATE", "127.0.0.1", &port, "k", "0", "3000"]));
        std::thread::sleep(std::time::Duration::from_millis(300));
        let pinged = std::time::Instant::now();
        assert_eq!(source.cli(&["PING"]), "PONG");
        assert!(
            pinged.elapsed() < std::time::Duration::from_millis(1500),
            "PING waited {:?}",
            pinged.elapsed()
        );
        running.join().unwrap()
    });
    assert_eq!(migrate, "IOERR error or timeout reading to target instance");
    assert!(started.elapsed() >= std::time::Duration::from_millis(2900));
    assert_eq!(source.cli(&["EXISTS", "k"]), "1");
    drop(silent);
}
