//! What real commands, run through the dispatcher, put into the replication backlog: each
//! handler's decision (absolute expiry, popped members, stored value) rewritten so that a
//! replica reaches the same state, transactions as MULTI ... EXEC, expired keys as DELs.

use super::{Client, ClientShared, Server};
use crate::command_framework::dispatch;
use crate::config::Config;
use crate::node_state::stats::LocalStats;
use bytes::BytesMut;
use proto::resp::Frame;
use std::sync::Arc;

type Argv = Vec<Vec<u8>>;

fn server(eager: bool) -> Server {
    let config = Config {
        repl_backlog_eager: eager,
        ..Config::default()
    };
    crate::commands::install_table();
    Server::new(config)
}

fn client() -> Client {
    let addr = "127.0.0.1:1".parse().expect("address");
    Client::new(Arc::new(ClientShared::new(1, addr, addr)), true)
}

/// Runs one command; returns its reply bytes.
fn run(server: &Server, client: &mut Client, args: &[&str]) -> Vec<u8> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let mut out = BytesMut::new();
    dispatch::execute(server, client, &mut out, &args, &mut LocalStats::default());
    out.to_vec()
}

/// The commands appended to the backlog after offset `after`.
fn stream_since(server: &Server, after: u64) -> Vec<Argv> {
    let bytes = server
        .replication
        .read_backlog(after + 1, |r| r.map(|r| r.to_vec()))
        .expect("backlog holds the range");
    let mut commands = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let (frame, used) = proto::resp::decode(&bytes[pos..])
            .expect("valid RESP")
            .expect("whole commands only");
        pos += used;
        let Frame::Array(items) = frame else {
            panic!("a command is an array, got {frame:?}");
        };
        commands.push(
            items
                .into_iter()
                .map(|f| f.as_bytes().expect("bulk").to_vec())
                .collect(),
        );
    }
    commands
}

fn argv(parts: &[&str]) -> Argv {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

fn num(a: &[u8]) -> u64 {
    std::str::from_utf8(a).unwrap().parse().unwrap()
}

/// Runs `args` and returns what it appended to the stream. The stream's first write selects
/// database 0 first (a new backlog's reader knows none): checked and left out here.
fn captured(server: &Server, client: &mut Client, args: &[&str]) -> Vec<Argv> {
    let before = server.replication.master_repl_offset();
    run(server, client, args);
    let mut got = stream_since(server, before);
    if before == 0 && !got.is_empty() {
        assert_eq!(
            got.remove(0),
            argv(&["SELECT", "0"]),
            "the first write selects"
        );
    }
    got
}

#[test]
fn nothing_is_recorded_before_a_backlog_exists() {
    let s = server(false);
    let mut c = client();
    assert!(!s.replication.active());
    run(&s, &mut c, &["SET", "k", "v"]);
    assert_eq!(s.replication.master_repl_offset(), 0);
    assert_eq!(c.repl_offset, 0);
}

#[test]
fn plain_writes_go_as_sent_and_reads_add_nothing() {
    let s = server(true);
    let mut c = client();
    assert_eq!(
        captured(&s, &mut c, &["SET", "k", "v"]),
        vec![argv(&["SET", "k", "v"])]
    );
    assert_eq!(c.repl_offset, s.replication.master_repl_offset());
    assert!(captured(&s, &mut c, &["GET", "k"]).is_empty());
    // A write that changed nothing (DEL of a missing key) is not replicated.
    assert!(captured(&s, &mut c, &["DEL", "missing"]).is_empty());
}

#[test]
fn relative_expiries_become_absolute() {
    let s = server(true);
    let mut c = client();
    let before = super::unix_millis();
    let got = captured(&s, &mut c, &["SET", "k", "v", "EX", "100"]);
    let after = super::unix_millis();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0][..4], argv(&["SET", "k", "v", "PXAT"])[..]);
    let at = num(&got[0][4]);
    assert!((before + 100_000..=after + 100_000).contains(&at), "{at}");

    let got = captured(&s, &mut c, &["EXPIRE", "k", "50"]);
    assert_eq!(got[0][..2], argv(&["PEXPIREAT", "k"])[..]);
    let at = num(&got[0][2]);
    assert!((before + 50_000..=super::unix_millis() + 50_000).contains(&at));

    let got = captured(&s, &mut c, &["SETEX", "e", "10", "x"]);
    assert_eq!(got[0][..4], argv(&["SET", "e", "x", "PXAT"])[..]);

    let got = captured(&s, &mut c, &["GETEX", "e", "PERSIST"]);
    assert_eq!(got, vec![argv(&["PERSIST", "e"])]);

    // An expiry already past deletes the key: the replica deletes it too.
    let got = captured(&s, &mut c, &["EXPIRE", "k", "-1"]);
    assert_eq!(got, vec![argv(&["DEL", "k"])]);
}

#[test]
fn random_and_float_results_are_replicated_as_values() {
    let s = server(true);
    let mut c = client();
    run(&s, &mut c, &["SADD", "s", "a", "b", "c"]);
    let got = captured(&s, &mut c, &["SPOP", "s", "2"]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].len(), 4);
    assert_eq!(got[0][..2], argv(&["SREM", "s"])[..]);
    // The members removed are exactly the ones no longer in the set.
    let left = run(&s, &mut c, &["SMEMBERS", "s"]);
    for m in &got[0][2..] {
        assert!(!left.windows(m.len()).any(|w| w == &m[..]));
    }

    run(&s, &mut c, &["SET", "f", "1.5"]);
    let got = captured(&s, &mut c, &["INCRBYFLOAT", "f", "1"]);
    assert_eq!(got, vec![argv(&["SET", "f", "2.5", "KEEPTTL"])]);
    let got = captured(&s, &mut c, &["HINCRBYFLOAT", "h", "x", "0.25"]);
    assert_eq!(got, vec![argv(&["HSET", "h", "x", "0.25"])]);
}

#[test]
fn pops_among_keys_name_the_key_that_served() {
    let s = server(true);
    let mut c = client();
    run(&s, &mut c, &["RPUSH", "b", "1", "2", "3"]);
    let got = captured(&s, &mut c, &["BLPOP", "a", "b", "0"]);
    assert_eq!(got, vec![argv(&["LPOP", "b"])]);
    let got = captured(&s, &mut c, &["LMPOP", "2", "a", "b", "RIGHT", "COUNT", "5"]);
    assert_eq!(got, vec![argv(&["RPOP", "b", "2"])]);
    run(&s, &mut c, &["ZADD", "z", "1", "m"]);
    let got = captured(&s, &mut c, &["BZPOPMIN", "y", "z", "0"]);
    assert_eq!(got, vec![argv(&["ZPOPMIN", "z"])]);
}

#[test]
fn a_transaction_goes_as_multi_exec() {
    let s = server(true);
    let mut c = client();
    run(&s, &mut c, &["MULTI"]);
    run(&s, &mut c, &["SET", "a", "1"]);
    run(&s, &mut c, &["GET", "a"]);
    run(&s, &mut c, &["INCR", "a"]);
    let got = captured(&s, &mut c, &["EXEC"]);
    assert_eq!(
        got,
        vec![
            argv(&["MULTI"]),
            argv(&["SET", "a", "1"]),
            argv(&["INCR", "a"]),
            argv(&["EXEC"]),
        ]
    );
}

#[test]
fn a_key_found_expired_is_deleted_on_replicas() {
    let s = server(true);
    let mut c = client();
    run(&s, &mut c, &["SET", "k", "v", "PX", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let got = captured(&s, &mut c, &["GET", "k"]);
    assert_eq!(got, vec![argv(&["DEL", "k"])]);
}

#[test]
fn wait_answers_at_once_without_replicas_when_it_cannot_or_need_not_block() {
    let s = server(true);
    let mut c = client();
    run(&s, &mut c, &["SET", "k", "v"]);
    assert_eq!(run(&s, &mut c, &["WAIT", "0", "0"]), b":0\r\n");
    assert_eq!(
        run(&s, &mut c, &["WAIT", "1", "-1"]),
        b"-ERR timeout is negative\r\n"
    );
    assert_eq!(
        run(&s, &mut c, &["WAIT", "x", "0"]),
        b"-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        run(&s, &mut c, &["WAIT", "1"]),
        b"-ERR wrong number of arguments for 'wait' command\r\n"
    );
}

#[test]
fn min_replicas_to_write_refuses_writes_not_reads() {
    let s = server(false);
    let mut c = client();
    s.set_config("min-replicas-to-write", "1").unwrap();
    assert_eq!(
        run(&s, &mut c, &["SET", "k", "v"]),
        b"-NOREPLICAS Not enough good replicas to write.\r\n"
    );
    assert_eq!(run(&s, &mut c, &["GET", "k"]), b"$-1\r\n");
    s.set_config("min-replicas-to-write", "0").unwrap();
    assert_eq!(run(&s, &mut c, &["SET", "k", "v"]), b"+OK\r\n");
}

/// A client over an in-memory stream: WAIT blocks its connection (not the thread) until a
/// replica's acknowledgement covers its last write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_is_answered_when_a_replica_acknowledges() {
    use super::connection::Connection;
    use crate::node_state::replication::ReplicaAddr;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let s = Arc::new(server(true));
    let (mut io, theirs) = tokio::io::duplex(64 * 1024);
    let addr = "127.0.0.1:1".parse().expect("address");
    let shared = Arc::new(ClientShared::new(s.clients.next_id(), addr, addr));
    s.clients.add(shared.clone());
    tokio::spawn(Connection::new(s.clone(), theirs, shared).run());
    let replica = ReplicaAddr {
        ip: "10.0.0.2".into(),
        port: 7001,
    };
    s.replication.attach_replica(1, replica, 0, 0).unwrap();
    s.replication.replica_online(1, super::unix_millis());

    async fn read_n(io: &mut tokio::io::DuplexStream, n: usize) -> Vec<u8> {
        let mut got = vec![0; n];
        tokio::time::timeout(Duration::from_secs(10), io.read_exact(&mut got))
            .await
            .expect("reply in time")
            .expect("read");
        got
    }
    io.write_all(
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$1\r\n0\r\n",
    )
    .await
    .unwrap();
    assert_eq!(read_n(&mut io, 5).await, b"+OK\r\n");
    // Blocked: nothing comes until the replica acknowledges the SET's offset.
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(100), io.read(&mut byte)).await;
    assert!(early.is_err(), "WAIT answered before any ack");
    assert_eq!(s.blocking.blocked_clients(), 1);
    let offset = s.replication.master_repl_offset();
    s.replication
        .observe_ack(1, offset - 1, super::unix_millis());
    let early = tokio::time::timeout(Duration::from_millis(50), io.read(&mut byte)).await;
    assert!(early.is_err(), "WAIT answered by an ack short of its write");
    s.replication.observe_ack(1, offset, super::unix_millis());
    assert_eq!(read_n(&mut io, 4).await, b":1\r\n");
    // ROLE lists the replica with its acknowledged offset.
    io.write_all(b"*1\r\n$4\r\nROLE\r\n").await.unwrap();
    let o = offset.to_string();
    let expect = format!(
        "*3\r\n$6\r\nmaster\r\n:{o}\r\n*1\r\n*3\r\n$8\r\n10.0.0.2\r\n$4\r\n7001\r\n${}\r\n{o}\r\n",
        o.len()
    );
    assert_eq!(
        String::from_utf8_lossy(&read_n(&mut io, expect.len()).await),
        expect
    );
}

#[test]
fn a_set_whose_expiry_is_past_deletes_the_key_once() {
    let s = server(true);
    let mut c = client();
    run(&s, &mut c, &["SET", "k", "old"]);
    let got = captured(&s, &mut c, &["SET", "k", "v", "PXAT", "1"]);
    assert_eq!(got, vec![argv(&["DEL", "k"])]);
    assert_eq!(run(&s, &mut c, &["EXISTS", "k"]), b":0\r\n");
}

#[test]
fn active_expiry_and_eviction_send_dels() {
    let s = server(true);
    let mut c = client();
    // {t} puts both in one shard: one active-expiry pass removes them together.
    run(&s, &mut c, &["SET", "{t}gone", "v", "PX", "1"]);
    run(&s, &mut c, &["SET", "{t}too", "v", "PX", "1"]);
    run(&s, &mut c, &["SET", "kept", "v"]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let before = s.replication.master_repl_offset();
    super::cron::active_expire(&s);
    let mut got = stream_since(&s, before);
    got.sort();
    // Each on its own, not wrapped in MULTI/EXEC.
    assert_eq!(
        got,
        vec![argv(&["DEL", "{t}gone"]), argv(&["DEL", "{t}too"])]
    );

    // Over maxmemory with allkeys-random, the write first evicts: the replica deletes the
    // victim before it sets the new key.
    s.set_config("maxmemory-policy", "allkeys-random").unwrap();
    s.set_config("maxmemory", "1").unwrap();
    let before = s.replication.master_repl_offset();
    run(&s, &mut c, &["SET", "new", "v"]);
    let got = stream_since(&s, before);
    assert!(got.contains(&argv(&["DEL", "kept"])), "{got:?}");
}

/// While a full sync's snapshot loads, clients get `-LOADING` for data commands; commands
/// flagged `loading` (INFO, as in Redis; PING is not; unlike Redis, the CLUSTER views of the
/// topology) still answer; the primary's stream is not refused.
#[test]
fn a_loading_replica_answers_loading() {
    let s = server(false);
    let mut c = client();
    s.replica_of.set_loading(true);
    assert_eq!(
        run(&s, &mut c, &["GET", "k"]),
        format!("-{}\r\n", dispatch::LOADING_ERROR).into_bytes()
    );
    assert!(run(&s, &mut c, &["INFO", "replication"]).starts_with(b"$"));
    // The topology views reach their handler (here: a node without cluster support says so).
    for view in [
        &["CLUSTER", "NODES"][..],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "KEYSLOT", "k"],
    ] {
        let reply = String::from_utf8(run(&s, &mut c, view)).unwrap();
        assert!(
            reply.contains("cluster support disabled"),
            "{view:?}: {reply}"
        );
    }
    let mut primary = client();
    primary.primary_link = true;
    assert_eq!(run(&s, &mut primary, &["SET", "k", "v"]), b"+OK\r\n");
    s.replica_of.set_loading(false);
    assert_eq!(run(&s, &mut c, &["GET", "k"]), b"$1\r\nv\r\n");
}
