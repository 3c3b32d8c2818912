//! Runs the same commands against a node and against Debian's redis-server 7.0.15 and
//! compares the raw replies frame by frame (errors included, in RESP2 or RESP3), for the data
//! types whose answers must match Redis to the byte (bitmaps, HyperLogLog, GEO, SORT).

use integration::raw::{Frame, RawClient};
use integration::reference::RedisServer;
use integration::Node;

/// Debian's redis-server, or `None` (with a message saying the comparison is skipped) on a
/// machine without it.
pub fn reference(test: &str) -> Option<RedisServer> {
    reference_with(test, &[])
}

/// [`reference`] started with `extra` flags (`["--cluster-enabled", "yes"]`).
pub fn reference_with(test: &str, extra: &[&str]) -> Option<RedisServer> {
    let installed = std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!("{test}: SKIPPED the comparison with redis-server: it is not installed");
        return None;
    }
    Some(RedisServer::start(extra))
}

/// A connection speaking RESP2, or RESP3 after `HELLO 3`.
pub fn connect(port: u16, resp3: bool) -> RawClient {
    let mut c = RawClient::connect(port);
    if resp3 {
        c.call(&["HELLO", "3"]);
    }
    c
}

/// The replies of `commands`, one connection, in order.
pub fn replies(port: u16, resp3: bool, commands: &[Vec<String>]) -> Vec<Frame> {
    let mut c = connect(port, resp3);
    commands
        .iter()
        .map(|args| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            c.call(&args)
        })
        .collect()
}

/// Commands written as lines of space-separated words.
pub fn script(lines: &[&str]) -> Vec<Vec<String>> {
    lines
        .iter()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// Asserts that the node answers `commands` exactly as redis-server does, in both protocols
/// (each protocol on a freshly flushed dataset).
pub fn assert_same_replies(test: &str, node: &Node, commands: &[Vec<String>]) {
    let Some(redis) = reference(test) else { return };
    for resp3 in [false, true] {
        for port in [node.port, redis.port] {
            RawClient::connect(port).call(&["FLUSHALL"]);
        }
        let ours = replies(node.port, resp3, commands);
        let theirs = replies(redis.port, resp3, commands);
        for ((args, o), t) in commands.iter().zip(&ours).zip(&theirs) {
            assert_eq!(o, t, "{test}: {args:?} (resp3: {resp3})");
        }
    }
}
