//! Hashes against a real node: every command, its Redis 7.0 error texts, RESP2 and RESP3
//! reply shapes, HSCAN's guarantee under concurrent deletes, and HRANDFIELD's bounds.

use integration::{cmd, Node};
use redis::Value;
use std::collections::{HashMap, HashSet};

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

fn texts(v: Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().map(text).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn resp3(node: &Node) -> redis::Connection {
    redis::Client::open(format!("{}?protocol=resp3", node.url()))
        .and_then(|c| c.get_connection())
        .expect("RESP3 connection")
}

#[test]
fn set_get_delete_and_reads() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(
        cmd(&mut c, &["HSET", "h", "a", "1", "b", "2"]).unwrap(),
        Value::Int(2)
    );
    assert_eq!(
        cmd(&mut c, &["HSET", "h", "a", "10", "c", "3"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(cmd(&mut c, &["HMSET", "h", "d", "4"]).unwrap(), Value::Okay);
    assert_eq!(
        cmd(&mut c, &["HSETNX", "h", "a", "x"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        cmd(&mut c, &["HSETNX", "h", "e", "5"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(cmd(&mut c, &["HGET", "h", "a"]).unwrap(), bulk("10"));
    assert_eq!(cmd(&mut c, &["HGET", "h", "zz"]).unwrap(), Value::Nil);
    assert_eq!(cmd(&mut c, &["HGET", "nokey", "a"]).unwrap(), Value::Nil);
    assert_eq!(
        cmd(&mut c, &["HMGET", "h", "a", "zz", "e"]).unwrap(),
        Value::Array(vec![bulk("10"), Value::Nil, bulk("5")])
    );
    assert_eq!(
        cmd(&mut c, &["HMGET", "nokey", "a", "b"]).unwrap(),
        Value::Array(vec![Value::Nil, Value::Nil])
    );
    assert_eq!(cmd(&mut c, &["HLEN", "h"]).unwrap(), Value::Int(5));
    assert_eq!(cmd(&mut c, &["HLEN", "nokey"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["HEXISTS", "h", "d"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["HEXISTS", "h", "zz"]).unwrap(), Value::Int(0));
    assert_eq!(
        cmd(&mut c, &["HEXISTS", "nokey", "a"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(cmd(&mut c, &["HSTRLEN", "h", "a"]).unwrap(), Value::Int(2));
    assert_eq!(cmd(&mut c, &["HSTRLEN", "h", "zz"]).unwrap(), Value::Int(0));
    assert_eq!(
        cmd(&mut c, &["HSTRLEN", "nokey", "a"]).unwrap(),
        Value::Int(0)
    );

    let mut keys = texts(cmd(&mut c, &["HKEYS", "h"]).unwrap());
    keys.sort();
    assert_eq!(keys, ["a", "b", "c", "d", "e"]);
    let mut vals = texts(cmd(&mut c, &["HVALS", "h"]).unwrap());
    vals.sort();
    assert_eq!(vals, ["10", "2", "3", "4", "5"]);
    let all = texts(cmd(&mut c, &["HGETALL", "h"]).unwrap());
    let pairs: HashMap<_, _> = all
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    assert_eq!(pairs.len(), 5);
    assert_eq!(pairs["a"], "10");
    assert_eq!(
        cmd(&mut c, &["HGETALL", "nokey"]).unwrap(),
        Value::Array(vec![])
    );
    assert_eq!(
        cmd(&mut c, &["HKEYS", "nokey"]).unwrap(),
        Value::Array(vec![])
    );
    assert_eq!(
        cmd(&mut c, &["HVALS", "nokey"]).unwrap(),
        Value::Array(vec![])
    );

    // HDEL counts each field once and deletes the key with its last field.
    assert_eq!(
        cmd(&mut c, &["HDEL", "h", "a", "zz", "a", "b"]).unwrap(),
        Value::Int(2)
    );
    assert_eq!(cmd(&mut c, &["HDEL", "nokey", "a"]).unwrap(), Value::Int(0));
    assert_eq!(
        cmd(&mut c, &["HDEL", "h", "c", "d", "e"]).unwrap(),
        Value::Int(3)
    );
    assert_eq!(cmd(&mut c, &["HLEN", "h"]).unwrap(), Value::Int(0));
    assert_eq!(
        cmd(&mut c, &["HSETNX", "h", "a", "x"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        cmd(&mut c, &["HGETALL", "h"]).unwrap(),
        Value::Array(vec![bulk("a"), bulk("x")])
    );
}

#[test]
fn arity_and_wrong_type_errors() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(
        error(&mut c, &["HSET", "h", "a", "1", "b"]),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(
        error(&mut c, &["HMSET", "h", "a"]),
        "ERR wrong number of arguments for 'hmset' command"
    );
    assert_eq!(
        node.cli(&["HGET", "h"]),
        "ERR wrong number of arguments for 'hget' command"
    );
    assert_eq!(
        cmd(&mut c, &["HLEN", "h"]).unwrap(),
        Value::Int(0),
        "a failed HSET creates nothing"
    );
    cmd(&mut c, &["SET", "s", "v"]).unwrap();
    let wrong = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for args in [
        &["HSET", "s", "a", "1"][..],
        &["HMSET", "s", "a", "1"],
        &["HSETNX", "s", "a", "1"],
        &["HGET", "s", "a"],
        &["HMGET", "s", "a"],
        &["HDEL", "s", "a"],
        &["HLEN", "s"],
        &["HEXISTS", "s", "a"],
        &["HGETALL", "s"],
        &["HKEYS", "s"],
        &["HVALS", "s"],
        &["HINCRBY", "s", "a", "1"],
        &["HINCRBYFLOAT", "s", "a", "1"],
        &["HSTRLEN", "s", "a"],
        &["HSCAN", "s", "0"],
        &["HSCAN", "s", "0", "COUNT", "0"],
        &["HRANDFIELD", "s"],
        &["HRANDFIELD", "s", "-5", "WITHVALUES"],
    ] {
        assert_eq!(error(&mut c, args), wrong, "{args:?}");
    }
    assert_eq!(cmd(&mut c, &["GET", "s"]).unwrap(), bulk("v"));
}

#[test]
fn increments() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(
        cmd(&mut c, &["HINCRBY", "h", "n", "5"]).unwrap(),
        Value::Int(5)
    );
    assert_eq!(
        cmd(&mut c, &["HINCRBY", "h", "n", "-7"]).unwrap(),
        Value::Int(-2)
    );
    assert_eq!(cmd(&mut c, &["HGET", "h", "n"]).unwrap(), bulk("-2"));
    assert_eq!(
        error(&mut c, &["HINCRBY", "h", "n", "x"]),
        "ERR value is not an integer or out of range"
    );
    cmd(
        &mut c,
        &[
            "HSET",
            "h",
            "s",
            "abc",
            "sp",
            " 1",
            "max",
            "9223372036854775807",
        ],
    )
    .unwrap();
    assert_eq!(
        error(&mut c, &["HINCRBY", "h", "s", "1"]),
        "ERR hash value is not an integer"
    );
    assert_eq!(
        error(&mut c, &["HINCRBY", "h", "sp", "1"]),
        "ERR hash value is not an integer"
    );
    assert_eq!(
        error(&mut c, &["HINCRBY", "h", "max", "1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        cmd(&mut c, &["HGET", "h", "max"]).unwrap(),
        bulk("9223372036854775807")
    );

    assert_eq!(
        cmd(&mut c, &["HINCRBYFLOAT", "h", "f", "10.5"]).unwrap(),
        bulk("10.5")
    );
    assert_eq!(
        cmd(&mut c, &["HINCRBYFLOAT", "h", "f", "0.1"]).unwrap(),
        bulk("10.6")
    );
    assert_eq!(
        cmd(&mut c, &["HINCRBYFLOAT", "h", "f", "-5.6"]).unwrap(),
        bulk("5")
    );
    assert_eq!(
        cmd(&mut c, &["HINCRBYFLOAT", "h", "g", "5.0e3"]).unwrap(),
        bulk("5000")
    );
    assert_eq!(
        cmd(&mut c, &["HINCRBYFLOAT", "h", "n", "1.5"]).unwrap(),
        bulk("-0.5")
    );
    assert_eq!(cmd(&mut c, &["HGET", "h", "f"]).unwrap(), bulk("5"));
    assert_eq!(
        error(&mut c, &["HINCRBYFLOAT", "h", "f", "x"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        error(&mut c, &["HINCRBYFLOAT", "h", "f", "inf"]),
        "ERR value is NaN or Infinity"
    );
    assert_eq!(
        error(&mut c, &["HINCRBYFLOAT", "h", "s", "1"]),
        "ERR hash value is not a float"
    );
    cmd(&mut c, &["HSET", "h", "big", "1.7e308"]).unwrap();
    assert_eq!(
        error(&mut c, &["HINCRBYFLOAT", "h", "big", "1.7e308"]),
        "ERR increment would produce NaN or Infinity"
    );
    assert_eq!(cmd(&mut c, &["HGET", "h", "big"]).unwrap(), bulk("1.7e308"));
}

#[test]
fn resp3_reply_shapes() {
    let node = Node::start(&[]);
    let mut c = resp3(&node);
    cmd(&mut c, &["HSET", "h", "a", "1"]).unwrap();
    assert_eq!(
        cmd(&mut c, &["HGETALL", "h"]).unwrap(),
        Value::Map(vec![(bulk("a"), bulk("1"))])
    );
    assert_eq!(
        cmd(&mut c, &["HGETALL", "nokey"]).unwrap(),
        Value::Map(vec![])
    );
    assert_eq!(
        cmd(&mut c, &["HRANDFIELD", "h", "2", "WITHVALUES"]).unwrap(),
        Value::Array(vec![Value::Array(vec![bulk("a"), bulk("1")])])
    );
    assert_eq!(
        cmd(&mut c, &["HRANDFIELD", "h", "-2", "WITHVALUES"]).unwrap(),
        Value::Array(vec![
            Value::Array(vec![bulk("a"), bulk("1")]),
            Value::Array(vec![bulk("a"), bulk("1")])
        ])
    );
    assert_eq!(cmd(&mut c, &["HRANDFIELD", "nokey"]).unwrap(), Value::Nil);
    assert_eq!(
        cmd(&mut c, &["HSCAN", "h", "0"]).unwrap(),
        Value::Array(vec![bulk("0"), Value::Array(vec![bulk("a"), bulk("1")])])
    );
}

/// Runs a whole HSCAN with `options`, deleting `churn` fields (not in `keep`) after each call.
fn full_hscan(
    c: &mut redis::Connection,
    key: &str,
    options: &[&str],
    churn: &mut Vec<String>,
) -> (Vec<(String, String)>, usize) {
    let mut cursor = "0".to_string();
    let mut found = Vec::new();
    let mut calls = 0;
    loop {
        let mut args = vec!["HSCAN", key, cursor.as_str()];
        args.extend_from_slice(options);
        let Value::Array(reply) = cmd(c, &args).unwrap() else {
            panic!("HSCAN answers an array");
        };
        let next = text(&reply[0]);
        let items = texts(reply[1].clone());
        found.extend(items.chunks(2).map(|p| (p[0].clone(), p[1].clone())));
        calls += 1;
        assert!(calls < 10_000, "HSCAN must end");
        for _ in 0..2 {
            if let Some(f) = churn.pop() {
                cmd(c, &["HDEL", key, &f]).unwrap();
            }
        }
        if next == "0" {
            return (found, calls);
        }
        cursor = next;
    }
}

#[test]
fn hscan_pages_match_count_and_errors() {
    let node = Node::start(&[]);
    let mut c = node.client();
    // A packed hash is answered whole (checked below): paging is a table's, and with no
    // packing allowed every hash is one.
    cmd(&mut c, &["CONFIG", "SET", "hash-max-listpack-entries", "0"]).unwrap();
    let mut args = vec!["HSET".to_string(), "h".into()];
    for i in 0..100 {
        args.push(format!("f{i}"));
        args.push(format!("v{i}"));
    }
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    cmd(&mut c, &refs).unwrap();

    let (found, calls) = full_hscan(&mut c, "h", &[], &mut Vec::new());
    let fields: HashSet<_> = found.iter().map(|(f, _)| f.clone()).collect();
    assert_eq!(fields.len(), 100);
    assert!(
        found.iter().all(|(f, v)| f[1..] == v[1..]),
        "values travel with fields"
    );
    assert_eq!(calls, 10, "the default COUNT visits 10 fields per call");
    let (found, calls) = full_hscan(&mut c, "h", &["COUNT", "1000"], &mut Vec::new());
    assert_eq!((found.len(), calls), (100, 1));
    let (found, _) = full_hscan(
        &mut c,
        "h",
        &["MATCH", "f1*", "COUNT", "7"],
        &mut Vec::new(),
    );
    let mut names: Vec<_> = found.into_iter().map(|(f, _)| f).collect();
    names.sort();
    assert_eq!(names.len(), 11, "f1 and f10..f19: {names:?}");

    // Fields present for the whole scan are all returned while others are deleted.
    let mut churn: Vec<String> = (0..100)
        .filter(|i| i % 2 == 1)
        .map(|i| format!("f{i}"))
        .collect();
    let (found, _) = full_hscan(&mut c, "h", &["COUNT", "3"], &mut churn);
    let fields: HashSet<_> = found.into_iter().map(|(f, _)| f).collect();
    for i in (0..100).step_by(2) {
        assert!(fields.contains(&format!("f{i}")), "missed f{i}");
    }

    // A packed hash: one call, cursor 0, every (matching) field whatever COUNT says.
    cmd(
        &mut c,
        &["CONFIG", "SET", "hash-max-listpack-entries", "128"],
    )
    .unwrap();
    let mut args = vec!["HSET".to_string(), "small".into()];
    for i in 0..20 {
        args.push(format!("f{i}"));
        args.push(format!("v{i}"));
    }
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    cmd(&mut c, &refs).unwrap();
    assert_eq!(
        text(&cmd(&mut c, &["OBJECT", "ENCODING", "small"]).unwrap()),
        "listpack"
    );
    let (found, calls) = full_hscan(&mut c, "small", &["COUNT", "1"], &mut Vec::new());
    assert_eq!((found.len(), calls), (20, 1));
    let (found, calls) = full_hscan(&mut c, "small", &["MATCH", "f1*"], &mut Vec::new());
    assert_eq!((found.len(), calls), (11, 1));

    assert_eq!(error(&mut c, &["HSCAN", "h", "x"]), "ERR invalid cursor");
    assert_eq!(error(&mut c, &["HSCAN", "h", "-"]), "ERR invalid cursor");
    assert_eq!(
        error(&mut c, &["HSCAN", "h", "0", "COUNT", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["HSCAN", "h", "0", "COUNT", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error(&mut c, &["HSCAN", "h", "0", "MATCH"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["HSCAN", "h", "0", "NOVALUES"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["HSCAN", "h", "0", "TYPE", "hash"]),
        "ERR syntax error"
    );
    // A missing key answers an empty last page before the options are read, as in Redis.
    assert_eq!(
        cmd(&mut c, &["HSCAN", "nokey", "0", "COUNT", "0"]).unwrap(),
        Value::Array(vec![bulk("0"), Value::Array(vec![])])
    );
    assert_eq!(
        error(&mut c, &["HSCAN", "nokey", "x"]),
        "ERR invalid cursor"
    );
}

#[test]
fn hrandfield_counts_and_bounds() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]).unwrap();
    let one = text(&cmd(&mut c, &["HRANDFIELD", "h"]).unwrap());
    assert!(["a", "b", "c"].contains(&one.as_str()));
    assert_eq!(cmd(&mut c, &["HRANDFIELD", "nokey"]).unwrap(), Value::Nil);

    let two = texts(cmd(&mut c, &["HRANDFIELD", "h", "2"]).unwrap());
    assert_eq!(two.len(), 2);
    assert_ne!(two[0], two[1], "a positive count picks distinct fields");
    let mut all = texts(cmd(&mut c, &["HRANDFIELD", "h", "10"]).unwrap());
    all.sort();
    assert_eq!(all, ["a", "b", "c"]);
    let pairs = texts(cmd(&mut c, &["HRANDFIELD", "h", "10", "withvalues"]).unwrap());
    assert_eq!(pairs.len(), 6);
    let many = texts(cmd(&mut c, &["HRANDFIELD", "h", "-1000"]).unwrap());
    assert_eq!(many.len(), 1000, "a negative count repeats");
    let seen: HashSet<_> = many.iter().collect();
    assert_eq!(seen.len(), 3, "1000 picks of 3 fields see all of them");
    let pairs = texts(cmd(&mut c, &["HRANDFIELD", "h", "-50", "WITHVALUES"]).unwrap());
    assert_eq!(pairs.len(), 100);
    for p in pairs.chunks(2) {
        let expected = match p[0].as_str() {
            "a" => "1",
            "b" => "2",
            _ => "3",
        };
        assert_eq!(p[1], expected);
    }
    assert_eq!(
        cmd(&mut c, &["HRANDFIELD", "h", "0"]).unwrap(),
        Value::Array(vec![])
    );
    assert_eq!(
        cmd(&mut c, &["HRANDFIELD", "nokey", "-5"]).unwrap(),
        Value::Array(vec![])
    );

    assert_eq!(
        error(&mut c, &["HRANDFIELD", "h", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error(&mut c, &["HRANDFIELD", "h", "1", "foo"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["HRANDFIELD", "h", "1", "WITHVALUES", "x"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["HRANDFIELD", "nokey", "1", "foo"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["HRANDFIELD", "h", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(
        error(
            &mut c,
            &["HRANDFIELD", "h", "-9223372036854770000", "WITHVALUES"]
        ),
        "ERR value is out of range"
    );
    assert_eq!(
        error(
            &mut c,
            &["HRANDFIELD", "h", "9223372036854770000", "WITHVALUES"]
        ),
        "ERR value is out of range"
    );
    // Redis would try to answer this many elements and exhaust memory; the node refuses.
    assert!(error(&mut c, &["HRANDFIELD", "h", "-9223372036854775807"])
        .starts_with("ERR value is out of range, a reply with repeated elements holds at most"));
    // ...but only when it would answer: a missing key is an empty array, as in Redis.
    assert_eq!(
        cmd(&mut c, &["HRANDFIELD", "nokey", "-9223372036854775807"]).unwrap(),
        Value::Array(vec![])
    );
    assert_eq!(
        cmd(&mut c, &["PING"]).unwrap(),
        Value::SimpleString("PONG".into())
    );
}
