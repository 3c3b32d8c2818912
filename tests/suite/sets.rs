//! Sets against a real node: every command, its Redis 7.0 error texts, RESP2 and RESP3 reply
//! shapes, the STORE forms' destination rules, SSCAN's guarantee under concurrent removals,
//! and the bounds of SRANDMEMBER.

use integration::{cmd, Node};
use redis::Value;
use std::collections::HashSet;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// The error a command answers, as `CODE detail` (Redis's full text).
fn error(c: &mut redis::Connection, args: &[&str]) -> String {
    let e = cmd(c, args).expect_err("an error reply");
    format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a bulk string: {other:?}"),
    }
}

/// The members of an array or set reply, sorted.
fn sorted(v: Value) -> Vec<String> {
    let mut out: Vec<String> = match v {
        Value::Array(items) | Value::Set(items) => items.iter().map(text).collect(),
        other => panic!("not an array: {other:?}"),
    };
    out.sort();
    out
}

fn resp3(node: &Node) -> redis::Connection {
    redis::Client::open(format!("{}?protocol=resp3", node.url()))
        .and_then(|c| c.get_connection())
        .expect("RESP3 connection")
}

#[test]
fn add_remove_membership() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(
        cmd(&mut c, &["SADD", "s", "a", "b", "c", "a"]).unwrap(),
        Value::Int(3)
    );
    assert_eq!(
        cmd(&mut c, &["SADD", "s", "a", "d"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(cmd(&mut c, &["SCARD", "s"]).unwrap(), Value::Int(4));
    assert_eq!(cmd(&mut c, &["SCARD", "nokey"]).unwrap(), Value::Int(0));
    assert_eq!(
        sorted(cmd(&mut c, &["SMEMBERS", "s"]).unwrap()),
        ["a", "b", "c", "d"]
    );
    assert_eq!(
        cmd(&mut c, &["SMEMBERS", "nokey"]).unwrap(),
        Value::Array(vec![])
    );
    assert_eq!(
        cmd(&mut c, &["SISMEMBER", "s", "a"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        cmd(&mut c, &["SISMEMBER", "s", "z"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        cmd(&mut c, &["SISMEMBER", "nokey", "a"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        cmd(&mut c, &["SMISMEMBER", "s", "a", "z", "d"]).unwrap(),
        Value::Array(vec![Value::Int(1), Value::Int(0), Value::Int(1)])
    );
    assert_eq!(
        cmd(&mut c, &["SMISMEMBER", "nokey", "a", "b"]).unwrap(),
        Value::Array(vec![Value::Int(0), Value::Int(0)])
    );
    assert_eq!(
        cmd(&mut c, &["SREM", "s", "a", "z", "a"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(cmd(&mut c, &["SREM", "nokey", "a"]).unwrap(), Value::Int(0));
    assert_eq!(
        cmd(&mut c, &["SREM", "s", "b", "c", "d"]).unwrap(),
        Value::Int(3)
    );
    // The last member took the key with it: the name is free for another type.
    assert_eq!(cmd(&mut c, &["SET", "s", "v"]).unwrap(), Value::Okay);
    assert_eq!(
        node.cli(&["SMISMEMBER", "s"]),
        "ERR wrong number of arguments for 'smismember' command"
    );
}

#[test]
fn wrong_type_everywhere() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["SET", "str", "v"]).unwrap();
    cmd(&mut c, &["SADD", "s", "a"]).unwrap();
    let wrong = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for args in [
        &["SADD", "str", "a"][..],
        &["SREM", "str", "a"],
        &["SMEMBERS", "str"],
        &["SISMEMBER", "str", "a"],
        &["SMISMEMBER", "str", "a"],
        &["SCARD", "str"],
        &["SPOP", "str"],
        &["SPOP", "str", "1"],
        &["SRANDMEMBER", "str"],
        &["SRANDMEMBER", "str", "-3"],
        &["SSCAN", "str", "0"],
        &["SSCAN", "str", "0", "COUNT", "0"],
        // A set operation fails on any key of another type, even when a missing key already
        // decides the result, as Redis 7.0 does.
        &["SINTER", "nokey", "str"],
        &["SINTER", "s", "str"],
        &["SUNION", "nokey", "str"],
        &["SDIFF", "nokey", "str"],
        &["SDIFF", "s", "str"],
        &["SINTERCARD", "2", "nokey", "str"],
        &["SINTERSTORE", "d", "nokey", "str"],
        &["SUNIONSTORE", "d", "s", "str"],
        &["SDIFFSTORE", "d", "nokey", "str"],
        &["SMOVE", "s", "str", "a"],
        &["SMOVE", "s", "str", "zz"],
        &["SMOVE", "str", "s", "a"],
    ] {
        assert_eq!(error(&mut c, args), wrong, "{args:?}");
    }
    // A missing source is checked first: SMOVE answers 0 whatever the destination is.
    assert_eq!(
        cmd(&mut c, &["SMOVE", "nokey", "str", "a"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(sorted(cmd(&mut c, &["SMEMBERS", "s"]).unwrap()), ["a"]);
    assert_eq!(cmd(&mut c, &["GET", "str"]).unwrap(), bulk("v"));
    assert_eq!(cmd(&mut c, &["GET", "d"]).unwrap(), Value::Nil);
}

#[test]
fn algebra_and_store_destinations() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["SADD", "t1", "1", "2", "3", "4"]).unwrap();
    cmd(&mut c, &["SADD", "t2", "3", "4", "5"]).unwrap();
    cmd(&mut c, &["SADD", "t3", "4", "9"]).unwrap();
    assert_eq!(
        sorted(cmd(&mut c, &["SINTER", "t1", "t2"]).unwrap()),
        ["3", "4"]
    );
    assert_eq!(
        sorted(cmd(&mut c, &["SINTER", "t1", "t2", "t3"]).unwrap()),
        ["4"]
    );
    assert_eq!(
        cmd(&mut c, &["SINTER", "t1", "nokey"]).unwrap(),
        Value::Array(vec![])
    );
    assert_eq!(
        sorted(cmd(&mut c, &["SINTER", "t1"]).unwrap()),
        ["1", "2", "3", "4"]
    );
    assert_eq!(
        sorted(cmd(&mut c, &["SUNION", "t1", "nokey", "t3"]).unwrap()),
        ["1", "2", "3", "4", "9"]
    );
    assert_eq!(
        sorted(cmd(&mut c, &["SDIFF", "t1", "t2", "t3"]).unwrap()),
        ["1", "2"]
    );
    assert_eq!(
        sorted(cmd(&mut c, &["SDIFF", "t1", "nokey"]).unwrap()),
        ["1", "2", "3", "4"]
    );
    assert_eq!(
        cmd(&mut c, &["SDIFF", "nokey", "t1"]).unwrap(),
        Value::Array(vec![])
    );
    assert_eq!(
        cmd(&mut c, &["SDIFF", "t1", "t1"]).unwrap(),
        Value::Array(vec![])
    );

    // STORE replaces the destination whatever it held, TTL included: the stored set
    // outlives the string's expiry (a slow machine only makes that wait longer).
    cmd(&mut c, &["SET", "dst", "x", "PX", "200"]).unwrap();
    assert_eq!(
        cmd(&mut c, &["SINTERSTORE", "dst", "t1", "t2"]).unwrap(),
        Value::Int(2)
    );
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(
        sorted(cmd(&mut c, &["SMEMBERS", "dst"]).unwrap()),
        ["3", "4"]
    );
    assert_eq!(
        cmd(&mut c, &["SUNIONSTORE", "dst", "t3", "t3"]).unwrap(),
        Value::Int(2)
    );
    assert_eq!(
        sorted(cmd(&mut c, &["SMEMBERS", "dst"]).unwrap()),
        ["4", "9"]
    );
    assert_eq!(
        cmd(&mut c, &["SDIFFSTORE", "dst", "t1", "t2"]).unwrap(),
        Value::Int(2)
    );
    assert_eq!(
        sorted(cmd(&mut c, &["SMEMBERS", "dst"]).unwrap()),
        ["1", "2"]
    );
    // A destination among the sources reads its old members.
    assert_eq!(
        cmd(&mut c, &["SUNIONSTORE", "dst", "dst", "t3"]).unwrap(),
        Value::Int(4)
    );
    assert_eq!(
        sorted(cmd(&mut c, &["SMEMBERS", "dst"]).unwrap()),
        ["1", "2", "4", "9"]
    );
    // An empty result deletes the destination.
    assert_eq!(
        cmd(&mut c, &["SDIFFSTORE", "dst", "t1", "t1"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(cmd(&mut c, &["GET", "dst"]).unwrap(), Value::Nil);
    cmd(&mut c, &["SET", "dst", "x"]).unwrap();
    assert_eq!(
        cmd(&mut c, &["SINTERSTORE", "dst", "t1", "nokey"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(cmd(&mut c, &["GET", "dst"]).unwrap(), Value::Nil);
    assert_eq!(
        cmd(&mut c, &["SUNIONSTORE", "dst", "nokey"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(cmd(&mut c, &["GET", "dst"]).unwrap(), Value::Nil);
    assert_eq!(
        node.cli(&["SINTERSTORE", "dst"]),
        "ERR wrong number of arguments for 'sinterstore' command"
    );
}

#[test]
fn sintercard_limits_and_errors() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["SADD", "t1", "1", "2", "3", "4"]).unwrap();
    cmd(&mut c, &["SADD", "t2", "2", "3", "4", "5"]).unwrap();
    assert_eq!(
        cmd(&mut c, &["SINTERCARD", "2", "t1", "t2"]).unwrap(),
        Value::Int(3)
    );
    assert_eq!(
        cmd(&mut c, &["SINTERCARD", "1", "t1"]).unwrap(),
        Value::Int(4)
    );
    assert_eq!(
        cmd(&mut c, &["SINTERCARD", "2", "t1", "nokey"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        cmd(&mut c, &["SINTERCARD", "2", "t1", "t2", "LIMIT", "2"]).unwrap(),
        Value::Int(2)
    );
    assert_eq!(
        cmd(&mut c, &["SINTERCARD", "2", "t1", "t2", "limit", "0"]).unwrap(),
        Value::Int(3)
    );
    assert_eq!(
        cmd(
            &mut c,
            &["SINTERCARD", "2", "t1", "t2", "LIMIT", "1", "LIMIT", "9"]
        )
        .unwrap(),
        Value::Int(3),
        "the last LIMIT wins"
    );
    for n in ["0", "-1", "x"] {
        assert_eq!(
            error(&mut c, &["SINTERCARD", n, "t1"]),
            "ERR numkeys should be greater than 0"
        );
    }
    assert_eq!(
        error(&mut c, &["SINTERCARD", "3", "t1", "t2"]),
        "ERR Number of keys can't be greater than number of args"
    );
    for l in ["-1", "x"] {
        assert_eq!(
            error(&mut c, &["SINTERCARD", "1", "t1", "LIMIT", l]),
            "ERR LIMIT can't be negative"
        );
    }
    assert_eq!(
        error(&mut c, &["SINTERCARD", "1", "t1", "LIMIT"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["SINTERCARD", "1", "t1", "foo"]),
        "ERR syntax error"
    );
}

#[test]
fn smove_rules() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["SADD", "src", "a", "b"]).unwrap();
    cmd(&mut c, &["SADD", "dst", "b"]).unwrap();
    assert_eq!(
        cmd(&mut c, &["SMOVE", "src", "dst", "zz"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        cmd(&mut c, &["SMOVE", "src", "dst", "a"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        sorted(cmd(&mut c, &["SMEMBERS", "dst"]).unwrap()),
        ["a", "b"]
    );
    // Already in the destination: still moved (and so removed from the source).
    assert_eq!(
        cmd(&mut c, &["SMOVE", "src", "dst", "b"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        cmd(&mut c, &["GET", "src"]).unwrap(),
        Value::Nil,
        "emptied source deleted"
    );
    // Same source and destination: only reports membership.
    assert_eq!(
        cmd(&mut c, &["SMOVE", "dst", "dst", "a"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        cmd(&mut c, &["SMOVE", "dst", "dst", "zz"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        sorted(cmd(&mut c, &["SMEMBERS", "dst"]).unwrap()),
        ["a", "b"]
    );
    // To a missing destination: created.
    assert_eq!(
        cmd(&mut c, &["SMOVE", "dst", "new", "a"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(sorted(cmd(&mut c, &["SMEMBERS", "new"]).unwrap()), ["a"]);
    assert_eq!(
        cmd(&mut c, &["SMOVE", "nokey", "new", "a"]).unwrap(),
        Value::Int(0)
    );
}

#[test]
fn pop_and_random_members() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["SADD", "s", "a", "b", "c", "d", "e"]).unwrap();
    let one = text(&cmd(&mut c, &["SRANDMEMBER", "s"]).unwrap());
    assert!("abcde".contains(one.as_str()));
    assert_eq!(cmd(&mut c, &["SRANDMEMBER", "nokey"]).unwrap(), Value::Nil);
    let three = sorted(cmd(&mut c, &["SRANDMEMBER", "s", "3"]).unwrap());
    assert_eq!(three.len(), 3);
    assert_eq!(three.iter().collect::<HashSet<_>>().len(), 3, "distinct");
    assert_eq!(
        sorted(cmd(&mut c, &["SRANDMEMBER", "s", "50"]).unwrap()),
        ["a", "b", "c", "d", "e"]
    );
    let many = sorted(cmd(&mut c, &["SRANDMEMBER", "s", "-500"]).unwrap());
    assert_eq!(many.len(), 500);
    assert_eq!(many.iter().collect::<HashSet<_>>().len(), 5);
    assert_eq!(
        cmd(&mut c, &["SRANDMEMBER", "s", "0"]).unwrap(),
        Value::Array(vec![])
    );
    assert_eq!(
        cmd(&mut c, &["SRANDMEMBER", "nokey", "-3"]).unwrap(),
        Value::Array(vec![])
    );
    assert_eq!(
        error(&mut c, &["SRANDMEMBER", "s", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error(&mut c, &["SRANDMEMBER", "s", "x", "2"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["SRANDMEMBER", "s", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert!(error(&mut c, &["SRANDMEMBER", "s", "-9223372036854775807"])
        .starts_with("ERR value is out of range, a reply with repeated elements holds at most"));
    assert_eq!(
        cmd(&mut c, &["SRANDMEMBER", "nokey", "-9223372036854775807"]).unwrap(),
        Value::Array(vec![])
    );
    assert_eq!(
        cmd(&mut c, &["SCARD", "s"]).unwrap(),
        Value::Int(5),
        "reads remove nothing"
    );

    let popped = text(&cmd(&mut c, &["SPOP", "s"]).unwrap());
    assert_eq!(
        cmd(&mut c, &["SISMEMBER", "s", &popped]).unwrap(),
        Value::Int(0)
    );
    let two = sorted(cmd(&mut c, &["SPOP", "s", "2"]).unwrap());
    assert_eq!(two.len(), 2);
    assert_eq!(cmd(&mut c, &["SCARD", "s"]).unwrap(), Value::Int(2));
    let rest = sorted(cmd(&mut c, &["SPOP", "s", "10"]).unwrap());
    assert_eq!(rest.len(), 2);
    let mut everything: Vec<String> = [vec![popped], two, rest].concat();
    everything.sort();
    assert_eq!(
        everything,
        ["a", "b", "c", "d", "e"],
        "every member popped once"
    );
    assert_eq!(cmd(&mut c, &["GET", "s"]).unwrap(), Value::Nil);
    assert_eq!(cmd(&mut c, &["SPOP", "s"]).unwrap(), Value::Nil);
    assert_eq!(
        cmd(&mut c, &["SPOP", "s", "3"]).unwrap(),
        Value::Array(vec![])
    );
    assert_eq!(
        cmd(&mut c, &["SPOP", "s", "0"]).unwrap(),
        Value::Array(vec![])
    );
    for bad in ["-1", "x"] {
        assert_eq!(
            error(&mut c, &["SPOP", "s", bad]),
            "ERR value is out of range, must be positive"
        );
    }
    assert_eq!(error(&mut c, &["SPOP", "s", "1", "2"]), "ERR syntax error");
}

#[test]
fn resp3_reply_shapes() {
    let node = Node::start(&[]);
    let mut c = resp3(&node);
    cmd(&mut c, &["SADD", "s", "a"]).unwrap();
    cmd(&mut c, &["SADD", "t", "a", "b"]).unwrap();
    let set_a = Value::Set(vec![bulk("a")]);
    assert_eq!(cmd(&mut c, &["SMEMBERS", "s"]).unwrap(), set_a);
    assert_eq!(
        cmd(&mut c, &["SMEMBERS", "nokey"]).unwrap(),
        Value::Set(vec![])
    );
    assert_eq!(cmd(&mut c, &["SINTER", "s", "t"]).unwrap(), set_a);
    assert_eq!(
        cmd(&mut c, &["SINTER", "s", "nokey"]).unwrap(),
        Value::Set(vec![])
    );
    assert_eq!(
        cmd(&mut c, &["SDIFF", "t", "s"]).unwrap(),
        Value::Set(vec![bulk("b")])
    );
    assert_eq!(
        sorted(cmd(&mut c, &["SUNION", "s", "t"]).unwrap()),
        ["a", "b"]
    );
    assert!(matches!(
        cmd(&mut c, &["SUNION", "s", "t"]).unwrap(),
        Value::Set(_)
    ));
    assert_eq!(
        cmd(&mut c, &["SISMEMBER", "s", "a"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        cmd(&mut c, &["SRANDMEMBER", "s", "-2"]).unwrap(),
        Value::Array(vec![bulk("a"), bulk("a")])
    );
    assert_eq!(
        cmd(&mut c, &["SPOP", "nokey", "2"]).unwrap(),
        Value::Set(vec![])
    );
    assert_eq!(cmd(&mut c, &["SPOP", "s", "2"]).unwrap(), set_a);
}

/// Runs a whole SSCAN with `options`, removing two `churn` members after each call.
fn full_sscan(
    c: &mut redis::Connection,
    key: &str,
    options: &[&str],
    churn: &mut Vec<String>,
) -> (Vec<String>, usize) {
    let mut cursor = "0".to_string();
    let mut found = Vec::new();
    let mut calls = 0;
    loop {
        let mut args = vec!["SSCAN", key, cursor.as_str()];
        args.extend_from_slice(options);
        let Value::Array(reply) = cmd(c, &args).unwrap() else {
            panic!("SSCAN answers an array");
        };
        let next = text(&reply[0]);
        found.extend(sorted(reply[1].clone()));
        calls += 1;
        assert!(calls < 10_000, "SSCAN must end");
        for _ in 0..2 {
            if let Some(m) = churn.pop() {
                cmd(c, &["SREM", key, &m]).unwrap();
            }
        }
        if next == "0" {
            return (found, calls);
        }
        cursor = next;
    }
}

#[test]
fn sscan_pages_match_count_and_errors() {
    let node = Node::start(&[]);
    let mut c = node.client();
    // A packed set is answered whole (checked below): paging is a table's, and with no
    // packing allowed every set is one.
    cmd(&mut c, &["CONFIG", "SET", "set-max-listpack-entries", "0"]).unwrap();
    let mut args = vec!["SADD".to_string(), "s".into()];
    args.extend((0..100).map(|i| format!("m{i}")));
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    cmd(&mut c, &refs).unwrap();

    let (found, calls) = full_sscan(&mut c, "s", &[], &mut Vec::new());
    assert_eq!(found.iter().collect::<HashSet<_>>().len(), 100);
    assert_eq!(calls, 10, "the default COUNT visits 10 members per call");
    let (found, calls) = full_sscan(&mut c, "s", &["count", "100"], &mut Vec::new());
    assert_eq!((found.len(), calls), (100, 1));
    let (found, _) = full_sscan(&mut c, "s", &["MATCH", "m?", "COUNT", "9"], &mut Vec::new());
    assert_eq!(found.len(), 10, "m0..m9: {found:?}");

    // Members present for the whole scan are all returned while others are removed.
    let mut churn: Vec<String> = (0..100)
        .filter(|i| i % 3 != 0)
        .map(|i| format!("m{i}"))
        .collect();
    let (found, _) = full_sscan(&mut c, "s", &["COUNT", "4"], &mut churn);
    let found: HashSet<_> = found.into_iter().collect();
    for i in (0..100).step_by(3) {
        assert!(found.contains(&format!("m{i}")), "missed m{i}");
    }

    // A packed set: one call, cursor 0, every (matching) member whatever COUNT says.
    cmd(
        &mut c,
        &["CONFIG", "SET", "set-max-listpack-entries", "128"],
    )
    .unwrap();
    let mut args = vec!["SADD".to_string(), "small".into()];
    args.extend((0..20).map(|i| format!("m{i}")));
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    cmd(&mut c, &refs).unwrap();
    let (found, calls) = full_sscan(&mut c, "small", &["COUNT", "1"], &mut Vec::new());
    assert_eq!((found.len(), calls), (20, 1));
    let (found, calls) = full_sscan(&mut c, "small", &["MATCH", "m1*"], &mut Vec::new());
    assert_eq!((found.len(), calls), (11, 1));

    assert_eq!(error(&mut c, &["SSCAN", "s", "x"]), "ERR invalid cursor");
    assert_eq!(
        error(&mut c, &["SSCAN", "s", "18446744073709551616"]),
        "ERR invalid cursor"
    );
    assert_eq!(error(&mut c, &["SSCAN", "s", " 1"]), "ERR invalid cursor");
    assert_eq!(
        error(&mut c, &["SSCAN", "s", "0", "COUNT", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["SSCAN", "s", "0", "COUNT", "-1"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["SSCAN", "s", "0", "COUNT", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error(&mut c, &["SSCAN", "s", "0", "MATCH"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["SSCAN", "s", "0", "TYPE", "set"]),
        "ERR syntax error"
    );
    assert_eq!(
        cmd(&mut c, &["SSCAN", "nokey", "0", "COUNT", "0"]).unwrap(),
        Value::Array(vec![bulk("0"), Value::Array(vec![])])
    );
    // strtoul's reading: a sign and leading zeros are fine; -1 is the largest cursor.
    let Value::Array(page) = cmd(&mut c, &["SSCAN", "s", "-1", "COUNT", "1000"]).unwrap() else {
        panic!("an array");
    };
    assert_eq!(page[0], bulk("0"));
    assert!(cmd(&mut c, &["SSCAN", "s", "+007"]).is_ok());
}
