//! Real tools against a real node: redis-benchmark runs every test the benchmark script uses,
//! pipelined and not, without a single error reply; redis-cli --pipe loads a stream.

use integration::Node;
use std::process::Command;

/// The redis-benchmark tests the issue names (and scripts/bench-vs-redis.sh runs).
const TESTS: &str =
    "ping,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset";

fn benchmark(node: &Node, pipeline: &str) {
    let out = Command::new("redis-benchmark")
        .args([
            "-p",
            &node.port.to_string(),
            "-t",
            TESTS,
            "-c",
            "20",
            "-n",
            "3000",
            "-P",
            pipeline,
            "--csv",
        ])
        .output()
        .expect("running redis-benchmark (scripts/install-deps.sh installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "redis-benchmark -P {pipeline} failed: {stderr}\n{stdout}"
    );
    assert!(
        !stderr.contains("Error") && !stdout.contains("Error"),
        "errors from the node: {stderr}\n{stdout}"
    );
    // One CSV row per test (LPUSH appears twice: once on its own, once to fill LRANGE's list).
    let rows = stdout
        .lines()
        .filter(|l| l.starts_with('"') && !l.starts_with("\"test\""))
        .count();
    assert!(rows >= 16, "expected a row per test, got:\n{stdout}");
}

#[test]
fn redis_benchmark_runs_every_test_without_errors() {
    let node = Node::start(&[]);
    benchmark(&node, "1");
    benchmark(&node, "16");
    assert_eq!(node.cli(&["PING"]), "PONG");
}

#[test]
fn redis_cli_pipe_loads_a_stream() {
    let node = Node::start(&[]);
    let mut input = String::new();
    for i in 0..5000 {
        input.push_str(&format!(
            "*3\r\n$3\r\nSET\r\n${}\r\nkey:{i}\r\n$5\r\nvalue\r\n",
            format!("key:{i}").len()
        ));
    }
    let path = node.dir.path().join("pipe.resp");
    std::fs::write(&path, input).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "redis-cli -p {} --pipe < {}",
            node.port,
            path.display()
        ))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("errors: 0, replies: 5000"), "{text}");
    assert_eq!(node.cli(&["DBSIZE"]), "5000");
}
