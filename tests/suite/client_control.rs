//! CLIENT PAUSE / UNPAUSE / UNBLOCK and MEMORY, against a real node over raw RESP: what
//! Redis 7.0 answers, and that held requests are answered once (and only once) the pause
//! lets them run.

use integration::raw::{bulk, Frame, RawClient};
use integration::Node;
use std::time::{Duration, Instant};

/// How long a held request is watched for a reply it must not get yet. A reply arriving
/// later than this would go unnoticed, never fail the test wrongly.
const HELD: Duration = Duration::from_millis(300);

/// Waits until `n` clients are blocked or held (INFO `blocked_clients`, which counts the
/// clients a pause holds, as Redis 7.0's does).
fn wait_blocked(node: &Node, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let wanted = format!("blocked_clients:{n}\r");
    while !node.cli(&["INFO", "clients"]).contains(&wanted) {
        assert!(Instant::now() < deadline, "{n} clients never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn error(text: &str) -> Frame {
    Frame::Error(text.as_bytes().to_vec().into())
}

fn ok() -> Frame {
    Frame::Simple("OK".as_bytes().to_vec().into())
}

fn client_id(c: &mut RawClient) -> String {
    match c.call(&["CLIENT", "ID"]) {
        Frame::Integer(id) => id.to_string(),
        other => panic!("CLIENT ID answered {other:?}"),
    }
}

/// Goal: CLIENT PAUSE WRITE holds writes and commands that may replicate (PUBLISH), not
/// reads, until CLIENT UNPAUSE; held requests then run in order. Method: a writer and a
/// publisher are held (INFO counts them) while a reader is served; UNPAUSE releases both.
#[test]
fn pause_write_holds_writes_until_unpause_and_serves_reads() {
    let node = Node::start(&[]);
    let mut admin = RawClient::connect(node.port);
    let mut writer = RawClient::connect(node.port);
    let mut publisher = RawClient::connect(node.port);
    let mut reader = RawClient::connect(node.port);
    assert_eq!(admin.call(&["CLIENT", "PAUSE", "100000", "WRITE"]), ok());

    writer.send_batch(&[&["SET", "k", "v"], &["GET", "k"]]);
    publisher.send(&["PUBLISH", "ch", "hello"]);
    wait_blocked(&node, 2);
    assert_eq!(reader.call(&["GET", "k"]), Frame::NullBulk, "reads go on");
    assert_eq!(
        reader.call(&["PING"]),
        Frame::Simple("PONG".as_bytes().to_vec().into())
    );
    assert_eq!(writer.read_within(HELD), None, "the SET is held");

    assert_eq!(admin.call(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(writer.read(), ok());
    assert_eq!(
        writer.read(),
        bulk("v"),
        "the request pipelined behind it ran after it"
    );
    assert_eq!(publisher.read(), Frame::Integer(0));
    wait_blocked(&node, 0);
    assert_eq!(reader.call(&["GET", "k"]), bulk("v"));
}

/// Goal: CLIENT PAUSE ALL holds every command, reads included, and ends by itself at its
/// timeout. Method: a GET sent during a 1.5 s pause is answered, and not before the pause's
/// end (a lower bound the pause itself sets).
#[test]
fn pause_all_holds_reads_and_ends_by_itself() {
    let node = Node::start(&[]);
    let mut admin = RawClient::connect(node.port);
    let mut reader = RawClient::connect(node.port);
    assert_eq!(admin.call(&["SET", "k", "v"]), ok());
    let paused_at = Instant::now();
    assert_eq!(admin.call(&["CLIENT", "PAUSE", "1500", "ALL"]), ok());
    reader.send(&["GET", "k"]);
    assert_eq!(reader.read_within(HELD), None, "the GET is held");
    assert_eq!(reader.read(), bulk("v"));
    assert!(
        paused_at.elapsed() >= Duration::from_millis(1500),
        "answered inside the pause"
    );
    // The pause is over for everyone: INFO (held under ALL) answers at once.
    assert!(node.cli(&["INFO", "clients"]).contains("blocked_clients:0"));
}

/// Goal: a WRITE pause ends at its timeout without UNPAUSE, releasing the held write.
/// Method: a SET held (INFO shows it) during a 1 s pause completes afterwards.
#[test]
fn pause_write_ends_by_itself() {
    let node = Node::start(&[]);
    let mut admin = RawClient::connect(node.port);
    let mut writer = RawClient::connect(node.port);
    let paused_at = Instant::now();
    assert_eq!(admin.call(&["CLIENT", "PAUSE", "1000", "WRITE"]), ok());
    writer.send(&["INCR", "n"]);
    wait_blocked(&node, 1);
    assert_eq!(writer.read(), Frame::Integer(1));
    assert!(paused_at.elapsed() >= Duration::from_millis(1000));
    assert_eq!(admin.call(&["GET", "n"]), bulk("1"));
}

#[test]
fn pause_arguments_are_checked_as_redis() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    assert_eq!(
        c.call(&["CLIENT", "PAUSE", "100", "READS"]),
        error("ERR CLIENT PAUSE mode must be WRITE or ALL")
    );
    assert_eq!(
        c.call(&["CLIENT", "PAUSE", "soon"]),
        error("ERR timeout is not an integer or out of range")
    );
    assert_eq!(
        c.call(&["CLIENT", "PAUSE", "-1"]),
        error("ERR timeout is negative")
    );
    assert_eq!(
        c.call(&["CLIENT", "PAUSE"]),
        error("ERR wrong number of arguments for 'client|pause' command")
    );
    // A zero timeout sets a pause that is already over.
    assert_eq!(c.call(&["CLIENT", "PAUSE", "0", "ALL"]), ok());
    assert_eq!(c.call(&["SET", "k", "v"]), ok());
    assert_eq!(
        c.call(&["CLIENT", "UNPAUSE"]),
        ok(),
        "nothing to lift is fine"
    );
}

/// Goal: CLIENT UNBLOCK ends a wait in BLPOP / BZPOPMIN / XREAD as a timeout or with
/// Redis's UNBLOCKED error, answering 1; it answers 0 for a client that is not blocked, one
/// that does not exist, and one held by a pause. Method: blocked raw clients, then UNBLOCK.
#[test]
fn client_unblock_ends_blocking_commands() {
    let node = Node::start(&[]);
    let mut admin = RawClient::connect(node.port);
    let mut blocked = RawClient::connect(node.port);
    let id = client_id(&mut blocked);

    assert_eq!(
        admin.call(&["CLIENT", "UNBLOCK", &id]),
        Frame::Integer(0),
        "idle"
    );
    assert_eq!(
        admin.call(&["CLIENT", "UNBLOCK", "987654"]),
        Frame::Integer(0),
        "no such client"
    );

    blocked.send(&["BLPOP", "list", "0"]);
    wait_blocked(&node, 1);
    assert_eq!(admin.call(&["CLIENT", "UNBLOCK", &id]), Frame::Integer(1));
    assert_eq!(blocked.read(), Frame::NullArray, "as a timeout");
    wait_blocked(&node, 0);

    blocked.send(&["BZPOPMIN", "zset", "0"]);
    wait_blocked(&node, 1);
    assert_eq!(
        admin.call(&["CLIENT", "UNBLOCK", &id, "ERROR"]),
        Frame::Integer(1)
    );
    assert_eq!(
        blocked.read(),
        error("UNBLOCKED client unblocked via CLIENT UNBLOCK")
    );

    blocked.send(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    wait_blocked(&node, 1);
    assert_eq!(
        admin.call(&["CLIENT", "UNBLOCK", &id, "timeout"]),
        Frame::Integer(1)
    );
    assert_eq!(blocked.read(), Frame::NullArray);
    assert_eq!(
        admin.call(&["CLIENT", "UNBLOCK", &id]),
        Frame::Integer(0),
        "served already"
    );
    // The connection goes on normally after being unblocked.
    assert_eq!(blocked.call(&["RPUSH", "list", "a"]), Frame::Integer(1));

    // A client held by a pause is not blocked in a command.
    assert_eq!(admin.call(&["CLIENT", "PAUSE", "100000", "WRITE"]), ok());
    blocked.send(&["SET", "k", "v"]);
    wait_blocked(&node, 1);
    assert_eq!(admin.call(&["CLIENT", "UNBLOCK", &id]), Frame::Integer(0));
    assert_eq!(admin.call(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(blocked.read(), ok());

    assert_eq!(
        admin.call(&["CLIENT", "UNBLOCK", &id, "LATER"]),
        error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
    );
    assert_eq!(
        admin.call(&["CLIENT", "UNBLOCK", "me"]),
        error("ERR value is not an integer or out of range")
    );
}

fn integer(f: Frame) -> i64 {
    match f {
        Frame::Integer(n) => n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// Goal: MEMORY USAGE estimates grow with what a key holds, are nil for a missing key, and
/// refuse bad options as Redis does. Method: strings and lists of growing sizes.
#[test]
fn memory_usage_grows_with_the_value() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    let small = "x".repeat(10);
    let big = "x".repeat(10_000);
    assert_eq!(c.call(&["SET", "small", &small]), ok());
    assert_eq!(c.call(&["SET", "big", &big]), ok());
    let s = integer(c.call(&["MEMORY", "USAGE", "small"]));
    let b = integer(c.call(&["MEMORY", "USAGE", "big"]));
    assert!(s > 10, "the key's own bookkeeping counts: {s}");
    assert!(b - s >= 9_990, "small {s}, big {b}");
    assert_eq!(c.call(&["MEMORY", "USAGE", "missing"]), Frame::NullBulk);

    for i in 0..100 {
        c.call(&["RPUSH", "list", &format!("element-{i:04}")]);
    }
    let hundred = integer(c.call(&["MEMORY", "USAGE", "list", "SAMPLES", "0"]));
    c.call(&["RPUSH", "list", &"y".repeat(5_000)]);
    let more = integer(c.call(&["MEMORY", "USAGE", "list", "SAMPLES", "0"]));
    assert!(more - hundred >= 5_000, "{hundred} then {more}");

    assert_eq!(
        c.call(&["MEMORY", "USAGE", "big", "SAMPLES", "-1"]),
        error("ERR syntax error")
    );
    assert_eq!(
        c.call(&["MEMORY", "USAGE", "big", "SAMPLES", "many"]),
        error("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.call(&["MEMORY", "USAGE", "big", "EXACT"]),
        error("ERR syntax error")
    );
    assert_eq!(
        c.call(&["MEMORY", "FOO"]),
        error("ERR unknown subcommand 'FOO'. Try MEMORY HELP.")
    );
}

/// Goal: MEMORY STATS is a map of Redis's field names with numbers a client can parse;
/// DOCTOR, MALLOC-STATS and PURGE answer. Method: RESP3 for the map, values read back.
#[test]
fn memory_stats_parse_and_the_other_subcommands_answer() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    assert!(matches!(c.call(&["HELLO", "3"]), Frame::Map(_)));
    c.call(&["SET", "a", "1"]);
    c.call(&["SET", "b", "2"]);
    let Frame::Map(fields) = c.call(&["MEMORY", "STATS"]) else {
        panic!("MEMORY STATS is no map");
    };
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| *k == bulk(name))
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {name} in {fields:?}"))
    };
    assert_eq!(field("keys.count"), Frame::Integer(2));
    let total = integer(field("total.allocated"));
    let peak = integer(field("peak.allocated"));
    assert!(total > 0 && peak >= total, "total {total}, peak {peak}");
    assert!(integer(field("startup.allocated")) > 0);
    assert!(integer(field("dataset.bytes")) >= 0);
    assert!(matches!(field("dataset.percentage"), Frame::Double(_)));
    assert!(matches!(field("fragmentation"), Frame::Double(_)));
    assert!(matches!(field("db.0"), Frame::Map(m) if m.len() == 3));

    let text = |f: Frame| match f {
        Frame::Verbatim { text, .. } | Frame::Bulk(text) => {
            String::from_utf8_lossy(&text).into_owned()
        }
        other => panic!("expected text, got {other:?}"),
    };
    assert!(text(c.call(&["MEMORY", "DOCTOR"])).contains("Sam"));
    assert!(text(c.call(&["MEMORY", "MALLOC-STATS"])).contains("jemalloc"));
    assert_eq!(c.call(&["MEMORY", "PURGE"]), ok());
    assert!(matches!(c.call(&["MEMORY", "HELP"]), Frame::Array(lines) if lines.len() > 5));
    assert_eq!(
        c.call(&["MEMORY", "STATS", "now"]),
        error("ERR wrong number of arguments for 'memory|stats' command")
    );
}

/// Goal: a WRITE pause holds EXEC of a transaction that queued a write before the pause, and
/// keeps a key whose TTL passes from being removed by active expiry until it ends (Redis
/// 7.0). Method: MULTI/SET queued, then the pause; a key of 50 ms TTL outlives the `hz`
/// cycles of a 300 ms wait (DBSIZE counts it), and goes once the pause is lifted.
#[test]
fn pause_write_holds_exec_and_active_expiry() {
    let node = Node::start(&[]);
    let mut admin = RawClient::connect(node.port);
    let mut txn = RawClient::connect(node.port);
    assert_eq!(admin.call(&["SET", "short", "v", "PX", "50"]), ok());
    assert_eq!(txn.call(&["MULTI"]), ok());
    assert_eq!(
        txn.call(&["SET", "k", "v"]),
        Frame::Simple("QUEUED".as_bytes().to_vec().into())
    );
    assert_eq!(admin.call(&["CLIENT", "PAUSE", "100000", "WRITE"]), ok());
    txn.send(&["EXEC"]);
    wait_blocked(&node, 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        admin.call(&["DBSIZE"]),
        Frame::Integer(1),
        "the expired key is still there"
    );
    assert_eq!(txn.read_within(HELD), None, "EXEC is held");

    assert_eq!(admin.call(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(txn.read(), Frame::Array(vec![ok()]));
    let deadline = Instant::now() + Duration::from_secs(10);
    while admin.call(&["DBSIZE"]) != Frame::Integer(1) {
        assert!(Instant::now() < deadline, "active expiry never resumed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(admin.call(&["EXISTS", "k"]), Frame::Integer(1));
}
