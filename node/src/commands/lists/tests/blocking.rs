//! In-process tests of blocking list commands end to end: real `Connection`s over in-memory
//! streams, so a test can watch the blocked-client registry and order clients exactly,
//! without sleeping. Also the MULTI/EXEC form (`in_exec`), through a hand-built context.

use crate::command_framework::ctx::{Ctx, Effects};
use crate::command_framework::{dispatch, table};
use crate::config::Config;
use crate::node_state::stats::LocalStats;
use crate::node_state::{Client, ClientShared};
use crate::server::connection::Connection;
use crate::server::Server;
use bytes::BytesMut;
use proto::resp::{ProtocolVersion, Reply};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// How long a test waits for something that should happen at once.
const PATIENCE: Duration = Duration::from_secs(10);

fn server() -> Arc<Server> {
    crate::commands::install_table();
    Arc::new(Server::new(Config::default()))
}

/// The client side of an in-memory connection to `server`.
struct TestClient {
    io: DuplexStream,
    id: u64,
}

fn connect(server: &Arc<Server>) -> TestClient {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let addr = "127.0.0.1:1".parse().expect("address");
    let shared = Arc::new(ClientShared::new(server.clients.next_id(), addr, addr));
    let id = shared.id;
    server.clients.add(shared.clone());
    tokio::spawn(Connection::new(server.clone(), theirs, shared).run());
    TestClient { io: ours, id }
}

fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

impl TestClient {
    async fn send(&mut self, args: &[&str]) {
        self.io.write_all(&encode(args)).await.expect("send");
    }

    /// Reads exactly the bytes of `expected` and checks them.
    async fn expect(&mut self, expected: &[u8]) {
        let mut got = vec![0; expected.len()];
        tokio::time::timeout(PATIENCE, self.io.read_exact(&mut got))
            .await
            .expect("reply in time")
            .expect("read");
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expected)
        );
    }

    async fn call(&mut self, args: &[&str], expected: &[u8]) {
        self.send(args).await;
        self.expect(expected).await;
    }

    /// Checks that nothing arrives within a short while (a reply that must not come yet).
    async fn expect_silence(&mut self) {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(100), self.io.read(&mut byte)).await;
        assert!(read.is_err(), "unexpected reply byte {byte:?}");
    }
}

/// Waits until `n` clients are registered as blocked.
async fn blocked(server: &Server, n: usize) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while server.blocking.blocked_clients() != n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "expected {n} blocked clients, have {}",
            server.blocking.blocked_clients()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_blocked_is_first_served() {
    let server = server();
    let (mut a, mut b, mut pusher) = (connect(&server), connect(&server), connect(&server));
    a.send(&["BLPOP", "k", "0"]).await;
    blocked(&server, 1).await;
    b.send(&["BLPOP", "k", "0"]).await;
    blocked(&server, 2).await;
    pusher.call(&["RPUSH", "k", "x"], b":1\r\n").await;
    a.expect(b"*2\r\n$1\r\nk\r\n$1\r\nx\r\n").await;
    b.expect_silence().await;
    blocked(&server, 1).await;
    pusher.call(&["RPUSH", "k", "y"], b":1\r\n").await;
    b.expect(b"*2\r\n$1\r\nk\r\n$1\r\ny\r\n").await;
    blocked(&server, 0).await;
    assert_ne!(a.id, b.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_push_of_n_serves_n_clients_in_order() {
    let server = server();
    let mut clients = Vec::new();
    for i in 0..4 {
        let mut c = connect(&server);
        c.send(&["BLPOP", "other", "k", "0"]).await;
        blocked(&server, i + 1).await;
        clients.push(c);
    }
    let mut pusher = connect(&server);
    pusher
        .call(&["RPUSH", "k", "a", "b", "c", "d", "e"], b":5\r\n")
        .await;
    for (c, e) in clients.iter_mut().zip(["a", "b", "c", "d"]) {
        c.expect(format!("*2\r\n$1\r\nk\r\n$1\r\n{e}\r\n").as_bytes())
            .await;
    }
    blocked(&server, 0).await;
    pusher
        .call(&["LRANGE", "k", "0", "-1"], b"*1\r\n$1\r\ne\r\n")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_while_blocked_is_forgotten() {
    let server = server();
    let gone = connect(&server);
    let mut gone = gone;
    gone.send(&["BLPOP", "k", "0"]).await;
    blocked(&server, 1).await;
    let mut waiting = connect(&server);
    waiting.send(&["BRPOPLPUSH", "k", "dst", "0"]).await;
    blocked(&server, 2).await;
    drop(gone);
    blocked(&server, 1).await;
    let mut pusher = connect(&server);
    pusher.call(&["LPUSH", "k", "v"], b":1\r\n").await;
    // The one left in line gets it; nothing went to the client that left.
    waiting.expect(b"$1\r\nv\r\n").await;
    blocked(&server, 0).await;
    pusher.call(&["LPOP", "dst"], b"$1\r\nv\r\n").await;
    // With nobody left in line, a push stays in the list.
    pusher.call(&["RPUSH", "k", "w"], b":1\r\n").await;
    pusher.call(&["LPOP", "k"], b"$1\r\nw\r\n").await;
    assert!(!server.blocking.active());
    assert_eq!(server.blocking.blocking_keys(), 0, "no line left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_answer_null_arrays_in_both_protocols() {
    let server = server();
    let mut c = connect(&server);
    c.call(&["BLPOP", "k", "0.01"], b"*-1\r\n").await;
    c.call(&["BLMOVE", "k", "d", "LEFT", "RIGHT", "0.01"], b"*-1\r\n")
        .await;
    c.call(&["BRPOPLPUSH", "k", "d", "0.01"], b"*-1\r\n").await;
    c.call(&["BLMPOP", "0.01", "1", "k", "LEFT"], b"*-1\r\n")
        .await;
    c.send(&["HELLO", "3"]).await;
    // Skip HELLO's map: its end is the last field, "modules" and an empty array.
    let mut seen = Vec::new();
    while !seen.ends_with(b"modules\r\n*0\r\n") {
        let mut byte = [0u8; 1];
        tokio::time::timeout(PATIENCE, c.io.read_exact(&mut byte))
            .await
            .expect("HELLO reply")
            .expect("read");
        seen.push(byte[0]);
    }
    c.call(&["BRPOP", "k", "0.01"], b"_\r\n").await;
    c.call(&["BLMOVE", "k", "d", "LEFT", "RIGHT", "0.01"], b"_\r\n")
        .await;
    blocked(&server, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_pipelined_behind_a_blocked_one_run_after_it() {
    let server = server();
    let mut c = connect(&server);
    let mut pipeline = Vec::new();
    for _ in 0..3 {
        pipeline.extend(encode(&["BLPOP", "k", "0.001"]));
    }
    pipeline.extend(encode(&["BLPOP", "k", "0"]));
    pipeline.extend(encode(&["PING"]));
    c.io.write_all(&pipeline).await.expect("send");
    c.expect(b"*-1\r\n*-1\r\n*-1\r\n").await;
    blocked(&server, 1).await;
    let mut pusher = connect(&server);
    pusher.call(&["RPUSH", "k", "z"], b":1\r\n").await;
    c.expect(b"*2\r\n$1\r\nk\r\n$1\r\nz\r\n+PONG\r\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_keeps_a_blocked_client_waiting() {
    let server = server();
    let mut c = connect(&server);
    c.send(&["BLPOP", "a", "b", "0"]).await;
    blocked(&server, 1).await;
    let mut other = connect(&server);
    other.call(&["SET", "a", "str"], b"+OK\r\n").await;
    other.call(&["RPUSH", "b", "x"], b":1\r\n").await;
    c.expect(b"*2\r\n$1\r\nb\r\n$1\r\nx\r\n").await;
    // A first run fails on the same key, as Redis does.
    c.call(
        &["BLPOP", "a", "b", "0"],
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    )
    .await;
}

/// A pipeline of blocking commands must not nest one wait inside the other: each level used
/// to take stack, and some thousands of them overflowed it, killing the node. Run on threads
/// with a small stack so that a few hundred levels would do.
#[test]
fn a_long_pipeline_of_blocking_commands_keeps_a_flat_stack() {
    const WAITS: usize = 400;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_stack_size(256 * 1024)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let server = server();
        let mut c = connect(&server);
        let mut pipeline = Vec::new();
        for _ in 0..WAITS {
            pipeline.extend(encode(&["BLPOP", "k", "0.001"]));
        }
        pipeline.extend(encode(&["PING"]));
        let mut expected = b"*-1\r\n".repeat(WAITS);
        expected.extend_from_slice(b"+PONG\r\n");
        // The whole pipeline fits the in-memory stream's buffer: no reader needed to send.
        c.io.write_all(&pipeline).await.expect("send");
        c.expect(&expected).await;
    });
}

/// Runs one command as EXEC runs a queued one (`in_exec`), returning its reply and effects.
fn run_in_exec(server: &Server, args: &[&str]) -> (String, Effects) {
    let addr = "127.0.0.1:1".parse().expect("address");
    let shared = Arc::new(ClientShared::new(1, addr, addr));
    let mut client = Client::new(shared, true);
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let spec = table::lookup(args[0]).expect("command");
    let mut out = BytesMut::new();
    // Before the view: it borrows the effects for as long as its guards live.
    let mut effects = Effects::default();
    let db = dispatch::lock_for(server, spec, &args, crate::clock::unix_millis(), 0, false)
        .expect("waits without giving up");
    let mut ctx = Ctx {
        server,
        services: server,
        client: &mut client,
        db,
        held: Vec::new(),
        reply: Reply::new(&mut out, ProtocolVersion::Resp2),
        effects: &mut effects,
        in_exec: true,
        replicating: false,
        event: None,
    };
    dispatch::run_in(&mut ctx, spec, &args, &mut LocalStats::default());
    drop(ctx);
    (String::from_utf8_lossy(&out).into_owned(), effects)
}

#[test]
fn inside_exec_blocking_commands_do_not_block() {
    crate::commands::install_table();
    let server = Server::new(Config::default());
    for (args, reply) in [
        (&["BLPOP", "k", "0"][..], "*-1\r\n"),
        (&["BRPOP", "k", "0"], "*-1\r\n"),
        (&["BLMPOP", "0", "1", "k", "LEFT"], "*-1\r\n"),
        (&["BLMOVE", "k", "d", "LEFT", "LEFT", "0"], "$-1\r\n"),
        (&["BRPOPLPUSH", "k", "d", "0"], "$-1\r\n"),
        (&["RPUSH", "k", "a", "b"], ":2\r\n"),
        (&["BLPOP", "k", "0"], "*2\r\n$1\r\nk\r\n$1\r\na\r\n"),
        (&["BLMOVE", "k", "d", "LEFT", "LEFT", "0"], "$1\r\nb\r\n"),
    ] {
        let (got, effects) = run_in_exec(&server, args);
        assert_eq!(got, reply, "{args:?}");
        assert!(effects.block.is_none(), "{args:?} asked to block");
    }
}

#[test]
fn outside_exec_an_empty_wait_blocks_without_a_reply() {
    crate::commands::install_table();
    let server = Server::new(Config::default());
    let addr = "127.0.0.1:1".parse().expect("address");
    let shared = Arc::new(ClientShared::new(1, addr, addr));
    let mut client = Client::new(shared, true);
    let args: [&[u8]; 6] = [b"BLMOVE", b"src", b"dst", b"LEFT", b"RIGHT", b"1.5"];
    let mut out = BytesMut::new();
    let effects = dispatch::execute(
        &server,
        &mut client,
        &mut out,
        &args,
        &mut LocalStats::default(),
    );
    assert!(out.is_empty(), "no reply while blocking");
    let block = effects.block.expect("asked to block");
    assert_eq!(block.keys, vec![Box::<[u8]>::from(&b"src"[..])]);
    assert_eq!(block.timeout, Some(Duration::from_millis(1500)));
    assert_eq!(block.retry.len(), 6);
    assert_eq!(
        block.timeout_reply,
        crate::command_framework::ctx::TimeoutReply::NullArray
    );
}
