//! Streams against real nodes (redis crate and redis-cli): the basic family with Redis 7.0's
//! replies and error texts, blocking XREAD and XREADGROUP woken by other clients (and by
//! DEL, XGROUP DESTROY, RENAME, MULTI/EXEC) or timing out, consumer groups with pending
//! entries, acks, claims and autoclaims, and a stream's whole state (entries, counters,
//! groups, PELs) through SAVE and restart, the AOF, DUMP/RESTORE and a replica; in cluster
//! mode CROSSSLOT and MOVED.

use integration::{cmd, free_port, Node};
use redis::{Connection, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn q(c: &mut Connection, args: &[&str]) -> Value {
    cmd(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn err(c: &mut Connection, args: &[&str]) -> String {
    match cmd(c, args) {
        Err(e) => {
            // The redis crate splits the code from the text; put them back together.
            let code = e.code().unwrap_or("").to_string();
            let text = e.detail().unwrap_or("").to_string();
            format!("{code} {text}").trim().to_string()
        }
        Ok(v) => panic!("{args:?} answered {v:?}, not an error"),
    }
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("not text: {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// An entry as `[id, [f, v, ...]]`.
fn entry(id: &str, fields: &[&str]) -> Value {
    Value::Array(vec![
        bulk(id),
        Value::Array(fields.iter().map(|f| bulk(f)).collect()),
    ])
}

/// Waits until the node reports `n` blocked clients.
fn wait_blocked(c: &mut Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = text(&q(c, &["INFO", "clients"]));
        if info.contains(&format!("blocked_clients:{n}\r")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never {n} blocked clients: {info}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Everything about `key` that must survive a restart or reach a replica, in one value:
/// entries, counters, groups (with read counters and lag), each consumer's pending count,
/// and the PEL with delivery counts (idle times and seen times are left out: they move).
fn state(c: &mut Connection, key: &str) -> Vec<Value> {
    let mut out = vec![q(c, &["XRANGE", key, "-", "+"])];
    let Value::Array(info) = q(c, &["XINFO", "STREAM", key]) else {
        panic!("XINFO STREAM")
    };
    // length .. recorded-first-entry-id, groups; not the radix tree sizes.
    for pair in info.chunks(2) {
        let name = text(&pair[0]);
        if !name.starts_with("radix") {
            out.push(pair[0].clone());
            out.push(pair[1].clone());
        }
    }
    let groups = q(c, &["XINFO", "GROUPS", key]);
    out.push(groups.clone());
    let Value::Array(groups) = groups else {
        panic!("XINFO GROUPS")
    };
    for g in groups {
        let Value::Array(fields) = g else { panic!() };
        let name = text(&fields[1]);
        let Value::Array(consumers) = q(c, &["XINFO", "CONSUMERS", key, &name]) else {
            panic!()
        };
        for consumer in consumers {
            let Value::Array(f) = consumer else { panic!() };
            out.push(Value::Array(f[..4].to_vec()));
        }
        let Value::Array(pel) = q(c, &["XPENDING", key, &name, "-", "+", "1000"]) else {
            panic!()
        };
        for p in pel {
            let Value::Array(f) = p else { panic!() };
            out.push(Value::Array(vec![f[0].clone(), f[1].clone(), f[3].clone()]));
        }
    }
    out
}

/// A stream with entries, deletions, a trim, two groups, consumers, pending entries, acks
/// and a claim: every part of a stream's state.
fn populate(c: &mut Connection, key: &str) {
    for i in 1..=30 {
        q(
            c,
            &[
                "XADD",
                key,
                &format!("{i}-1"),
                "f",
                &i.to_string(),
                "g",
                "x",
            ],
        );
    }
    q(c, &["XADD", key, "31-*", "other", "field"]);
    q(c, &["XDEL", key, "5-1", "1-1"]);
    q(c, &["XTRIM", key, "MINID", "3-0"]);
    q(c, &["XGROUP", "CREATE", key, "g1", "0"]);
    q(c, &["XGROUP", "CREATE", key, "g2", "$", "ENTRIESREAD", "3"]);
    q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "alice",
            "COUNT",
            "4",
            "STREAMS",
            key,
            ">",
        ],
    );
    q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "COUNT",
            "3",
            "STREAMS",
            key,
            ">",
        ],
    );
    q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "bob",
            "COUNT",
            "2",
            "NOACK",
            "STREAMS",
            key,
            ">",
        ],
    );
    q(c, &["XACK", key, "g1", "3-1"]);
    q(
        c,
        &["XCLAIM", key, "g1", "carol", "0", "4-1", "RETRYCOUNT", "5"],
    );
    q(c, &["XGROUP", "CREATECONSUMER", key, "g2", "idle"]);
    q(c, &["XADD", key, "MAXLEN", "~", "1", "*", "f", "v"]);
}

#[test]
fn the_basic_family_answers_as_redis() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(
        q(&mut c, &["XADD", "s", "1-1", "a", "1", "b", "2"]),
        bulk("1-1")
    );
    assert_eq!(q(&mut c, &["XADD", "s", "1-*", "a", "3"]), bulk("1-2"));
    assert_eq!(q(&mut c, &["XADD", "s", "5", "c", "4"]), bulk("5-0"));
    let auto = text(&q(&mut c, &["XADD", "s", "*", "d", "5"]));
    assert!(auto.ends_with("-0") && auto.len() > 10, "{auto}");
    assert_eq!(
        err(&mut c, &["XADD", "s", "5-0", "x", "y"]),
        "ERR The ID specified in XADD is equal or smaller than the target stream top item"
    );
    assert_eq!(
        err(&mut c, &["XADD", "t", "0-0", "x", "y"]),
        "ERR The ID specified in XADD must be greater than 0-0"
    );
    assert_eq!(
        err(&mut c, &["XADD", "s", "1-x", "x", "y"]),
        "ERR Invalid stream ID specified as stream command argument"
    );
    assert_eq!(
        err(&mut c, &["XADD", "s", "*", "x"]),
        "ERR wrong number of arguments for 'xadd' command"
    );
    assert_eq!(
        q(&mut c, &["XADD", "nope", "NOMKSTREAM", "*", "a", "b"]),
        Value::Nil
    );
    assert_eq!(q(&mut c, &["EXISTS", "nope"]), Value::Int(0));
    assert_eq!(q(&mut c, &["XLEN", "s"]), Value::Int(4));
    assert_eq!(q(&mut c, &["XLEN", "missing"]), Value::Int(0));
    assert_eq!(
        q(&mut c, &["XRANGE", "s", "-", "5"]),
        Value::Array(vec![
            entry("1-1", &["a", "1", "b", "2"]),
            entry("1-2", &["a", "3"]),
            entry("5-0", &["c", "4"]),
        ])
    );
    assert_eq!(
        q(&mut c, &["XRANGE", "s", "(1-1", "(5-0", "COUNT", "5"]),
        Value::Array(vec![entry("1-2", &["a", "3"])])
    );
    assert_eq!(
        q(&mut c, &["XREVRANGE", "s", "5", "-", "COUNT", "2"]),
        Value::Array(vec![entry("5-0", &["c", "4"]), entry("1-2", &["a", "3"])])
    );
    assert_eq!(
        err(&mut c, &["XRANGE", "s", "(-", "+"]),
        "ERR Invalid stream ID specified as stream command argument"
    );
    assert_eq!(
        err(&mut c, &["XRANGE", "s", "-", "(0-0"]),
        "ERR invalid end ID for the interval"
    );
    assert_eq!(q(&mut c, &["XDEL", "s", "1-2", "9-9"]), Value::Int(1));
    assert_eq!(
        q(&mut c, &["XTRIM", "s", "MAXLEN", "=", "2"]),
        Value::Int(1)
    );
    assert_eq!(
        q(&mut c, &["XRANGE", "s", "-", "+"]),
        Value::Array(vec![entry("5-0", &["c", "4"]), entry(&auto, &["d", "5"])])
    );
    assert_eq!(
        err(&mut c, &["XTRIM", "s", "MAXLEN", "1", "LIMIT", "10"]),
        "ERR syntax error, LIMIT cannot be used without the special ~ option"
    );
    assert_eq!(
        q(&mut c, &["TYPE", "s"]),
        Value::SimpleString("stream".into())
    );
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "s"]), bulk("stream"));
    let scanned = q(&mut c, &["SCAN", "0", "TYPE", "stream"]);
    assert!(format!("{scanned:?}").contains("\"s\"") || format!("{scanned:?}").contains("115"));
    // WRONGTYPE both ways.
    q(&mut c, &["SET", "str", "x"]);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for args in [
        &["XADD", "str", "*", "a", "b"][..],
        &["XLEN", "str"],
        &["XRANGE", "str", "-", "+"],
        &["XREAD", "STREAMS", "str", "0"],
        &["XGROUP", "CREATE", "str", "g", "$"],
        &["XINFO", "STREAM", "str"],
    ] {
        assert_eq!(err(&mut c, args), wrongtype, "{args:?}");
    }
    assert_eq!(err(&mut c, &["LPUSH", "s", "x"]), wrongtype);
    assert_eq!(err(&mut c, &["GET", "s"]), wrongtype);
    // XSETID and the counters XINFO shows.
    q(&mut c, &["DEL", "x"]);
    q(&mut c, &["XADD", "x", "1-0", "a", "b"]);
    q(&mut c, &["XADD", "x", "2-0", "a", "b"]);
    q(&mut c, &["XDEL", "x", "1-0"]);
    assert_eq!(
        err(&mut c, &["XSETID", "x", "1-5"]),
        "ERR The ID specified in XSETID is smaller than the target stream top item"
    );
    assert_eq!(
        q(&mut c, &["XSETID", "x", "9-0", "ENTRIESADDED", "7"]),
        Value::Okay
    );
    assert_eq!(err(&mut c, &["XSETID", "nokey", "1-1"]), "ERR no such key");
    let Value::Array(info) = q(&mut c, &["XINFO", "STREAM", "x"]) else {
        panic!()
    };
    let field = |name: &str| {
        let at = info
            .iter()
            .position(|v| matches!(v, Value::BulkString(b) if b == name.as_bytes()));
        info[at.unwrap_or_else(|| panic!("{name} missing")) + 1].clone()
    };
    assert_eq!(field("length"), Value::Int(1));
    assert_eq!(field("last-generated-id"), bulk("9-0"));
    assert_eq!(field("max-deleted-entry-id"), bulk("1-0"));
    assert_eq!(field("entries-added"), Value::Int(7));
    assert_eq!(field("recorded-first-entry-id"), bulk("2-0"));
    assert_eq!(field("first-entry"), entry("2-0", &["a", "b"]));
    // The command table: arity, flags and keys as COMMAND INFO shows them.
    let info = node.cli(&["COMMAND", "INFO", "xreadgroup"]);
    assert!(
        info.contains("-7") && info.contains("movablekeys") && info.contains("blocking"),
        "{info}"
    );
    let keys = node.cli(&[
        "COMMAND", "GETKEYS", "XREAD", "COUNT", "2", "STREAMS", "a", "b", "0", "0",
    ]);
    assert_eq!(keys, "a\nb");
}

/// RESP3 answers XREAD with a map of key to entries (RESP2: an array of pairs).
#[test]
fn xread_answers_a_map_in_resp3() {
    let node = Node::start(&[]);
    let mut c = node.client();
    q(&mut c, &["XADD", "s", "1-1", "a", "b"]);
    let mut sock = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sock.write_all(b"HELLO 3\r\nXREAD STREAMS s 0\r\nPING\r\n")
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"+PONG\r\n") {
        let n = sock.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.contains(
            "%1\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n+PONG"
        ),
        "{text}"
    );
}

/// Goal: a blocked XREAD is served by another client's XADD, with only what came after `$`;
/// one with a timeout answers nil after it; MULTI/EXEC does not block. Method: a reader
/// thread per case, the writer on the main thread once INFO shows the reader blocked.
#[test]
fn blocking_xread_is_woken_by_xadd_and_times_out() {
    let node = Node::start(&[]);
    let mut c = node.client();
    q(&mut c, &["XADD", "s", "1-0", "old", "1"]);
    let mut reader = node.client();
    let waiter = std::thread::spawn(move || {
        q(
            &mut reader,
            &["XREAD", "BLOCK", "0", "STREAMS", "other", "s", "$", "$"],
        )
    });
    wait_blocked(&mut c, 1);
    q(&mut c, &["XADD", "s", "2-0", "new", "2"]);
    let got = waiter.join().unwrap();
    assert_eq!(
        got,
        Value::Array(vec![Value::Array(vec![
            bulk("s"),
            Value::Array(vec![entry("2-0", &["new", "2"])])
        ])])
    );
    // Two readers on one key are both served by one XADD.
    let spawn_reader = |node: &Node| {
        let mut r = node.client();
        std::thread::spawn(move || q(&mut r, &["XREAD", "BLOCK", "5000", "STREAMS", "s", "2-0"]))
    };
    let (a, b) = (spawn_reader(&node), spawn_reader(&node));
    wait_blocked(&mut c, 2);
    q(&mut c, &["XADD", "s", "3-0", "x", "y"]);
    assert_eq!(a.join().unwrap(), b.join().unwrap());
    // A timeout answers nil, after the time given.
    let start = Instant::now();
    assert_eq!(
        q(&mut c, &["XREAD", "BLOCK", "150", "STREAMS", "s", "$"]),
        Value::Nil
    );
    assert!(start.elapsed() >= Duration::from_millis(150));
    // Inside MULTI/EXEC the read answers at once.
    q(&mut c, &["MULTI"]);
    q(&mut c, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    assert_eq!(q(&mut c, &["EXEC"]), Value::Array(vec![Value::Nil]));
    // An XADD then DEL in one transaction wakes the reader, who keeps waiting (the key is
    // gone), and the next XADD serves it.
    let mut reader = node.client();
    let waiter = std::thread::spawn(move || {
        q(
            &mut reader,
            &["XREAD", "BLOCK", "0", "STREAMS", "fresh", "$"],
        )
    });
    wait_blocked(&mut c, 1);
    q(&mut c, &["MULTI"]);
    q(&mut c, &["XADD", "fresh", "1-0", "a", "b"]);
    q(&mut c, &["DEL", "fresh"]);
    q(&mut c, &["EXEC"]);
    std::thread::sleep(Duration::from_millis(50));
    assert!(!waiter.is_finished());
    q(&mut c, &["XADD", "fresh", "5-0", "c", "d"]);
    let got = waiter.join().unwrap();
    assert!(format!("{got:?}").contains("5-0"), "{got:?}");
}

/// Goal: consumer groups deliver, keep and hand over pending entries as Redis does.
#[test]
fn xreadgroup_pending_ack_claim_and_autoclaim() {
    let node = Node::start(&[]);
    let mut c = node.client();
    for i in 1..=5 {
        q(
            &mut c,
            &["XADD", "s", &format!("{i}-0"), "f", &i.to_string()],
        );
    }
    assert_eq!(q(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]), Value::Okay);
    assert_eq!(
        err(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]),
        "BUSYGROUP Consumer Group name already exists"
    );
    assert_eq!(
        err(
            &mut c,
            &["XREADGROUP", "GROUP", "nog", "a", "STREAMS", "s", ">"]
        ),
        "NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option"
    );
    assert_eq!(
        q(
            &mut c,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "alice",
                "COUNT",
                "2",
                "STREAMS",
                "s",
                ">"
            ]
        ),
        Value::Array(vec![Value::Array(vec![
            bulk("s"),
            Value::Array(vec![entry("1-0", &["f", "1"]), entry("2-0", &["f", "2"])])
        ])])
    );
    q(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "bob",
            "COUNT",
            "2",
            "STREAMS",
            "s",
            ">",
        ],
    );
    // History: alice's own pending entries.
    let history = q(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"],
    );
    assert!(format!("{history:?}").contains("2-0") && !format!("{history:?}").contains("3-0"));
    assert_eq!(
        q(&mut c, &["XPENDING", "s", "g"]),
        Value::Array(vec![
            Value::Int(4),
            bulk("1-0"),
            bulk("4-0"),
            Value::Array(vec![
                Value::Array(vec![bulk("alice"), bulk("2")]),
                Value::Array(vec![bulk("bob"), bulk("2")]),
            ]),
        ])
    );
    let Value::Array(rows) = q(&mut c, &["XPENDING", "s", "g", "-", "+", "10", "alice"]) else {
        panic!()
    };
    assert_eq!(rows.len(), 2);
    let Value::Array(first) = &rows[0] else {
        panic!()
    };
    assert_eq!(
        (first[0].clone(), first[1].clone(), int(&first[3])),
        (bulk("1-0"), bulk("alice"), 2)
    );
    assert_eq!(
        q(&mut c, &["XACK", "s", "g", "1-0", "1-0", "9-0"]),
        Value::Int(1)
    );
    assert_eq!(
        err(&mut c, &["XACK", "s", "g", "bad"]),
        "ERR Invalid stream ID specified as stream command argument"
    );
    // XCLAIM hands 3-0 from bob to carol; an idle time too high claims nothing.
    assert_eq!(
        q(&mut c, &["XCLAIM", "s", "g", "carol", "3600000", "3-0"]),
        Value::Array(vec![])
    );
    assert_eq!(
        q(&mut c, &["XCLAIM", "s", "g", "carol", "0", "3-0", "JUSTID"]),
        Value::Array(vec![bulk("3-0")])
    );
    assert_eq!(
        err(&mut c, &["XCLAIM", "s", "g", "carol", "0", "3-0", "BOGUS"]),
        "ERR Unrecognized XCLAIM option 'BOGUS'"
    );
    // XDEL'd entries leave the PEL through XAUTOCLAIM, reported apart.
    q(&mut c, &["XDEL", "s", "4-0"]);
    assert_eq!(
        q(
            &mut c,
            &["XAUTOCLAIM", "s", "g", "dave", "0", "0-0", "COUNT", "10"]
        ),
        Value::Array(vec![
            bulk("0-0"),
            Value::Array(vec![entry("2-0", &["f", "2"]), entry("3-0", &["f", "3"])]),
            Value::Array(vec![bulk("4-0")]),
        ])
    );
    assert_eq!(
        err(
            &mut c,
            &["XAUTOCLAIM", "s", "g", "dave", "0", "0-0", "COUNT", "0"]
        ),
        "ERR COUNT must be > 0"
    );
    assert_eq!(
        q(&mut c, &["XGROUP", "DELCONSUMER", "s", "g", "dave"]),
        Value::Int(2)
    );
    assert_eq!(
        q(&mut c, &["XPENDING", "s", "g"]),
        Value::Array(vec![Value::Int(0), Value::Nil, Value::Nil, Value::Nil])
    );
    assert_eq!(
        q(&mut c, &["XGROUP", "CREATECONSUMER", "s", "g", "erin"]),
        Value::Int(1)
    );
    assert_eq!(
        err(&mut c, &["XINFO", "CONSUMERS", "s", "zz"]),
        "NOGROUP No such consumer group 'zz' for key name 's'"
    );
    assert_eq!(q(&mut c, &["XGROUP", "DESTROY", "s", "g"]), Value::Int(1));
    assert_eq!(
        err(&mut c, &["XGROUP", "CREATE", "none", "g", "$"]),
        "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."
    );
    assert_eq!(
        q(&mut c, &["XGROUP", "CREATE", "none", "g", "$", "MKSTREAM"]),
        Value::Okay
    );
    assert_eq!(q(&mut c, &["XLEN", "none"]), Value::Int(0));
}

/// Goal: a blocked XREADGROUP is served by XADD and by a RENAME that brings a stream with
/// its group into place, and answers errors when its group is destroyed or its key goes.
#[test]
fn blocked_xreadgroup_wakes_on_xadd_rename_destroy_and_delete() {
    let node = Node::start(&[]);
    let mut c = node.client();
    let block = |node: &Node, key: &'static str| {
        let mut r = node.client();
        std::thread::spawn(move || {
            cmd(
                &mut r,
                &[
                    "XREADGROUP",
                    "GROUP",
                    "g",
                    "alice",
                    "BLOCK",
                    "0",
                    "STREAMS",
                    key,
                    ">",
                ],
            )
        })
    };
    q(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let w = block(&node, "s");
    wait_blocked(&mut c, 1);
    q(&mut c, &["XADD", "s", "7-0", "f", "v"]);
    let got = w.join().unwrap().unwrap();
    assert!(format!("{got:?}").contains("7-0"));
    assert_eq!(
        q(&mut c, &["XPENDING", "s", "g"])
            .as_sequence()
            .map(|v| v.len()),
        Some(4)
    );

    let w = block(&node, "s");
    wait_blocked(&mut c, 1);
    q(&mut c, &["XGROUP", "DESTROY", "s", "g"]);
    let e = w.join().unwrap().unwrap_err().to_string();
    assert!(e.contains("NOGROUP"), "{e}");

    q(&mut c, &["XGROUP", "CREATE", "s", "g", "$"]);
    let w = block(&node, "s");
    wait_blocked(&mut c, 1);
    q(&mut c, &["DEL", "s"]);
    let e = w.join().unwrap().unwrap_err().to_string();
    assert!(e.contains("no longer exists"), "{e}");

    q(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let w = block(&node, "s");
    wait_blocked(&mut c, 1);
    q(&mut c, &["XGROUP", "CREATE", "s2", "g", "$", "MKSTREAM"]);
    q(&mut c, &["XADD", "s2", "100-0", "f1", "v1"]);
    q(&mut c, &["RENAME", "s2", "s"]);
    let got = w.join().unwrap().unwrap();
    assert!(format!("{got:?}").contains("100-0"), "{got:?}");
}

#[test]
fn streams_survive_save_and_restart_and_dump_restore() {
    let node = Node::start(&[]);
    let mut c = node.client();
    populate(&mut c, "s");
    q(&mut c, &["XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM"]);
    let before = state(&mut c, "s");
    let empty_before = state(&mut c, "empty");
    // DUMP/RESTORE carries the whole stream too.
    let Value::BulkString(payload) = q(&mut c, &["DUMP", "s"]) else {
        panic!("DUMP")
    };
    redis::cmd("RESTORE")
        .arg("copy")
        .arg(0)
        .arg(payload)
        .query::<()>(&mut c)
        .unwrap();
    assert_eq!(state(&mut c, "copy"), before);
    assert_eq!(q(&mut c, &["SAVE"]), Value::Okay);
    let node = Node::start_in(node.into_dir(), &[]);
    let mut c = node.client();
    assert_eq!(state(&mut c, "s"), before);
    assert_eq!(state(&mut c, "empty"), empty_before);
    // It goes on from where it was: IDs keep growing, groups deliver what comes next.
    q(&mut c, &["XADD", "s", "*", "after", "restart"]);
    let got = q(
        &mut c,
        &["XREADGROUP", "GROUP", "g2", "x", "STREAMS", "s", ">"],
    );
    assert!(format!("{got:?}").contains("restart"), "{got:?}");
}

#[test]
fn streams_replay_from_the_aof() {
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let node = Node::start(&args);
    let mut c = node.client();
    populate(&mut c, "s");
    q(
        &mut c,
        &["XAUTOCLAIM", "s", "g1", "zed", "0", "0-0", "COUNT", "2"],
    );
    q(
        &mut c,
        &["XGROUP", "SETID", "s", "g2", "10-1", "ENTRIESREAD", "8"],
    );
    q(&mut c, &["XGROUP", "DELCONSUMER", "s", "g2", "idle"]);
    let before = state(&mut c, "s");
    let node = Node::start_in(node.into_dir(), &args);
    assert_eq!(state(&mut node.client(), "s"), before);
}

/// Goal: a replica reaches the primary's stream state from the replication stream (XADD
/// with generated IDs, approximate trims, XREADGROUP, XCLAIM and XAUTOCLAIM as effects).
/// Method: two node processes over `ofi:tcp`, the replica started with `replicaof`.
#[test]
fn a_replica_holds_the_primarys_streams() {
    const FABRIC: [&str; 4] = ["--fabric-provider", "ofi:tcp", "--rdma-bind", "127.0.0.1"];
    let repl_port = free_port().to_string();
    let mut args = FABRIC.to_vec();
    args.extend(["--repl-fabric-port", &repl_port]);
    let primary = Node::start(&args);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !primary
        .log()
        .contains("accepting replication links (fabric)")
    {
        assert!(Instant::now() < deadline, "{}", primary.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let target = format!("127.0.0.1 {}", primary.port);
    let mut replica_args = FABRIC.to_vec();
    replica_args.extend(["--replicaof", &target]);
    let replica = Node::start(&replica_args);
    let mut p = primary.client();
    populate(&mut p, "s");
    for _ in 0..50 {
        q(&mut p, &["XADD", "s", "MAXLEN", "~", "10", "*", "k", "v"]);
    }
    q(&mut p, &["XDEL", "s", "10-1"]);
    q(&mut p, &["XAUTOCLAIM", "s", "g1", "zed", "0", "0-0"]);
    let want = state(&mut p, "s");
    let mut r = replica.client();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = match cmd(&mut r, &["EXISTS", "s"]) {
            Ok(Value::Int(1)) => Some(state(&mut r, "s")),
            _ => None,
        };
        if got.as_ref() == Some(&want) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "replica state {got:?}\nprimary state {want:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// In cluster mode, stream keys must hash to the node: XREAD over two slots is CROSSSLOT,
/// a key of another node's slot is MOVED there, hash tags keep keys together.
#[test]
fn cluster_mode_routes_stream_keys() {
    let nodes = integration::cluster::create_cluster("stream-secret", 0);
    let n = &nodes[0];
    assert_eq!(
        n.cli(&["XREAD", "STREAMS", "a", "b", "0", "0"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    // Find a key this node does not own: it answers MOVED to the owner.
    let mut moved = None;
    for i in 0..100 {
        let key = format!("k{i}");
        let out = n.cli(&["XADD", &key, "*", "f", "v"]);
        if out.starts_with("MOVED ") {
            moved = Some((key, out));
            break;
        }
    }
    let (key, out) = moved.expect("some key lives on another node");
    let owner_port = out.rsplit(':').next().unwrap().trim().to_string();
    let owner = nodes
        .iter()
        .find(|m| m.port.to_string() == owner_port)
        .expect("owner");
    assert!(owner.cli(&["XADD", &key, "1-1", "f", "v"]).contains("1-1"));
    assert!(owner.cli(&["XREAD", "STREAMS", &key, "0"]).contains("1-1"));
    // Keys with one hash tag go together, XREADGROUP included.
    let tagged = ["{t}a", "{t}b"];
    let home = nodes
        .iter()
        .find(|m| {
            !m.cli(&["XADD", tagged[0], "*", "f", "v"])
                .starts_with("MOVED")
        })
        .expect("a node owns {t}");
    home.cli(&["XADD", tagged[1], "*", "f", "v"]);
    home.cli(&["XGROUP", "CREATE", tagged[0], "g", "0"]);
    home.cli(&["XGROUP", "CREATE", tagged[1], "g", "0"]);
    let out = home.cli(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "STREAMS",
        tagged[0],
        tagged[1],
        ">",
        ">",
    ]);
    assert!(out.contains("{t}a") && out.contains("{t}b"), "{out}");
}
