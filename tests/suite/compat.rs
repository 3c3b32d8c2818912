//! Redis compatibility fixes found by running Redis 7.0's own test suite against a node
//! (scripts/redis-suite.sh): each test states the Redis behaviour and drives a real node
//! with raw RESP or redis-cli to check it.

use integration::raw::{bulk, bulks, Frame, RawClient};
use integration::Node;
use std::time::{Duration, Instant};

/// Waits until `n` clients are blocked (INFO `blocked_clients`).
fn wait_blocked(node: &Node, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let wanted = format!("blocked_clients:{n}");
    while !node.cli(&["INFO", "clients"]).contains(&wanted) {
        assert!(Instant::now() < deadline, "{n} clients never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The value of `field` in `INFO section`.
fn info_field(node: &Node, section: &str, field: &str) -> Option<String> {
    let prefix = format!("{field}:");
    node.cli(&["INFO", section])
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(|v| v.trim().to_string()))
}

/// Goal: a key moved into place by RENAME / RENAMENX, alone or inside MULTI, serves the
/// clients blocked on its new name, as a push there would (Redis signals every key a write
/// adds). Method: BLPOP / BZPOPMIN wait on a key, another client creates it by renaming.
#[test]
fn a_key_renamed_into_place_serves_clients_blocked_on_it() {
    let node = Node::start(&[]);
    let wait = Duration::from_secs(5);

    let mut blocked = RawClient::connect(node.port);
    blocked.send(&["BLPOP", "foo", "0"]);
    wait_blocked(&node, 1);
    node.cli(&["RPUSH", "bob", "abc", "def", "hij"]);
    assert_eq!(node.cli(&["RENAME", "bob", "foo"]), "OK");
    assert_eq!(blocked.read_within(wait), Some(bulks(&["foo", "abc"])));

    blocked.send(&["BLPOP", "target", "0"]);
    wait_blocked(&node, 1);
    node.cli(&["RPUSH", "src", "x"]);
    assert_eq!(node.cli(&["RENAMENX", "src", "target"]), "1");
    assert_eq!(blocked.read_within(wait), Some(bulks(&["target", "x"])));

    blocked.send(&["BZPOPMIN", "zdst", "0"]);
    wait_blocked(&node, 1);
    let mut writer = RawClient::connect(node.port);
    assert_eq!(writer.call(&["MULTI"]), Frame::simple("OK"));
    writer.call(&["ZADD", "zsrc", "1", "one"]);
    writer.call(&["RENAME", "zsrc", "zdst"]);
    assert_eq!(
        writer.call(&["EXEC"]),
        Frame::Array(vec![Frame::Integer(1), Frame::simple("OK")])
    );
    assert_eq!(
        blocked.read_within(wait),
        Some(Frame::Array(vec![bulk("zdst"), bulk("one"), bulk("1")]))
    );
}

/// Goal: FLUSHALL and FLUSHDB fail the EXEC of a client watching a key they delete, and only
/// that: a watched key that did not exist is not touched (Redis's touchAllWatchedKeysInDb).
/// SMOVE touches only the sets it changes (a destination that already has the member is
/// unchanged).
#[test]
fn flushes_and_empty_smoves_touch_only_the_watched_keys_they_change() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    let exec_after = |c: &mut RawClient| {
        assert_eq!(c.call(&["MULTI"]), Frame::simple("OK"));
        c.call(&["PING"]);
        c.call(&["EXEC"])
    };
    let pong = Frame::Array(vec![Frame::simple("PONG")]);

    for flush in ["FLUSHALL", "FLUSHDB"] {
        node.cli(&["SET", "other", "1"]);
        assert_eq!(c.call(&["WATCH", "absent"]), Frame::simple("OK"));
        assert_eq!(node.cli(&[flush]), "OK");
        assert_eq!(
            exec_after(&mut c),
            pong,
            "{flush} over an absent watched key"
        );

        node.cli(&["SET", "x", "30"]);
        assert_eq!(c.call(&["WATCH", "x"]), Frame::simple("OK"));
        assert_eq!(node.cli(&[flush]), "OK");
        assert_eq!(
            exec_after(&mut c),
            Frame::NullArray,
            "{flush} deleted the watched key"
        );
    }

    node.cli(&["SADD", "src", "a"]);
    node.cli(&["SADD", "dst", "b"]);
    assert_eq!(c.call(&["WATCH", "src", "dst"]), Frame::simple("OK"));
    assert_eq!(node.cli(&["SMOVE", "src", "dst", "nosuch"]), "0");
    assert_eq!(node.cli(&["SMOVE", "nosrc", "dst", "a"]), "0");
    assert_eq!(exec_after(&mut c), pong, "SMOVE moved nothing");
    // The member leaves the source, but the destination already had it: only the source
    // changed.
    node.cli(&["SADD", "dst", "a"]);
    assert_eq!(c.call(&["WATCH", "dst"]), Frame::simple("OK"));
    assert_eq!(node.cli(&["SMOVE", "src", "dst", "a"]), "1");
    assert_eq!(
        exec_after(&mut c),
        pong,
        "SMOVE into a set holding the member"
    );
    node.cli(&["SADD", "src", "c"]);
    assert_eq!(c.call(&["WATCH", "dst"]), Frame::simple("OK"));
    assert_eq!(node.cli(&["SMOVE", "src", "dst", "c"]), "1");
    assert_eq!(exec_after(&mut c), Frame::NullArray, "SMOVE added a member");
}

/// Goal: INFO commandstats counts calls, time, rejected calls (refused before running: wrong
/// arity) and failed calls (ran and answered an error) per command and subcommand, as Redis
/// 7.0 does; latencystats reports the configured percentiles; CONFIG RESETSTAT starts both
/// from zero; `latency-tracking no` empties latencystats.
#[test]
fn info_commandstats_and_latencystats_count_as_redis() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    c.call(&["SET", "s", "text"]);
    c.call(&["SET", "n", "1"]);
    for _ in 0..3 {
        c.call(&["GET", "s"]);
    }
    assert!(matches!(c.call(&["INCR", "s"]), Frame::Error(_)));
    c.call(&["INCR", "n"]);
    assert!(matches!(c.call(&["GET"]), Frame::Error(_)));
    c.call(&["CONFIG", "GET", "maxmemory"]);
    assert!(matches!(c.call(&["NOSUCHCOMMAND"]), Frame::Error(_)));

    let stat =
        |node: &Node, name: &str| info_field(node, "commandstats", &format!("cmdstat_{name}"));
    let get = stat(&node, "get").expect("cmdstat_get");
    assert!(
        get.starts_with("calls=3,usec=") && get.ends_with(",rejected_calls=1,failed_calls=0"),
        "{get}"
    );
    let incr = stat(&node, "incr").expect("cmdstat_incr");
    assert!(
        incr.starts_with("calls=2,") && incr.ends_with(",rejected_calls=0,failed_calls=1"),
        "{incr}"
    );
    assert!(stat(&node, "config|get").is_some_and(|s| s.starts_with("calls=1,")));
    assert!(stat(&node, "nosuchcommand").is_none());
    assert!(
        info_field(&node, "errorstats", "errorstat_ERR").is_some_and(|v| v == "count=3"),
        "wrong arity, not an integer, unknown command"
    );

    let latency =
        info_field(&node, "latencystats", "latency_percentiles_usec_get").expect("latency of GET");
    assert!(
        latency.starts_with("p50=") && latency.contains(",p99=") && latency.contains(",p99.9="),
        "{latency}"
    );
    assert_eq!(
        node.cli(&[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "50 90"
        ]),
        "OK"
    );
    let latency = info_field(&node, "latencystats", "latency_percentiles_usec_get").expect("GET");
    assert!(
        latency.starts_with("p50=") && latency.contains(",p90=") && !latency.contains("p99"),
        "{latency}"
    );

    assert_eq!(node.cli(&["CONFIG", "RESETSTAT"]), "OK");
    assert!(stat(&node, "get").is_none(), "reset");
    c.call(&["GET", "s"]);
    assert!(stat(&node, "get").is_some_and(|s| s.starts_with("calls=1,")));

    assert_eq!(node.cli(&["CONFIG", "SET", "latency-tracking", "no"]), "OK");
    let section = node.cli(&["INFO", "latencystats"]);
    assert!(!section.contains("latency_percentiles_usec_"), "{section}");
}

/// Goal: COMMAND GETKEYSANDFLAGS reports Redis 7.0's key flags (the suite's own cases: SET
/// overwrites, LMOVE reads and deletes from its source and inserts into its destination).
#[test]
fn command_getkeysandflags_reports_redis_key_flags() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    let key = |name: &str, flags: &[&str]| {
        Frame::Array(vec![
            bulk(name),
            Frame::Set(flags.iter().map(|f| Frame::simple(f)).collect()),
        ])
    };
    // RESP3, so that the flags come back as the set Redis sends.
    c.call(&["HELLO", "3"]);
    assert_eq!(
        c.call(&["COMMAND", "GETKEYSANDFLAGS", "SET", "k1", "v1"]),
        Frame::Array(vec![key("k1", &["OW", "update"])])
    );
    assert_eq!(
        c.call(&["COMMAND", "GETKEYSANDFLAGS", "SET", "k1", "v1", "GET"]),
        Frame::Array(vec![key("k1", &["RW", "access", "update"])])
    );
    assert_eq!(
        c.call(&["COMMAND", "GETKEYSANDFLAGS", "MSET", "k1", "v1", "k2", "v2"]),
        Frame::Array(vec![
            key("k1", &["OW", "update"]),
            key("k2", &["OW", "update"])
        ])
    );
    assert_eq!(
        c.call(&[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "LMOVE",
            "k1",
            "k2",
            "left",
            "right"
        ]),
        Frame::Array(vec![
            key("k1", &["RW", "access", "delete"]),
            key("k2", &["RW", "insert"])
        ])
    );
    assert_eq!(
        c.call(&["COMMAND", "GETKEYSANDFLAGS", "DEL", "k1"]),
        Frame::Array(vec![key("k1", &["RM", "delete"])])
    );
}

/// Goal: CONFIG GET/SET take Redis's old names (`slaveof`, `*-ziplist-*`) and the encoding
/// thresholds clients and tests tune; FUNCTION FLUSH (which clients send to reset a server)
/// answers OK on a node that has no functions to delete; `lua-time-limit` is taken as
/// `busy-reply-threshold`.
#[test]
fn config_aliases_encoding_thresholds_and_function_flush() {
    let node = Node::start(&[]);
    assert_eq!(
        node.cli(&["CONFIG", "SET", "hash-max-ziplist-entries", "20"]),
        "OK"
    );
    assert_eq!(
        node.cli(&["CONFIG", "GET", "hash-max-listpack-entries"]),
        "hash-max-listpack-entries\n20"
    );
    assert_eq!(
        node.cli(&["CONFIG", "GET", "hash-max-ziplist-entries"]),
        "hash-max-ziplist-entries\n20"
    );
    assert_eq!(
        node.cli(&["CONFIG", "SET", "list-max-ziplist-size", "-3"]),
        "OK"
    );
    assert_eq!(
        node.cli(&["CONFIG", "GET", "list-max-listpack-size"]),
        "list-max-listpack-size\n-3"
    );
    assert!(node
        .cli(&["CONFIG", "SET", "zset-max-ziplist-entries", "x"])
        .starts_with("ERR CONFIG SET failed"));
    // The value is empty: redis-cli prints the name and an empty line, which `cli` trims.
    assert_eq!(node.cli(&["CONFIG", "GET", "slaveof"]), "slaveof");
    // Tests and tools set the script time limit by its old name (busy-reply-threshold now).
    assert_eq!(node.cli(&["CONFIG", "SET", "lua-time-limit", "10"]), "OK");
    assert_eq!(
        node.cli(&["CONFIG", "GET", "busy-reply-threshold"]),
        "busy-reply-threshold\n10"
    );
    assert_eq!(node.cli(&["FUNCTION", "FLUSH"]), "OK");
    assert_eq!(node.cli(&["FUNCTION", "FLUSH", "ASYNC"]), "OK");
    assert!(node
        .cli(&["FUNCTION", "FLUSH", "LATER"])
        .starts_with("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"));
}

/// Goal: CONFIG SET of a parameter fixed at start to the value it already has succeeds (tools
/// re-apply whole configs), any other value is still refused.
#[test]
fn config_set_of_a_fixed_parameter_to_its_value_succeeds() {
    let node = Node::start(&[]);
    let port = node.port.to_string();
    assert_eq!(node.cli(&["CONFIG", "SET", "port", &port]), "OK");
    assert_eq!(node.cli(&["CONFIG", "SET", "bind", "127.0.0.1"]), "OK");
    let other = (node.port - 1).to_string();
    assert!(node
        .cli(&["CONFIG", "SET", "port", &other])
        .ends_with("can't set immutable config"));
}

/// Goal: LATENCY HISTOGRAM answers per-command call counts and cumulative buckets; with
/// `latency-monitor-threshold` set, a command over it becomes a LATENCY LATEST / HISTORY
/// event, which LATENCY RESET forgets. Method: one RPUSH of 300k elements and LPOS scans of
/// them, each well over 1 ms.
#[test]
fn latency_histogram_and_monitor_events() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    assert_eq!(c.call(&["CONFIG", "RESETSTAT"]), Frame::simple("OK"));
    c.call(&["SET", "a", "b"]);
    c.call(&["SET", "c", "d"]);
    c.call(&["CLIENT", "ID"]);
    let Frame::Array(h) = c.call(&["LATENCY", "HISTOGRAM", "set", "client", "nosuch"]) else {
        panic!("LATENCY HISTOGRAM answers a map (an array in RESP2)");
    };
    assert_eq!(h.len(), 4, "set and client|id: {h:?}");
    assert_eq!(h[0], bulk("set"));
    let Frame::Array(set) = &h[1] else {
        panic!("{h:?}")
    };
    assert_eq!(
        set[..3],
        [bulk("calls"), Frame::Integer(2), bulk("histogram_usec")]
    );
    let Frame::Array(buckets) = &set[3] else {
        panic!("{set:?}")
    };
    assert!(!buckets.is_empty() && buckets.len() % 2 == 0);
    assert_eq!(
        buckets.last(),
        Some(&Frame::Integer(2)),
        "cumulative: ends at all calls"
    );
    assert_eq!(h[2], bulk("client|id"));

    assert_eq!(
        c.call(&["CONFIG", "SET", "latency-monitor-threshold", "1"]),
        Frame::simple("OK")
    );
    let values: Vec<String> = (0..300_000).map(|i| i.to_string()).collect();
    let mut push: Vec<&str> = vec!["RPUSH", "big"];
    push.extend(values.iter().map(String::as_str));
    assert_eq!(c.call(&push), Frame::Integer(300_000));
    // O(n) over the list with a one-word reply (a big reply would time the client).
    for _ in 0..5 {
        assert!(c.call(&["LPOS", "big", "nosuch"]).is_null());
    }
    let Frame::Array(latest) = c.call(&["LATENCY", "LATEST"]) else {
        panic!()
    };
    let events: Vec<Frame> = latest
        .iter()
        .map(|e| match e {
            Frame::Array(fields) => fields[0].clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(!events.is_empty(), "RPUSH and LPOS took over 1 ms");
    let Frame::Bulk(first) = &events[0] else {
        panic!("{events:?}")
    };
    let first = String::from_utf8_lossy(first).to_string();
    let Frame::Array(history) = c.call(&["LATENCY", "HISTORY", &first]) else {
        panic!()
    };
    assert!(!history.is_empty());
    assert!(matches!(c.call(&["LATENCY", "DOCTOR"]), Frame::Bulk(text) if !text.is_empty()));
    assert_eq!(c.call(&["LATENCY", "RESET", "nosuch"]), Frame::Integer(0));
    assert_eq!(
        c.call(&["LATENCY", "RESET"]),
        Frame::Integer(events.len() as i64)
    );
    assert_eq!(c.call(&["LATENCY", "LATEST"]), Frame::Array(vec![]));
}

/// Goal: an active expire cycle over `latency-monitor-threshold` (here: freeing a set of
/// 300k members that expired) is a LATENCY event named `expire-cycle`, as Redis names it.
#[test]
fn a_slow_expire_cycle_is_a_latency_event() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    let values: Vec<String> = (0..300_000).map(|i| i.to_string()).collect();
    let mut add: Vec<&str> = vec!["SADD", "big"];
    add.extend(values.iter().map(String::as_str));
    assert_eq!(c.call(&add), Frame::Integer(300_000));
    assert_eq!(
        c.call(&["CONFIG", "SET", "latency-monitor-threshold", "1"]),
        Frame::simple("OK")
    );
    assert_eq!(c.call(&["PEXPIRE", "big", "20"]), Frame::Integer(1));
    // Nothing reads the key: the active cycle removes it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let Frame::Array(latest) = c.call(&["LATENCY", "LATEST"]) else {
            panic!("LATENCY LATEST answers an array")
        };
        let expire_cycle = |e: &Frame| matches!(e, Frame::Array(f) if f[0] == bulk("expire-cycle"));
        if latest.iter().any(expire_cycle) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no expire-cycle event: {latest:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.call(&["DBSIZE"]), Frame::Integer(0));
}

/// Goal: CLIENT REPLY OFF silences replies until ON, SKIP silences the next one; CLIENT
/// LIST / INFO of the asking client counts the command being run in `qbuf`, as Redis does.
#[test]
fn client_reply_modes_and_own_qbuf() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    c.send(&["CLIENT", "REPLY", "OFF"]);
    c.send(&["SET", "k", "1"]);
    c.send(&["INCR", "k"]);
    assert_eq!(c.call(&["CLIENT", "REPLY", "ON"]), Frame::simple("OK"));
    assert_eq!(c.call(&["GET", "k"]), bulk("2"));
    c.send(&["CLIENT", "REPLY", "SKIP"]);
    c.send(&["INCR", "k"]);
    assert_eq!(c.call(&["GET", "k"]), bulk("3"));
    assert_eq!(
        c.call(&["CLIENT", "REPLY", "MAYBE"]),
        Frame::error("ERR syntax error")
    );

    let Frame::Bulk(info) = c.call(&["CLIENT", "INFO"]) else {
        panic!()
    };
    let info = String::from_utf8_lossy(&info).to_string();
    // *2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n
    assert!(info.contains(" qbuf=26 "), "{info}");
}

/// Goal: INFO carries Redis 7.0's fields for what this node does not have (scripts, forks,
/// defragmentation, tracking) with their true value, zero, so that dashboards built on
/// redis-server's INFO find them.
#[test]
fn info_has_redis_fields_for_absent_features() {
    let node = Node::start(&[]);
    let everything = node.cli(&["INFO", "everything"]);
    for field in [
        "number_of_functions:0",
        "used_memory_lua:0",
        "rdb_last_cow_size:0",
        "current_fork_perc:0.00",
        "module_fork_in_progress:0",
        "active_defrag_hits:0",
        "tracking_total_keys:0",
        "lazyfreed_objects:0",
        "mem_aof_buffer:0",
    ] {
        assert!(everything.contains(&format!("{field}\r\n")), "{field}");
    }
}

/// Goal: OBJECT ENCODING answers Redis 7.0's names, chosen by the encoding thresholds in the
/// config: lists are quicklists, sets of integers intsets and other sets hash tables, small
/// hashes and sorted sets listpacks until a threshold is passed (by what they are: converted
/// by the write that passes it, never back).
#[test]
fn object_encoding_answers_redis_7_0_names_by_the_thresholds() {
    let node = Node::start(&[]);
    let encoding = |key: &str| node.cli(&["OBJECT", "ENCODING", key]);
    node.cli(&["RPUSH", "list", "a"]);
    assert_eq!(encoding("list"), "quicklist");
    node.cli(&["SADD", "ints", "1", "2", "-3"]);
    assert_eq!(encoding("ints"), "intset");
    node.cli(&["SADD", "words", "a", "b"]);
    assert_eq!(encoding("words"), "hashtable");
    node.cli(&["HSET", "hash", "f1", "v", "f2", "v"]);
    assert_eq!(encoding("hash"), "listpack");
    node.cli(&["ZADD", "zset", "1", "a", "2", "b"]);
    assert_eq!(encoding("zset"), "listpack");
    node.cli(&["CONFIG", "SET", "hash-max-ziplist-entries", "3"]);
    node.cli(&["CONFIG", "SET", "zset-max-listpack-value", "0"]);
    node.cli(&["CONFIG", "SET", "set-max-intset-entries", "3"]);
    // A sorted set is what it is too: a new config applies at its next write that adds.
    assert_eq!(encoding("zset"), "listpack");
    node.cli(&["ZADD", "zset", "5", "a"]);
    assert_eq!(encoding("zset"), "listpack");
    node.cli(&["ZADD", "zset", "3", "c"]);
    assert_eq!(encoding("zset"), "skiplist");
    node.cli(&["ZREM", "zset", "b", "c"]);
    assert_eq!(encoding("zset"), "skiplist");
    assert_eq!(node.cli(&["ZSCORE", "zset", "a"]), "5");
    // Sets answer by their history, as Redis 7.0 converts them: on the write that passes
    // the intset bound or adds a non-integer, never back.
    assert_eq!(encoding("ints"), "intset");
    node.cli(&["SADD", "ints", "4"]);
    assert_eq!(encoding("ints"), "hashtable");
    node.cli(&["SREM", "ints", "4"]);
    assert_eq!(encoding("ints"), "hashtable");
    node.cli(&["SADD", "mixed", "1", "2"]);
    assert_eq!(encoding("mixed"), "intset");
    node.cli(&["SADD", "mixed", "x"]);
    node.cli(&["SREM", "mixed", "x"]);
    assert_eq!(encoding("mixed"), "hashtable");
    // A hash is what it is: packed until a write takes it past the thresholds, then a
    // table for good, as Redis (which converts on write, never back).
    node.cli(&["HSET", "hash", "f3", "v"]);
    assert_eq!(encoding("hash"), "listpack");
    node.cli(&["HSET", "hash", "f4", "v"]);
    assert_eq!(encoding("hash"), "hashtable");
    node.cli(&["HDEL", "hash", "f2", "f3", "f4"]);
    assert_eq!(encoding("hash"), "hashtable");
    assert_eq!(node.cli(&["HGET", "hash", "f1"]), "v");
    let long = "x".repeat(65);
    node.cli(&["HSET", "short", "f", "v"]);
    assert_eq!(encoding("short"), "listpack");
    node.cli(&["HSET", "short", "f", &long]);
    assert_eq!(encoding("short"), "hashtable");
    assert_eq!(node.cli(&["HGET", "short", "f"]), long);
}

/// Goal: COMMAND GETKEYS of a script naming no key answers an empty list (Redis 7.0 flags
/// EVAL and its kin `no_mandatory_keys`), one naming keys lists them. Method: the suite's
/// own cases (introspection-2).
#[test]
fn command_getkeys_of_a_script_without_keys_is_empty() {
    let node = Node::start(&[]);
    let mut c = RawClient::connect(node.port);
    assert_eq!(
        c.call(&["COMMAND", "GETKEYS", "EVAL", "return 1", "0"]),
        Frame::Array(vec![])
    );
    assert_eq!(
        c.call(&["COMMAND", "GETKEYS", "EVAL", "return 1", "1", "key"]),
        Frame::Array(vec![bulk("key")])
    );
    assert_eq!(
        c.call(&["COMMAND", "GETKEYS", "EVALSHA_RO", "abc", "0"]),
        Frame::Array(vec![])
    );
}

/// Goal: values a loader builds (RESTORE here; snapshots, RDB files and a replica's full
/// sync decode the same way) are packed by the node's configured thresholds, as Redis loads
/// by them: a 3-member hash, sorted set and integer set dumped under the defaults come back
/// as a hash table, skiplist and hash table once the thresholds are 2.
#[test]
fn restored_values_follow_the_configured_encoding_thresholds() {
    let node = Node::start(&[]);
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", node.port)).unwrap();
    let mut c = client.get_connection().unwrap();
    node.cli(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    node.cli(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    node.cli(&["SADD", "s", "1", "2", "3"]);
    let dumps: Vec<(&str, Vec<u8>)> = ["h", "z", "s"]
        .into_iter()
        .map(|k| {
            let payload: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut c).unwrap();
            (k, payload)
        })
        .collect();
    let restore_all = |c: &mut redis::Connection, suffix: &str| {
        for (k, payload) in &dumps {
            let _: () = redis::cmd("RESTORE")
                .arg(format!("{k}{suffix}"))
                .arg(0)
                .arg(payload.as_slice())
                .query(c)
                .unwrap();
        }
    };
    let encoding = |key: &str| node.cli(&["OBJECT", "ENCODING", key]);
    restore_all(&mut c, "-default");
    assert_eq!(encoding("h-default"), "listpack");
    assert_eq!(encoding("z-default"), "listpack");
    assert_eq!(encoding("s-default"), "intset");
    for setting in [
        "hash-max-listpack-entries",
        "zset-max-listpack-entries",
        "set-max-intset-entries",
    ] {
        assert_eq!(node.cli(&["CONFIG", "SET", setting, "2"]), "OK");
    }
    restore_all(&mut c, "-tight");
    assert_eq!(encoding("h-tight"), "hashtable");
    assert_eq!(encoding("z-tight"), "skiplist");
    assert_eq!(encoding("s-tight"), "hashtable");
    // The same data either way.
    assert_eq!(node.cli(&["HGET", "h-tight", "c"]), "3");
    assert_eq!(node.cli(&["ZSCORE", "z-tight", "b"]), "2");
    assert_eq!(node.cli(&["SCARD", "s-tight"]), "3");
    // What was there keeps its form (a threshold applies at a value's next write).
    assert_eq!(encoding("h"), "listpack");
}
