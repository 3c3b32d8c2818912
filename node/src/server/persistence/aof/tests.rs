//! The AOF's pieces together, in one process: a node's writes through the dispatcher, the
//! log, rewrites racing the writes, and a second node loading what the first left.

use super::manifest::Manifest;
use crate::command_framework::dispatch;
use crate::config::{Config, FsyncPolicy};
use crate::db::{Locked, Value};
use crate::node_state::client::{Client, ClientShared};
use crate::node_state::stats::LocalStats;
use crate::server::{unix_millis, Server};
use bytes::BytesMut;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn config(dir: &std::path::Path) -> Config {
    let mut c = Config {
        dir: dir.to_path_buf(),
        save: Vec::new(),
        ..Config::default()
    };
    c.aof.enabled = true;
    c.aof.fsync = FsyncPolicy::Always;
    c.aof.rewrite_percentage = 0;
    c
}

fn start(config: Config) -> Arc<Server> {
    crate::commands::install_table();
    let server = Arc::new(Server::new(config));
    crate::server::persistence::load_at_start(&server).unwrap();
    server
}

fn client(server: &Server) -> Client {
    let addr = "127.0.0.1:1".parse().unwrap();
    Client::new(
        Arc::new(ClientShared::new(server.clients.next_id(), addr, addr)),
        true,
    )
}

fn exec(server: &Server, client: &mut Client, args: &[&str]) -> String {
    let mut out = BytesMut::new();
    let mut stats = LocalStats::default();
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    dispatch::execute(server, client, &mut out, &args, &mut stats);
    String::from_utf8_lossy(&out).into_owned()
}

fn int(server: &Server, key: &str) -> Option<i64> {
    let db = Locked::lock_all(&server.keyspace, unix_millis(), 0);
    db.get_shared(key.as_bytes()).map(|e| match &e.value {
        Value::Int(n) => *n,
        other => panic!("{key} holds {other:?}"),
    })
}

fn wait_for_rewrite(server: &Server) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.aof.info().rewrite_in_progress {
        assert!(Instant::now() < deadline, "rewrite still running");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Goal: rewrites racing writes lose and double nothing, and transactions stay whole.
/// Method: threads INCR 64 counters (spread over shards), some of them inside MULTI/EXEC,
/// while BGREWRITEAOF runs again and again; a second node loads the files and must find
/// each counter at exactly the number of increments answered.
#[test]
fn rewrites_under_writes_lose_and_double_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path()));
    assert!(server.aof.info().enabled);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let server = server.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut c = client(&server);
                let mut counts = vec![0i64; 64];
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let k = (i * 7 + w) % 64;
                    let key = format!("counter:{k}");
                    if i.is_multiple_of(5) {
                        let other = (k + 1) % 64;
                        let key2 = format!("counter:{other}");
                        exec(&server, &mut c, &["MULTI"]);
                        exec(&server, &mut c, &["INCR", &key]);
                        exec(&server, &mut c, &["INCR", &key2]);
                        let reply = exec(&server, &mut c, &["EXEC"]);
                        assert!(reply.starts_with("*2"), "{reply}");
                        counts[k] += 1;
                        counts[other] += 1;
                    } else {
                        let reply = exec(&server, &mut c, &["INCR", &key]);
                        assert!(reply.starts_with(':'), "{reply}");
                        counts[k] += 1;
                    }
                    i += 1;
                }
                counts
            })
        })
        .collect();
    let config = server.config.read().clone();
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(30));
        server.aof.bgrewrite(&config).unwrap();
        wait_for_rewrite(&server);
        assert!(server.aof.info().last_bgrewrite_ok);
    }
    stop.store(true, Ordering::Relaxed);
    let mut expected = vec![0i64; 64];
    for w in writers {
        for (k, n) in w.join().unwrap().into_iter().enumerate() {
            expected[k] += n;
        }
    }
    server.aof.shutdown();
    let info = server.aof.info();
    assert_eq!(info.rewrites, 6, "the first base at start, then five");
    let manifest = std::fs::read(dir.path().join("appendonlydir/appendonly.aof.manifest")).unwrap();
    let manifest = Manifest::parse(&manifest).unwrap();
    assert_eq!(manifest.base.as_ref().map(|b| b.seq), Some(6));
    assert_eq!(manifest.incrs.len(), 1);
    let files: Vec<String> = std::fs::read_dir(dir.path().join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 3, "base, increment, manifest: {files:?}");

    let reloaded = start(config);
    for (k, n) in expected.iter().enumerate() {
        let key = format!("counter:{k}");
        let want = (*n > 0).then_some(*n);
        assert_eq!(int(&reloaded, &key), want, "{key}");
    }
}
