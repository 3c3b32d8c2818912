//! Keyspace notifications and MONITOR against a real node. Goal: subscribers see the events
//! Redis 7.0 publishes (channel names, event names, order) for each command family, only for
//! the classes `notify-keyspace-events` enables; MONITOR shows other clients' commands in
//! Redis's line format with secrets redacted, and a monitor that never reads is closed
//! instead of growing the node's memory. Method: real node processes, raw RESP connections
//! (to see every frame) for subscribers and monitors, the `redis` crate and redis-cli to act.

use integration::raw::{bulk, Frame, RawClient};
use integration::{cmd, Node};
use redis::Value;
use std::time::Duration;

/// Time to conclude that no further frame is coming.
const QUIET: Duration = Duration::from_millis(300);

fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(b) | Frame::Simple(b) | Frame::Error(b) => {
            String::from_utf8_lossy(b).into_owned()
        }
        other => panic!("expected a string frame, got {other:?}"),
    }
}

/// A raw client subscribed to `patterns`, confirmations read.
fn psubscribed(node: &Node, patterns: &[&str]) -> RawClient {
    let mut sub = RawClient::connect(node.port);
    let mut args = vec!["PSUBSCRIBE"];
    args.extend_from_slice(patterns);
    sub.send(&args);
    for p in patterns {
        let Frame::Array(items) = sub.read() else {
            panic!("confirmation expected")
        };
        assert_eq!(items[1], bulk(p));
    }
    sub
}

/// The next pmessage as (channel, message).
fn next_event(sub: &mut RawClient) -> (String, String) {
    match sub.read() {
        Frame::Array(items) if items.len() == 4 && items[0] == bulk("pmessage") => {
            (text(&items[2]), text(&items[3]))
        }
        other => panic!("pmessage expected, got {other:?}"),
    }
}

/// Reads one keyevent message per expected `(event, key)`, in order, then checks that
/// nothing else came.
fn expect_keyevents(sub: &mut RawClient, expected: &[(&str, &str)]) {
    for (event, key) in expected {
        assert_eq!(
            next_event(sub),
            (format!("__keyevent@0__:{event}"), key.to_string()),
            "expecting {event} {key}"
        );
    }
    assert_eq!(sub.read_within(QUIET), None, "after {expected:?}");
}

/// A command and the keyevent messages `(event, key)` it publishes, in order.
type Step = (
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
);

fn run(con: &mut redis::Connection, args: &[&str]) {
    cmd(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

fn config_get(con: &mut redis::Connection) -> String {
    match cmd(con, &["CONFIG", "GET", "notify-keyspace-events"]).unwrap() {
        Value::Array(items) => match &items[1] {
            Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
            other => panic!("{other:?}"),
        },
        other => panic!("CONFIG GET answered {other:?}"),
    }
}

#[test]
fn config_round_trips_in_redis_canonical_form_and_refuses_unknown_classes() {
    let node = Node::start(&["--notify-keyspace-events", "Kx"]);
    let mut con = node.client();
    assert_eq!(config_get(&mut con), "xK", "from the command line");
    for (set, get) in [
        ("KEA", "AKE"),
        ("Elg", "glE"),
        ("g$lshzxetdK", "AK"),
        ("AnmK", "AKm"),
        ("nE", "nE"),
        ("", ""),
    ] {
        run(&mut con, &["CONFIG", "SET", "notify-keyspace-events", set]);
        assert_eq!(config_get(&mut con), get, "after setting {set:?}");
    }
    let mut raw = RawClient::connect(node.port);
    assert_eq!(
        raw.call(&["CONFIG", "SET", "notify-keyspace-events", "KEq"]),
        Frame::error("ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
    );
    assert_eq!(config_get(&mut con), "", "a refused value changes nothing");
}

#[test]
fn commands_publish_redis_event_names_on_both_channels() {
    let node = Node::start(&["--notify-keyspace-events", "KEA"]);
    let mut sub = psubscribed(&node, &["__key*__:*"]);
    let mut con = node.client();

    // Both channels, keyspace first, as Redis publishes them.
    run(&mut con, &["SET", "foo", "bar"]);
    assert_eq!(
        next_event(&mut sub),
        ("__keyspace@0__:foo".into(), "set".into())
    );
    assert_eq!(
        next_event(&mut sub),
        ("__keyevent@0__:set".into(), "foo".into())
    );
    assert_eq!(sub.read_within(QUIET), None);
    drop(sub);

    let mut sub = psubscribed(&node, &["__keyevent@0__:*"]);
    let steps: &[Step] = &[
        (
            &["SET", "s", "v", "EX", "100"],
            &[("set", "s"), ("expire", "s")],
        ),
        (&["APPEND", "s", "x"], &[("append", "s")]),
        (&["INCRBY", "n", "5"], &[("incrby", "n")]),
        (&["INCRBYFLOAT", "n", "1.5"], &[("incrbyfloat", "n")]),
        (&["SETRANGE", "s", "0", "z"], &[("setrange", "s")]),
        (&["DEL", "s", "n", "missing"], &[("del", "s"), ("del", "n")]),
        (&["LPUSH", "l", "a", "b"], &[("lpush", "l")]),
        (&["RPOP", "l"], &[("rpop", "l")]),
        (
            &["LMOVE", "l", "l2", "LEFT", "RIGHT"],
            &[("lpop", "l"), ("del", "l"), ("rpush", "l2")],
        ),
        (&["HSET", "h", "f", "v"], &[("hset", "h")]),
        (&["HINCRBY", "h", "n", "2"], &[("hincrby", "h")]),
        (&["HDEL", "h", "f", "n"], &[("hdel", "h"), ("del", "h")]),
        (&["SADD", "st", "m", "k"], &[("sadd", "st")]),
        (&["SREM", "st", "k"], &[("srem", "st")]),
        (&["ZADD", "z", "1", "m"], &[("zadd", "z")]),
        (&["ZADD", "z", "INCR", "1", "m"], &[("zincr", "z")]),
        (&["ZINCRBY", "z", "1", "m"], &[("zincr", "z")]),
        (&["ZPOPMAX", "z"], &[("zpopmax", "z"), ("del", "z")]),
        (
            &["RENAME", "l2", "l3"],
            &[("rename_from", "l2"), ("rename_to", "l3")],
        ),
        (&["EXPIRE", "l3", "100"], &[("expire", "l3")]),
        (&["PERSIST", "l3"], &[("persist", "l3")]),
        (&["EXPIRE", "l3", "-1"], &[("del", "l3")]),
        (&["XADD", "x", "*", "f", "v"], &[("xadd", "x")]),
        (
            &["XGROUP", "CREATE", "x", "g", "0"],
            &[("xgroup-create", "x")],
        ),
        // Reads, and writes that change nothing, publish nothing.
        (&["SCARD", "st"], &[]),
        (&["SADD", "st", "m"], &[]),
        (&["DEL", "missing"], &[]),
    ];
    for (command, events) in steps {
        run(&mut con, command);
        expect_keyevents(&mut sub, events);
    }

    // A TTL running out: `expired`, from active expiry (or lazily if read first).
    run(&mut con, &["PEXPIRE", "st", "50"]);
    assert_eq!(
        next_event(&mut sub),
        ("__keyevent@0__:expire".into(), "st".into())
    );
    assert_eq!(
        next_event(&mut sub),
        ("__keyevent@0__:expired".into(), "st".into())
    );

    // A key read after its TTL passed is reported expired by the read itself, unless active
    // expiry got there first: either way exactly one `expired`.
    run(&mut con, &["SET", "lazy", "v", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(cmd(&mut con, &["GET", "lazy"]).unwrap(), Value::Nil);
    expect_keyevents(
        &mut sub,
        &[("set", "lazy"), ("expire", "lazy"), ("expired", "lazy")],
    );

    // MULTI/EXEC: each command's events, in order, once EXEC runs.
    run(&mut con, &["MULTI"]);
    run(&mut con, &["RPUSH", "tx", "a"]);
    run(&mut con, &["LPOP", "tx"]);
    run(&mut con, &["EXEC"]);
    expect_keyevents(&mut sub, &[("rpush", "tx"), ("lpop", "tx"), ("del", "tx")]);

    // redis-cli from outside drives the same path.
    node.cli(&["HSET", "cli", "f", "1"]);
    expect_keyevents(&mut sub, &[("hset", "cli")]);
}

#[test]
fn classes_and_channel_kinds_filter_what_is_published() {
    let node = Node::start(&[]);
    let mut sub = psubscribed(&node, &["__key*__:*"]);
    let mut con = node.client();

    // Off by default.
    run(&mut con, &["SET", "a", "1"]);
    assert_eq!(sub.read_within(QUIET), None);

    // A class without a channel kind publishes nothing.
    run(&mut con, &["CONFIG", "SET", "notify-keyspace-events", "$l"]);
    run(&mut con, &["SET", "a", "2"]);
    assert_eq!(sub.read_within(QUIET), None);

    // Lists only, keyevent channel only.
    run(&mut con, &["CONFIG", "SET", "notify-keyspace-events", "El"]);
    run(&mut con, &["SET", "a", "3"]);
    run(&mut con, &["DEL", "a"]);
    run(&mut con, &["RPUSH", "l", "x"]);
    run(&mut con, &["RPOP", "l"]);
    // `rpop` is a list event; the `del` of the emptied key is generic, so filtered out.
    expect_keyevents(&mut sub, &[("rpush", "l"), ("rpop", "l")]);

    // Strings and generic, keyspace channel only.
    run(
        &mut con,
        &["CONFIG", "SET", "notify-keyspace-events", "K$g"],
    );
    run(&mut con, &["SET", "b", "1"]);
    run(&mut con, &["LPUSH", "l", "x"]);
    run(&mut con, &["DEL", "b"]);
    assert_eq!(
        next_event(&mut sub),
        ("__keyspace@0__:b".into(), "set".into())
    );
    assert_eq!(
        next_event(&mut sub),
        ("__keyspace@0__:b".into(), "del".into())
    );
    assert_eq!(sub.read_within(QUIET), None);

    // `new` is outside `A` and reports keys created, not keys overwritten.
    run(&mut con, &["CONFIG", "SET", "notify-keyspace-events", "EA"]);
    run(&mut con, &["SET", "fresh", "1"]);
    expect_keyevents(&mut sub, &[("set", "fresh")]);
    run(&mut con, &["CONFIG", "SET", "notify-keyspace-events", "En"]);
    run(&mut con, &["SET", "fresh", "2"]);
    run(&mut con, &["SET", "fresher", "1"]);
    run(&mut con, &["HSET", "h", "f", "v"]);
    expect_keyevents(&mut sub, &[("new", "fresher"), ("new", "h")]);

    // `m`, outside `A` too: a read command's lookup of a missing key (`keymiss`); a write's
    // lookup of one is no miss, nor is a hit.
    run(&mut con, &["CONFIG", "SET", "notify-keyspace-events", "EA"]);
    run(&mut con, &["GET", "nothing"]);
    assert_eq!(sub.read_within(QUIET), None);
    run(&mut con, &["CONFIG", "SET", "notify-keyspace-events", "Em"]);
    run(&mut con, &["GET", "nothing"]);
    run(&mut con, &["GET", "fresh"]);
    run(&mut con, &["MGET", "fresh", "gone1", "gone2"]);
    run(&mut con, &["INCR", "counter"]);
    expect_keyevents(
        &mut sub,
        &[
            ("keymiss", "nothing"),
            ("keymiss", "gone1"),
            ("keymiss", "gone2"),
        ],
    );
}

/// Parses a MONITOR line: (timestamp, address, quoted arguments).
fn monitor_line(frame: Frame) -> (String, String, String) {
    let Frame::Simple(line) = frame else {
        panic!("a MONITOR line is a status reply, got {frame:?}")
    };
    let line = String::from_utf8(line.to_vec()).unwrap();
    let (stamp, rest) = line.split_once(' ').expect("timestamp");
    let (secs, micros) = stamp.split_once('.').expect("seconds.micros");
    assert!(secs.parse::<u64>().unwrap() > 1_600_000_000, "{line}");
    assert_eq!(micros.len(), 6, "{line}");
    assert!(micros.bytes().all(|b| b.is_ascii_digit()), "{line}");
    let rest = rest.strip_prefix("[0 ").expect("database 0");
    let (addr, args) = rest.split_once("] ").expect("address");
    (stamp.to_string(), addr.to_string(), args.to_string())
}

#[test]
fn monitor_shows_other_clients_commands_with_redis_quoting_and_redaction() {
    let node = Node::start(&["--requirepass", "s3cret"]);
    let mut monitor = RawClient::connect(node.port);
    assert_eq!(
        monitor.call(&["auth", "s3cret"]),
        Frame::Simple("OK".into())
    );
    assert_eq!(monitor.call(&["MONITOR"]), Frame::Simple("OK".into()));

    let mut other = RawClient::connect(node.port);
    assert_eq!(other.call(&["auth", "s3cret"]), Frame::Simple("OK".into()));
    // Arguments are shown as the client sent them (case included).
    let (_, addr, args) = monitor_line(monitor.read());
    assert_eq!(args, r#""auth" "(redacted)""#);
    let (ip, port) = addr.rsplit_once(':').expect("ip:port");
    assert_eq!(ip, "127.0.0.1");
    port.parse::<u16>().expect("a port");

    other.call(&["set", "k", "a \"q\" \\ \r\n\t\u{7}\u{8}\u{1}é"]);
    let (_, addr2, args) = monitor_line(monitor.read());
    assert_eq!(addr2, addr, "the same client");
    assert_eq!(args, r#""set" "k" "a \"q\" \\ \r\n\t\a\b\x01\xc3\xa9""#);

    other.call(&["hello", "3", "AUTH", "default", "s3cret", "setname", "me"]);
    let (_, _, args) = monitor_line(monitor.read());
    assert_eq!(
        args,
        r#""hello" "3" "AUTH" "(redacted)" "(redacted)" "setname" "me""#
    );

    // Admin commands are never shown; EXEC follows the commands it ran, as in Redis 7.0.
    other.call(&["CONFIG", "GET", "port"]);
    other.call(&["multi"]);
    other.call(&["incr", "c"]);
    other.call(&["EXEC"]);
    for expected in [r#""multi""#, r#""incr" "c""#, r#""EXEC""#] {
        assert_eq!(monitor_line(monitor.read()).2, expected);
    }

    // redis-cli is another client, with its own address.
    node.cli(&["-a", "s3cret", "--no-auth-warning", "PING"]);
    let mut saw_ping = false;
    while let Some(frame) = monitor.read_within(Duration::from_secs(5)) {
        let (_, cli_addr, args) = monitor_line(frame);
        if args == r#""PING""# {
            assert_ne!(cli_addr, addr);
            saw_ping = true;
            break;
        }
    }
    assert!(saw_ping, "redis-cli's PING reached the monitor");

    // MONITOR inside a transaction is refused when EXEC runs it (Redis's DENY BLOCKING).
    let mut tx = RawClient::connect(node.port);
    tx.call(&["AUTH", "s3cret"]);
    tx.call(&["MULTI"]);
    assert_eq!(tx.call(&["MONITOR"]), Frame::Simple("QUEUED".into()));
    assert_eq!(
        tx.call(&["EXEC"]),
        Frame::Array(vec![Frame::error(
            "ERR MONITOR isn't allowed for DENY BLOCKING client"
        )])
    );
    // ...and that client does not monitor: its next command gets only its reply.
    assert_eq!(tx.call(&["PING"]), Frame::Simple("PONG".into()));
    assert_eq!(tx.read_within(QUIET), None);
}

#[test]
fn a_monitor_that_never_reads_is_closed_and_the_node_keeps_serving() {
    let node = Node::start(&[]);
    let mut stalled = RawClient::connect(node.port);
    assert_eq!(stalled.call(&["MONITOR"]), Frame::Simple("OK".into()));
    // From here `stalled` reads nothing. Each SET below becomes a MONITOR line of a MiB;
    // past the socket buffers they queue on the node, which must close the monitor once
    // its 32 MiB push-queue limit is reached instead of holding them all.
    let value = "v".repeat(1 << 20);
    let mut con = node.client();
    for i in 0..96 {
        run(&mut con, &["SET", &format!("big{i}"), &value]);
    }
    assert!(
        stalled.closed_within(Duration::from_secs(20)),
        "the stalled monitor was closed"
    );
    let clients = node.cli(&["CLIENT", "LIST"]);
    assert!(!clients.contains("cmd=monitor"), "{clients}");
    assert_eq!(node.cli(&["DBSIZE"]), "96");
}

#[test]
fn implicit_stream_consumers_and_evictions_publish_their_events() {
    let node = Node::start(&["--notify-keyspace-events", "Ete"]);
    let mut sub = psubscribed(&node, &["__keyevent@0__:*"]);
    let mut con = node.client();
    run(&mut con, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    run(&mut con, &["XADD", "s", "1", "f", "v"]);
    expect_keyevents(&mut sub, &[("xgroup-create", "s"), ("xadd", "s")]);
    // Consumers XREADGROUP and XCLAIM create on the fly are announced; an existing one not.
    run(
        &mut con,
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"],
    );
    expect_keyevents(&mut sub, &[("xgroup-createconsumer", "s")]);
    run(&mut con, &["XCLAIM", "s", "g", "mike", "0", "1-0", "FORCE"]);
    expect_keyevents(&mut sub, &[("xgroup-createconsumer", "s")]);
    run(&mut con, &["XAUTOCLAIM", "s", "g", "alice", "0", "0"]);
    // Deleting a consumer that does not exist changes nothing.
    run(&mut con, &["XGROUP", "DELCONSUMER", "s", "g", "nobody"]);
    run(&mut con, &["XGROUP", "DELCONSUMER", "s", "g", "mike"]);
    expect_keyevents(&mut sub, &[("xgroup-delconsumer", "s")]);

    // Lowering maxmemory evicts at once, as Redis's CONFIG SET does: `evicted`.
    run(&mut con, &["DEL", "s"]);
    run(
        &mut con,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    run(&mut con, &["SET", "victim", "v"]);
    run(&mut con, &["CONFIG", "SET", "maxmemory", "1"]);
    expect_keyevents(&mut sub, &[("evicted", "victim")]);
    run(&mut con, &["CONFIG", "SET", "maxmemory", "0"]);
}
