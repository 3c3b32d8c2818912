//! DUMP/RESTORE in Redis 7.0's payload format (issue 18): a payload DUMPed by redis-server
//! 7.0.15 RESTOREs on the node, and one DUMPed by the node RESTOREs on redis-server, for
//! every type and each encoding Redis picks for it (small and large, integers and binary,
//! HyperLogLogs sparse and dense, streams with groups). Method: the same commands build the
//! same values on both servers (Debian's redis-server, started here, with its encoding
//! thresholds and quicklist plain-node threshold lowered so that every encoding appears),
//! each value crosses both ways, and the copies are read back with the type's own commands
//! and compared as text.

use crate::reply_compare::reference_with;
use integration::Node;
use redis::{Connection, Value};

fn run(c: &mut Connection, args: &[&[u8]]) -> Value {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
        .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(args[0])))
}

fn s(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

fn bytes_of(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        other => panic!("not a bulk string: {other:?}"),
    }
}

/// Every byte value, for binary elements.
fn binary(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The commands that build each test value, by key.
fn builders() -> Vec<(&'static str, Vec<Vec<Vec<u8>>>)> {
    let mut v: Vec<(&'static str, Vec<Vec<Vec<u8>>>)> = Vec::new();
    let mut one = |key: &'static str, cmds: Vec<Vec<Vec<u8>>>| v.push((key, cmds));
    // Strings: raw, int, large int, LZF-compressible, binary, large binary.
    one("s:raw", vec![s(&["SET", "s:raw", "hello"])]);
    one("s:int", vec![s(&["SET", "s:int", "-123456"])]);
    one(
        "s:bigint",
        vec![s(&["SET", "s:bigint", "-9223372036854775808"])],
    );
    one("s:zero", vec![s(&["SET", "s:zero", "0"])]);
    one("s:notint", vec![s(&["SET", "s:notint", "007"])]);
    one("s:empty", vec![s(&["SET", "s:empty", ""])]);
    let lzf = "abc".repeat(2000);
    one("s:lzf", vec![s(&["SET", "s:lzf", &lzf])]);
    let mut set_bin = s(&["SET", "s:bin"]);
    set_bin.push((0..=255u8).collect());
    one("s:bin", vec![set_bin]);
    let mut set_big = s(&["SET", "s:big"]);
    set_big.push(binary(200_000, 7));
    one("s:big", vec![set_big]);
    // Lists: one listpack node; many nodes; plain nodes (elements over the threshold).
    let mut small = s(&["RPUSH", "l:small", "a", "1", "-1", "4095", "-4096", "70000"]);
    small.push(b"9223372036854775807".to_vec());
    small.push((0..=255u8).collect());
    one("l:small", vec![small]);
    let mut large = s(&["RPUSH", "l:large"]);
    large.extend((0..3000).map(|i| format!("element-{i}").into_bytes()));
    large.extend((0..300i64).map(|i| (i * 7919 - 1_000_000).to_string().into_bytes()));
    one("l:large", vec![large]);
    let mut plain = s(&["RPUSH", "l:plain", "short"]);
    plain.push(binary(5000, 3));
    plain.push(b"tail".to_vec());
    one("l:plain", vec![plain]);
    // Sets: intset small and large, hashtable of strings, large hashtable.
    one(
        "set:int",
        vec![s(&["SADD", "set:int", "1", "-5", "70000", "5000000000"])],
    );
    let mut int_large = s(&["SADD", "set:intlarge"]);
    int_large.extend((0..400i64).map(|i| (i * 1_000_003 - 77).to_string().into_bytes()));
    one("set:intlarge", vec![int_large]);
    one(
        "set:str",
        vec![s(&["SADD", "set:str", "a", "b", "1", "xyz"])],
    );
    let mut str_large = s(&["SADD", "set:strlarge"]);
    str_large.extend((0..2000).map(|i| format!("m{i}").into_bytes()));
    str_large.push(binary(300, 11));
    one("set:strlarge", vec![str_large]);
    // Sorted sets: listpack, skiplist (many members; a long member).
    one(
        "z:small",
        vec![s(&[
            "ZADD", "z:small", "1.5", "a", "-2", "b", "3e100", "c", "inf", "d", "0", "7",
        ])],
    );
    let mut z_large = s(&["ZADD", "z:large"]);
    for i in 0..500i64 {
        z_large.push(format!("{}", (i as f64) / 3.0 - 50.0).into_bytes());
        z_large.push(format!("member:{i}").into_bytes());
    }
    z_large.extend(s(&["-inf", "lowest", "0.1", "tenth"]));
    one("z:large", vec![z_large]);
    let mut z_long = s(&["ZADD", "z:long", "1", "short", "2"]);
    z_long.push(binary(100, 5));
    one("z:long", vec![z_long]);
    // Hashes: listpack, hashtable by count, hashtable by value length.
    one(
        "h:small",
        vec![s(&[
            "HSET", "h:small", "f", "v", "n", "123", "neg", "-70000",
        ])],
    );
    let mut h_large = s(&["HSET", "h:large"]);
    for i in 0..1000 {
        h_large.push(format!("field{i}").into_bytes());
        h_large.push(format!("{}", i * 3).into_bytes());
    }
    one("h:large", vec![h_large]);
    let mut h_long = s(&["HSET", "h:long", "k"]);
    h_long.push(binary(1000, 9));
    one("h:long", vec![h_long]);
    // HyperLogLogs: sparse, dense.
    let mut sparse = s(&["PFADD", "hll:sparse"]);
    sparse.extend((0..100).map(|i| format!("e{i}").into_bytes()));
    one("hll:sparse", vec![sparse]);
    let mut dense = s(&["PFADD", "hll:dense"]);
    dense.extend((0..5000).map(|i| format!("e{i}").into_bytes()));
    one("hll:dense", vec![dense]);
    // Streams: small with a group and pending entries; large over many nodes, with holes.
    let mut small_stream = vec![
        s(&["XADD", "x:small", "1-1", "f", "v", "g", "1"]),
        s(&["XADD", "x:small", "1-2", "f", "w", "g", "2"]),
        s(&["XADD", "x:small", "5-0", "other", "x"]),
        s(&["XADD", "x:small", "6-0", "f", "z", "g", "3"]),
        s(&["XDEL", "x:small", "1-2"]),
        s(&["XGROUP", "CREATE", "x:small", "g1", "0"]),
        s(&[
            "XREADGROUP",
            "GROUP",
            "g1",
            "c1",
            "COUNT",
            "2",
            "STREAMS",
            "x:small",
            ">",
        ]),
        s(&["XGROUP", "CREATE", "x:small", "g2", "$"]),
        s(&["XGROUP", "CREATECONSUMER", "x:small", "g2", "idle"]),
    ];
    let mut bin_entry = s(&["XADD", "x:small", "7-0", "bin"]);
    bin_entry.push((0..=255u8).collect());
    small_stream.push(bin_entry);
    one("x:small", small_stream);
    let mut big_stream = Vec::new();
    for i in 1..=1500u64 {
        let fields = if i % 7 == 0 { "other" } else { "f" };
        big_stream.push(s(&[
            "XADD",
            "x:large",
            &format!("{}-{}", 1000 + i / 3, i % 3),
            fields,
            &format!("value-{i}"),
        ]));
    }
    for i in (10..1500u64).step_by(37) {
        big_stream.push(s(&[
            "XDEL",
            "x:large",
            &format!("{}-{}", 1000 + i / 3, i % 3),
        ]));
    }
    big_stream.push(s(&["XGROUP", "CREATE", "x:large", "readers", "0"]));
    big_stream.push(s(&[
        "XREADGROUP",
        "GROUP",
        "readers",
        "r1",
        "COUNT",
        "300",
        "STREAMS",
        "x:large",
        ">",
    ]));
    big_stream.push(s(&[
        "XREADGROUP",
        "GROUP",
        "readers",
        "r2",
        "COUNT",
        "5",
        "STREAMS",
        "x:large",
        ">",
    ]));
    big_stream.push(s(&["XACK", "x:large", "readers", "1003-0", "1003-1"]));
    one("x:large", big_stream);
    v
}

/// The value at `key` as text, read with its type's commands (order-free types sorted).
fn content(c: &mut Connection, key: &str) -> String {
    let k = key.as_bytes();
    let kind: String = redis::cmd("TYPE").arg(key).query(c).unwrap();
    let text = |v: Value| format!("{v:?}");
    let sorted = |v: Value| {
        let Value::Array(items) = v else {
            return format!("{v:?}");
        };
        let mut items: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
        items.sort();
        items.join(",")
    };
    let pairs_sorted = |v: Value| {
        let Value::Array(items) = v else {
            return format!("{v:?}");
        };
        let mut pairs: Vec<String> = items
            .chunks(2)
            .map(|p| format!("{:?}={:?}", p[0], p.get(1)))
            .collect();
        pairs.sort();
        pairs.join(",")
    };
    let body = match kind.as_str() {
        "string" => text(run(c, &[b"GET", k])),
        "list" => text(run(c, &[b"LRANGE", k, b"0", b"-1"])),
        "set" => sorted(run(c, &[b"SMEMBERS", k])),
        "zset" => text(run(c, &[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"])),
        "hash" => pairs_sorted(run(c, &[b"HGETALL", k])),
        "stream" => {
            let mut out = text(run(c, &[b"XRANGE", k, b"-", b"+"]));
            out += &text(run(c, &[b"XLEN", k]));
            out += &text(run(c, &[b"XINFO", b"GROUPS", k]));
            let Value::Array(groups) = run(c, &[b"XINFO", b"GROUPS", k]) else {
                panic!("XINFO GROUPS")
            };
            for g in groups {
                let name = match g {
                    Value::Array(fields) => bytes_of(&fields[1]),
                    Value::Map(fields) => bytes_of(&fields[0].1),
                    other => panic!("group {other:?}"),
                };
                out += &text(run(c, &[b"XPENDING", k, &name]));
                let Value::Array(consumers) = run(c, &[b"XINFO", b"CONSUMERS", k, &name]) else {
                    panic!("XINFO CONSUMERS")
                };
                for consumer in consumers {
                    let Value::Array(f) = consumer else {
                        panic!("consumer")
                    };
                    // Name and pending count; idle times differ by the time taken.
                    out += &format!("{:?}{:?}", f[1], f[3]);
                }
            }
            let info = text(run(c, &[b"XINFO", b"STREAM", k]));
            // last-generated-id, max-deleted-entry-id, entries-added: the counters.
            for field in ["last-generated-id", "max-deleted-entry-id", "entries-added"] {
                let at = info
                    .find(field)
                    .unwrap_or_else(|| panic!("{field} in {info}"));
                out += &info[at..(at + 80).min(info.len())];
            }
            out
        }
        other => panic!("unexpected type {other}"),
    };
    format!("{kind}:{body}")
}

fn dump(c: &mut Connection, key: &str) -> Vec<u8> {
    bytes_of(&run(c, &[b"DUMP", key.as_bytes()]))
}

fn restore(c: &mut Connection, key: &str, ttl_ms: u64, payload: &[u8]) {
    let ttl = ttl_ms.to_string();
    let reply = run(c, &[b"RESTORE", key.as_bytes(), ttl.as_bytes(), payload]);
    assert!(matches!(reply, Value::Okay), "RESTORE {key}: {reply:?}");
}

fn pttl(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(c).unwrap()
}

fn reference_server(test: &str) -> Option<integration::reference::RedisServer> {
    // Low thresholds so that the values above take each encoding Redis has.
    reference_with(
        test,
        &[
            "--enable-debug-command",
            "yes",
            "--set-max-intset-entries",
            "512",
        ],
    )
}

#[test]
fn every_type_dumped_by_redis_server_restores_on_the_node_and_back() {
    let node = Node::start(&[]);
    let Some(redis) = reference_server("every_type_dumped_by_redis_server_restores_on_the_node")
    else {
        return;
    };
    let (mut ours, mut theirs) = (node.client(), redis.client());
    // Elements of 4 KB and more go to plain quicklist nodes on redis-server.
    run(
        &mut theirs,
        &[b"DEBUG", b"QUICKLIST-PACKED-THRESHOLD", b"4096"],
    );
    for (key, commands) in builders() {
        for cmd in &commands {
            let args: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
            run(&mut theirs, &args);
            run(&mut ours, &args);
        }
        let want = content(&mut theirs, key);
        assert_eq!(
            content(&mut ours, key),
            want,
            "{key}: the same commands differ"
        );
        // redis-server -> node, with a TTL.
        let payload = dump(&mut theirs, key);
        let copy = format!("{key}:from-redis");
        restore(&mut ours, &copy, 100_000, &payload);
        assert_eq!(
            content(&mut ours, &copy).replace(&copy, key),
            want,
            "{key}: redis-server's DUMP restored on the node"
        );
        let ttl = pttl(&mut ours, &copy);
        assert!(ttl > 0 && ttl <= 100_000, "{key}: PTTL {ttl}");
        // node -> redis-server.
        let payload = dump(&mut ours, key);
        let copy = format!("{key}:from-node");
        restore(&mut theirs, &copy, 0, &payload);
        assert_eq!(
            content(&mut theirs, &copy).replace(&copy, key),
            want,
            "{key}: the node's DUMP restored on redis-server"
        );
        assert_eq!(pttl(&mut theirs, &copy), -1);
        // And the node's payload comes back to the node unchanged.
        let copy = format!("{key}:round-trip");
        restore(
            &mut ours,
            &copy,
            0,
            &dump(&mut theirs, &format!("{key}:from-node")),
        );
        assert_eq!(content(&mut ours, &copy).replace(&copy, key), want);
    }
}

#[test]
fn hyperloglogs_cross_by_dump_and_restore_bytes_unchanged() {
    let node = Node::start(&[]);
    let Some(redis) = reference_server("hyperloglogs_cross_by_dump_and_restore") else {
        return;
    };
    let (mut ours, mut theirs) = (node.client(), redis.client());
    for (key, n) in [("sparse", 50usize), ("dense", 4000)] {
        let mut add: Vec<Vec<u8>> = s(&["PFADD", key]);
        add.extend((0..n).map(|i| format!("{key}-{i}").into_bytes()));
        let args: Vec<&[u8]> = add.iter().map(Vec::as_slice).collect();
        run(&mut theirs, &args);
        restore(&mut ours, key, 0, &dump(&mut theirs, key));
        let count =
            |c: &mut Connection, k: &str| -> i64 { redis::cmd("PFCOUNT").arg(k).query(c).unwrap() };
        assert_eq!(count(&mut ours, key), count(&mut theirs, key), "{key}");
        let grow: Vec<Vec<u8>> = [s(&["PFADD", key]), s(&["x", "y", "z"])].concat();
        let args: Vec<&[u8]> = grow.iter().map(Vec::as_slice).collect();
        run(&mut ours, &args);
        run(&mut theirs, &args);
        let back = format!("{key}-back");
        restore(&mut theirs, &back, 0, &dump(&mut ours, key));
        assert_eq!(
            bytes_of(&run(&mut theirs, &[b"GET", back.as_bytes()])),
            bytes_of(&run(&mut theirs, &[b"GET", key.as_bytes()])),
            "{key}: grown here, moved back, the same bytes"
        );
        assert_eq!(count(&mut theirs, &back), count(&mut ours, key));
    }
}

#[test]
fn damaged_payloads_get_redis_errors() {
    let node = Node::start(&[]);
    let mut ours = node.client();
    run(&mut ours, &[b"SET", b"k", b"v"]);
    let good = dump(&mut ours, "k");
    let err = |c: &mut Connection, payload: &[u8]| -> String {
        let r: redis::RedisResult<Value> = redis::cmd("RESTORE")
            .arg("dst")
            .arg(0)
            .arg(payload)
            .arg("REPLACE")
            .query(c);
        match r {
            Err(e) => e.to_string(),
            Ok(v) => format!("{v:?}"),
        }
    };
    let mut flipped = good.clone();
    flipped[1] ^= 1;
    assert!(err(&mut ours, &flipped).contains("DUMP payload version or checksum are wrong"));
    let mut future = good.clone();
    let at = future.len() - 10;
    future[at] = 11;
    assert!(err(&mut ours, &future).contains("DUMP payload version or checksum are wrong"));
    // A right checksum over wrong content: an empty list.
    let mut body = vec![1u8, 0, 10, 0];
    let crc = crc64_jones(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    assert!(err(&mut ours, &body).contains("Bad data format"));
}

/// Redis's CRC-64 (Jones, reflected, bit by bit): anyone can make a payload's checksum right.
fn crc64_jones(bytes: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in bytes {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}
