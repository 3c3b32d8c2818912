//! Goal: nobody but a replica can make its primary believe it acknowledged something
//! (issue 15): a rogue local process connected to the primary's replication port, guessing
//! the keys and addresses of the ack and applied words and writing a forged offset, moves
//! neither WAIT nor a synchronous write; in cluster mode a replication link needs a proof of
//! the cluster secret over a fresh challenge.
//! Method: real node processes on `ofi:tcp` and `ofi:shm` (on shm, when the test runs as
//! root, as uid 65534: root may ptrace anyone); the rogue is `bus/examples/fabric_rogue`
//! (`forge-ack`); the REPLCONF exchange over TCP with the `redis` crate.

use integration::cluster::cluster_node;
use integration::{as_user, cmd, free_port, is_root, rogue_binary, Node, STARTUP_TIMEOUT};
use redis::Value;
use std::time::{Duration, Instant};

fn wait_for(what: &str, node: &Node, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    while !check() {
        assert!(Instant::now() < deadline, "{what}; log: {}", node.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn info_field(c: &mut redis::Connection, name: &str) -> String {
    let text: String = redis::cmd("INFO").arg("replication").query(c).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .trim()
        .to_string()
}

/// A primary with a replica in sync; the replica is then killed (SIGKILL) and the primary
/// writes on. A rogue forges the replica's acknowledgement of everything: WAIT still counts
/// nobody, and a synchronous write is refused.
fn a_forged_ack_moves_nothing(provider: &str) {
    let uid = (provider == "ofi:shm" && is_root()).then_some("65534");
    let repl_port = free_port().to_string();
    let fabric = ["--fabric-provider", provider, "--rdma-bind", "127.0.0.1"];
    let mut primary_args = fabric.to_vec();
    primary_args.extend(["--repl-fabric-port", &repl_port]);
    let primary = Node::start_as(uid, &primary_args);
    wait_for("no replication listener", &primary, || {
        primary
            .log()
            .contains("accepting replication links (fabric)")
    });
    let mut replica = Node::start_as(uid, &fabric);
    let mut p = primary.client();
    let mut r = replica.client();
    cmd(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &primary.port.to_string()],
    )
    .unwrap();
    for i in 0..20 {
        cmd(&mut p, &["SET", &format!("k{i}"), "v"]).unwrap();
    }
    wait_for("the replica never acknowledged", &replica, || {
        cmd(&mut p, &["WAIT", "1", "100"]).unwrap() == Value::Int(1)
    });
    drop(r);
    replica.signal_and_wait("KILL");
    cmd(&mut p, &["SET", "after", "the kill"]).unwrap();
    let offset: u64 = info_field(&mut p, "master_repl_offset").parse().unwrap();

    let out = as_user(uid, &rogue_binary())
        .args(["forge-ack", "--fabric", provider])
        .args(["--addr", &format!("127.0.0.1:{repl_port}")])
        .args(["--offset", &offset.to_string(), "--parallel", "4"])
        .env("FI_OFI_RXM_CM_PROGRESS_INTERVAL", "500")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the rogue forged something: {text}");
    assert!(text.contains(" 0 succeeded,"), "{text}");

    assert_eq!(cmd(&mut p, &["WAIT", "1", "200"]).unwrap(), Value::Int(0));
    cmd(&mut p, &["CONFIG", "SET", "repl-sync-acks", "1"]).unwrap();
    cmd(&mut p, &["CONFIG", "SET", "repl-sync-timeout", "400"]).unwrap();
    let err = cmd(&mut p, &["SET", "synchronous", "v"]).unwrap_err();
    assert!(err.to_string().contains("NOREPLICAS"), "{err}");
}

#[test]
fn a_forged_ack_moves_nothing_over_ofi_tcp() {
    a_forged_ack_moves_nothing("ofi:tcp");
}

#[test]
fn a_forged_ack_moves_nothing_over_ofi_shm() {
    a_forged_ack_moves_nothing("ofi:shm");
}

/// In cluster mode `REPLCONF RDMA-PORT` gives a 16-byte challenge with the port, and
/// `REPLCONF RDMA-LINK` is refused (NOPERM) without a proof, with a wrong one, or with a right
/// one for a challenge already used (each is used once); the right proof over a fresh
/// challenge gets past the check (the made-up request is then refused as malformed).
#[test]
fn a_cluster_replication_link_needs_a_proof_of_the_cluster_secret() {
    const SECRET: &str = "proof-secret";
    const ENDPOINT: &str = "ofi/tcp/0200";
    const REQUEST: &[u8] = b"request";
    let node = cluster_node(SECRET);
    let mut c = node.client();
    let link = |c: &mut redis::Connection, extra: &[&[u8]]| {
        let mut command = redis::cmd("REPLCONF");
        command
            .arg("RDMA-LINK")
            .arg(ENDPOINT)
            .arg(7000)
            .arg(REQUEST);
        for e in extra {
            command.arg(*e);
        }
        command.query::<Value>(c)
    };
    let challenge =
        |c: &mut redis::Connection| match redis::cmd("REPLCONF").arg("RDMA-PORT").query(c).unwrap()
        {
            Value::Array(items) => match items.as_slice() {
                [Value::Int(port), Value::BulkString(challenge)] => {
                    assert!(*port > 0);
                    assert_eq!(challenge.len(), 16);
                    challenge.clone()
                }
                other => panic!("RDMA-PORT answered {other:?}"),
            },
            other => panic!("RDMA-PORT answered {other:?}"),
        };
    let proof = |challenge: &[u8]| {
        proto::bus::link_proof::link_proof(
            SECRET.as_bytes(),
            challenge,
            ENDPOINT.as_bytes(),
            REQUEST,
        )
    };
    let first = challenge(&mut c);
    let refused = |r: redis::RedisResult<Value>| {
        let e = r.unwrap_err();
        assert_eq!(e.code(), Some("NOPERM"), "{e}");
    };
    refused(link(&mut c, &[]));
    refused(link(&mut c, &[&[0u8; 32]]));
    // The wrong proof used the challenge up: its right proof is refused now.
    refused(link(&mut c, &[&proof(&first)]));
    let second = challenge(&mut c);
    assert_ne!(first, second);
    let past = link(&mut c, &[&proof(&second)]).unwrap_err();
    assert_ne!(past.code(), Some("NOPERM"), "{past}");
    assert!(past.to_string().contains("handshake"), "{past}");
}
