//! Strings, driven through the `redis` crate and redis-cli against a real node.

use integration::{cmd, Node};
use redis::Value;

#[test]
fn set_get_and_options() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["SET", "k", "v"]).unwrap(), Value::Okay);
    assert_eq!(
        cmd(&mut c, &["GET", "k"]).unwrap(),
        Value::BulkString(b"v".to_vec())
    );
    assert_eq!(cmd(&mut c, &["SET", "k", "w", "NX"]).unwrap(), Value::Nil);
    assert_eq!(
        cmd(&mut c, &["SET", "k", "w", "XX", "GET"]).unwrap(),
        Value::BulkString(b"v".to_vec())
    );
    assert_eq!(
        cmd(&mut c, &["SET", "k2", "x", "EX", "100"]).unwrap(),
        Value::Okay
    );
    let e = cmd(&mut c, &["SET", "k", "v", "EX", "0"]).unwrap_err();
    assert_eq!(e.to_string(), "An error was signalled by the server - ResponseError: invalid expire time in 'set' command");
    assert!(cmd(&mut c, &["SET", "k", "v", "NX", "XX"])
        .unwrap_err()
        .to_string()
        .contains("syntax error"));
    assert_eq!(node.cli(&["GET", "k"]), "w");
}

/// Strings edited in place (SETRANGE, APPEND, SETBIT) report Redis's `raw` encoding however
/// short; a string written whole again is `embstr`.
#[test]
fn strings_edited_in_place_are_raw() {
    let node = Node::start(&[]);
    let encoding = |key: &str| node.cli(&["OBJECT", "ENCODING", key]);
    node.cli(&["SET", "n", "1234"]);
    assert_eq!(encoding("n"), "int");
    assert_eq!(node.cli(&["SETRANGE", "n", "0", "2"]), "4");
    assert_eq!(node.cli(&["GET", "n"]), "2234");
    assert_eq!(encoding("n"), "raw");
    node.cli(&["SET", "n", "short", "KEEPTTL"]);
    assert_eq!(encoding("n"), "embstr");
    assert_eq!(node.cli(&["APPEND", "n", "er"]), "7");
    assert_eq!(encoding("n"), "raw");
    node.cli(&["SET", "b", "x"]);
    node.cli(&["SETBIT", "b", "0", "1"]);
    assert_eq!(encoding("b"), "raw");
    // A key APPEND creates is stored like SET's.
    node.cli(&["APPEND", "fresh", "abc"]);
    assert_eq!(encoding("fresh"), "embstr");
    node.cli(&["SETRANGE", "made", "0", "abc"]);
    assert_eq!(encoding("made"), "raw");
}

#[test]
fn counters_and_errors() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["INCR", "n"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["INCRBY", "n", "41"]).unwrap(), Value::Int(42));
    assert_eq!(cmd(&mut c, &["DECRBY", "n", "2"]).unwrap(), Value::Int(40));
    assert_eq!(
        cmd(&mut c, &["INCRBYFLOAT", "n", "0.5"]).unwrap(),
        Value::BulkString(b"40.5".to_vec())
    );
    cmd(&mut c, &["SET", "s", "abc"]).unwrap();
    assert!(cmd(&mut c, &["INCR", "s"])
        .unwrap_err()
        .to_string()
        .contains("value is not an integer or out of range"));
    cmd(&mut c, &["SET", "max", "9223372036854775807"]).unwrap();
    assert!(cmd(&mut c, &["INCR", "max"])
        .unwrap_err()
        .to_string()
        .contains("increment or decrement would overflow"));
    assert_eq!(
        node.cli(&["NOSUCHCMD", "a"]),
        "ERR unknown command 'NOSUCHCMD', with args beginning with: 'a' "
    );
    assert_eq!(
        node.cli(&["GET"]),
        "ERR wrong number of arguments for 'get' command"
    );
}

#[test]
fn ranges_append_and_multi_key() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(
        cmd(&mut c, &["APPEND", "a", "Hello"]).unwrap(),
        Value::Int(5)
    );
    assert_eq!(
        cmd(&mut c, &["APPEND", "a", " World"]).unwrap(),
        Value::Int(11)
    );
    assert_eq!(
        cmd(&mut c, &["GETRANGE", "a", "-5", "-1"]).unwrap(),
        Value::BulkString(b"World".to_vec())
    );
    assert_eq!(
        cmd(&mut c, &["SETRANGE", "a", "6", "Redis"]).unwrap(),
        Value::Int(11)
    );
    assert_eq!(
        cmd(&mut c, &["GET", "a"]).unwrap(),
        Value::BulkString(b"Hello Redis".to_vec())
    );
    assert_eq!(
        cmd(&mut c, &["SETRANGE", "z", "3", "x"]).unwrap(),
        Value::Int(4)
    );
    assert_eq!(
        cmd(&mut c, &["GET", "z"]).unwrap(),
        Value::BulkString(b"\0\0\0x".to_vec())
    );
    assert_eq!(
        cmd(&mut c, &["MSET", "m1", "1", "m2", "2"]).unwrap(),
        Value::Okay
    );
    assert_eq!(
        cmd(&mut c, &["MSETNX", "m2", "x", "m3", "3"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        cmd(&mut c, &["MGET", "m1", "m2", "m3"]).unwrap(),
        Value::Array(vec![
            Value::BulkString(b"1".to_vec()),
            Value::BulkString(b"2".to_vec()),
            Value::Nil
        ])
    );
    assert_eq!(cmd(&mut c, &["STRLEN", "a"]).unwrap(), Value::Int(11));
    assert_eq!(
        cmd(&mut c, &["GETDEL", "a"]).unwrap(),
        Value::BulkString(b"Hello Redis".to_vec())
    );
    assert_eq!(cmd(&mut c, &["GET", "a"]).unwrap(), Value::Nil);
}

/// Only the canonical decimal form of an integer is one: "-0" and "007" are strings that read
/// back as written (they were once stored as the integers 0 and 7), and INCRBY refuses them
/// as increments, as Redis's string2ll does.
#[test]
fn non_canonical_integers_stay_strings() {
    let node = Node::start(&[]);
    for s in ["-0", "007", "-007"] {
        node.cli(&["SET", "k", s]);
        assert_eq!(node.cli(&["GET", "k"]), s);
        assert_eq!(node.cli(&["OBJECT", "ENCODING", "k"]), "embstr");
    }
    node.cli(&["SET", "n", "-12"]);
    assert_eq!(node.cli(&["OBJECT", "ENCODING", "n"]), "int");
    assert_eq!(
        node.cli(&["INCRBY", "n", "-0"]),
        "ERR value is not an integer or out of range"
    );
}
