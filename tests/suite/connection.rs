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
    assert!(cmd(&mut c, &["SELECT", "16"])
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

#[test]
fn select_in_cluster_mode_answers_as_redis_cluster() {
    let node = Node::start(&["--cluster-enabled", "yes"]);
    assert_eq!(node.cli(&["SELECT", "0"]), "OK");
    // Redis 7.0's texts: any other database is refused as such in cluster mode, and an
    // index that is not an int is out of an int's range.
    assert_eq!(
        node.cli(&["SELECT", "1"]),
        "ERR SELECT is not allowed in cluster mode"
    );
    assert_eq!(
        node.cli(&["SELECT", "4294967296"]),
        "ERR value is out of range, value must between -2147483648 and 2147483647"
    );
}
