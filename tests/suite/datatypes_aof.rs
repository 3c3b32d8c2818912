//! Bitmap, HyperLogLog and GEO writes are logged and replayed like every other write: the
//! append-only file holds the commands the replication stream carries, so a node restarted
//! over its AOF (killed with -9, `appendfsync always`) must hold byte-identical values.
//! Method: write with every family's write commands, read the values back raw, kill, restart
//! over the same directory, read again.

use integration::Node;
use redis::Connection;

const ARGS: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];

fn run(c: &mut Connection, args: &[&str]) {
    let mut command = redis::cmd(args[0]);
    for a in &args[1..] {
        command.arg(*a);
    }
    command
        .query::<redis::Value>(c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

/// Every key's value, raw: strings by GET, sorted sets with their scores.
fn snapshot(c: &mut Connection) -> Vec<(String, redis::Value)> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let kind: String = redis::cmd("TYPE").arg(&k).query(c).unwrap();
            let value = if kind == "zset" {
                redis::cmd("ZRANGE")
                    .arg(&k)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(c)
                    .unwrap()
            } else {
                redis::cmd("GET").arg(&k).query(c).unwrap()
            };
            (k, value)
        })
        .collect()
}

#[test]
fn datatype_writes_replay_from_the_aof_to_the_same_bytes() {
    let node = Node::start(ARGS);
    let mut c = node.client();
    for args in [
        &["SETBIT", "bits", "100", "1"][..],
        &["SETBIT", "bits", "3", "1"],
        &[
            "BITFIELD", "bits", "SET", "i8", "#2", "-100", "INCRBY", "u4", "7", "9",
        ],
        &[
            "BITFIELD", "bits", "OVERFLOW", "SAT", "INCRBY", "i8", "#2", "-100",
        ],
        &["SET", "other", "abc"],
        &["BITOP", "XOR", "xored", "bits", "other"],
        &["PFADD", "hll", "a", "b", "c", "d"],
        &["PFADD", "hll2", "c", "d", "e"],
        &["PFMERGE", "merged", "hll", "hll2"],
        &[
            "GEOADD",
            "geo",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
        &["GEOADD", "geo", "XX", "CH", "13.5", "38.2", "Palermo"],
        &[
            "GEOSEARCHSTORE",
            "near",
            "geo",
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "200",
            "km",
            "STOREDIST",
        ],
        &[
            "GEORADIUS",
            "geo",
            "15",
            "37",
            "200",
            "km",
            "STORE",
            "stored",
        ],
    ] {
        run(&mut c, args);
    }
    let before = snapshot(&mut c);
    assert_eq!(before.len(), 9, "{before:?}");
    let node = Node::start_in(node.into_dir(), ARGS);
    let after = snapshot(&mut node.client());
    assert_eq!(before, after);
}
