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
