//! Generic key commands (DEL EXISTS TYPE TOUCH, expiry, SCAN, KEYS, RENAME, RANDOMKEY,
//! OBJECT) against a real node, through the `redis` crate and redis-cli.

use integration::{cmd, Node};
use redis::Value;
use std::collections::HashSet;
use std::time::{Duration, Instant};

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn err_text(r: redis::RedisResult<Value>) -> String {
    let e = r.expect_err("an error reply");
    // The crate splits "ERR text" into a kind and a detail; put them back together.
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => e.to_string(),
    }
}

fn int(c: &mut redis::Connection, args: &[&str]) -> i64 {
    match cmd(c, args).unwrap() {
        Value::Int(n) => n,
        other => panic!("{args:?}: expected an integer, got {other:?}"),
    }
}

#[test]
fn del_exists_type_touch() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["SET", "a", "1"]).unwrap();
    cmd(&mut c, &["SET", "b", "2"]).unwrap();
    cmd(&mut c, &["SET", "c", "3"]).unwrap();
    // EXISTS counts a key each time it is named; DEL deletes it once.
    assert_eq!(int(&mut c, &["EXISTS", "a", "a", "nokey", "b"]), 3);
    assert_eq!(int(&mut c, &["DEL", "a", "a", "nokey"]), 1);
    assert_eq!(int(&mut c, &["UNLINK", "b", "nokey"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "a", "b"]), 0);
    assert_eq!(int(&mut c, &["TOUCH", "c", "nokey", "c"]), 2);
    // TYPE answers a status reply, "none" for a missing key.
    assert_eq!(node.cli(&["--no-raw", "TYPE", "c"]), "string");
    assert_eq!(node.cli(&["--no-raw", "TYPE", "nokey"]), "none");
    assert_eq!(node.cli(&["--no-raw", "DEL", "c"]), "(integer) 1");
    assert_eq!(
        node.cli(&["DEL"]),
        "ERR wrong number of arguments for 'del' command"
    );
}

#[test]
fn expire_family_with_options() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["SET", "k", "v"]).unwrap();
    assert_eq!(
        err_text(cmd(&mut c, &["EXPIRE", "k", "100", "NX", "XX"])),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(
        err_text(cmd(&mut c, &["EXPIRE", "k", "100", "GT", "LT"])),
        "ERR GT and LT options at the same time are not compatible"
    );
    assert_eq!(
        err_text(cmd(&mut c, &["EXPIRE", "k", "100", "foo"])),
        "ERR Unsupported option foo"
    );
    assert_eq!(
        err_text(cmd(&mut c, &["EXPIRE", "k", "abc"])),
        "ERR value is not an integer or out of range"
    );
    for (command, amount) in [
        ("EXPIRE", "9223372036854775807"),
        ("PEXPIRE", "9223372036854775807"),
        ("EXPIREAT", "9223372036854775807"),
    ] {
        assert_eq!(
            err_text(cmd(&mut c, &[command, "k", amount])),
            format!(
                "ERR invalid expire time in '{}' command",
                command.to_lowercase()
            )
        );
    }
    // No TTL yet: GT fails (no TTL counts as forever), LT passes, XX fails, NX passes.
    assert_eq!(int(&mut c, &["EXPIRE", "k", "100", "GT"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "100", "XX"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "100", "LT"]), 1);
    assert_eq!(int(&mut c, &["TTL", "k"]), 100);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "50", "GT"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "200", "GT"]), 1);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "300", "NX"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "300", "XX"]), 1);
    let pttl = int(&mut c, &["PTTL", "k"]);
    assert!((299_000..=300_000).contains(&pttl), "{pttl}");
    let at = int(&mut c, &["PEXPIRETIME", "k"]);
    assert_eq!(int(&mut c, &["EXPIRETIME", "k"]), at / 1000);
    assert_eq!(
        int(&mut c, &["PEXPIREAT", "k", &(at + 5000).to_string()]),
        1
    );
    assert_eq!(int(&mut c, &["PEXPIRETIME", "k"]), at + 5000);
    assert_eq!(int(&mut c, &["PERSIST", "k"]), 1);
    assert_eq!(int(&mut c, &["PERSIST", "k"]), 0);
    assert_eq!(node.cli(&["--no-raw", "TTL", "k"]), "(integer) -1");
    assert_eq!(node.cli(&["--no-raw", "EXPIRETIME", "k"]), "(integer) -1");
    assert_eq!(node.cli(&["--no-raw", "PTTL", "nokey"]), "(integer) -2");
    assert_eq!(
        node.cli(&["--no-raw", "EXPIRETIME", "nokey"]),
        "(integer) -2"
    );
    assert_eq!(int(&mut c, &["EXPIRE", "nokey", "10"]), 0);
    // A time in the past deletes the key and still answers 1.
    assert_eq!(int(&mut c, &["EXPIRE", "k", "-1"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 0);
    cmd(&mut c, &["SET", "k", "v"]).unwrap();
    assert_eq!(int(&mut c, &["EXPIREAT", "k", "1"]), 1);
    assert_eq!(cmd(&mut c, &["GET", "k"]).unwrap(), Value::Nil);
    // Overwriting with SET clears the TTL.
    cmd(&mut c, &["SET", "k", "v", "EX", "100"]).unwrap();
    cmd(&mut c, &["SET", "k", "w"]).unwrap();
    assert_eq!(int(&mut c, &["TTL", "k"]), -1);
}

#[test]
fn a_key_with_a_short_ttl_goes_away() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["SET", "short", "v"]).unwrap();
    cmd(&mut c, &["SET", "unread", "v"]).unwrap();
    assert_eq!(int(&mut c, &["PEXPIRE", "short", "50"]), 1);
    assert_eq!(int(&mut c, &["PEXPIRE", "unread", "50"]), 1);
    // Lazy expiry on access, and active expiry for the key nobody reads (DBSIZE counts
    // keys not yet removed, so it falls to 0 only once the cron deleted "unread").
    let deadline = Instant::now() + Duration::from_secs(10);
    while cmd(&mut c, &["GET", "short"]).unwrap() != Value::Nil || int(&mut c, &["DBSIZE"]) != 0 {
        assert!(Instant::now() < deadline, "keys did not expire");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(int(&mut c, &["TTL", "short"]), -2);
    let info = node.cli(&["INFO", "stats"]);
    assert!(info.lines().any(|l| l.trim() == "expired_keys:2"), "{info}");
}

/// Runs a full SCAN, deleting `to_delete` after the first call and adding new keys, and
/// returns every key it saw.
fn scan_all(
    c: &mut redis::Connection,
    extra: &[&str],
    mut between: impl FnMut(&mut redis::Connection, usize),
) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    // 16384 slot tables at most, each ending a call at worst once, plus the keys / COUNT.
    for call in 0..20_000 {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(extra);
        let (next, keys): (String, Vec<String>) = {
            let mut q = redis::cmd(args[0]);
            for a in &args[1..] {
                q.arg(*a);
            }
            q.query(c).unwrap()
        };
        seen.extend(keys);
        if next == "0" {
            return seen;
        }
        cursor = next;
        between(c, call);
    }
    panic!("SCAN did not finish");
}

#[test]
fn scan_returns_every_key_that_stays_despite_deletions() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("SET").arg(format!("key:{i}")).arg(i).ignore();
    }
    pipe.query::<()>(&mut c).unwrap();
    // Delete every third key and add new ones while the scan runs.
    let seen = scan_all(&mut c, &["COUNT", "37"], |c, call| {
        if call == 2 {
            for i in (0..1000).step_by(3) {
                cmd(c, &["DEL", &format!("key:{i}")]).unwrap();
            }
            for i in 0..50 {
                cmd(c, &["SET", &format!("new:{i}"), "x"]).unwrap();
            }
        }
    });
    for i in (0..1000).filter(|i| i % 3 != 0) {
        assert!(seen.contains(&format!("key:{i}")), "key:{i} never returned");
    }
    assert!(seen
        .iter()
        .all(|k| k.starts_with("key:") || k.starts_with("new:")));

    // MATCH and TYPE filter; COUNT only bounds the work of one call.
    let matched = scan_all(&mut c, &["MATCH", "key:1?", "COUNT", "1000"], |_, _| {});
    let expected: HashSet<String> = (10..20)
        .filter(|i| i % 3 != 0)
        .map(|i| format!("key:{i}"))
        .collect();
    assert_eq!(matched, expected);
    let strings = scan_all(&mut c, &["TYPE", "string", "COUNT", "500"], |_, _| {});
    assert_eq!(strings.len(), int(&mut c, &["DBSIZE"]) as usize);
    assert!(scan_all(&mut c, &["TYPE", "hash"], |_, _| {}).is_empty());

    // One call with a small COUNT returns a few keys and a cursor to go on from.
    let (cursor, keys): (String, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("COUNT")
        .arg(5)
        .query(&mut c)
        .unwrap();
    assert!(keys.len() <= 5 && cursor != "0", "{cursor} {keys:?}");

    // The redis crate's iterator and redis-cli --scan walk the same cursor.
    let via_crate: HashSet<String> = redis::cmd("SCAN")
        .cursor_arg(0)
        .arg("MATCH")
        .arg("new:*")
        .clone()
        .iter::<String>(&mut c)
        .unwrap()
        .collect();
    assert_eq!(via_crate.len(), 50);
    let via_cli: HashSet<String> = node
        .cli(&["--scan", "--pattern", "new:*"])
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(via_cli, via_crate);

    for (args, text) in [
        (vec!["SCAN", "abc"], "ERR invalid cursor"),
        (vec!["SCAN", "18446744073709551616"], "ERR invalid cursor"),
        (vec!["SCAN", "0", "COUNT", "0"], "ERR syntax error"),
        (
            vec!["SCAN", "0", "COUNT", "x"],
            "ERR value is not an integer or out of range",
        ),
        (vec!["SCAN", "0", "MATCH"], "ERR syntax error"),
        (vec!["SCAN", "0", "FOO", "bar"], "ERR syntax error"),
    ] {
        assert_eq!(err_text(cmd(&mut c, &args)), text, "{args:?}");
    }
}

#[test]
fn keys_and_randomkey() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["RANDOMKEY"]).unwrap(), Value::Nil);
    assert_eq!(node.cli(&["--no-raw", "KEYS", "*"]), "(empty array)");
    for k in ["user:1", "user:2", "order:1"] {
        cmd(&mut c, &["SET", k, "v"]).unwrap();
    }
    let mut users: Vec<String> = redis::cmd("KEYS").arg("user:*").query(&mut c).unwrap();
    users.sort();
    assert_eq!(users, ["user:1", "user:2"]);
    let any: String = redis::cmd("RANDOMKEY").query(&mut c).unwrap();
    assert!(["user:1", "user:2", "order:1"].contains(&any.as_str()));
    cmd(&mut c, &["FLUSHALL"]).unwrap();
    // Only expired keys: RANDOMKEY answers nil (and does not spin).
    let mut pipe = redis::pipe();
    for i in 0..300 {
        pipe.cmd("SET")
            .arg(format!("gone:{i}"))
            .arg("v")
            .arg("PX")
            .arg(1)
            .ignore();
    }
    pipe.query::<()>(&mut c).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(cmd(&mut c, &["RANDOMKEY"]).unwrap(), Value::Nil);
    assert_eq!(cmd(&mut c, &["KEYS", "*"]).unwrap(), Value::Array(vec![]));
}

#[test]
fn rename_moves_value_and_ttl() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["SET", "src", "v", "EX", "100"]).unwrap();
    cmd(&mut c, &["SET", "dst", "old"]).unwrap();
    assert_eq!(cmd(&mut c, &["RENAME", "src", "dst"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["GET", "dst"]).unwrap(), bulk("v"));
    assert_eq!(cmd(&mut c, &["GET", "src"]).unwrap(), Value::Nil);
    let ttl = int(&mut c, &["TTL", "dst"]);
    assert!((99..=100).contains(&ttl), "{ttl}");
    assert_eq!(
        err_text(cmd(&mut c, &["RENAME", "src", "x"])),
        "ERR no such key"
    );
    assert_eq!(
        err_text(cmd(&mut c, &["RENAMENX", "src", "x"])),
        "ERR no such key"
    );
    // Renaming a key to itself.
    assert_eq!(cmd(&mut c, &["RENAME", "dst", "dst"]).unwrap(), Value::Okay);
    assert_eq!(int(&mut c, &["RENAMENX", "dst", "dst"]), 0);
    cmd(&mut c, &["SET", "other", "o"]).unwrap();
    assert_eq!(int(&mut c, &["RENAMENX", "dst", "other"]), 0);
    assert_eq!(int(&mut c, &["RENAMENX", "dst", "fresh"]), 1);
    assert_eq!(cmd(&mut c, &["GET", "fresh"]).unwrap(), bulk("v"));
    assert_eq!(int(&mut c, &["EXISTS", "dst"]), 0);
}

/// Under an LFU policy OBJECT FREQ shows the keys' access counters (which RESTORE FREQ sets),
/// and OBJECT IDLETIME is refused, as in Redis.
#[test]
fn lfu_policies_count_accesses() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(
        err_text(cmd(&mut c, &["CONFIG", "SET", "maxmemory-policy", "lfu"])),
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"
    );
    cmd(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
    )
    .unwrap();
    // Factor 0: every access counts (the counter's growth is otherwise random).
    cmd(&mut c, &["CONFIG", "SET", "lfu-log-factor", "0"]).unwrap();
    cmd(&mut c, &["SET", "k", "v"]).unwrap();
    assert_eq!(int(&mut c, &["OBJECT", "FREQ", "k"]), 5);
    for _ in 0..10 {
        cmd(&mut c, &["GET", "k"]).unwrap();
    }
    assert_eq!(int(&mut c, &["OBJECT", "FREQ", "k"]), 15);
    assert_eq!(
        err_text(cmd(&mut c, &["OBJECT", "IDLETIME", "k"])),
        "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
    );
    let Value::BulkString(dump) = cmd(&mut c, &["DUMP", "k"]).unwrap() else {
        panic!("DUMP gives a bulk string");
    };
    let restored: Value = redis::cmd("RESTORE")
        .arg("r")
        .arg(0)
        .arg(dump)
        .arg("FREQ")
        .arg(100)
        .query(&mut c)
        .unwrap();
    assert_eq!(restored, Value::Okay);
    assert_eq!(int(&mut c, &["OBJECT", "FREQ", "r"]), 100);
    assert_eq!(
        cmd(&mut c, &["CONFIG", "GET", "lfu-decay-time"]).unwrap(),
        Value::Array(vec![bulk("lfu-decay-time"), bulk("1")])
    );
}

#[test]
fn object_subcommands() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["SET", "n", "12"]).unwrap();
    cmd(&mut c, &["SET", "s", "short"]).unwrap();
    cmd(&mut c, &["SET", "long", &"x".repeat(100)]).unwrap();
    assert_eq!(
        cmd(&mut c, &["OBJECT", "ENCODING", "n"]).unwrap(),
        bulk("int")
    );
    assert_eq!(
        cmd(&mut c, &["OBJECT", "ENCODING", "s"]).unwrap(),
        bulk("embstr")
    );
    assert_eq!(
        cmd(&mut c, &["OBJECT", "ENCODING", "long"]).unwrap(),
        bulk("raw")
    );
    assert_eq!(
        cmd(&mut c, &["OBJECT", "ENCODING", "nokey"]).unwrap(),
        Value::Nil
    );
    assert_eq!(int(&mut c, &["OBJECT", "IDLETIME", "s"]), 0);
    assert_eq!(int(&mut c, &["OBJECT", "REFCOUNT", "s"]), 1);
    assert_eq!(
        err_text(cmd(&mut c, &["OBJECT", "FREQ", "s"])),
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
    );
    assert_eq!(
        err_text(cmd(&mut c, &["OBJECT", "FOO", "s"])),
        "ERR unknown subcommand 'FOO'. Try OBJECT HELP."
    );
    assert_eq!(
        err_text(cmd(&mut c, &["OBJECT", "ENCODING"])),
        "ERR wrong number of arguments for 'object|encoding' command"
    );
    assert_eq!(
        err_text(cmd(&mut c, &["OBJECT"])),
        "ERR wrong number of arguments for 'object' command"
    );
    let help = node.cli(&["--no-raw", "OBJECT", "HELP"]);
    assert!(
        help.starts_with(
            " 1) OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\n 2) ENCODING <key>"
        ),
        "{help}"
    );
}
