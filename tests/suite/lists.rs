//! Lists, driven against a real node: every command with its replies and Redis 7.0 error
//! texts, exact RESP2/RESP3 bytes where null rules differ, and the blocking commands with
//! clients on their own threads (blocked, served first come first served, timed out,
//! disconnected).

use integration::{cmd, Node};
use redis::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

/// How long anything that should happen at once may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(10);

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| bulk(s)).collect())
}

/// The error text of a reply that must be an error (what follows the code, as the redis
/// crate splits it: "ERR syntax error" reads back as its detail "syntax error").
fn error(c: &mut redis::Connection, args: &[&str]) -> String {
    match cmd(c, args) {
        Err(e) => {
            let code = e.code().unwrap_or("");
            let detail = e.detail().unwrap_or("");
            format!("{code} {detail}")
        }
        Ok(v) => panic!("{args:?} should fail, answered {v:?}"),
    }
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A plain socket speaking RESP, for checking replies byte for byte.
struct Raw {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Raw {
    fn connect(node: &Node) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", node.port)).expect("connect");
        stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
        Raw {
            reader: BufReader::new(stream.try_clone().expect("clone")),
            writer: stream,
        }
    }

    fn send(&mut self, args: &[&str]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.writer.write_all(&out).expect("send");
    }

    /// Reads one complete reply, as its raw bytes.
    fn read_reply(&mut self) -> String {
        let mut out = Vec::new();
        let mut pending = 1usize;
        while pending > 0 {
            pending -= 1;
            let mut line = Vec::new();
            self.reader
                .read_until(b'\n', &mut line)
                .expect("reply line");
            assert!(line.ends_with(b"\r\n"), "truncated reply: {out:?} {line:?}");
            let n: i64 = std::str::from_utf8(&line[1..line.len() - 2])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            match line[0] {
                b'$' | b'=' if n >= 0 => {
                    let mut body = vec![0; n as usize + 2];
                    self.reader.read_exact(&mut body).expect("bulk body");
                    line.extend_from_slice(&body);
                }
                b'*' | b'~' | b'>' if n > 0 => pending += n as usize,
                b'%' if n > 0 => pending += 2 * n as usize,
                _ => {}
            }
            out.extend_from_slice(&line);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    fn call(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.read_reply()
    }

    fn resp3(node: &Node) -> Raw {
        let mut raw = Raw::connect(node);
        assert!(raw.call(&["HELLO", "3"]).starts_with('%'));
        raw
    }
}

/// Waits until `n` clients are blocked, by INFO's `blocked_clients` (a node without the field
/// fails the test rather than being given a moment and passing unchecked).
fn wait_blocked(node: &Node, n: usize) {
    let mut c = node.client();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let info = match cmd(&mut c, &["INFO", "clients"]) {
            Ok(Value::BulkString(b)) => String::from_utf8_lossy(&b).into_owned(),
            _ => String::new(),
        };
        let Some(blocked) = info
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
        else {
            panic!("INFO clients has no blocked_clients field: {info}");
        };
        if blocked == n {
            return;
        }
        assert!(Instant::now() < deadline, "{n} clients never blocked");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Sends a blocking command from its own thread and hands back its reply.
fn blocked_call(node: &Node, args: &[&str]) -> thread::JoinHandle<String> {
    let mut raw = Raw::connect(node);
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    thread::spawn(move || {
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        raw.call(&args)
    })
}

#[test]
fn push_length_range_index_and_set() {
    let node = Node::start(&[]);
    let mut c = node.client();
    assert_eq!(
        cmd(&mut c, &["RPUSH", "l", "a", "b", "c"]).unwrap(),
        Value::Int(3)
    );
    assert_eq!(
        cmd(&mut c, &["LPUSH", "l", "y", "x"]).unwrap(),
        Value::Int(5)
    );
    assert_eq!(cmd(&mut c, &["LPUSHX", "l", "w"]).unwrap(), Value::Int(6));
    assert_eq!(
        cmd(&mut c, &["RPUSHX", "l", "d", "e"]).unwrap(),
        Value::Int(8)
    );
    assert_eq!(
        cmd(&mut c, &["LPUSHX", "none", "w"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        cmd(&mut c, &["RPUSHX", "none", "w"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(cmd(&mut c, &["GET", "none"]).unwrap(), Value::Nil);
    assert_eq!(
        cmd(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(),
        bulks(&["w", "x", "y", "a", "b", "c", "d", "e"])
    );
    assert_eq!(
        cmd(&mut c, &["LRANGE", "l", "-3", "-2"]).unwrap(),
        bulks(&["c", "d"])
    );
    assert_eq!(cmd(&mut c, &["LRANGE", "l", "5", "2"]).unwrap(), bulks(&[]));
    assert_eq!(
        cmd(
            &mut c,
            &["LRANGE", "l", "-9223372036854775808", "9223372036854775807"]
        )
        .unwrap(),
        bulks(&["w", "x", "y", "a", "b", "c", "d", "e"])
    );
    assert_eq!(
        cmd(&mut c, &["LRANGE", "none", "0", "-1"]).unwrap(),
        bulks(&[])
    );
    assert_eq!(
        error(&mut c, &["LRANGE", "none", "x", "1"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(cmd(&mut c, &["LLEN", "l"]).unwrap(), Value::Int(8));
    assert_eq!(cmd(&mut c, &["LLEN", "none"]).unwrap(), Value::Int(0));
    assert_eq!(cmd(&mut c, &["LINDEX", "l", "0"]).unwrap(), bulk("w"));
    assert_eq!(cmd(&mut c, &["LINDEX", "l", "-1"]).unwrap(), bulk("e"));
    assert_eq!(cmd(&mut c, &["LINDEX", "l", "8"]).unwrap(), Value::Nil);
    assert_eq!(cmd(&mut c, &["LINDEX", "l", "-9"]).unwrap(), Value::Nil);
    // The key is looked up first: no key, no complaint about the index.
    assert_eq!(cmd(&mut c, &["LINDEX", "none", "x"]).unwrap(), Value::Nil);
    assert_eq!(
        error(&mut c, &["LINDEX", "l", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(cmd(&mut c, &["LSET", "l", "0", "W"]).unwrap(), Value::Okay);
    assert_eq!(cmd(&mut c, &["LSET", "l", "-1", "E"]).unwrap(), Value::Okay);
    assert_eq!(
        error(&mut c, &["LSET", "l", "8", "z"]),
        "ERR index out of range"
    );
    assert_eq!(
        error(&mut c, &["LSET", "none", "0", "z"]),
        "ERR no such key"
    );
    assert_eq!(
        error(&mut c, &["LSET", "l", "x", "z"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        cmd(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(),
        bulks(&["W", "x", "y", "a", "b", "c", "d", "E"])
    );
    assert_eq!(node.cli(&["LRANGE", "l", "1", "2"]), "x\ny");
}

#[test]
fn insert_remove_trim_and_emptied_lists_vanish() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["RPUSH", "l", "a", "b", "a", "c", "a"]).unwrap();
    assert_eq!(
        cmd(&mut c, &["LINSERT", "l", "BEFORE", "b", "B"]).unwrap(),
        Value::Int(6)
    );
    assert_eq!(
        cmd(&mut c, &["LINSERT", "l", "after", "c", "C"]).unwrap(),
        Value::Int(7)
    );
    assert_eq!(
        cmd(&mut c, &["LINSERT", "l", "after", "zz", "C"]).unwrap(),
        Value::Int(-1)
    );
    assert_eq!(
        cmd(&mut c, &["LINSERT", "none", "after", "a", "C"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        error(&mut c, &["LINSERT", "l", "beside", "a", "C"]),
        "ERR syntax error"
    );
    assert_eq!(
        cmd(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(),
        bulks(&["a", "B", "b", "a", "c", "C", "a"])
    );
    assert_eq!(
        cmd(&mut c, &["LREM", "l", "-1", "a"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        cmd(&mut c, &["LREM", "l", "1", "a"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        cmd(&mut c, &["LREM", "l", "0", "zz"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        cmd(&mut c, &["LREM", "none", "0", "a"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(
        error(&mut c, &["LREM", "l", "x", "a"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        cmd(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(),
        bulks(&["B", "b", "a", "c", "C"])
    );
    assert_eq!(
        cmd(&mut c, &["LTRIM", "l", "1", "-2"]).unwrap(),
        Value::Okay
    );
    assert_eq!(
        cmd(&mut c, &["LRANGE", "l", "0", "-1"]).unwrap(),
        bulks(&["b", "a", "c"])
    );
    assert_eq!(
        cmd(&mut c, &["LTRIM", "none", "0", "1"]).unwrap(),
        Value::Okay
    );
    assert_eq!(
        error(&mut c, &["LTRIM", "l", "0", "x"]),
        "ERR value is not an integer or out of range"
    );
    // An empty range empties the list, and an empty list is no key at all.
    assert_eq!(cmd(&mut c, &["LTRIM", "l", "5", "1"]).unwrap(), Value::Okay);
    assert_eq!(
        cmd(&mut c, &["SETNX", "l", "now a string"]).unwrap(),
        Value::Int(1)
    );
    cmd(&mut c, &["RPUSH", "r", "x", "x"]).unwrap();
    assert_eq!(
        cmd(&mut c, &["LREM", "r", "0", "x"]).unwrap(),
        Value::Int(2)
    );
    assert_eq!(
        cmd(&mut c, &["SETNX", "r", "now a string"]).unwrap(),
        Value::Int(1)
    );
}

#[test]
fn lpos_ranks_counts_maxlen_and_errors() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(
        &mut c,
        &["RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c"],
    )
    .unwrap();
    assert_eq!(cmd(&mut c, &["LPOS", "l", "c"]).unwrap(), Value::Int(2));
    assert_eq!(
        cmd(&mut c, &["LPOS", "l", "c", "RANK", "2"]).unwrap(),
        Value::Int(6)
    );
    assert_eq!(
        cmd(&mut c, &["LPOS", "l", "c", "RANK", "-1"]).unwrap(),
        Value::Int(7)
    );
    assert_eq!(
        cmd(&mut c, &["LPOS", "l", "c", "RANK", "4"]).unwrap(),
        Value::Nil
    );
    let ints = |v: &[i64]| Value::Array(v.iter().map(|&i| Value::Int(i)).collect());
    assert_eq!(
        cmd(&mut c, &["LPOS", "l", "c", "COUNT", "2"]).unwrap(),
        ints(&[2, 6])
    );
    assert_eq!(
        cmd(&mut c, &["LPOS", "l", "c", "COUNT", "0"]).unwrap(),
        ints(&[2, 6, 7])
    );
    assert_eq!(
        cmd(&mut c, &["LPOS", "l", "c", "RANK", "-2", "COUNT", "0"]).unwrap(),
        ints(&[6, 2])
    );
    assert_eq!(
        cmd(&mut c, &["LPOS", "l", "c", "COUNT", "0", "MAXLEN", "3"]).unwrap(),
        ints(&[2])
    );
    assert_eq!(
        cmd(
            &mut c,
            &[
                "LPOS",
                "l",
                "c",
                "COUNT",
                "9223372036854775807",
                "MAXLEN",
                "9223372036854775807"
            ]
        )
        .unwrap(),
        ints(&[2, 6, 7])
    );
    assert_eq!(
        cmd(&mut c, &["LPOS", "l", "zz", "COUNT", "1"]).unwrap(),
        ints(&[])
    );
    assert_eq!(cmd(&mut c, &["LPOS", "none", "zz"]).unwrap(), Value::Nil);
    assert_eq!(
        cmd(&mut c, &["LPOS", "none", "zz", "COUNT", "1"]).unwrap(),
        ints(&[])
    );
    assert_eq!(
        error(&mut c, &["LPOS", "l", "c", "RANK", "0"]),
        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
    );
    assert_eq!(
        error(&mut c, &["LPOS", "l", "c", "COUNT", "-1"]),
        "ERR COUNT can't be negative"
    );
    assert_eq!(
        error(&mut c, &["LPOS", "l", "c", "MAXLEN", "-1"]),
        "ERR MAXLEN can't be negative"
    );
    assert_eq!(
        error(&mut c, &["LPOS", "l", "c", "RANK", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error(&mut c, &["LPOS", "l", "c", "RANK"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["LPOS", "l", "c", "FOO", "1"]),
        "ERR syntax error"
    );
}

#[test]
fn pops_with_counts_and_the_null_rules_of_both_protocols() {
    let node = Node::start(&[]);
    let mut r2 = Raw::connect(&node);
    let mut r3 = Raw::resp3(&node);
    assert_eq!(r2.call(&["LPOP", "none"]), "$-1\r\n");
    assert_eq!(r2.call(&["LPOP", "none", "2"]), "*-1\r\n");
    assert_eq!(r2.call(&["RPOP", "none", "0"]), "*-1\r\n");
    assert_eq!(r3.call(&["LPOP", "none"]), "_\r\n");
    assert_eq!(r3.call(&["RPOP", "none", "2"]), "_\r\n");
    assert_eq!(r2.call(&["RPUSH", "l", "a", "b", "c", "d", "e"]), ":5\r\n");
    assert_eq!(r2.call(&["LPOP", "l", "0"]), "*0\r\n");
    assert_eq!(r3.call(&["LPOP", "l", "0"]), "*0\r\n");
    assert_eq!(r2.call(&["LPOP", "l"]), "$1\r\na\r\n");
    assert_eq!(r2.call(&["RPOP", "l", "2"]), "*2\r\n$1\r\ne\r\n$1\r\nd\r\n");
    assert_eq!(
        r2.call(&["LPOP", "l", "-1"]),
        "-ERR value is out of range, must be positive\r\n"
    );
    assert_eq!(
        r2.call(&["LPOP", "l", "x"]),
        "-ERR value is out of range, must be positive\r\n"
    );
    assert_eq!(
        r2.call(&["LPOP", "l", "1", "2"]),
        "-ERR wrong number of arguments for 'lpop' command\r\n"
    );
    // A huge count takes what there is (and must not reserve room for 2^62 elements).
    assert_eq!(
        r2.call(&["LPOP", "l", "4611686018427387904"]),
        "*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(r2.call(&["LPOP", "l", "1"]), "*-1\r\n");
    assert_eq!(r2.call(&["RPOP", "l"]), "$-1\r\n");
    assert_eq!(r3.call(&["LRANGE", "l", "0", "-1"]), "*0\r\n");
    assert_eq!(r3.call(&["LINDEX", "l", "0"]), "_\r\n");
    assert_eq!(r3.call(&["LPOS", "l", "x"]), "_\r\n");
}

#[test]
fn lmove_rpoplpush_and_lmpop() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["RPUSH", "a", "1", "2", "3"]).unwrap();
    assert_eq!(
        cmd(&mut c, &["LMOVE", "a", "a", "LEFT", "RIGHT"]).unwrap(),
        bulk("1")
    );
    assert_eq!(
        cmd(&mut c, &["LRANGE", "a", "0", "-1"]).unwrap(),
        bulks(&["2", "3", "1"])
    );
    assert_eq!(
        cmd(&mut c, &["LMOVE", "a", "b", "right", "left"]).unwrap(),
        bulk("1")
    );
    assert_eq!(
        cmd(&mut c, &["LMOVE", "a", "b", "LEFT", "RIGHT"]).unwrap(),
        bulk("2")
    );
    assert_eq!(cmd(&mut c, &["RPOPLPUSH", "a", "b"]).unwrap(), bulk("3"));
    assert_eq!(cmd(&mut c, &["RPOPLPUSH", "a", "b"]).unwrap(), Value::Nil);
    assert_eq!(
        cmd(&mut c, &["LMOVE", "none", "b", "LEFT", "LEFT"]).unwrap(),
        Value::Nil
    );
    assert_eq!(
        cmd(&mut c, &["LRANGE", "b", "0", "-1"]).unwrap(),
        bulks(&["3", "1", "2"])
    );
    assert_eq!(
        error(&mut c, &["LMOVE", "b", "a", "UP", "LEFT"]),
        "ERR syntax error"
    );
    assert_eq!(
        error(&mut c, &["LMOVE", "b", "a", "LEFT", "DOWN"]),
        "ERR syntax error"
    );
    // The source went with its last element.
    assert_eq!(cmd(&mut c, &["SETNX", "a", "s"]).unwrap(), Value::Int(1));
    // A destination of another type: nothing moves.
    assert_eq!(
        error(&mut c, &["LMOVE", "b", "a", "LEFT", "LEFT"]),
        WRONGTYPE
    );
    assert_eq!(error(&mut c, &["RPOPLPUSH", "a", "b"]), WRONGTYPE);
    assert_eq!(cmd(&mut c, &["LLEN", "b"]).unwrap(), Value::Int(3));

    let popped = |key: &str, items: &[&str]| Value::Array(vec![bulk(key), bulks(items)]);
    assert_eq!(
        cmd(&mut c, &["LMPOP", "2", "none", "b", "LEFT"]).unwrap(),
        popped("b", &["3"])
    );
    assert_eq!(
        cmd(
            &mut c,
            &["LMPOP", "1", "b", "RIGHT", "COUNT", "9223372036854775807"]
        )
        .unwrap(),
        popped("b", &["2", "1"])
    );
    assert_eq!(
        cmd(&mut c, &["LMPOP", "1", "b", "LEFT"]).unwrap(),
        Value::Nil
    );
    assert_eq!(error(&mut c, &["LMPOP", "2", "a", "b", "LEFT"]), WRONGTYPE);
    for (args, text) in [
        (
            &["LMPOP", "0", "b", "LEFT"][..],
            "ERR numkeys should be greater than 0",
        ),
        (
            &["LMPOP", "-1", "b", "LEFT"],
            "ERR numkeys should be greater than 0",
        ),
        (
            &["LMPOP", "x", "b", "LEFT"],
            "ERR numkeys should be greater than 0",
        ),
        (&["LMPOP", "2", "b", "LEFT"], "ERR syntax error"),
        (
            &["LMPOP", "9223372036854775807", "b", "LEFT"],
            "ERR syntax error",
        ),
        (&["LMPOP", "1", "b", "MIDDLE"], "ERR syntax error"),
        (
            &["LMPOP", "1", "b", "LEFT", "COUNT", "0"],
            "ERR count should be greater than 0",
        ),
        (
            &["LMPOP", "1", "b", "LEFT", "COUNT", "x"],
            "ERR count should be greater than 0",
        ),
        (&["LMPOP", "1", "b", "LEFT", "COUNT"], "ERR syntax error"),
        (
            &["LMPOP", "1", "b", "LEFT", "COUNT", "1", "COUNT", "1"],
            "ERR syntax error",
        ),
        (
            &["LMPOP", "1", "b"],
            "ERR wrong number of arguments for 'lmpop' command",
        ),
    ] {
        assert_eq!(error(&mut c, args), text, "{args:?}");
    }
    let mut r2 = Raw::connect(&node);
    let mut r3 = Raw::resp3(&node);
    assert_eq!(r2.call(&["LMPOP", "1", "none", "LEFT"]), "*-1\r\n");
    assert_eq!(r3.call(&["LMPOP", "1", "none", "LEFT"]), "_\r\n");
    assert_eq!(r3.call(&["LMOVE", "none", "x", "LEFT", "LEFT"]), "_\r\n");
}

#[test]
fn every_command_refuses_other_types() {
    let node = Node::start(&[]);
    let mut c = node.client();
    cmd(&mut c, &["SET", "s", "v"]).unwrap();
    for args in [
        &["LPUSH", "s", "a"][..],
        &["RPUSH", "s", "a"],
        &["LPUSHX", "s", "a"],
        &["RPUSHX", "s", "a"],
        &["LINSERT", "s", "BEFORE", "a", "b"],
        &["LSET", "s", "0", "a"],
        &["LREM", "s", "0", "a"],
        &["LTRIM", "s", "0", "1"],
        &["LLEN", "s"],
        &["LRANGE", "s", "0", "1"],
        &["LINDEX", "s", "0"],
        &["LPOS", "s", "a"],
        &["LPOP", "s"],
        &["RPOP", "s", "2"],
        &["LMOVE", "s", "d", "LEFT", "LEFT"],
        &["RPOPLPUSH", "s", "d"],
        &["LMPOP", "1", "s", "LEFT"],
        &["BLPOP", "none", "s", "0"],
        &["BRPOP", "s", "0"],
        &["BLMOVE", "s", "d", "LEFT", "LEFT", "0"],
        &["BRPOPLPUSH", "s", "d", "0"],
        &["BLMPOP", "0", "1", "s", "LEFT"],
    ] {
        assert_eq!(error(&mut c, args), WRONGTYPE, "{args:?}");
    }
    assert_eq!(cmd(&mut c, &["GET", "s"]).unwrap(), bulk("v"));
    for (args, name) in [
        (&["LPUSH", "k"][..], "lpush"),
        (&["LINSERT", "k", "BEFORE", "a"], "linsert"),
        (&["LPOS", "k"], "lpos"),
        (&["BLPOP", "k"], "blpop"),
        (&["BLMPOP", "0", "1", "k"], "blmpop"),
        (&["BLMOVE", "a", "b", "LEFT", "LEFT"], "blmove"),
    ] {
        assert_eq!(
            error(&mut c, args),
            format!("ERR wrong number of arguments for '{name}' command")
        );
    }
}

#[test]
fn blocking_commands_serve_at_once_or_time_out() {
    let node = Node::start(&[]);
    let mut r2 = Raw::connect(&node);
    assert_eq!(r2.call(&["RPUSH", "l", "a", "b", "c", "d"]), ":4\r\n");
    assert_eq!(
        r2.call(&["BLPOP", "none", "l", "0"]),
        "*2\r\n$1\r\nl\r\n$1\r\na\r\n"
    );
    assert_eq!(
        r2.call(&["BRPOP", "l", "0"]),
        "*2\r\n$1\r\nl\r\n$1\r\nd\r\n"
    );
    assert_eq!(
        r2.call(&["BLMOVE", "l", "m", "LEFT", "RIGHT", "0"]),
        "$1\r\nb\r\n"
    );
    assert_eq!(r2.call(&["BRPOPLPUSH", "l", "m", "0"]), "$1\r\nc\r\n");
    assert_eq!(
        r2.call(&["BLMPOP", "0", "2", "l", "m", "LEFT", "COUNT", "5"]),
        "*2\r\n$1\r\nm\r\n*2\r\n$1\r\nc\r\n$1\r\nb\r\n"
    );
    // Every list wait times out with a null array, BLMOVE's included (as redis-server 7.0).
    let started = Instant::now();
    for args in [
        &["BLPOP", "none", "0.05"][..],
        &["BRPOP", "none", "other", "0.05"],
        &["BLMOVE", "none", "m", "LEFT", "LEFT", "0.05"],
        &["BRPOPLPUSH", "none", "m", "0.05"],
        &["BLMPOP", "0.05", "1", "none", "RIGHT", "COUNT", "2"],
    ] {
        assert_eq!(r2.call(args), "*-1\r\n", "{args:?}");
    }
    assert!(started.elapsed() >= Duration::from_millis(250));
    let mut r3 = Raw::resp3(&node);
    assert_eq!(r3.call(&["BLPOP", "none", "0.01"]), "_\r\n");
    assert_eq!(r3.call(&["BRPOPLPUSH", "none", "m", "0.01"]), "_\r\n");
    assert_eq!(r3.call(&["BLMPOP", "0.01", "1", "none", "LEFT"]), "_\r\n");
    for (args, text) in [
        (
            &["BLPOP", "k", "x"][..],
            "-ERR timeout is not a float or out of range\r\n",
        ),
        (&["BLPOP", "k", "-1"], "-ERR timeout is negative\r\n"),
        (&["BLPOP", "k", "inf"], "-ERR timeout is negative\r\n"),
        (
            &["BRPOPLPUSH", "k", "d", "nan"],
            "-ERR timeout is not a float or out of range\r\n",
        ),
        (
            &["BLMOVE", "k", "d", "LEFT", "UP", "1"],
            "-ERR syntax error\r\n",
        ),
        (
            &["BLMPOP", "x", "1", "k", "LEFT"],
            "-ERR timeout is not a float or out of range\r\n",
        ),
        (
            &["BLMPOP", "1", "0", "k", "LEFT"],
            "-ERR numkeys should be greater than 0\r\n",
        ),
        (&["BLMPOP", "1", "2", "k", "LEFT"], "-ERR syntax error\r\n"),
        (
            &["BLMPOP", "1", "1", "k", "LEFT", "COUNT", "0"],
            "-ERR count should be greater than 0\r\n",
        ),
    ] {
        assert_eq!(r2.call(args), text, "{args:?}");
    }
}

#[test]
fn the_first_client_blocked_is_the_first_served() {
    let node = Node::start(&[]);
    let first = blocked_call(&node, &["BLPOP", "k", "0"]);
    wait_blocked(&node, 1);
    let second = blocked_call(&node, &["BLPOP", "k", "0"]);
    wait_blocked(&node, 2);
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["RPUSH", "k", "one"]).unwrap(), Value::Int(1));
    assert_eq!(first.join().unwrap(), "*2\r\n$1\r\nk\r\n$3\r\none\r\n");
    assert!(!second.is_finished());
    assert_eq!(cmd(&mut c, &["RPUSH", "k", "two"]).unwrap(), Value::Int(1));
    assert_eq!(second.join().unwrap(), "*2\r\n$1\r\nk\r\n$3\r\ntwo\r\n");
    assert_eq!(cmd(&mut c, &["LLEN", "k"]).unwrap(), Value::Int(0));
}

#[test]
fn one_push_of_n_elements_serves_n_blocked_clients() {
    let node = Node::start(&[]);
    let mut waiting = Vec::new();
    for (i, args) in [
        &["BLPOP", "k", "0"][..],
        &["BRPOP", "other", "k", "0"],
        &["BLMPOP", "0", "1", "k", "LEFT", "COUNT", "1"],
        &["BLMOVE", "k", "dst", "LEFT", "LEFT", "0"],
    ]
    .into_iter()
    .enumerate()
    {
        waiting.push(blocked_call(&node, args));
        wait_blocked(&node, i + 1);
    }
    let mut c = node.client();
    assert_eq!(
        cmd(&mut c, &["RPUSH", "k", "a", "b", "c", "d", "e"]).unwrap(),
        Value::Int(5)
    );
    let replies: Vec<String> = waiting.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        replies,
        [
            "*2\r\n$1\r\nk\r\n$1\r\na\r\n",
            "*2\r\n$1\r\nk\r\n$1\r\ne\r\n",
            "*2\r\n$1\r\nk\r\n*1\r\n$1\r\nb\r\n",
            "$1\r\nc\r\n",
        ]
    );
    assert_eq!(
        cmd(&mut c, &["LRANGE", "k", "0", "-1"]).unwrap(),
        bulks(&["d"])
    );
    assert_eq!(
        cmd(&mut c, &["LRANGE", "dst", "0", "-1"]).unwrap(),
        bulks(&["c"])
    );
}

#[test]
fn a_client_gone_while_blocked_takes_nothing() {
    let node = Node::start(&[]);
    let mut gone = Raw::connect(&node);
    gone.send(&["BLPOP", "k", "0"]);
    wait_blocked(&node, 1);
    gone.writer
        .shutdown(std::net::Shutdown::Both)
        .expect("shutdown");
    drop(gone);
    wait_blocked(&node, 0);
    let mut c = node.client();
    // Pushed after the client left: nobody takes it, it is there to read back.
    assert_eq!(cmd(&mut c, &["RPUSH", "k", "v"]).unwrap(), Value::Int(1));
    assert_eq!(cmd(&mut c, &["LPOP", "k"]).unwrap(), bulk("v"));
    // And the line on the key is clear for the next client.
    let next = blocked_call(&node, &["BRPOPLPUSH", "k", "d", "0"]);
    wait_blocked(&node, 1);
    assert_eq!(cmd(&mut c, &["LPUSH", "k", "w"]).unwrap(), Value::Int(1));
    assert_eq!(next.join().unwrap(), "$1\r\nw\r\n");
    assert_eq!(cmd(&mut c, &["LPOP", "d"]).unwrap(), bulk("w"));
}

#[test]
fn a_push_from_another_thread_wakes_a_blocked_client() {
    let node = Node::start(&[]);
    let mut blocked = node.client();
    blocked.set_read_timeout(Some(PATIENCE)).unwrap();
    let port = node.port;
    let pusher = thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
            .expect("connect");
        // Push a few times until the blocked client has taken one: its wait may not have
        // started when the first push lands, which must work too.
        for i in 0..100 {
            let _: i64 = redis::cmd("LPUSH")
                .arg("q")
                .arg(format!("v{i}"))
                .query(&mut c)
                .unwrap();
            thread::sleep(Duration::from_millis(20));
            let left: i64 = redis::cmd("LLEN").arg("q").query(&mut c).unwrap();
            if left == 0 {
                return i;
            }
        }
        panic!("the blocked client never took an element");
    });
    let got = cmd(&mut blocked, &["BRPOP", "q", "0"]).unwrap();
    let pushes = pusher.join().unwrap();
    assert_eq!(
        got,
        Value::Array(vec![bulk("q"), bulk(&format!("v{pushes}"))])
    );
    // It also works the other way round: the wait first, then the push.
    let waiter = blocked_call(&node, &["BLMOVE", "q2", "q3", "RIGHT", "LEFT", "0"]);
    wait_blocked(&node, 1);
    let mut c = node.client();
    cmd(&mut c, &["RPUSH", "q2", "x", "y"]).unwrap();
    assert_eq!(waiter.join().unwrap(), "$1\r\ny\r\n");
    assert_eq!(
        cmd(&mut c, &["LRANGE", "q3", "0", "-1"]).unwrap(),
        bulks(&["y"])
    );
}
