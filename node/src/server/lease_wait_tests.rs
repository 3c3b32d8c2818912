//! A transaction that meets a lapsed serving lease parks its session (no thread waits): a
//! command being queued or EXEC runs once the lease holds again, and at the timeout answers
//! CLUSTERDOWN with the transaction doomed (queueing) or discarded (EXEC), as an immediate
//! routing refusal leaves it. Real `Connection`s over in-memory streams.

use crate::config::Config;
use crate::server::connection::Connection;
use crate::server::{ClientShared, Server};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// How long a test waits for something that should happen at once.
const PATIENCE: Duration = Duration::from_secs(10);
/// The serving lease of the tests that wait for its timeout (the bus sets it in a node).
const SHORT_LEASE_MS: u64 = 300;

/// A cluster-mode node owning every slot, its lease lapsed. Keeps the config dir alive.
fn node(lease_ms: u64) -> (Arc<Server>, tempfile::TempDir) {
    let (server, dir) = cluster_node_owning_every_slot();
    let cluster = server.cluster.as_ref().expect("cluster mode");
    cluster.set_lease_ms(lease_ms);
    cluster.set_serving_until(0, 1);
    (server, dir)
}

/// A cluster-mode node owning every slot (the lease as a fresh node has it). Keeps the
/// config dir alive. Shared by the server layer's unit tests that need cluster mode.
pub(crate) fn cluster_node_owning_every_slot() -> (Arc<Server>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let mut config = Config {
        dir: dir.path().to_path_buf(),
        port: 7000,
        ..Config::default()
    };
    config.cluster.enabled = true;
    let cluster =
        crate::server::persistence::nodes_conf_file::start_cluster(&config).expect("cluster");
    cluster
        .topology
        .write()
        .add_slots(&[(0, 16383)])
        .expect("slots");
    crate::commands::install_table();
    let mut server = Server::new(config);
    server.cluster = Some(cluster);
    (Arc::new(server), dir)
}

pub(super) fn lease(server: &Server, holds: bool) {
    let cluster = server.cluster.as_ref().expect("cluster mode");
    match holds {
        true => cluster.set_serving_until(u64::MAX - 1, 0),
        false => cluster.set_serving_until(0, 1),
    }
}

pub(super) fn connect(server: &Arc<Server>) -> DuplexStream {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let addr = "127.0.0.1:1".parse().expect("address");
    let shared = Arc::new(ClientShared::new(server.clients.next_id(), addr, addr));
    server.clients.add(shared.clone());
    tokio::spawn(Connection::new(server.clone(), theirs, shared).run());
    ours
}

pub(super) async fn send(io: &mut DuplexStream, args: &[&str]) {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    io.write_all(&out).await.expect("send");
}

pub(super) async fn expect(io: &mut DuplexStream, expected: &[u8]) {
    let mut got = vec![0; expected.len()];
    tokio::time::timeout(PATIENCE, io.read_exact(&mut got))
        .await
        .expect("reply in time")
        .expect("read");
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
}

pub(super) async fn silence(io: &mut DuplexStream) {
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_millis(50), io.read(&mut byte)).await;
    assert!(read.is_err(), "unexpected reply byte {byte:?}");
}

const DOWN: &[u8] = b"-CLUSTERDOWN The cluster is down\r\n";

// One thread runs the connections and this test: an EXEC that held its thread while waiting
// would keep the other client and the lease's return from ever running before its timeout.
#[tokio::test(flavor = "current_thread")]
async fn exec_waits_parked_and_runs_when_the_lease_is_back() {
    // Longer than the test can take: the EXEC must run on the wake-up, not time out.
    let (server, _dir) = node(PATIENCE.as_millis() as u64);
    lease(&server, true);
    let mut c = connect(&server);
    send(&mut c, &["MULTI"]).await;
    expect(&mut c, b"+OK\r\n").await;
    send(&mut c, &["SET", "k", "v"]).await;
    expect(&mut c, b"+QUEUED\r\n").await;
    lease(&server, false);
    send(&mut c, &["EXEC"]).await;
    silence(&mut c).await;
    // Another client of the same thread is served meanwhile (no thread is held).
    let mut other = connect(&server);
    send(&mut other, &["PING"]).await;
    expect(&mut other, b"+PONG\r\n").await;
    lease(&server, true);
    expect(&mut c, b"*1\r\n+OK\r\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_refused_at_the_timeout_discards_the_transaction() {
    let (server, _dir) = node(SHORT_LEASE_MS);
    lease(&server, true);
    let mut c = connect(&server);
    send(&mut c, &["MULTI"]).await;
    expect(&mut c, b"+OK\r\n").await;
    send(&mut c, &["SET", "k", "v"]).await;
    expect(&mut c, b"+QUEUED\r\n").await;
    lease(&server, false);
    send(&mut c, &["EXEC"]).await;
    expect(&mut c, DOWN).await;
    send(&mut c, &["DISCARD"]).await;
    expect(&mut c, b"-ERR DISCARD without MULTI\r\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_refused_while_queued_dooms_the_transaction() {
    let (server, _dir) = node(SHORT_LEASE_MS);
    let mut c = connect(&server);
    send(&mut c, &["MULTI"]).await;
    expect(&mut c, b"+OK\r\n").await;
    send(&mut c, &["SET", "k", "v"]).await;
    expect(&mut c, DOWN).await;
    lease(&server, true);
    send(&mut c, &["EXEC"]).await;
    expect(
        &mut c,
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    )
    .await;
}
