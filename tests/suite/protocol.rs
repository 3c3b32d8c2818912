//! Malformed input: protocol errors with Redis's texts, and the node keeps serving.

use integration::Node;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn exchange(node: &Node, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn protocol_errors_close_the_connection_with_redis_texts() {
    let node = Node::start(&[]);
    assert_eq!(
        exchange(&node, b"*1\r\n$2000000000\r\n"),
        "-ERR Protocol error: invalid bulk length\r\n"
    );
    assert_eq!(
        exchange(&node, b"*x\r\n"),
        "-ERR Protocol error: invalid multibulk length\r\n"
    );
    assert_eq!(
        exchange(&node, b"*1\r\n+PING\r\n"),
        "-ERR Protocol error: expected '$', got '+'\r\n"
    );
    assert_eq!(
        exchange(&node, b"ECHO \"unterminated\r\n"),
        "-ERR Protocol error: unbalanced quotes in request\r\n"
    );
    assert_eq!(node.cli(&["PING"]), "PONG");
}

fn used_memory(node: &Node) -> u64 {
    let info = node.cli(&["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO")
}

/// The hostile inputs the issue names, all at once against one node: a 10-million-element
/// array header, a 2 GB bulk length, random bytes, and clients that send half a command and
/// stall. The node answers or closes each, keeps serving others, and its memory stays flat
/// (nothing is reserved from a header).
#[test]
fn hostile_input_never_grows_memory_or_stops_the_node() {
    let node = Node::start(&[]);
    let before = used_memory(&node);
    let mut stalled = Vec::new();
    for _ in 0..20 {
        // Announces ten million arguments, sends one, then goes quiet.
        let mut s = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
        s.write_all(b"*10000000\r\n$3\r\nSET\r\n").unwrap();
        stalled.push(s);
        // Half a bulk of an announced 400 MB value.
        let mut s = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
        s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$400000000\r\nabc")
            .unwrap();
        stalled.push(s);
    }
    assert_eq!(
        exchange(&node, b"*1\r\n$2147483648\r\n"),
        "-ERR Protocol error: invalid bulk length\r\n"
    );
    // Deterministic pseudo-random garbage (xorshift), in several connections.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..50 {
        let mut bytes = Vec::with_capacity(4096);
        for _ in 0..4096 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            bytes.push(x as u8);
        }
        let mut s = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let _ = s.write_all(&bytes);
        let mut sink = [0u8; 4096];
        let _ = s.read(&mut sink);
    }
    assert_eq!(node.cli(&["SET", "alive", "yes"]), "OK");
    assert_eq!(node.cli(&["GET", "alive"]), "yes");
    let after = used_memory(&node);
    // 40 stalled clients with tiny partial requests: far under 16 MiB in all, whatever the
    // headers announced (a reservation from them would be gigabytes).
    assert!(
        after < before + 16 * 1024 * 1024,
        "used_memory grew from {before} to {after}"
    );
    drop(stalled);
}
