//! HyperLogLog (PFADD PFCOUNT PFMERGE PFDEBUG). Method: the node must produce redis-server
//! 7.0.15's bytes exactly, so every test runs the same commands against both (Debian's
//! redis-server, started here) and compares the raw values, the counts and the errors;
//! values also travel between the two with GET/SET and DUMP/RESTORE.

use crate::reply_compare::reference;
use integration::Node;
use redis::{Connection, RedisResult, Value};

/// A small deterministic generator (xorshift64) for elements and corruptions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn query(c: &mut Connection, name: &str, args: &[&[u8]]) -> RedisResult<Value> {
    let mut command = redis::cmd(name);
    for a in args {
        command.arg(*a);
    }
    command.query(c)
}

/// The reply as comparable text, errors included.
fn text(r: RedisResult<Value>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!(
            "error: {}",
            e.detail()
                .map(str::to_string)
                .unwrap_or_else(|| e.to_string())
        ),
    }
}

fn raw(c: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("GET").arg(key).query(c).expect("GET of an HLL")
}

fn elements(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}-{i}").into_bytes())
        .collect()
}

fn pfadd(c: &mut Connection, key: &str, els: &[Vec<u8>]) -> RedisResult<Value> {
    let mut args: Vec<&[u8]> = vec![key.as_bytes()];
    args.extend(els.iter().map(Vec::as_slice));
    query(c, "PFADD", &args)
}

#[test]
fn hll_bytes_counts_and_merges_match_redis_server() {
    let node = Node::start(&[]);
    let Some(redis) = reference("hll_bytes_counts_and_merges_match_redis_server") else {
        return;
    };
    let (mut ours, mut theirs) = (node.client(), redis.client());
    // Sizes that stay sparse, that grow the sparse form, and that promote it to dense.
    for (key, n) in [
        ("h0", 0),
        ("h1", 1),
        ("h10", 10),
        ("h300", 300),
        ("h5000", 5000),
    ] {
        for batch in elements(key, n).chunks(97).chain([&[][..]]) {
            let a = text(pfadd(&mut ours, key, batch));
            let b = text(pfadd(&mut theirs, key, batch));
            assert_eq!(a, b, "PFADD {key}");
        }
        assert_eq!(raw(&mut ours, key), raw(&mut theirs, key), "bytes of {key}");
        assert_eq!(
            text(query(&mut ours, "PFCOUNT", &[key.as_bytes()])),
            text(query(&mut theirs, "PFCOUNT", &[key.as_bytes()])),
            "PFCOUNT {key}"
        );
        // The count is cached in the header, as redis-server caches it.
        assert_eq!(raw(&mut ours, key), raw(&mut theirs, key), "cached {key}");
        for sub in ["ENCODING", "DECODE"] {
            let a = text(query(
                &mut ours,
                "PFDEBUG",
                &[sub.as_bytes(), key.as_bytes()],
            ));
            let b = text(query(
                &mut theirs,
                "PFDEBUG",
                &[sub.as_bytes(), key.as_bytes()],
            ));
            assert_eq!(a, b, "PFDEBUG {sub} {key}");
        }
    }
    let keys: [&[u8]; 4] = [b"h10", b"h300", b"h5000", b"nokey"];
    assert_eq!(
        text(query(&mut ours, "PFCOUNT", &keys)),
        text(query(&mut theirs, "PFCOUNT", &keys))
    );
    for (dest, sources) in [
        ("m1", vec![&b"h10"[..], b"h300"]),
        ("m2", vec![b"h10", b"h5000"]),
        ("h300", vec![b"h1"]),
        ("m3", vec![]),
    ] {
        let mut args = vec![dest.as_bytes()];
        args.extend(sources);
        assert_eq!(
            text(query(&mut ours, "PFMERGE", &args)),
            text(query(&mut theirs, "PFMERGE", &args))
        );
        assert_eq!(
            raw(&mut ours, dest),
            raw(&mut theirs, dest),
            "merged {dest}"
        );
        assert_eq!(
            text(query(&mut ours, "PFCOUNT", &[dest.as_bytes()])),
            text(query(&mut theirs, "PFCOUNT", &[dest.as_bytes()]))
        );
    }
    // A small hll-sparse-max-bytes promotes early, the same way on both.
    for c in [&mut ours, &mut theirs] {
        redis::cmd("CONFIG")
            .arg(&["SET", "hll-sparse-max-bytes", "40"][..])
            .query::<()>(c)
            .unwrap();
    }
    for batch in elements("small", 40).chunks(3) {
        assert_eq!(
            text(pfadd(&mut ours, "small", batch)),
            text(pfadd(&mut theirs, "small", batch))
        );
        assert_eq!(raw(&mut ours, "small"), raw(&mut theirs, "small"));
    }
}

/// Values travel as raw strings (GET/SET); DUMP/RESTORE of HLLs is tests/suite/dump_rdb.rs's.
#[test]
fn an_hll_travels_between_redis_server_and_the_node() {
    let node = Node::start(&[]);
    let Some(redis) = reference("an_hll_travels_between_redis_server_and_the_node") else {
        return;
    };
    let (mut ours, mut theirs) = (node.client(), redis.client());
    for (key, n) in [("sparse", 100), ("dense", 4000)] {
        pfadd(&mut theirs, key, &elements(key, n)).unwrap();
        let written_there = raw(&mut theirs, key);
        query(&mut ours, "SET", &[key.as_bytes(), &written_there]).unwrap();
        let count = |c: &mut Connection, key: &str| -> i64 {
            redis::cmd("PFCOUNT").arg(key).query(c).unwrap()
        };
        assert_eq!(count(&mut ours, key), count(&mut theirs, key));
        // Grown here, moved back, read and grown there.
        let more = elements("more", 50);
        pfadd(&mut ours, key, &more).unwrap();
        pfadd(&mut theirs, key, &more).unwrap();
        let written_here = raw(&mut ours, key);
        assert_eq!(written_here, raw(&mut theirs, key));
        query(&mut theirs, "SET", &[b"copy", &written_here]).unwrap();
        assert_eq!(count(&mut theirs, "copy"), count(&mut ours, key));
        let last = elements("last", 20);
        pfadd(&mut theirs, "copy", &last).unwrap();
        pfadd(&mut ours, key, &last).unwrap();
        assert_eq!(raw(&mut theirs, "copy"), raw(&mut ours, key));
    }
}

#[test]
fn malformed_hlls_get_redis_errors_never_a_crash() {
    let node = Node::start(&[]);
    let reference = reference("malformed_hlls_get_redis_errors_never_a_crash");
    let mut ours = node.client();
    // Fixed cases, with the texts Redis answers.
    let not_hll = "error: Key is not a valid HyperLogLog string value.";
    let corrupt = "error: Corrupted HLL object detected";
    let mut valid = Vec::new();
    pfadd(&mut ours, "v", &elements("x", 20)).unwrap();
    valid.extend(raw(&mut ours, "v"));
    let mut extra = valid.clone();
    extra.push(0x00);
    let mut dense_short = valid.clone();
    dense_short[4] = 0;
    let mut bad_encoding = valid.clone();
    bad_encoding[4] = 2;
    // PFADD reads a sparse value only up to the register it raises, so bytes past the
    // last register go unnoticed by it, as in Redis.
    let cases: [(&[u8], &str, &str); 6] = [
        (b"HYLL", not_hll, not_hll),
        (b"hello world, not an HLL", not_hll, not_hll),
        (b"12345", not_hll, not_hll),
        (&extra, corrupt, "int(1)"),
        (&dense_short, not_hll, not_hll),
        (&bad_encoding, not_hll, not_hll),
    ];
    for (value, expected, by_pfadd) in cases {
        query(&mut ours, "SET", &[b"bad", value]).unwrap();
        assert_eq!(text(query(&mut ours, "PFCOUNT", &[b"bad"])), expected);
        assert_eq!(text(query(&mut ours, "PFADD", &[b"bad", b"e"])), by_pfadd);
        assert_eq!(
            text(query(&mut ours, "PFMERGE", &[b"dest", b"bad"])),
            expected
        );
    }
    query(&mut ours, "LPUSH", &[b"list", b"a"]).unwrap();
    let wrongtype = "error: Operation against a key holding the wrong kind of value";
    assert_eq!(text(query(&mut ours, "PFADD", &[b"list", b"a"])), wrongtype);
    assert_eq!(
        text(query(&mut ours, "PFCOUNT", &[b"list", b"v"])),
        wrongtype
    );

    // Random corruptions of valid sparse values: the node must answer exactly what
    // redis-server answers (same detection, same counts), and stay up.
    let Some(redis) = reference else { return };
    let mut theirs = redis.client();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for round in 0..300 {
        let mut value = valid.clone();
        for _ in 0..1 + rng.next() % 4 {
            let at = 16 + (rng.next() as usize) % (value.len() - 16);
            value[at] = rng.next() as u8;
        }
        if rng.next().is_multiple_of(4) {
            value.truncate(16 + (rng.next() as usize) % (value.len() - 16));
        }
        for c in [&mut ours, &mut theirs] {
            query(c, "SET", &[b"fuzz", &value]).unwrap();
        }
        for (name, args) in [
            ("PFCOUNT", vec![&b"fuzz"[..]]),
            ("PFCOUNT", vec![b"fuzz", b"v"]),
            ("PFADD", vec![b"fuzz", b"a", b"b", b"c"]),
            ("PFCOUNT", vec![b"fuzz"]),
        ] {
            let a = text(query(&mut ours, name, &args));
            let b = text(query(&mut theirs, name, &args));
            assert_eq!(a, b, "round {round}: {name} on {value:?}");
        }
        assert_eq!(
            raw(&mut ours, "fuzz"),
            raw(&mut theirs, "fuzz"),
            "round {round}"
        );
    }
    assert_eq!(node.cli(&["PING"]), "PONG");
}

#[test]
fn multi_key_hll_commands_need_one_slot_in_cluster_mode() {
    let node = Node::start(&["--cluster-enabled", "yes"]);
    assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "OK");
    let crossslot = "CROSSSLOT Keys in request don't hash to the same slot";
    assert_eq!(node.cli(&["PFCOUNT", "a", "b"]), crossslot);
    assert_eq!(node.cli(&["PFMERGE", "a", "b"]), crossslot);
    assert_eq!(node.cli(&["PFADD", "{h}a", "x", "y"]), "1");
    assert_eq!(node.cli(&["PFADD", "{h}b", "y", "z"]), "1");
    assert_eq!(node.cli(&["PFCOUNT", "{h}a", "{h}b"]), "3");
    assert_eq!(node.cli(&["PFMERGE", "{h}c", "{h}a", "{h}b"]), "OK");
    assert_eq!(node.cli(&["PFCOUNT", "{h}c"]), "3");
}
