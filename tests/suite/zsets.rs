//! Sorted sets against a real node: every command, its error texts (Redis 7.0's), RESP2 and
//! RESP3 reply shapes, blocking pops woken by another client, and a redis-benchmark run.
//!
//! Method: typed queries through the `redis` crate for data, and raw RESP exchanges for exact
//! bytes (error texts, RESP3 shapes). Scores are printed as the shortest round-trip text
//! (`1.1`, as Redis 7.2+), not 7.0's `%.17g` (`1.1000000000000001`).

use integration::Node;
use redis::{Connection, FromRedisValue, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Runs one command through the `redis` crate and converts its reply.
fn q<T: FromRedisValue>(c: &mut Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Sends `commands` on a fresh connection (RESP3 first if `resp3`), then QUIT, and returns
/// every reply byte before QUIT's `+OK`.
fn raw(node: &Node, resp3: bool, commands: &[&[&str]]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    let mut all: Vec<&[&str]> = Vec::new();
    if resp3 {
        all.push(&["HELLO", "3"]);
    }
    all.extend_from_slice(commands);
    all.push(&["QUIT"]);
    for c in &all {
        out.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
        for a in c.iter() {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    s.write_all(&out).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    let mut text = String::from_utf8_lossy(&reply).into_owned();
    assert!(text.ends_with("+OK\r\n"), "no QUIT reply in {text:?}");
    text.truncate(text.len() - 5);
    if resp3 {
        // Drop the HELLO map: everything up to its last field, `modules` (an empty array).
        let end = text.find("$7\r\nmodules\r\n*0\r\n").expect("HELLO reply") + 17;
        text.drain(..end);
    }
    text
}

/// The error line a command answers (without `-` and CRLF), RESP2.
fn error(node: &Node, args: &[&str]) -> String {
    let reply = raw(node, false, &[args]);
    assert!(
        reply.starts_with('-'),
        "{args:?} answered {reply:?}, not an error"
    );
    reply[1..].trim_end().to_string()
}

/// A `redis` crate connection that fails instead of hanging if a reply never completes.
fn client(node: &Node) -> Connection {
    let c = node.client();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn zadd_options_incr_and_errors() {
    let node = Node::start(&[]);
    let mut c = client(&node);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]), 2);
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "NX", "5", "a", "3", "c"]),
        1
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]), "1");
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "XX", "5", "a", "9", "new"]),
        0
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]), "5");
    assert_eq!(q::<Option<String>>(&mut c, &["ZSCORE", "z", "new"]), None);
    // CH counts updates too; GT/LT only move scores one way.
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZADD", "z", "GT", "CH", "4", "a", "10", "b", "0", "d"]
        ),
        2
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]), "5");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "b"]), "10");
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "LT", "CH", "1", "a", "20", "b"]),
        1
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]), "1");
    // INCR answers the new score, or nil when NX/XX/GT/LT stopped it.
    assert_eq!(
        q::<String>(&mut c, &["ZADD", "z", "INCR", "2.5", "a"]),
        "3.5"
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZADD", "z", "NX", "INCR", "1", "a"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZADD", "z", "XX", "INCR", "1", "zz"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZADD", "z", "GT", "INCR", "-1", "a"]),
        None
    );
    assert_eq!(q::<String>(&mut c, &["ZINCRBY", "z", "-0.5", "a"]), "3");
    assert_eq!(
        q::<String>(&mut c, &["ZINCRBY", "fresh", "1.5", "m"]),
        "1.5"
    );
    // Redis 7.0's `%.17g` formatting (7.2 moved to the shortest form; Redis 7.0's own suite
    // expects 17 digits), hex and exponent input as strtod reads it.
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "f", "1.1", "x", "0x10", "h", "1e3", "e"]),
        3
    );
    assert_eq!(
        q::<String>(&mut c, &["ZSCORE", "f", "x"]),
        "1.1000000000000001"
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "f", "h"]), "16");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "f", "e"]), "1000");
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "inf", "+inf", "x", "-inf", "y"]),
        2
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "inf", "x"]), "inf");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "inf", "y"]), "-inf");
    // XX on a missing key creates nothing.
    assert_eq!(q::<i64>(&mut c, &["ZADD", "none", "XX", "1", "a"]), 0);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "none"]), None);

    let nan = "ERR resulting score is not a number (NaN)";
    assert_eq!(error(&node, &["ZINCRBY", "inf", "-inf", "x"]), nan);
    assert_eq!(error(&node, &["ZADD", "inf", "INCR", "-inf", "x"]), nan);
    assert_eq!(
        error(&node, &["ZADD", "z", "XX", "NX", "1", "a"]),
        "ERR XX and NX options at the same time are not compatible"
    );
    let gtlt = "ERR GT, LT, and/or NX options at the same time are not compatible";
    assert_eq!(error(&node, &["ZADD", "z", "GT", "LT", "1", "a"]), gtlt);
    assert_eq!(error(&node, &["ZADD", "z", "NX", "GT", "1", "a"]), gtlt);
    assert_eq!(
        error(&node, &["ZADD", "z", "INCR", "1", "a", "2", "b"]),
        "ERR INCR option supports a single increment-element pair"
    );
    assert_eq!(
        error(&node, &["ZADD", "z", "1", "a", "2"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZADD", "z", "foo", "1", "a"]),
        "ERR syntax error"
    );
    for bad in ["abc", "nan", " 1", "1e400", ""] {
        assert_eq!(
            error(&node, &["ZADD", "z", bad, "a"]),
            "ERR value is not a valid float",
            "score {bad:?}"
        );
    }
    assert_eq!(
        error(&node, &["ZINCRBY", "z", "x", "a"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        error(&node, &["ZADD", "z", "1"]),
        "ERR wrong number of arguments for 'zadd' command"
    );
    // A bad score anywhere leaves the set untouched.
    assert_eq!(
        error(&node, &["ZADD", "z", "7", "q", "x", "r"]),
        "ERR value is not a valid float"
    );
    assert_eq!(q::<Option<String>>(&mut c, &["ZSCORE", "z", "q"]), None);
    q::<()>(&mut c, &["SET", "str", "v"]);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(error(&node, &["ZADD", "str", "1", "a"]), wrongtype);
    assert_eq!(error(&node, &["ZINCRBY", "str", "1", "a"]), wrongtype);
    // The sorted set is not a string either.
    assert_eq!(error(&node, &["GET", "z"]), wrongtype);
}

#[test]
fn lookups_counts_and_ranks() {
    let node = Node::start(&[]);
    let mut c = client(&node);
    q::<i64>(
        &mut c,
        &["ZADD", "z", "1", "a", "2", "b", "2", "c", "3", "d"],
    );
    q::<i64>(
        &mut c,
        &[
            "ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e",
        ],
    );
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]), 4);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "nokey"]), 0);
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["ZMSCORE", "z", "a", "nope", "d"]),
        vec![Some("1".into()), None, Some("3".into())]
    );
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["ZMSCORE", "nokey", "a", "b"]),
        vec![None, None]
    );
    assert_eq!(q::<Option<i64>>(&mut c, &["ZRANK", "z", "c"]), Some(2));
    assert_eq!(q::<Option<i64>>(&mut c, &["ZREVRANK", "z", "c"]), Some(1));
    assert_eq!(q::<Option<i64>>(&mut c, &["ZRANK", "z", "nope"]), None);
    assert_eq!(q::<Option<i64>>(&mut c, &["ZRANK", "nokey", "a"]), None);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "-inf", "+inf"]), 4);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "(1", "2"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "(2", "(3"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "3", "1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "lex", "-", "+"]), 5);
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "lex", "[b", "(d"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "lex", "+", "-"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "nokey", "-", "+"]), 0);
    // Ranges are checked before the key is looked up.
    assert_eq!(
        error(&node, &["ZCOUNT", "nokey", "x", "1"]),
        "ERR min or max is not a float"
    );
    assert_eq!(
        error(&node, &["ZCOUNT", "z", "(nan", "1"]),
        "ERR min or max is not a float"
    );
    assert_eq!(
        error(&node, &["ZLEXCOUNT", "nokey", "a", "+"]),
        "ERR min or max not valid string range item"
    );
    assert_eq!(
        error(&node, &["ZLEXCOUNT", "lex", "+x", "+"]),
        "ERR min or max not valid string range item"
    );
    assert_eq!(
        error(&node, &["ZMSCORE", "z"]),
        "ERR wrong number of arguments for 'zmscore' command"
    );
    q::<()>(&mut c, &["SET", "str", "v"]);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for cmd in [
        &["ZCARD", "str"][..],
        &["ZSCORE", "str", "a"],
        &["ZMSCORE", "str", "a"],
        &["ZRANK", "str", "a"],
        &["ZREVRANK", "str", "a"],
        &["ZCOUNT", "str", "0", "1"],
        &["ZLEXCOUNT", "str", "-", "+"],
    ] {
        assert_eq!(error(&node, cmd), wrongtype, "{cmd:?}");
    }
}

#[test]
fn ranges_by_rank_score_and_lex() {
    let node = Node::start(&[]);
    let mut c = client(&node);
    q::<i64>(
        &mut c,
        &[
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
    q::<i64>(
        &mut c,
        &[
            "ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e",
        ],
    );
    let r = |c: &mut Connection, args: &[&str]| q::<Vec<String>>(c, args);
    assert_eq!(
        r(&mut c, &["ZRANGE", "z", "0", "-1"]),
        strings(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(
        r(&mut c, &["ZRANGE", "z", "-2", "100"]),
        strings(&["d", "e"])
    );
    assert_eq!(r(&mut c, &["ZRANGE", "z", "3", "1"]), strings(&[]));
    assert_eq!(
        r(&mut c, &["ZRANGE", "z", "0", "1", "WITHSCORES"]),
        strings(&["a", "1", "b", "2"])
    );
    assert_eq!(
        r(&mut c, &["ZRANGE", "z", "0", "1", "REV"]),
        strings(&["e", "d"])
    );
    assert_eq!(
        r(&mut c, &["ZREVRANGE", "z", "1", "2"]),
        strings(&["d", "c"])
    );
    assert_eq!(
        r(&mut c, &["ZRANGE", "z", "(1", "3", "BYSCORE"]),
        strings(&["b", "c"])
    );
    assert_eq!(
        r(
            &mut c,
            &["ZRANGE", "z", "+inf", "(2", "BYSCORE", "REV", "LIMIT", "1", "2"]
        ),
        strings(&["d", "c"])
    );
    assert_eq!(
        r(
            &mut c,
            &[
                "ZRANGEBYSCORE",
                "z",
                "-inf",
                "+inf",
                "WITHSCORES",
                "LIMIT",
                "3",
                "5"
            ]
        ),
        strings(&["d", "4", "e", "5"])
    );
    // A negative count means all; a negative offset selects nothing (as in Redis).
    assert_eq!(
        r(
            &mut c,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "2", "-1"]
        ),
        strings(&["c", "d", "e"])
    );
    assert_eq!(
        r(
            &mut c,
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2"]
        ),
        strings(&[])
    );
    assert_eq!(
        r(
            &mut c,
            &["ZREVRANGEBYSCORE", "z", "4", "(1", "LIMIT", "0", "2"]
        ),
        strings(&["d", "c"])
    );
    assert_eq!(
        r(&mut c, &["ZRANGEBYLEX", "lex", "[b", "(e"]),
        strings(&["b", "c", "d"])
    );
    assert_eq!(
        r(&mut c, &["ZRANGEBYLEX", "lex", "-", "+", "LIMIT", "1", "2"]),
        strings(&["b", "c"])
    );
    assert_eq!(
        r(&mut c, &["ZREVRANGEBYLEX", "lex", "+", "(c"]),
        strings(&["e", "d"])
    );
    assert_eq!(
        r(&mut c, &["ZRANGE", "lex", "(a", "[c", "BYLEX"]),
        strings(&["b", "c"])
    );
    assert_eq!(
        r(&mut c, &["ZRANGE", "lex", "[c", "-", "BYLEX", "REV"]),
        strings(&["c", "b", "a"])
    );
    assert_eq!(
        r(&mut c, &["ZRANGE", "lex", "-", "-", "BYLEX"]),
        strings(&[])
    );
    assert_eq!(r(&mut c, &["ZRANGE", "nokey", "0", "-1"]), strings(&[]));
    // Range errors, each as Redis words it.
    assert_eq!(
        error(&node, &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"]),
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    );
    assert_eq!(
        error(&node, &["ZRANGE", "lex", "-", "+", "BYLEX", "WITHSCORES"]),
        "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
    );
    assert_eq!(
        error(&node, &["ZRANGEBYLEX", "lex", "-", "+", "WITHSCORES"]),
        "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
    );
    assert_eq!(
        error(&node, &["ZRANGE", "z", "0", "-1", "REV", "REV"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZREVRANGE", "z", "0", "-1", "REV"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZRANGEBYSCORE", "z", "0", "1", "LIMIT", "1"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZRANGE", "z", "a", "b"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error(&node, &["ZRANGE", "z", "x", "1", "BYSCORE"]),
        "ERR min or max is not a float"
    );
    assert_eq!(
        error(&node, &["ZRANGEBYLEX", "lex", "a", "+"]),
        "ERR min or max not valid string range item"
    );
    assert_eq!(
        error(&node, &["ZRANGE", "z"]),
        "ERR wrong number of arguments for 'zrange' command"
    );

    // ZRANGESTORE stores the selection; an empty one deletes the destination.
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "ZRANGESTORE",
                "dst",
                "z",
                "(1",
                "4",
                "BYSCORE",
                "LIMIT",
                "1",
                "5"
            ]
        ),
        2
    );
    assert_eq!(
        r(&mut c, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
        strings(&["c", "3", "d", "4"])
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZRANGESTORE", "dst", "z", "0", "-1", "REV"]),
        5
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZRANGESTORE", "dst", "nokey", "0", "-1"]),
        0
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "dst"]), None);
    assert_eq!(
        error(&node, &["ZRANGESTORE", "dst", "z", "0", "-1", "WITHSCORES"]),
        "ERR syntax error"
    );
}

#[test]
fn removals_delete_empty_keys() {
    let node = Node::start(&[]);
    let mut c = client(&node);
    q::<i64>(
        &mut c,
        &[
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "a", "nope", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "nokey", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "-1", "-1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "10", "20"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "z", "(2", "3"]), 1);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "z", "0", "-1"]),
        strings(&["b", "d"])
    );
    q::<i64>(&mut c, &["ZADD", "lex", "0", "a", "0", "b", "0", "c"]);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYLEX", "lex", "(a", "+"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYLEX", "lex", "-", "+"]), 1);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "lex"]), None);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "0", "-1"]), 2);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "z"]), None);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "a"]), 1);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "z"]), None);
    assert_eq!(
        error(&node, &["ZREMRANGEBYRANK", "z", "a", "1"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error(&node, &["ZREMRANGEBYSCORE", "z", "1", "x"]),
        "ERR min or max is not a float"
    );
    assert_eq!(
        error(&node, &["ZREMRANGEBYLEX", "z", "x", "+"]),
        "ERR min or max not valid string range item"
    );
}

#[test]
fn pops_and_multi_key_pops() {
    let node = Node::start(&[]);
    let mut c = client(&node);
    q::<i64>(
        &mut c,
        &[
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZPOPMIN", "z"]),
        strings(&["a", "1"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZPOPMAX", "z", "2"]),
        strings(&["e", "5", "d", "4"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZPOPMIN", "z", "0"]),
        strings(&[])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZPOPMIN", "nokey"]),
        strings(&[])
    );
    assert_eq!(
        error(&node, &["ZPOPMIN", "z", "-1"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        error(&node, &["ZPOPMIN", "z", "x"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        error(&node, &["ZPOPMIN", "z", "1", "2"]),
        "ERR syntax error"
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZPOPMIN", "z", "10"]),
        strings(&["b", "2", "c", "3"])
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "z"]), None);

    q::<i64>(&mut c, &["ZADD", "m", "1", "a", "2", "b", "3", "c"]);
    let popped: (String, Vec<(String, String)>) =
        q(&mut c, &["ZMPOP", "2", "nokey", "m", "MAX", "COUNT", "2"]);
    assert_eq!(
        popped,
        (
            "m".into(),
            vec![("c".into(), "3".into()), ("b".into(), "2".into())]
        )
    );
    assert_eq!(
        q::<Value>(&mut c, &["ZMPOP", "1", "nokey", "MIN"]),
        Value::Nil
    );
    assert_eq!(
        error(&node, &["ZMPOP", "0", "m", "MIN"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        error(&node, &["ZMPOP", "x", "m", "MIN"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        error(&node, &["ZMPOP", "1", "m", "FOO"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZMPOP", "2", "m", "MIN"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZMPOP", "1", "m", "MIN", "COUNT", "0"]),
        "ERR count should be greater than 0"
    );
    assert_eq!(
        error(
            &node,
            &["ZMPOP", "1", "m", "MIN", "COUNT", "1", "COUNT", "1"]
        ),
        "ERR syntax error"
    );

    // Blocking forms serve at once when a set has members; BZPOPMIN's reply names the key.
    q::<i64>(&mut c, &["ZADD", "b2", "7", "x", "8", "y"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["BZPOPMIN", "nokey", "b2", "0"]),
        strings(&["b2", "x", "7"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["BZPOPMAX", "b2", "0"]),
        strings(&["b2", "y", "8"])
    );
    q::<i64>(&mut c, &["ZADD", "b3", "1", "p"]);
    let popped: (String, Vec<(String, String)>) =
        q(&mut c, &["BZMPOP", "0", "1", "b3", "MIN", "COUNT", "5"]);
    assert_eq!(popped, ("b3".into(), vec![("p".into(), "1".into())]));
    // Nothing to pop: the timeout passes and the answer is a null array.
    let started = Instant::now();
    assert_eq!(
        q::<Value>(&mut c, &["BZPOPMIN", "empty", "0.2"]),
        Value::Nil
    );
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(
        q::<Value>(&mut c, &["BZMPOP", "0.1", "1", "empty", "MAX"]),
        Value::Nil
    );
    assert_eq!(
        error(&node, &["BZPOPMIN", "z", "-1"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        error(&node, &["BZPOPMIN", "z", "abc"]),
        "ERR timeout is not a float or out of range"
    );
    q::<()>(&mut c, &["SET", "str", "v"]);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(error(&node, &["ZPOPMIN", "str"]), wrongtype);
    assert_eq!(error(&node, &["BZPOPMIN", "str", "0"]), wrongtype);
    assert_eq!(error(&node, &["ZMPOP", "1", "str", "MIN"]), wrongtype);
}

#[test]
fn bzpopmin_waits_for_a_push_from_another_client() {
    // Goal: a blocked BZPOPMIN is served by a later ZADD on another connection.
    // Method: one thread blocks with a long timeout; the main thread adds after the waiter
    // is registered (seen in INFO's blocked_clients when available, else after a pause).
    let node = Node::start(&[]);
    let url = node.url();
    let waiter = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let started = Instant::now();
        let got: Vec<String> = q(&mut c, &["BZPOPMIN", "q1", "q2", "30"]);
        (got, started.elapsed())
    });
    let mut c = client(&node);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "q2", "5", "late", "3", "first"]),
        2
    );
    let (got, waited) = waiter.join().unwrap();
    assert_eq!(got, strings(&["q2", "first", "3"]));
    assert!(waited < Duration::from_secs(20), "waited {waited:?}");
    // The other member stays.
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "q2", "0", "-1"]),
        strings(&["late"])
    );

    // BZMPOP wakes the same way, with its nested reply.
    let url = node.url();
    let waiter = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        q::<(String, Vec<(String, String)>)>(
            &mut c,
            &["BZMPOP", "30", "1", "q3", "MAX", "COUNT", "2"],
        )
    });
    std::thread::sleep(Duration::from_millis(300));
    q::<i64>(&mut c, &["ZADD", "q3", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(
        waiter.join().unwrap(),
        (
            "q3".into(),
            vec![("c".into(), "3".into()), ("b".into(), "2".into())]
        )
    );
}

#[test]
fn union_intersection_difference() {
    let node = Node::start(&[]);
    let mut c = client(&node);
    q::<i64>(&mut c, &["ZADD", "u1", "1", "a", "2", "b", "3", "c"]);
    q::<i64>(&mut c, &["ZADD", "u2", "4", "b", "5", "c", "6", "d"]);
    let all = |c: &mut Connection, key: &str| {
        q::<Vec<String>>(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"])
    };
    assert_eq!(q::<i64>(&mut c, &["ZUNIONSTORE", "d", "2", "u1", "u2"]), 4);
    assert_eq!(
        all(&mut c, "d"),
        strings(&["a", "1", "b", "6", "d", "6", "c", "8"])
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "ZUNIONSTORE",
                "d",
                "2",
                "u1",
                "u2",
                "WEIGHTS",
                "2",
                "-1",
                "AGGREGATE",
                "MAX"
            ]
        ),
        4
    );
    assert_eq!(
        all(&mut c, "d"),
        strings(&["d", "-6", "a", "2", "b", "4", "c", "6"])
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZINTERSTORE", "d", "2", "u1", "u2", "AGGREGATE", "MIN"]
        ),
        2
    );
    assert_eq!(all(&mut c, "d"), strings(&["b", "2", "c", "3"]));
    assert_eq!(q::<i64>(&mut c, &["ZDIFFSTORE", "d", "2", "u1", "u2"]), 1);
    assert_eq!(all(&mut c, "d"), strings(&["a", "1"]));
    assert_eq!(
        q::<i64>(&mut c, &["ZINTERSTORE", "d", "2", "u1", "nokey"]),
        0
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "d"]), None);
    // inf + -inf sums to 0, and 0 * inf weighs 0, as in Redis.
    q::<i64>(&mut c, &["ZADD", "pinf", "+inf", "x"]);
    q::<i64>(&mut c, &["ZADD", "ninf", "-inf", "x"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZUNION", "2", "pinf", "ninf", "WITHSCORES"]),
        strings(&["x", "0"])
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &[
                "ZINTER",
                "2",
                "pinf",
                "u1",
                "WEIGHTS",
                "0",
                "1",
                "WITHSCORES"
            ]
        ),
        strings(&[])
    );
    assert_eq!(
        q::<Vec<String>>(
            &mut c,
            &["ZUNION", "1", "pinf", "WEIGHTS", "0", "WITHSCORES"]
        ),
        strings(&["x", "0"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZINTER", "2", "u1", "u2", "WITHSCORES"]),
        strings(&["b", "6", "c", "8"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZDIFF", "2", "u2", "u1"]),
        strings(&["d"])
    );
    assert_eq!(q::<i64>(&mut c, &["ZINTERCARD", "2", "u1", "u2"]), 2);
    assert_eq!(
        q::<i64>(&mut c, &["ZINTERCARD", "2", "u1", "u2", "LIMIT", "1"]),
        1
    );
    // The destination may be a source.
    assert_eq!(q::<i64>(&mut c, &["ZUNIONSTORE", "u1", "2", "u1", "u2"]), 4);

    assert_eq!(
        error(&node, &["ZUNIONSTORE", "d", "0", "u1"]),
        "ERR at least 1 input key is needed for 'zunionstore' command"
    );
    assert_eq!(
        error(&node, &["ZINTER", "0", "u1"]),
        "ERR at least 1 input key is needed for 'zinter' command"
    );
    assert_eq!(
        error(&node, &["ZUNIONSTORE", "d", "x", "u1"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error(&node, &["ZUNIONSTORE", "d", "3", "u1", "u2"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(
            &node,
            &["ZUNIONSTORE", "d", "2", "u1", "u2", "WEIGHTS", "1", "x"]
        ),
        "ERR weight value is not a float"
    );
    assert_eq!(
        error(
            &node,
            &["ZUNIONSTORE", "d", "2", "u1", "u2", "WEIGHTS", "1"]
        ),
        "ERR syntax error"
    );
    assert_eq!(
        error(
            &node,
            &["ZUNIONSTORE", "d", "2", "u1", "u2", "AGGREGATE", "AVG"]
        ),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZUNIONSTORE", "d", "1", "u1", "WITHSCORES"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZDIFF", "2", "u1", "u2", "WEIGHTS", "1", "2"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZINTERCARD", "1", "u1", "LIMIT", "-1"]),
        "ERR LIMIT can't be negative"
    );
    q::<()>(&mut c, &["SET", "str", "v"]);
    // Key types are checked before the options are read.
    assert_eq!(
        error(&node, &["ZUNIONSTORE", "d", "1", "str", "WEIGHTS", "x"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn randmember_and_scan() {
    let node = Node::start(&[]);
    let mut c = client(&node);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    let one: String = q(&mut c, &["ZRANDMEMBER", "z"]);
    assert!(["a", "b", "c"].contains(&one.as_str()));
    assert_eq!(q::<Option<String>>(&mut c, &["ZRANDMEMBER", "nokey"]), None);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANDMEMBER", "nokey", "3"]),
        strings(&[])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANDMEMBER", "z", "0"]),
        strings(&[])
    );
    let mut distinct: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "2"]);
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 2);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANDMEMBER", "z", "10", "WITHSCORES"]),
        strings(&["a", "1", "b", "2", "c", "3"])
    );
    let repeats: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "-20"]);
    assert_eq!(repeats.len(), 20);
    assert!(repeats
        .iter()
        .all(|m| ["a", "b", "c"].contains(&m.as_str())));
    let pairs: Vec<(String, String)> = q(&mut c, &["ZRANDMEMBER", "z", "-5", "WITHSCORES"]);
    assert!(pairs
        .iter()
        .all(|(m, s)| (m.as_bytes()[0] - b'a' + 1).to_string() == *s));
    assert_eq!(
        error(&node, &["ZRANDMEMBER", "z", "1", "foo"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZRANDMEMBER", "z", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    // With scores the reply would hold twice the count: Redis refuses past half the range.
    assert_eq!(
        error(
            &node,
            &["ZRANDMEMBER", "z", "-9223372036854770000", "WITHSCORES"]
        ),
        "ERR value is out of range"
    );

    // A small set comes back whole in one call, cursor 0.
    let (cursor, items): (String, Vec<String>) = q(&mut c, &["ZSCAN", "z", "0"]);
    assert_eq!(cursor, "0");
    assert_eq!(items.len(), 6);
    let (_, items): (String, Vec<String>) = q(&mut c, &["ZSCAN", "z", "0", "MATCH", "b*"]);
    assert_eq!(items, strings(&["b", "2"]));
    // A large one takes several calls, every member exactly once when nothing changes.
    let mut args: Vec<String> = vec!["ZADD".into(), "big".into()];
    for i in 0..1000 {
        args.push(i.to_string());
        args.push(format!("m{i}"));
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(q::<i64>(&mut c, &argv), 1000);
    let mut seen = std::collections::HashMap::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let (next, items): (String, Vec<String>) =
            q(&mut c, &["ZSCAN", "big", &cursor, "COUNT", "100"]);
        for pair in items.chunks(2) {
            seen.insert(pair[0].clone(), pair[1].clone());
        }
        calls += 1;
        cursor = next;
        if cursor == "0" {
            break;
        }
        assert!(calls < 100, "scan does not end");
    }
    assert_eq!(seen.len(), 1000);
    assert_eq!(seen["m7"], "7");
    assert!(calls >= 10);
    let (_, nothing): (String, Vec<String>) = q(&mut c, &["ZSCAN", "nokey", "0"]);
    assert!(nothing.is_empty());
    assert_eq!(error(&node, &["ZSCAN", "z", "abc"]), "ERR invalid cursor");
    assert_eq!(
        error(&node, &["ZSCAN", "z", "0", "COUNT", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZSCAN", "z", "0", "FOO"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&node, &["ZSCAN", "z", "0", "COUNT", "x"]),
        "ERR value is not an integer or out of range"
    );
}

#[test]
fn resp2_and_resp3_reply_shapes() {
    let node = Node::start(&[]);
    let setup: &[&[&str]] = &[&["ZADD", "z", "1.5", "a", "2", "b", "3", "c"]];
    assert_eq!(raw(&node, false, setup), ":3\r\n");
    let cmds: &[&[&str]] = &[
        &["ZSCORE", "z", "a"],
        &["ZSCORE", "z", "nope"],
        &["ZRANGE", "z", "0", "1", "WITHSCORES"],
        &["ZRANGEBYSCORE", "z", "2", "2", "WITHSCORES"],
        &["ZMSCORE", "z", "b", "nope"],
        &["ZADD", "z", "NX", "INCR", "1", "a"],
        &["ZINCRBY", "z", "0", "b"],
        &["ZUNION", "1", "z", "WITHSCORES"],
        &["ZRANDMEMBER", "z", "5", "WITHSCORES"],
        &["ZPOPMIN", "z"],
        &["ZPOPMIN", "z", "1"],
        &["ZMPOP", "1", "z", "MAX"],
        &["ZPOPMIN", "nokey"],
        &["ZMPOP", "1", "nokey", "MIN"],
    ];
    // Replies in the order of `cmds`; the setup above ran on its own connection.
    assert_eq!(
        raw(&node, false, cmds),
        concat!(
            "$3\r\n1.5\r\n",
            "$-1\r\n",
            "*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n",
            "*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
            "*2\r\n$1\r\n2\r\n$-1\r\n",
            "$-1\r\n",
            "$1\r\n2\r\n",
            "*6\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n",
            "*6\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n",
            "*2\r\n$1\r\na\r\n$3\r\n1.5\r\n",
            "*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
            "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n",
            "*0\r\n",
            "*-1\r\n",
        )
    );
    assert_eq!(raw(&node, false, setup), ":3\r\n");
    assert_eq!(
        raw(&node, true, cmds),
        concat!(
            ",1.5\r\n",
            "_\r\n",
            "*2\r\n*2\r\n$1\r\na\r\n,1.5\r\n*2\r\n$1\r\nb\r\n,2\r\n",
            "*1\r\n*2\r\n$1\r\nb\r\n,2\r\n",
            "*2\r\n,2\r\n_\r\n",
            "_\r\n",
            ",2\r\n",
            "*3\r\n*2\r\n$1\r\na\r\n,1.5\r\n*2\r\n$1\r\nb\r\n,2\r\n*2\r\n$1\r\nc\r\n,3\r\n",
            "*3\r\n*2\r\n$1\r\na\r\n,1.5\r\n*2\r\n$1\r\nb\r\n,2\r\n*2\r\n$1\r\nc\r\n,3\r\n",
            "*2\r\n$1\r\na\r\n,1.5\r\n",
            "*1\r\n*2\r\n$1\r\nb\r\n,2\r\n",
            "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nc\r\n,3\r\n",
            "*0\r\n",
            "_\r\n",
        )
    );
    // BZPOPMIN is flat in both; ZSCAN scores are bulk strings in both.
    assert_eq!(raw(&node, false, &[&["ZADD", "w", "4", "m"]]), ":1\r\n");
    assert_eq!(
        raw(
            &node,
            true,
            &[
                &["ZSCAN", "w", "0"],
                &["BZPOPMIN", "w", "0"],
                &["BZPOPMIN", "w", "0.01"]
            ]
        ),
        concat!(
            "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nm\r\n$1\r\n4\r\n",
            "*3\r\n$1\r\nw\r\n$1\r\nm\r\n,4\r\n",
            "_\r\n",
        )
    );
}

#[test]
fn redis_benchmark_zadd_zpopmin_without_errors() {
    // Goal: real-client traffic (pipelined, concurrent) gets only valid replies.
    let node = Node::start(&[]);
    let out = std::process::Command::new("redis-benchmark")
        .args([
            "-p",
            &node.port.to_string(),
            "-t",
            "zadd,zpopmin",
            "-n",
            "2000",
            "-r",
            "500",
            "-P",
            "4",
            "-q",
        ])
        .output()
        .expect("running redis-benchmark (scripts/install-deps.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "\n");
    assert!(out.status.success(), "redis-benchmark failed: {text}");
    assert!(
        text.contains("ZADD:") && text.contains("ZPOPMIN:"),
        "{text}"
    );
    assert!(!text.to_ascii_lowercase().contains("error"), "{text}");
}
