//! Connection commands and authentication.

use integration::{cmd, Node};
use redis::Value;

#[test]
fn ping_echo_hello() {
    let node = Node::start(&[]);
    assert_eq!(node.cli(&["PING"]), "PONG");
    assert_eq!(node.cli(&["ECHO", "hi"]), "hi");
    let mut c = node.client();
    assert_eq!(cmd(&mut c, &["SELECT", "0"]).unwrap(), Value::Okay);
    assert!(cmd(&mut c, &["SELECT", "1"])
        .unwrap_err()
        .to_string()
        .contains("DB index is out of range"));
    assert!(cmd(&mut c, &["HELLO", "4"])
        .unwrap_err()
        .to_string()
        .contains("unsupported protocol version"));
    let hello = node.cli(&["HELLO", "3"]);
    assert!(hello.contains("proto") && hello.contains('3'), "{hello}");
}

#[test]
fn requirepass_gates_commands() {
    let node = Node::start(&["--requirepass", "s3cret"]);
    assert_eq!(node.cli(&["GET", "k"]), "NOAUTH Authentication required.");
    assert!(node.cli(&["AUTH", "wrong"]).starts_with("WRONGPASS"));
    let out = std::process::Command::new("redis-cli")
        .args([
            "-p",
            &node.port.to_string(),
            "-a",
            "s3cret",
            "--no-auth-warning",
            "SET",
            "k",
            "v",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "OK\n");
}
