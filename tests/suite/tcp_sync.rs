//! SYNC and PSYNC on the client port (issue 18): a raw TCP client follows the node's
//! replication stream as the Redis test suite's `attach_to_replication_stream` and
//! `redis-cli --replica` do: `$<len>` and the snapshot (the node's own format, not an RDB),
//! then the propagated commands as RESP arrays, a SELECT wherever the stream's database
//! changes (and before the first write after a full sync), as Redis's stream has them.

use integration::{cmd, Node};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How long a test waits for any one thing the node sends.
const WAIT: Duration = Duration::from_secs(10);
/// The node's bound on stream consumers (`TCP_REPLICAS_MAX`).
const CONSUMERS_MAX: usize = 4;

/// A connection that asked for the stream.
struct StreamClient {
    reader: BufReader<TcpStream>,
}

impl StreamClient {
    /// A consumer that sent SYNC and read past the snapshot: what it reads next is the
    /// stream of writes made from here on.
    fn synced(node: &Node) -> StreamClient {
        let mut consumer = StreamClient::connect(node);
        consumer.send(b"SYNC\r\n");
        consumer.payload();
        consumer
    }

    fn connect(node: &Node) -> StreamClient {
        let stream = TcpStream::connect(("127.0.0.1", node.port)).expect("connecting");
        stream.set_read_timeout(Some(WAIT)).unwrap();
        StreamClient {
            reader: BufReader::new(stream),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).expect("sending");
    }

    /// One line without its CRLF, skipping the empty lines Redis sends as keepalives.
    fn line(&mut self) -> String {
        loop {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).expect("reading a line");
            assert!(n > 0, "the node closed the connection");
            let line = line.trim_end_matches(['\r', '\n']).to_string();
            if !line.is_empty() {
                return line;
            }
        }
    }

    /// `$<len>` and the payload.
    fn payload(&mut self) -> Vec<u8> {
        let head = self.line();
        let len: usize = head
            .strip_prefix('$')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("expected $<len>, got {head:?}"));
        let mut bytes = vec![0u8; len];
        self.reader.read_exact(&mut bytes).expect("the payload");
        bytes
    }

    /// One replicated command: its arguments, the name lowercased (as the suite compares).
    fn command(&mut self) -> Vec<String> {
        let head = self.line();
        let count: usize = head
            .strip_prefix('*')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("expected *<count>, got {head:?}"));
        let mut args = Vec::with_capacity(count);
        for i in 0..count {
            let mut arg = String::from_utf8(self.payload()).expect("utf-8 argument");
            let mut crlf = [0u8; 2];
            self.reader.read_exact(&mut crlf).expect("CRLF");
            if i == 0 {
                arg = arg.to_lowercase();
            }
            args.push(arg);
        }
        args
    }

    /// Reads until the node closes the connection; the bytes read, or `None` when it is
    /// still open after `wait`.
    fn drain_until_closed(&mut self, wait: Duration) -> Option<usize> {
        let deadline = Instant::now() + wait;
        let mut total = self.reader.buffer().len();
        self.reader.consume(total);
        let stream = self.reader.get_mut();
        let mut chunk = vec![0u8; 256 * 1024];
        while Instant::now() < deadline {
            match stream.read(&mut chunk) {
                Ok(0) => return Some(total),
                Ok(n) => total += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return Some(total),
                Err(e) => panic!("reading: {e}"),
            }
        }
        None
    }
}

fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// Goal: SYNC gives the snapshot (holding the keys written before) and then every write of
/// other clients as RESP arrays after `SELECT 0`, as `attach_to_replication_stream` and
/// `assert_replication_stream {select *} {set foo bar} {incr x}` expect.
#[test]
fn sync_streams_the_snapshot_then_select_and_the_writes() {
    let node = Node::start(&[]);
    let mut other = node.client();
    cmd(&mut other, &["SET", "before-sync", "v"]).unwrap();
    let mut consumer = StreamClient::connect(&node);
    consumer.send(b"SYNC\r\n");
    let snapshot = consumer.payload();
    assert!(
        snapshot.windows(11).any(|w| w == b"before-sync"),
        "the snapshot holds the dataset"
    );
    cmd(&mut other, &["SET", "foo", "bar"]).unwrap();
    cmd(&mut other, &["INCR", "x"]).unwrap();
    cmd(&mut other, &["DEL", "foo"]).unwrap();
    // A command that changes nothing is not replicated.
    cmd(&mut other, &["DEL", "missing"]).unwrap();
    cmd(&mut other, &["SET", "last", "1"]).unwrap();
    assert_eq!(consumer.command(), words(&["select", "0"]));
    assert_eq!(consumer.command(), words(&["set", "foo", "bar"]));
    assert_eq!(consumer.command(), words(&["incr", "x"]));
    assert_eq!(consumer.command(), words(&["del", "foo"]));
    assert_eq!(consumer.command(), words(&["set", "last", "1"]));
    // The connection takes no commands any more; the node serves others.
    assert_eq!(node.cli(&["PING"]), "PONG");
}

/// Goal: the stream selects a database only where it changes, and again after a new
/// consumer's full sync (Redis's `slaveseldb`): a suite's `assert_replication_stream
/// {select *} {set a 1} {set b 2}` in db 9 sees one SELECT, not one per command.
#[test]
fn the_stream_selects_only_when_the_database_changes() {
    let node = Node::start(&[]);
    let mut other = node.client();
    cmd(&mut other, &["SELECT", "9"]).unwrap();
    let mut first = StreamClient::synced(&node);
    cmd(&mut other, &["SET", "a", "1"]).unwrap();
    cmd(&mut other, &["SET", "b", "2"]).unwrap();
    assert_eq!(first.command(), words(&["select", "9"]));
    assert_eq!(first.command(), words(&["set", "a", "1"]));
    assert_eq!(first.command(), words(&["set", "b", "2"]));
    let mut second = StreamClient::synced(&node);
    cmd(&mut other, &["SET", "c", "3"]).unwrap();
    cmd(&mut other, &["SELECT", "2"]).unwrap();
    cmd(&mut other, &["SET", "d", "4"]).unwrap();
    for consumer in [&mut first, &mut second] {
        assert_eq!(consumer.command(), words(&["select", "9"]));
        assert_eq!(consumer.command(), words(&["set", "c", "3"]));
        assert_eq!(consumer.command(), words(&["select", "2"]));
        assert_eq!(consumer.command(), words(&["set", "d", "4"]));
    }
}

/// Goal: a transaction that SELECTs other databases reaches the stream as one MULTI/EXEC
/// with the SELECTs inside, as Redis propagates it (the suite's "MULTI / EXEC is propagated
/// correctly (multiple commands with SELECT)"); a SELECT back to a database passed before
/// is inside it too, and the client is left in the last one.
#[test]
fn a_transaction_across_databases_is_one_multi_exec_in_the_stream() {
    let node = Node::start(&[]);
    let mut consumer = StreamClient::synced(&node);
    let mut c = node.client();
    cmd(&mut c, &["MULTI"]).unwrap();
    for args in [
        &["SELECT", "1"][..],
        &["SET", "foo", "bar"],
        &["GET", "foo"],
        &["SELECT", "2"],
        &["SET", "foo2", "bar2"],
        &["SELECT", "1"],
        &["SET", "foo3", "bar3"],
    ] {
        cmd(&mut c, args).unwrap();
    }
    cmd(&mut c, &["EXEC"]).unwrap();
    cmd(&mut c, &["SET", "after", "1"]).unwrap();
    for expected in [
        &["select", "1"][..],
        &["multi"],
        &["set", "foo", "bar"],
        &["select", "2"],
        &["set", "foo2", "bar2"],
        &["select", "1"],
        &["set", "foo3", "bar3"],
        &["exec"],
        &["set", "after", "1"],
    ] {
        assert_eq!(consumer.command(), words(expected));
    }
    assert_eq!(node.cli(&["-n", "2", "GET", "foo2"]), "bar2");
}

/// Goal: PUBLISH reaches the stream (a replica's subscribers hear what the primary's hear,
/// as Redis forwards it; the suite's "MULTI propagation of PUBLISH") and never the AOF,
/// which a restart would otherwise replay as messages nobody asked for.
#[test]
fn publish_reaches_replicas_and_not_the_aof() {
    let node = Node::start(&["--appendonly", "yes"]);
    let mut consumer = StreamClient::synced(&node);
    let mut c = node.client();
    cmd(&mut c, &["PUBLISH", "bla", "bla"]).unwrap();
    cmd(&mut c, &["SET", "after", "1"]).unwrap();
    assert_eq!(consumer.command(), words(&["select", "0"]));
    assert_eq!(consumer.command(), words(&["publish", "bla", "bla"]));
    assert_eq!(consumer.command(), words(&["set", "after", "1"]));
    let increment = node
        .dir
        .path()
        .join("appendonlydir")
        .join("appendonly.aof.1.incr.aof");
    let logged = std::fs::read(&increment).unwrap_or_default();
    let logged = String::from_utf8_lossy(&logged).to_ascii_lowercase();
    assert!(logged.contains("after"), "the AOF has the SET: {logged}");
    assert!(
        !logged.contains("publish"),
        "the AOF has no PUBLISH: {logged}"
    );
}

/// The `name:value` field of INFO replication, or "" when absent.
fn replication_field(node: &Node, name: &str) -> String {
    node.cli(&["INFO", "replication"])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
        .unwrap_or_default()
}

/// Polls `check` until it holds or [`WAIT`] passes; whether it held.
fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    check()
}

/// Goal: a stream consumer is shown as Redis shows a replica: CLIENT LIST flag `S` (and
/// TYPE replica), INFO replication's `connected_slaves` and a `slave0` line that follows
/// what it was sent; gone from both once it disconnects.
#[test]
fn stream_consumers_are_listed_as_replicas() {
    let node = Node::start(&[]);
    let mut other = node.client();
    assert_eq!(replication_field(&node, "connected_slaves"), "0");
    let mut consumer = StreamClient::synced(&node);
    cmd(&mut other, &["SET", "foo", "bar"]).unwrap();
    assert_eq!(consumer.command(), words(&["select", "0"]));
    assert_eq!(consumer.command(), words(&["set", "foo", "bar"]));
    let replicas = node.cli(&["CLIENT", "LIST", "TYPE", "replica"]);
    assert_eq!(replicas.lines().count(), 1, "{replicas}");
    assert!(
        replicas.contains(" flags=S ") && replicas.contains(" cmd=sync "),
        "{replicas}"
    );
    assert_eq!(replication_field(&node, "connected_slaves"), "1");
    let offset = replication_field(&node, "master_repl_offset");
    assert!(
        eventually(|| {
            let line = replication_field(&node, "slave0");
            line.starts_with("ip=127.0.0.1,port=")
                && line.contains(&format!(",state=online,offset={offset},lag="))
        }),
        "{}",
        replication_field(&node, "slave0")
    );
    drop(consumer);
    assert!(
        eventually(|| replication_field(&node, "connected_slaves") == "0"),
        "the consumer left"
    );
    assert_eq!(node.cli(&["CLIENT", "LIST", "TYPE", "replica"]), "");
}

/// Goal: `PSYNC ? -1` (redis-cli --replica) answers `+FULLRESYNC <40-char replid> <offset>`
/// before the payload; a PSYNC naming that history at an offset the backlog holds continues
/// (`+CONTINUE`) with exactly the commands after it.
#[test]
fn psync_answers_fullresync_and_continues_a_known_history() {
    let node = Node::start(&[]);
    let mut other = node.client();
    cmd(&mut other, &["SET", "a", "1"]).unwrap();
    let mut first = StreamClient::connect(&node);
    first.send(b"PSYNC ? -1\r\n");
    let status = first.line();
    let parts: Vec<&str> = status.split(' ').collect();
    assert_eq!(parts.len(), 3, "{status}");
    assert_eq!(parts[0], "+FULLRESYNC");
    let replid = parts[1].to_string();
    assert_eq!(replid.len(), 40, "{status}");
    assert!(replid.chars().all(|c| c.is_ascii_hexdigit()), "{status}");
    let offset: u64 = parts[2].parse().expect("offset");
    first.payload();
    cmd(&mut other, &["SET", "b", "2"]).unwrap();
    assert_eq!(first.command(), words(&["select", "0"]));
    assert_eq!(first.command(), words(&["set", "b", "2"]));

    let mut again = StreamClient::connect(&node);
    again.send(format!("PSYNC {replid} {}\r\n", offset + 1).as_bytes());
    assert_eq!(again.line(), "+CONTINUE");
    assert_eq!(again.command(), words(&["select", "0"]));
    assert_eq!(again.command(), words(&["set", "b", "2"]));
    // An unknown history gets a full sync.
    let mut unknown = StreamClient::connect(&node);
    unknown.send(format!("PSYNC {} 1\r\n", "0".repeat(40)).as_bytes());
    assert!(unknown.line().starts_with("+FULLRESYNC "));
    unknown.payload();
}

/// Goal: with `requirepass`, SYNC is refused with NOAUTH before AUTH and served after it.
#[test]
fn sync_needs_authentication() {
    let node = Node::start(&["--requirepass", "s3cret"]);
    let mut consumer = StreamClient::connect(&node);
    consumer.send(b"SYNC\r\n");
    assert!(consumer.line().starts_with("-NOAUTH"));
    consumer.send(b"PSYNC ? -1\r\n");
    assert!(consumer.line().starts_with("-NOAUTH"));
    consumer.send(b"AUTH s3cret\r\nSYNC\r\n");
    assert_eq!(consumer.line(), "+OK");
    consumer.payload();
    // As Redis: no SELECT right after the payload; the first write selects its database.
    node.cli(&["-a", "s3cret", "--no-auth-warning", "SET", "a", "1"]);
    assert_eq!(consumer.command(), words(&["select", "0"]));
    assert_eq!(consumer.command(), words(&["set", "a", "1"]));
}

/// Goal: in cluster mode too SYNC needs authentication (no command runs before AUTH).
#[test]
fn sync_needs_authentication_in_cluster_mode() {
    let node = Node::start(&["--cluster-enabled", "yes", "--requirepass", "s3cret"]);
    let mut consumer = StreamClient::connect(&node);
    consumer.send(b"SYNC\r\n");
    assert!(consumer.line().starts_with("-NOAUTH"));
}

/// Goal: bounded memory. A consumer that stops reading while writes go on is disconnected
/// once it falls out of the backlog (1 MiB here), rather than having the stream queued for
/// it; the node keeps serving. And the number of consumers is bounded.
#[test]
fn a_consumer_that_does_not_read_is_disconnected() {
    let node = Node::start(&["--repl-backlog-size", "1mb"]);
    let mut stalled = StreamClient::synced(&node);
    let value = "v".repeat(512 * 1024);
    let mut other = node.client();
    let writes = 64;
    for i in 0..writes {
        cmd(&mut other, &["SET", &format!("k{i}"), &value]).unwrap();
    }
    let written = writes * value.len();
    let read = stalled
        .drain_until_closed(Duration::from_secs(30))
        .expect("the stalled consumer is disconnected");
    assert!(
        read < written,
        "read {read} of {written} bytes: the stream was queued for the stalled consumer"
    );
    assert_eq!(node.cli(&["PING"]), "PONG");

    // Small snapshots for the consumers below.
    cmd(&mut other, &["FLUSHALL"]).unwrap();
    let mut consumers: Vec<StreamClient> = (0..CONSUMERS_MAX)
        .map(|_| StreamClient::synced(&node))
        .collect();
    let mut refused = StreamClient::connect(&node);
    refused.send(b"SYNC\r\n");
    assert_eq!(refused.line(), "-ERR too many replication stream consumers");
    // A slot is given back when its consumer leaves.
    drop(consumers.pop());
    let deadline = Instant::now() + WAIT;
    loop {
        let mut c = StreamClient::connect(&node);
        c.send(b"SYNC\r\n");
        let head = c.line();
        if head.starts_with('$') {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slot never came back: {head}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Goal: `redis-cli --replica` (PSYNC, then SYNC's payload) follows the node's stream.
#[test]
fn redis_cli_replica_follows_the_stream() {
    let node = Node::start(&[]);
    let mut child = std::process::Command::new("redis-cli")
        .args(["-p", &node.port.to_string(), "--replica"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("redis-cli");
    // Its progress goes to stderr, the commands to stdout.
    let (progress_tx, progress) = std::sync::mpsc::channel();
    let (commands_tx, commands) = std::sync::mpsc::channel();
    forward_lines(Box::new(child.stderr.take().unwrap()), progress_tx);
    forward_lines(Box::new(child.stdout.take().unwrap()), commands_tx);
    // It logs commands once the payload is read.
    while !progress
        .recv_timeout(WAIT)
        .expect("redis-cli --replica's progress")
        .contains("Logging commands")
    {}
    let mut other = node.client();
    cmd(&mut other, &["SET", "foo", "bar"]).unwrap();
    cmd(&mut other, &["RPUSH", "l", "a", "b"]).unwrap();
    let next = || {
        commands
            .recv_timeout(WAIT)
            .expect("a command from redis-cli")
    };
    assert_eq!(next(), r#""SELECT","0""#);
    assert_eq!(next(), r#""SET","foo","bar""#);
    assert_eq!(next(), r#""RPUSH","l","a","b""#);
    let _ = child.kill();
    let _ = child.wait();
}

/// Sends each line `out` gives to `lines`, from a thread, until either end is gone.
fn forward_lines(out: Box<dyn Read + Send>, lines: std::sync::mpsc::Sender<String>) {
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
}
