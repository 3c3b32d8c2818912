//! Persistence against real node processes: SAVE/BGSAVE/save rules/shutdown write a snapshot
//! that a restarted node (`Node::start_in` over the same directory) loads; DUMP/RESTORE move
//! values between nodes; a corrupt snapshot stops a node from starting.
//!
//! Aggregates are created with RESTORE from payloads built here by an encoder written from
//! the format's documentation (node/src/server/persistence/format.rs), independent of the node's
//! own: that pins the wire layout from outside, and needs no other command family.

use integration::{cmd, Node};
use redis::Value;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Generous bound for anything asynchronous (a background save, a rule firing).
const PATIENCE: Duration = Duration::from_secs(60);

/// DUMP payloads, encoded independently of the node.
mod payload {
    /// The node's own payload format (still RESTOREd: slot copies between nodes use it).
    const VERSION: u16 = 1;

    /// CRC-64/XZ, bit by bit (reflected polynomial 0xC96C5795D7870F42, init and xorout !0).
    fn crc64(bytes: &[u8]) -> u64 {
        let mut crc = !0u64;
        for &b in bytes {
            crc ^= u64::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xC96C_5795_D787_0F42
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn bytes(out: &mut Vec<u8>, b: &[u8]) {
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }

    fn seal(mut body: Vec<u8>) -> Vec<u8> {
        body.extend_from_slice(&VERSION.to_le_bytes());
        let crc = crc64(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }

    pub fn string(s: &str) -> Vec<u8> {
        let mut out = vec![0];
        bytes(&mut out, s.as_bytes());
        seal(out)
    }

    fn elements(tag: u8, items: &[&str]) -> Vec<u8> {
        let mut out = vec![tag];
        varint(&mut out, items.len() as u64);
        for i in items {
            bytes(&mut out, i.as_bytes());
        }
        seal(out)
    }

    pub fn list(items: &[&str]) -> Vec<u8> {
        elements(2, items)
    }

    /// Field, value, field, value...
    pub fn hash(flat: &[&str]) -> Vec<u8> {
        let mut out = vec![3];
        varint(&mut out, (flat.len() / 2) as u64);
        for i in flat {
            bytes(&mut out, i.as_bytes());
        }
        seal(out)
    }

    pub fn set(items: &[&str]) -> Vec<u8> {
        elements(4, items)
    }

    /// Pairs in (score, member) order, as the node keeps them.
    pub fn zset(pairs: &[(&str, f64)]) -> Vec<u8> {
        let mut out = vec![5];
        varint(&mut out, pairs.len() as u64);
        for (m, s) in pairs {
            bytes(&mut out, m.as_bytes());
            out.extend_from_slice(&s.to_le_bytes());
        }
        seal(out)
    }

    /// A payload whose checksum is right but whose content is not a value (unknown tag).
    pub fn bad_data() -> Vec<u8> {
        seal(vec![9, 1, 2, 3])
    }

    /// Redis 7.0's DUMP format, which DUMP emits: an RDB object, RDB version 10, CRC-64/Jones.
    /// Only what short test values need: lengths under 64 (one byte, `00xxxxxx`).
    pub mod redis {
        const RDB_VERSION: u16 = 10;

        /// CRC-64/Jones as Redis computes it (reflected polynomial 0x95AC9329AC4BC9B5,
        /// init and xorout 0), bit by bit.
        fn crc64(bytes: &[u8]) -> u64 {
            let mut crc = 0u64;
            for &b in bytes {
                crc ^= u64::from(b);
                for _ in 0..8 {
                    crc = if crc & 1 == 1 {
                        (crc >> 1) ^ 0x95AC_9329_AC4B_C9B5
                    } else {
                        crc >> 1
                    };
                }
            }
            crc
        }

        fn len(out: &mut Vec<u8>, n: usize) {
            assert!(n < 64, "test values are short");
            out.push(n as u8);
        }

        fn string_bytes(out: &mut Vec<u8>, s: &str) {
            len(out, s.len());
            out.extend_from_slice(s.as_bytes());
        }

        fn seal(mut body: Vec<u8>) -> Vec<u8> {
            body.extend_from_slice(&RDB_VERSION.to_le_bytes());
            let crc = crc64(&body);
            body.extend_from_slice(&crc.to_le_bytes());
            body
        }

        /// RDB_TYPE_STRING, raw (not an integer, not compressed).
        pub fn string(s: &str) -> Vec<u8> {
            let mut out = vec![0];
            string_bytes(&mut out, s);
            seal(out)
        }

        /// RDB_TYPE_LIST: the count, then each element.
        pub fn list(items: &[&str]) -> Vec<u8> {
            let mut out = vec![1];
            len(&mut out, items.len());
            for i in items {
                string_bytes(&mut out, i);
            }
            seal(out)
        }

        /// RDB_TYPE_ZSET_2: the count, then member and binary double, highest score first.
        pub fn zset(highest_first: &[(&str, f64)]) -> Vec<u8> {
            let mut out = vec![5];
            len(&mut out, highest_first.len());
            for (m, s) in highest_first {
                string_bytes(&mut out, m);
                out.extend_from_slice(&s.to_le_bytes());
            }
            seal(out)
        }
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn restore(c: &mut redis::Connection, key: &str, ttl_ms: u64, payload: &[u8]) -> Value {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(ttl_ms)
        .arg(payload)
        .query(c)
        .unwrap()
}

fn dump(c: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("DUMP").arg(key).query(c).unwrap()
}

fn lastsave(c: &mut redis::Connection) -> i64 {
    redis::cmd("LASTSAVE").query(c).unwrap()
}

/// "CODE detail" of an error reply.
fn error_text(e: redis::RedisError) -> String {
    format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))
}

/// Waits until LASTSAVE moves past `before`.
fn wait_for_save(c: &mut redis::Connection, before: i64) -> i64 {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let now = lastsave(c);
        if now > before {
            return now;
        }
        assert!(Instant::now() < deadline, "LASTSAVE stayed at {before}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the wall clock is in a later second than `t`, so that a save completing
/// afterwards shows in LASTSAVE (which counts whole seconds).
fn wait_past_second(t: i64) {
    while (unix_ms() / 1000) as i64 <= t {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Keys of every type, with and without TTL, plus keys that expire in ~1.5 s.
struct Fixture {
    dumps: Vec<(&'static str, Vec<u8>)>,
    short_lived: [&'static str; 2],
    short_deadline_ms: u64,
}

fn fill(c: &mut redis::Connection) -> Fixture {
    const HOUR_MS: u64 = 3_600_000;
    assert_eq!(cmd(c, &["SET", "str", "hello"]).unwrap(), Value::Okay);
    assert_eq!(cmd(c, &["SET", "int", "-42"]).unwrap(), Value::Okay);
    assert_eq!(
        cmd(c, &["SET", "str:ttl", "v", "PX", "3600000"]).unwrap(),
        Value::Okay
    );
    assert_eq!(
        restore(c, "list", 0, &payload::list(&["a", "", "c"])),
        Value::Okay
    );
    assert_eq!(
        restore(c, "hash", HOUR_MS, &payload::hash(&["f", "v", "g", "w"])),
        Value::Okay
    );
    assert_eq!(
        restore(c, "set", 0, &payload::set(&["x", "y"])),
        Value::Okay
    );
    assert_eq!(
        restore(
            c,
            "zset",
            HOUR_MS,
            &payload::zset(&[("m", f64::NEG_INFINITY), ("n", 2.5)])
        ),
        Value::Okay
    );
    let short_deadline_ms = unix_ms() + 1_500;
    assert_eq!(
        cmd(c, &["SET", "str:short", "v", "PX", "1500"]).unwrap(),
        Value::Okay
    );
    assert_eq!(
        restore(c, "list:short", 1_500, &payload::list(&["z"])),
        Value::Okay
    );
    let dumps = ["str", "int", "str:ttl", "list", "hash", "set", "zset"]
        .into_iter()
        .map(|k| (k, dump(c, k).unwrap_or_else(|| panic!("{k} missing"))))
        .collect();
    Fixture {
        dumps,
        short_lived: ["str:short", "list:short"],
        short_deadline_ms,
    }
}

/// Everything in `f` is on the node behind `c`, and the short-lived keys go at their time.
fn check(c: &mut redis::Connection, f: &Fixture) {
    for (k, d) in &f.dumps {
        assert_eq!(dump(c, k).as_ref(), Some(d), "{k} after restart");
    }
    assert_eq!(
        cmd(c, &["GET", "str"]).unwrap(),
        Value::BulkString(b"hello".to_vec())
    );
    assert_eq!(
        cmd(c, &["GET", "int"]).unwrap(),
        Value::BulkString(b"-42".to_vec())
    );
    // Had the TTLs been lost, these would outlive their deadline.
    let wait = f.short_deadline_ms.saturating_sub(unix_ms()) + 100;
    std::thread::sleep(Duration::from_millis(wait));
    for k in f.short_lived {
        assert_eq!(dump(c, k), None, "{k} outlived its TTL");
    }
}

#[test]
fn save_then_restart_keeps_every_type_and_ttl() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let f = fill(&mut c);
    assert_eq!(cmd(&mut c, &["SAVE"]).unwrap(), Value::Okay);
    assert!(node.log().contains("DB saved on disk"), "{}", node.log());
    let node = Node::start_in(node.into_dir(), &[]);
    assert!(node.log().contains("DB loaded from disk"), "{}", node.log());
    check(&mut node.client(), &f);
}

#[test]
fn bgsave_does_not_stall_writers_and_its_file_loads() {
    // Goal: a background save over a sizeable keyspace leaves clients served; method: time
    // every write of a concurrent writer while the save runs, then restart over the file.
    const KEYS: usize = 100_000;
    const BATCH: usize = 1_000;
    let node = Node::start(&[]);
    let mut c = node.client();
    let value = "v".repeat(100);
    for b in 0..KEYS / BATCH {
        let mut mset = redis::cmd("MSET");
        for i in b * BATCH..(b + 1) * BATCH {
            mset.arg(format!("key:{i}")).arg(&value);
        }
        let _: () = mset.query(&mut c).unwrap();
    }
    let before = lastsave(&mut c);
    wait_past_second(before);

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let mut w = node.client();
        std::thread::spawn(move || {
            let (mut n, mut worst) = (0u64, Duration::ZERO);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                let _: () = redis::cmd("SET")
                    .arg(format!("w:{}", n % 1000))
                    .arg(n)
                    .query(&mut w)
                    .unwrap();
                worst = worst.max(t.elapsed());
                n += 1;
            }
            (n, worst)
        })
    };
    assert_eq!(
        cmd(&mut c, &["BGSAVE"]).unwrap(),
        Value::SimpleString("Background saving started".into())
    );
    let after = wait_for_save(&mut c, before);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (writes, worst) = writer.join().unwrap();
    assert!(writes > 0);
    assert!(
        worst < Duration::from_secs(2),
        "a write waited {worst:?} during BGSAVE"
    );
    assert!(after >= before);

    let node = Node::start_in(node.into_dir(), &[]);
    let mut c = node.client();
    for i in (0..KEYS).step_by(997) {
        assert_eq!(
            cmd(&mut c, &["GET", &format!("key:{i}")]).unwrap(),
            Value::BulkString(value.clone().into_bytes()),
            "key:{i}"
        );
    }
}

#[test]
fn save_rules_trigger_a_background_save() {
    let node = Node::start(&["--save", "1 1"]);
    let mut c = node.client();
    let before = lastsave(&mut c);
    assert_eq!(cmd(&mut c, &["SET", "k", "v"]).unwrap(), Value::Okay);
    let saved = wait_for_save(&mut c, before);
    let log = node.log();
    assert!(log.contains("1 changes in 1 seconds. Saving..."), "{log}");
    // INFO persistence tells the same story as LASTSAVE and the log.
    let info: redis::InfoDict = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
    let field = |name: &str| info.get::<String>(name).unwrap_or_else(|| panic!("{name}"));
    assert_eq!(field("rdb_last_save_time"), saved.to_string());
    assert_eq!(field("rdb_saves"), "1");
    assert_eq!(field("rdb_last_bgsave_status"), "ok");
    assert_eq!(field("rdb_bgsave_in_progress"), "0");
    assert!(field("rdb_last_bgsave_time_sec").parse::<u64>().is_ok());
    assert_eq!(field("rdb_changes_since_last_save"), "0");
    let node = Node::start_in(node.into_dir(), &[]);
    let mut c = node.client();
    assert_eq!(
        cmd(&mut c, &["GET", "k"]).unwrap(),
        Value::BulkString(b"v".to_vec())
    );
    let info: redis::InfoDict = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
    assert_eq!(info.get::<u64>("rdb_last_load_keys_loaded"), Some(1));
    assert_eq!(info.get::<u64>("rdb_saves"), Some(0));
}

#[test]
fn sigterm_saves_only_when_save_rules_are_set() {
    let mut node = Node::start(&["--save", "3600 1"]);
    let mut c = node.client();
    let f = fill(&mut c);
    assert!(node.signal_and_wait("TERM").success());
    let node = Node::start_in(node.into_dir(), &[]);
    check(&mut node.client(), &f);

    let mut node = Node::start(&[]);
    assert_eq!(
        cmd(&mut node.client(), &["SET", "k", "v"]).unwrap(),
        Value::Okay
    );
    assert!(node.signal_and_wait("TERM").success());
    assert!(!node.dir.path().join("dump.snap").exists());
}

#[test]
fn shutdown_save_then_restart() {
    let mut node = Node::start(&[]);
    let mut c = node.client();
    let f = fill(&mut c);
    let _ = cmd(&mut c, &["SHUTDOWN", "SAVE"]);
    assert!(node.wait_exit().success());
    let node = Node::start_in(node.into_dir(), &[]);
    check(&mut node.client(), &f);
}

/// Goal: a SHUTDOWN whose final save fails answers Redis's error and the node stays up and
/// keeps taking writes (the wait's pause is lifted); SHUTDOWN SAVE FORCE then stops it anyway.
/// Method: a directory where the snapshot file goes makes the save's rename fail.
#[test]
fn a_failed_final_save_keeps_the_node_up_unless_forced() {
    let mut node = Node::start(&[]);
    std::fs::create_dir(node.dir.path().join("dump.snap")).unwrap();
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["SET", "k", "v"]).unwrap(), Value::Okay);
    let refused = cmd(&mut c, &["SHUTDOWN", "SAVE"]).expect_err("the save fails");
    assert_eq!(
        (refused.code(), refused.detail()),
        (Some("ERR"), Some("Errors trying to SHUTDOWN. Check logs.")),
        "{refused}"
    );
    assert_eq!(cmd(&mut c, &["SET", "k", "w"]).unwrap(), Value::Okay);
    let _ = cmd(&mut c, &["SHUTDOWN", "SAVE", "FORCE"]);
    assert!(node.wait_exit().success(), "{}", node.log());
}

#[test]
fn dump_restore_between_two_nodes() {
    let a = Node::start(&[]);
    let b = Node::start(&[]);
    let (mut ca, mut cb) = (a.client(), b.client());
    let f = fill(&mut ca);
    // The node's payloads are byte for byte what the independent encoder of Redis's format
    // writes.
    assert_eq!(dump(&mut ca, "str"), Some(payload::redis::string("hello")));
    assert_eq!(
        dump(&mut ca, "list"),
        Some(payload::redis::list(&["a", "", "c"]))
    );
    assert_eq!(
        dump(&mut ca, "zset"),
        Some(payload::redis::zset(&[
            ("n", 2.5),
            ("m", f64::NEG_INFINITY)
        ]))
    );
    for (k, d) in &f.dumps {
        assert_eq!(restore(&mut cb, k, 0, d), Value::Okay, "{k}");
        assert_eq!(dump(&mut cb, k).as_ref(), Some(d), "{k}");
    }
    assert_eq!(
        cmd(&mut cb, &["GET", "int"]).unwrap(),
        Value::BulkString(b"-42".to_vec())
    );
    assert_eq!(dump(&mut ca, "nosuchkey"), None);

    // REPLACE overwrites; options are accepted.
    let other = payload::string("other");
    let replaced: Value = redis::cmd("RESTORE")
        .arg("str")
        .arg(0)
        .arg(&other)
        .arg("REPLACE")
        .arg("IDLETIME")
        .arg(10)
        .query(&mut cb)
        .unwrap();
    assert_eq!(replaced, Value::Okay);
    assert_eq!(
        cmd(&mut cb, &["GET", "str"]).unwrap(),
        Value::BulkString(b"other".to_vec())
    );
    let with_freq: Value = redis::cmd("RESTORE")
        .arg("fresh")
        .arg(0)
        .arg(&other)
        .arg("FREQ")
        .arg(100)
        .query(&mut cb)
        .unwrap();
    assert_eq!(with_freq, Value::Okay);

    // A TTL already in the past: nothing is created, and REPLACE deletes the old key.
    let past: Value = redis::cmd("RESTORE")
        .arg("gone")
        .arg(1000)
        .arg(&other)
        .arg("ABSTTL")
        .query(&mut cb)
        .unwrap();
    assert_eq!(past, Value::Okay);
    assert_eq!(dump(&mut cb, "gone"), None);
    let past: Value = redis::cmd("RESTORE")
        .arg("str")
        .arg(1000)
        .arg(&other)
        .arg("ABSTTL")
        .arg("REPLACE")
        .query(&mut cb)
        .unwrap();
    assert_eq!(past, Value::Okay);
    assert_eq!(cmd(&mut cb, &["GET", "str"]).unwrap(), Value::Nil);
    // An absolute TTL in the future holds.
    let at = unix_ms() + 3_600_000;
    let future: Value = redis::cmd("RESTORE")
        .arg("later")
        .arg(at)
        .arg(&other)
        .arg("ABSTTL")
        .query(&mut cb)
        .unwrap();
    assert_eq!(future, Value::Okay);
    assert_eq!(
        cmd(&mut cb, &["GET", "later"]).unwrap(),
        Value::BulkString(b"other".to_vec())
    );
}

#[test]
fn restore_and_save_errors() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let good = payload::string("v");
    let run = |c: &mut redis::Connection, args: &[&[u8]]| -> String {
        let mut r = redis::cmd(std::str::from_utf8(args[0]).unwrap());
        for a in &args[1..] {
            r.arg(*a);
        }
        match r.query::<Value>(c) {
            Ok(v) => format!("{v:?}"),
            Err(e) => error_text(e),
        }
    };
    assert_eq!(
        run(&mut c, &[b"RESTORE", b"k", b"0", &good]),
        format!("{:?}", Value::Okay)
    );
    assert_eq!(
        run(&mut c, &[b"RESTORE", b"k", b"0", &good]),
        "BUSYKEY Target key name already exists."
    );
    // Options are checked before the key, the TTL before the payload, as Redis does.
    assert_eq!(
        run(&mut c, &[b"RESTORE", b"k", b"0", b"x", b"IDLETIME", b"-1"]),
        "ERR Invalid IDLETIME value, must be >= 0"
    );
    assert_eq!(
        run(&mut c, &[b"RESTORE", b"k", b"0", b"x", b"FREQ", b"256"]),
        "ERR Invalid FREQ value, must be >= 0 and <= 255"
    );
    assert_eq!(
        run(
            &mut c,
            &[
                b"RESTORE",
                b"k",
                b"0",
                b"x",
                b"FREQ",
                b"1",
                b"IDLETIME",
                b"1"
            ]
        ),
        "ERR syntax error"
    );
    assert_eq!(
        run(&mut c, &[b"RESTORE", b"k", b"0", b"x", b"BOGUS"]),
        "ERR syntax error"
    );
    assert_eq!(
        run(&mut c, &[b"RESTORE", b"k2", b"-1", &good]),
        "ERR Invalid TTL value, must be >= 0"
    );
    assert_eq!(
        run(&mut c, &[b"RESTORE", b"k2", b"abc", &good]),
        "ERR value is not an integer or out of range"
    );
    let mut flipped = good.clone();
    flipped[1] ^= 0x20;
    let bad_payloads: [&[u8]; 4] = [&flipped, b"", b"short", &good[..good.len() - 1]];
    for bad in bad_payloads {
        assert_eq!(
            run(&mut c, &[b"RESTORE", b"k2", b"0", bad]),
            "ERR DUMP payload version or checksum are wrong"
        );
    }
    assert_eq!(
        run(&mut c, &[b"RESTORE", b"k2", b"0", &payload::bad_data()]),
        "ERR Bad data format"
    );
    assert_eq!(run(&mut c, &[b"DUMP", b"k2"]), format!("{:?}", Value::Nil));
    assert_eq!(
        run(&mut c, &[b"RESTORE", b"k2", b"0"]),
        "ERR wrong number of arguments for 'restore' command"
    );
    assert_eq!(run(&mut c, &[b"BGSAVE", b"bogus"]), "ERR syntax error");
    assert_eq!(
        run(&mut c, &[b"SAVE", b"extra"]),
        "ERR wrong number of arguments for 'save' command"
    );
    // SAVE refuses while a background save runs; BGSAVE SCHEDULE is accepted.
    assert_eq!(
        node.cli(&["BGSAVE", "SCHEDULE"]),
        "Background saving started"
    );
    let busy = node.cli(&["SAVE"]);
    assert!(
        busy == "OK" || busy == "ERR Background save already in progress",
        "{busy}"
    );
}

#[test]
fn bgsave_inside_multi_is_scheduled() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let before = lastsave(&mut c);
    wait_past_second(before);
    let mut pipe = redis::pipe();
    pipe.atomic().cmd("SET").arg("k").arg("v").cmd("BGSAVE");
    let replies: Vec<Value> = pipe.query(&mut c).unwrap();
    assert_eq!(
        replies[1],
        Value::SimpleString("Background saving scheduled".into())
    );
    wait_for_save(&mut c, before);
}

#[test]
fn corrupt_snapshot_stops_the_node_with_a_clear_message() {
    let node = Node::start(&[]);
    let mut c = node.client();
    fill(&mut c);
    assert_eq!(cmd(&mut c, &["SAVE"]).unwrap(), Value::Okay);
    let dir = node.into_dir();
    let path = dir.path().join("dump.snap");
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let (status, log) = Node::start_expecting_exit(dir.path(), &[]);
    assert!(!status.success());
    assert!(log.contains(&path.display().to_string()), "{log}");
    assert!(log.contains("is corrupt"), "{log}");

    bytes.truncate(middle);
    std::fs::write(&path, &bytes).unwrap();
    let (status, log) = Node::start_expecting_exit(dir.path(), &[]);
    assert!(!status.success());
    assert!(log.contains("truncated"), "{log}");
}
