//! `operator cli` and `operator bench` (the built binary) against a real node: the CLI prints
//! replies as redis-cli does (checked against redis-cli itself where both run), reads commands
//! from stdin, fails clearly when it cannot connect; the benchmark runs redis-benchmark's tests
//! without error replies, pipelined and not, and the node really holds what it wrote.

use std::io::Write;
use std::os::unix::ffi::OsStringExt;
use std::process::{Output, Stdio};

use integration::{free_port, operator, Node};

/// Runs `operator cli -p PORT args...` (stdout is a pipe: raw output unless `--no-raw`).
fn cli(node: &Node, args: &[&str]) -> Output {
    let port = node.port.to_string();
    let mut all = vec!["cli", "-p", &port];
    all.extend_from_slice(args);
    operator(&all).output().expect("running operator cli")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `operator bench -p PORT args...` and asserts it succeeded.
fn bench(node: &Node, args: &[&str]) -> String {
    let port = node.port.to_string();
    let mut all = vec!["bench", "-p", &port];
    all.extend_from_slice(args);
    let out = operator(&all).output().expect("running operator bench");
    assert!(
        out.status.success(),
        "operator bench {args:?} failed ({}): {}\n{}",
        out.status,
        stderr(&out),
        stdout(&out)
    );
    stdout(&out)
}

#[test]
fn cli_one_shot_prints_replies_like_redis_cli() {
    let node = Node::start(&[]);
    assert_eq!(stdout(&cli(&node, &["SET", "k", "v"])), "OK\n");
    assert_eq!(stdout(&cli(&node, &["GET", "k"])), "v\n");
    assert_eq!(stdout(&cli(&node, &["--no-raw", "GET", "k"])), "\"v\"\n");
    assert_eq!(stdout(&cli(&node, &["GET", "missing"])), "\n");
    assert_eq!(
        stdout(&cli(&node, &["--no-raw", "GET", "missing"])),
        "(nil)\n"
    );
    assert_eq!(
        stdout(&cli(&node, &["--no-raw", "INCR", "counter"])),
        "(integer) 1\n"
    );
    let error = cli(&node, &["--no-raw", "INCR", "k"]);
    assert!(
        error.status.success(),
        "an error reply is not a tool failure"
    );
    assert_eq!(
        stdout(&error),
        "(error) ERR value is not an integer or out of range\n"
    );
    cli(&node, &["RPUSH", "list", "a", "b c", "-1"]);
    assert_eq!(
        stdout(&cli(&node, &["--no-raw", "LRANGE", "list", "0", "-1"])),
        "1) \"a\"\n2) \"b c\"\n3) \"-1\"\n"
    );
    assert_eq!(
        stdout(&cli(&node, &["--no-raw", "LRANGE", "nothing", "0", "-1"])),
        "(empty array)\n"
    );
    // Arguments are bytes, not necessarily UTF-8; formatted output escapes them.
    let port = node.port.to_string();
    let binary = std::ffi::OsString::from_vec(vec![b'a', 0xff, b'\n']);
    let set = operator(&["cli", "-p", &port, "SET", "bin"])
        .arg(&binary)
        .output()
        .unwrap();
    assert_eq!(stdout(&set), "OK\n");
    assert_eq!(
        stdout(&cli(&node, &["--no-raw", "GET", "bin"])),
        "\"a\\xff\\n\"\n"
    );
    // Raw output is byte for byte what redis-cli prints with stdout redirected.
    for command in [
        &["GET", "k"][..],
        &["GET", "missing"],
        &["INCR", "k"],
        &["LRANGE", "list", "0", "-1"],
        &["LRANGE", "nothing", "0", "-1"],
        &["NOSUCHCOMMAND", "x"],
        &["DBSIZE"],
    ] {
        let ours = stdout(&cli(&node, command));
        let theirs = std::process::Command::new("redis-cli")
            .arg("-p")
            .arg(node.port.to_string())
            .args(command)
            .output()
            .expect("running redis-cli (scripts/install-deps.sh installs it)");
        assert_eq!(ours, stdout(&theirs), "raw output of {command:?}");
    }
}

#[test]
fn cli_speaks_resp3_and_authenticates() {
    let node = Node::start(&["--requirepass", "secret"]);
    let refused = cli(&node, &["--no-raw", "PING"]);
    assert!(
        stdout(&refused).starts_with("(error) NOAUTH"),
        "{}",
        stdout(&refused)
    );
    assert_eq!(stdout(&cli(&node, &["-a", "secret", "PING"])), "PONG\n");
    let hello = cli(&node, &["-a", "secret", "-3", "--no-raw", "HELLO", "3"]);
    assert!(
        stdout(&hello).contains("# \"proto\" => (integer) 3"),
        "RESP3 map reply formatted: {}",
        stdout(&hello)
    );
    let wrong = cli(&node, &["-a", "wrong", "PING"]);
    assert!(!wrong.status.success());
    assert!(stderr(&wrong).contains("AUTH failed"), "{}", stderr(&wrong));
}

#[test]
fn cli_interactive_reads_commands_from_stdin() {
    let node = Node::start(&[]);
    let port = node.port.to_string();
    let mut child = operator(&["cli", "-p", &port])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting operator cli");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"SET greeting \"hello world\"\nGET greeting\nGET \"unbalanced\n\n\
              RPUSH l 'x y' z\nLRANGE l 0 -1\nINCR l\nquit\nSET after quit\n",
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "OK\nhello world\nInvalid argument(s)\n2\nx y\nz\n\
         WRONGTYPE Operation against a key holding the wrong kind of value\n\n"
    );
    assert_eq!(
        node.cli(&["EXISTS", "after"]),
        "0",
        "nothing runs after quit"
    );

    // A connection the server closes is reported once, then re-opened for the next command.
    let mut child = operator(&["cli", "-p", &port])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting operator cli");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"CLIENT KILL TYPE normal SKIPME no\nGET greeting\nGET greeting\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    // The server's close shows as end of stream, or as a reset if our GET raced it.
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0], "1");
    assert!(
        lines[1] == "Error: Server closed the connection"
            || lines[1].starts_with("Error: I/O error"),
        "{text}"
    );
    assert_eq!(lines[2], "hello world");
}

#[test]
fn cli_fails_with_a_message_when_it_cannot_connect() {
    let port = free_port().to_string();
    let out = operator(&["cli", "-p", &port, "PING"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("Could not connect to 127.0.0.1:{port}")),
        "{}",
        stderr(&out)
    );
    let interactive = operator(&["cli", "-p", &port])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!interactive.status.success());
    // --rdma is the verbs provider: on a host without an RDMA device (CI) it fails at once
    // with the provider's reason, not with a TCP connection (tests/suite/fabric.rs covers the
    // providers that run here).
    let node = Node::start(&[]);
    let out = cli(&node, &["--rdma", "PING"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("over fabric verbs"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bench_runs_every_test_without_errors() {
    let node = Node::start(&[]);
    let tests =
        "ping,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset";
    let quiet = bench(&node, &["-t", tests, "-n", "2000", "-c", "8", "-q"]);
    let lines: Vec<&str> = quiet.lines().collect();
    // 15 names select 17 tests: ping is inline and multi-bulk, lrange_100 first fills a list.
    assert_eq!(lines.len(), 17, "{quiet}");
    for line in &lines {
        assert!(line.contains(" requests per second, p50="), "{line}");
        assert!(line.contains("p99.9="), "{line}");
        assert!(!line.contains("errors"), "{line}");
    }
    let csv = bench(
        &node,
        &[
            "-t",
            tests,
            "-n",
            "3000",
            "-c",
            "10",
            "-P",
            "16",
            "--csv",
            "--threads",
            "2",
        ],
    );
    let mut rows = csv.lines();
    assert_eq!(
        rows.next(),
        Some(
            "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\
             \"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\",\"p999_latency_ms\",\"errors\""
        )
    );
    let rows: Vec<&str> = rows.collect();
    assert_eq!(rows.len(), 17, "{csv}");
    assert!(rows[0].starts_with("\"PING_INLINE\","), "{csv}");
    for row in rows {
        assert!(row.ends_with(",\"0\""), "no error replies: {row}");
    }
    let full = bench(&node, &["-t", "get", "-n", "500", "-c", "4", "-d", "100"]);
    assert!(
        full.starts_with("====== GET ======\n  500 requests completed in "),
        "{full}"
    );
    assert!(full.contains("  100 bytes payload\n"), "{full}");
    assert!(full.contains("p50       p99     p99.9"), "{full}");
}

#[test]
fn bench_writes_exactly_what_it_says() {
    let node = Node::start(&[]);
    // Every INCR runs exactly once, with batches that do not divide the total evenly.
    bench(
        &node,
        &["-t", "incr", "-n", "1003", "-c", "7", "-P", "16", "-q"],
    );
    assert_eq!(node.cli(&["GET", "counter:__rand_int__"]), "1003");
    bench(&node, &["-t", "lpush", "-n", "1000", "-c", "5", "-q"]);
    bench(
        &node,
        &["-t", "rpush", "-n", "500", "-c", "5", "-P", "16", "-q"],
    );
    assert_eq!(node.cli(&["LLEN", "mylist"]), "1500");
    // -d sets the value size.
    bench(
        &node,
        &["-t", "set", "-n", "10", "-c", "1", "-d", "77", "-q"],
    );
    assert_eq!(node.cli(&["STRLEN", "key:__rand_int__"]), "77");
    // -r spreads keys over the keyspace: 12-digit keys below it.
    node.cli(&["FLUSHALL"]);
    bench(
        &node,
        &[
            "-t", "set", "-n", "4000", "-c", "4", "-r", "50", "-P", "8", "-q",
        ],
    );
    let keys: u64 = node.cli(&["DBSIZE"]).parse().unwrap();
    assert!((2..=50).contains(&keys), "{keys} keys");
    assert_eq!(node.cli(&["EXISTS", "key:__rand_int__"]), "0");
    let key = node.cli(&["RANDOMKEY"]);
    assert!(
        key.len() == "key:".len() + 12 && key["key:".len()..].parse::<u64>().unwrap() < 50,
        "{key}"
    );
    bench(
        &node,
        &["-t", "sadd", "-n", "1000", "-c", "4", "-r", "10", "-q"],
    );
    let members: u64 = node.cli(&["SCARD", "myset"]).parse().unwrap();
    assert!((2..=10).contains(&members), "{members} members");
}

#[test]
fn bench_counts_error_replies_and_fails_on_them() {
    let node = Node::start(&[]);
    node.cli(&["SET", "counter:__rand_int__", "not a number"]);
    let port = node.port.to_string();
    let out = operator(&[
        "bench", "-p", &port, "-t", "incr", "-n", "100", "-c", "2", "--csv",
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stdout(&out).contains("\"INCR\","), "{}", stdout(&out));
    assert!(
        stdout(&out).trim_end().ends_with(",\"100\""),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("ERR value is not an integer"),
        "{}",
        stderr(&out)
    );
    let free = free_port().to_string();
    let refused = operator(&["bench", "-p", &free, "-t", "ping", "-n", "10"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("Could not connect"),
        "{}",
        stderr(&refused)
    );
}
