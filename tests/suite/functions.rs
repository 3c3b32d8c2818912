//! Redis 7.0 Functions (FUNCTION LOAD/LIST/DELETE/FLUSH/DUMP/RESTORE/STATS/KILL, FCALL,
//! FCALL_RO) against real node processes: errors in Redis 7.0.15's words, the flags, a
//! library reaching a replica (by the stream and by a full sync), a library surviving a
//! restart (snapshot and AOF), FUNCTION KILL, and MONITOR showing a function's calls.

use integration::raw::{bulk, bulks, Frame, RawClient};
use integration::{free_port, Node, STARTUP_TIMEOUT};
use std::time::{Duration, Instant};

/// Bound for anything waited on.
const PATIENCE: Duration = Duration::from_secs(20);

const HELLO: &str = "#!lua name=lib\nredis.register_function('hello', function(keys, args) return 'hello ' .. (args[1] or '') end)";
const SETTER: &str = "#!lua name=setter\nredis.register_function{function_name='put', callback=function(keys, args) return redis.call('set', keys[1], args[1]) end, description='sets a key'}\nredis.register_function{function_name='peek', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}";

fn error_text(frame: &Frame) -> String {
    match frame {
        Frame::Error(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn assert_error(frame: Frame, expected: &str) {
    let text = error_text(&frame);
    assert!(text.contains(expected), "{text:?} lacks {expected:?}");
}

/// Goal: loading, calling, replacing, deleting and flushing libraries, with FUNCTION LOAD's
/// and FCALL's errors in Redis's words. Method: one node, a raw connection.
#[test]
fn libraries_load_run_and_refuse_bad_input_as_redis_does() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    assert_eq!(c.call(&["FUNCTION", "LOAD", HELLO]), bulk("lib"));
    assert_eq!(c.call(&["FCALL", "hello", "0", "you"]), bulk("hello you"));
    assert_eq!(c.call(&["FCALL", "HELLO", "0"]), bulk("hello "), "any case");
    assert_error(
        c.call(&["FUNCTION", "LOAD", HELLO]),
        "ERR Library 'lib' already exists",
    );
    assert_error(
        c.call(&["FUNCTION", "LOAD", "foo", HELLO]),
        "ERR Unknown option given: foo",
    );

    // Malformed libraries: metadata, engine, compile errors, registration errors.
    for (code, expected) in [
        ("return 1", "ERR Missing library metadata"),
        ("#!lua\nreturn 1", "ERR Library name was not given"),
        ("#!js name=x\nreturn 1", "ERR Engine 'js' not found"),
        ("#!lua name=x foo=bar\n", "ERR Invalid metadata value given: foo=bar"),
        ("#!lua name=a-b\n", "ERR Library names can only contain letters"),
        ("#!lua name=x\nbad code", "ERR Error compiling function: user_function:2:"),
        ("#!lua name=x\nreturn 1", "ERR No functions registered"),
        (
            "#!lua name=x\nredis.register_function('f', 'not a function')",
            "second argument to redis.register_function must be a function",
        ),
        (
            "#!lua name=x\nredis.register_function{function_name='f', callback=function() end, flags={'bad'}}",
            "unknown flag given",
        ),
        (
            "#!lua name=x\nredis.call('ping')",
            "Script attempted to access nonexistent global variable 'call'",
        ),
        ("#!lua name=x\na = 1", "Attempt to modify a readonly table"),
        (
            "#!lua name=x\nlocal a = 1 while true do a = a + 1 end",
            "FUNCTION LOAD timeout",
        ),
        (
            "#!lua name=x\nredis.register_function('hello', function() return 1 end)",
            "ERR Function hello already exists",
        ),
    ] {
        assert_error(c.call(&["FUNCTION", "LOAD", code]), expected);
    }
    assert_eq!(
        c.call(&["FUNCTION", "STATS"]),
        Frame::Array(vec![
            bulk("running_script"),
            Frame::NullBulk,
            bulk("engines"),
            Frame::Array(vec![
                bulk("LUA"),
                Frame::Array(vec![
                    bulk("libraries_count"),
                    Frame::Integer(1),
                    bulk("functions_count"),
                    Frame::Integer(1),
                ]),
            ]),
        ]),
        "failed loads left nothing behind"
    );

    // FCALL's own errors, and a failing function's.
    assert_error(c.call(&["FCALL", "nope", "0"]), "ERR Function not found");
    assert_error(
        c.call(&["FCALL", "hello", "x"]),
        "ERR Bad number of keys provided",
    );
    assert_error(
        c.call(&["FCALL", "hello", "3", "k"]),
        "ERR Number of keys can't be greater than number of args",
    );
    c.call(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=boom\nredis.register_function('boom', function()\nlocal r = redis.call('nosuchcmd') return r end)",
    ]);
    assert_error(
        c.call(&["FCALL", "boom", "0"]),
        "ERR Unknown Redis command called from script script: boom, on @user_function:3.",
    );

    // REPLACE swaps the code; a failed REPLACE keeps the old one.
    let v2 = HELLO.replace("'hello '", "'bye '");
    assert_eq!(c.call(&["FUNCTION", "LOAD", "REPLACE", &v2]), bulk("lib"));
    assert_eq!(c.call(&["FCALL", "hello", "0", "x"]), bulk("bye x"));
    assert_error(
        c.call(&["FUNCTION", "LOAD", "REPLACE", "#!lua name=lib\nbad"]),
        "Error compiling function",
    );
    assert_eq!(c.call(&["FCALL", "hello", "0", "x"]), bulk("bye x"));

    assert_eq!(c.call(&["FUNCTION", "DELETE", "lib"]), Frame::simple("OK"));
    assert_error(c.call(&["FCALL", "hello", "0"]), "ERR Function not found");
    assert_error(
        c.call(&["FUNCTION", "DELETE", "lib"]),
        "ERR Library not found",
    );
    assert_error(
        c.call(&["FUNCTION", "FLUSH", "bad"]),
        "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
    );
    assert_eq!(c.call(&["FUNCTION", "FLUSH", "ASYNC"]), Frame::simple("OK"));
    assert_eq!(c.call(&["FUNCTION", "LIST"]), Frame::Array(vec![]));
    assert_error(
        c.call(&["FUNCTION", "KILL"]),
        "NOTBUSY No scripts in execution right now.",
    );
}

/// Goal: flags decide what a function may do (no-writes, FCALL_RO), LIST shows them with
/// descriptions and code, and GETKEYS finds FCALL's keys.
#[test]
fn flags_list_and_getkeys() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    assert_eq!(c.call(&["FUNCTION", "LOAD", SETTER]), bulk("setter"));
    assert_eq!(
        c.call(&["FCALL", "put", "1", "k", "v"]),
        Frame::simple("OK")
    );
    assert_eq!(c.call(&["FCALL_RO", "peek", "1", "k"]), bulk("v"));
    assert_error(
        c.call(&["FCALL_RO", "put", "1", "k", "v"]),
        "ERR Can not execute a script with write flag using *_ro command.",
    );
    c.call(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=sneaky\nredis.register_function{function_name='sneak', callback=function() return redis.call('set', 'x', '1') end, flags={'no-writes'}}",
    ]);
    assert_error(
        c.call(&["FCALL", "sneak", "0"]),
        "Write commands are not allowed from read-only scripts",
    );
    assert_eq!(
        c.call(&["FUNCTION", "LIST", "LIBRARYNAME", "sett*"]),
        Frame::Array(vec![Frame::Array(vec![
            bulk("library_name"),
            bulk("setter"),
            bulk("engine"),
            bulk("LUA"),
            bulk("functions"),
            Frame::Array(vec![
                Frame::Array(vec![
                    bulk("name"),
                    bulk("put"),
                    bulk("description"),
                    bulk("sets a key"),
                    bulk("flags"),
                    Frame::Array(vec![]),
                ]),
                Frame::Array(vec![
                    bulk("name"),
                    bulk("peek"),
                    bulk("description"),
                    Frame::NullBulk,
                    bulk("flags"),
                    bulks(&["no-writes"]),
                ]),
            ]),
        ])])
    );
    let Frame::Array(listed) = c.call(&["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "setter"])
    else {
        panic!("LIST answers an array");
    };
    let Frame::Array(fields) = &listed[0] else {
        panic!("a library is a map");
    };
    assert_eq!(fields[6], bulk("library_code"));
    assert_eq!(fields[7], bulk(SETTER));
    assert_error(
        c.call(&["FUNCTION", "LIST", "bad"]),
        "ERR Unknown argument bad",
    );
    assert_error(
        c.call(&["FUNCTION", "LIST", "LIBRARYNAME"]),
        "ERR library name argument was not given",
    );
    assert_eq!(
        c.call(&["COMMAND", "GETKEYS", "FCALL", "put", "2", "a", "b", "v"]),
        bulks(&["a", "b"])
    );
    assert_eq!(
        c.call(&["COMMAND", "GETKEYS", "FCALL_RO", "peek", "0"]),
        Frame::Array(vec![])
    );
}

/// Goal: DUMP and RESTORE carry libraries with Redis's policies; damaged or oversized
/// payloads are refused and change nothing.
#[test]
fn dump_and_restore_with_policies_and_bad_payloads() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    c.call(&["FUNCTION", "LOAD", HELLO]);
    let Frame::Bulk(payload) = c.call(&["FUNCTION", "DUMP"]) else {
        panic!("DUMP answers a payload");
    };
    assert_error(
        c.call_bytes(&[b"FUNCTION", b"RESTORE", &payload]),
        "ERR Library lib already exists",
    );
    assert_eq!(
        c.call_bytes(&[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]),
        Frame::simple("OK")
    );
    assert_error(
        c.call_bytes(&[b"FUNCTION", b"RESTORE", &payload, b"bogus"]),
        "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
    );
    let mut damaged = payload.to_vec();
    damaged[2] ^= 0x20;
    assert_error(
        c.call_bytes(&[b"FUNCTION", b"RESTORE", &damaged]),
        "ERR payload version or checksum are wrong",
    );
    assert_error(
        c.call(&["FUNCTION", "RESTORE", "bad_payload"]),
        "ERR payload version or checksum are wrong",
    );
    let huge = vec![b'x'; 65 * 1024 * 1024];
    assert_error(
        c.call_bytes(&[b"FUNCTION", b"RESTORE", &huge]),
        "is over the limit",
    );
    let big_code = format!("{HELLO}\n--{}", "x".repeat(4 * 1024 * 1024));
    assert_error(
        c.call(&["FUNCTION", "LOAD", "REPLACE", &big_code]),
        "is over the limit",
    );
    c.call(&["FUNCTION", "LOAD", SETTER]);
    assert_eq!(
        c.call_bytes(&[b"FUNCTION", b"RESTORE", &payload, b"FLUSH"]),
        Frame::simple("OK")
    );
    assert_eq!(
        c.call(&["FCALL", "hello", "0", "again"]),
        bulk("hello again")
    );
    assert_error(
        c.call(&["FCALL", "put", "1", "k", "v"]),
        "ERR Function not found",
    );
}

/// Goal: libraries survive a restart, from the snapshot (SAVE) and from the AOF (the
/// FUNCTION LOAD in the increment, then in a rewritten base). Method: restart in the same
/// directory, call the function.
#[test]
fn libraries_survive_restarts_from_snapshot_and_aof() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    c.call(&["FUNCTION", "LOAD", HELLO]);
    assert_eq!(c.call(&["SAVE"]), Frame::simple("OK"));
    let node = Node::start_in(node.into_dir(), &[]);
    let mut c = RawClient::connect(node.port);
    assert_eq!(c.call(&["FCALL", "hello", "0", "back"]), bulk("hello back"));

    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let node = Node::start(&aof);
    let mut c = RawClient::connect(node.port);
    c.call(&["FUNCTION", "LOAD", HELLO]);
    c.call(&["FUNCTION", "LOAD", SETTER]);
    c.call(&["FUNCTION", "DELETE", "setter"]);
    let node = Node::start_in(node.into_dir(), &aof);
    let mut c = RawClient::connect(node.port);
    assert_eq!(c.call(&["FCALL", "hello", "0", "aof"]), bulk("hello aof"));
    assert_error(
        c.call(&["FCALL", "put", "1", "k", "v"]),
        "ERR Function not found",
    );
    assert_eq!(
        c.call(&["BGREWRITEAOF"]),
        Frame::simple("Background append only file rewriting started")
    );
    let deadline = Instant::now() + PATIENCE;
    while !node
        .cli(&["INFO", "persistence"])
        .contains("aof_rewrite_in_progress:0")
    {
        assert!(Instant::now() < deadline, "the rewrite never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    let node = Node::start_in(node.into_dir(), &aof);
    let mut c = RawClient::connect(node.port);
    assert_eq!(c.call(&["FCALL", "hello", "0", "base"]), bulk("hello base"));
}

/// Goal: a replica gets libraries by its full sync and by the stream (LOAD, DELETE, FLUSH,
/// RESTORE), runs read-only functions, refuses writing ones and FUNCTION LOAD from its
/// clients, and receives a function's writes as their effects.
#[test]
fn libraries_reach_a_replica_by_full_sync_and_stream() {
    let fabric = ["--fabric-provider", "ofi:tcp", "--rdma-bind", "127.0.0.1"];
    let repl_port = free_port().to_string();
    let mut args = fabric.to_vec();
    args.extend(["--repl-fabric-port", &repl_port]);
    let primary = Node::start(&args);
    wait_for_log(&primary, "accepting replication links (fabric)");
    let replica = Node::start(&fabric);
    let mut p = RawClient::connect(primary.port);
    let mut r = RawClient::connect(replica.port);
    p.call(&["FUNCTION", "LOAD", HELLO]);
    let port = primary.port.to_string();
    assert_eq!(
        r.call(&["REPLICAOF", "127.0.0.1", &port]),
        Frame::simple("OK")
    );
    // `hello` may write (no `no-writes` flag): a replica lists it but refuses to run it.
    eventually(
        &mut r,
        "the full sync",
        |r| matches!(r.call(&["FUNCTION", "LIST", "LIBRARYNAME", "lib"]), Frame::Array(l) if l.len() == 1),
    );
    assert_error(
        r.call(&["FCALL", "hello", "0"]),
        "READONLY You can't write against a read only replica.",
    );

    p.call(&["FUNCTION", "LOAD", SETTER]);
    eventually(&mut r, "LOAD by the stream", |r| {
        r.call(&["FCALL_RO", "peek", "1", "k"]) == Frame::NullBulk
    });
    assert_eq!(
        p.call(&["FCALL", "put", "1", "k", "v"]),
        Frame::simple("OK")
    );
    eventually(&mut r, "a function's write", |r| {
        r.call(&["GET", "k"]) == bulk("v")
    });
    assert_error(
        r.call(&["FCALL", "put", "1", "k", "w"]),
        "READONLY You can't write against a read only replica.",
    );
    assert_error(
        r.call(&["FUNCTION", "LOAD", "REPLACE", HELLO]),
        "READONLY You can't write against a read only replica.",
    );

    let Frame::Bulk(payload) = p.call(&["FUNCTION", "DUMP"]) else {
        panic!("DUMP answers a payload");
    };
    p.call(&["FUNCTION", "DELETE", "setter"]);
    eventually(&mut r, "DELETE by the stream", |r| {
        matches!(r.call(&["FCALL_RO", "peek", "1", "k"]), Frame::Error(_))
    });
    p.call(&["FUNCTION", "FLUSH"]);
    eventually(&mut r, "FLUSH by the stream", |r| {
        r.call(&["FUNCTION", "LIST"]) == Frame::Array(vec![])
    });
    assert_eq!(
        p.call_bytes(&[b"FUNCTION", b"RESTORE", &payload]),
        Frame::simple("OK")
    );
    eventually(&mut r, "RESTORE by the stream", |r| {
        r.call(&["FCALL_RO", "peek", "1", "k"]) == bulk("v")
    });
}

/// Goal: a function running past `busy-reply-threshold` is BUSY for others with FUNCTION
/// KILL's text, shows in FUNCTION STATS, is not stopped by SCRIPT KILL, and FUNCTION KILL
/// stops it; a MULTI sent meanwhile is let in and its EXEC aborts. Method: one
/// io-thread, the default on 2 cores (the function's thread hands the event loop over at
/// the threshold), an endless function, PING polled on another client.
#[test]
fn function_kill_stops_a_busy_function() {
    let node = Node::start(&["--io-threads", "1", "--busy-reply-threshold", "50"]);
    let mut runner = RawClient::connect(node.port);
    let mut other = RawClient::connect(node.port);
    runner.call(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=spin\nredis.register_function('spin', function() local a = 1 while true do a = a + 1 end end)",
    ]);
    runner.send(&["FCALL", "spin", "0"]);
    let busy =
        "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
    let deadline = Instant::now() + PATIENCE;
    loop {
        let reply = other.call(&["PING"]);
        if reply == Frame::error(busy) {
            break;
        }
        assert_eq!(reply, Frame::simple("PONG"));
        assert!(Instant::now() < deadline, "the function never became busy");
        std::thread::sleep(Duration::from_millis(10));
    }
    let Frame::Array(stats) = other.call(&["FUNCTION", "STATS"]) else {
        panic!("STATS answers a map");
    };
    let Frame::Array(running) = &stats[1] else {
        panic!("a function runs: {stats:?}");
    };
    assert_eq!(
        &running[..4],
        &[
            bulk("name"),
            bulk("spin"),
            bulk("command"),
            bulks(&["FCALL", "spin", "0"])
        ]
    );
    // A transaction begun now is let in, its refused command aborts it (Redis's allow-busy).
    let mut txn = RawClient::connect(node.port);
    assert_eq!(txn.call(&["MULTI"]), Frame::simple("OK"));
    assert_eq!(txn.call(&["INCR", "n"]), Frame::error(busy));
    assert_eq!(other.call(&["SCRIPT", "KILL"]), Frame::error(busy));
    assert_eq!(other.call(&["FUNCTION", "KILL"]), Frame::simple("OK"));
    let killed = error_text(
        &runner
            .read_within(PATIENCE)
            .expect("the killed function answers"),
    );
    assert!(killed.contains("Script killed by user"), "{killed}");
    assert_eq!(other.call(&["PING"]), Frame::simple("PONG"));
    assert_error(txn.call(&["EXEC"]), "EXECABORT Transaction discarded");
    assert_eq!(txn.call(&["GET", "n"]), Frame::NullBulk);
}

/// Goal: MONITOR shows an FCALL, then the commands it ran as `[0 lua]`, as Redis does.
#[test]
fn monitor_shows_a_functions_calls_from_lua() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    c.call(&["FUNCTION", "LOAD", SETTER]);
    let mut monitor = RawClient::connect(node.port);
    assert_eq!(monitor.call(&["MONITOR"]), Frame::simple("OK"));
    c.call(&["FCALL", "put", "1", "k", "v"]);
    let line = |m: &mut RawClient| match m.read_within(PATIENCE) {
        Some(Frame::Simple(s)) => String::from_utf8_lossy(&s).into_owned(),
        other => panic!("a monitor line, got {other:?}"),
    };
    let first = line(&mut monitor);
    assert!(first.contains("\"FCALL\" \"put\""), "{first}");
    let second = line(&mut monitor);
    assert!(second.contains("[0 lua] \"set\" \"k\" \"v\""), "{second}");
}

fn wait_for_log(node: &Node, line: &str) {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    while !node.log().contains(line) {
        assert!(
            Instant::now() < deadline,
            "no '{line}'; log: {}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn eventually(c: &mut RawClient, what: &str, mut check: impl FnMut(&mut RawClient) -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !check(c) {
        assert!(
            Instant::now() < deadline,
            "{what}: not on the replica in time"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
