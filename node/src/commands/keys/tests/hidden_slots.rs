//! The walks over the whole keyspace leave out the slots `db::hidden_slots` hides (a
//! migration's copy before its commit). Goal: DBSIZE, INFO keyspace, KEYS, SCAN and
//! RANDOMKEY see exactly the keys of visible slots, and all keys once nothing is hidden.
//! Method: a standalone node in process, commands run through a session as a client would,
//! the hidden set replaced by hand (the cluster bus does it from the ledger).

use crate::config::Config;
use crate::node_state::ClientShared;
use crate::server::session::Session;
use crate::server::Server;
use proto::resp::{decode, Frame};
use std::collections::BTreeSet;
use std::sync::Arc;

const VISIBLE: usize = 40;
const HIDDEN: usize = 25;

fn session() -> (Arc<Server>, Session) {
    crate::commands::install_table();
    let server = Arc::new(Server::new(Config::default()));
    let addr = "127.0.0.1:1".parse().expect("address");
    let shared = Arc::new(ClientShared::new(server.clients.next_id(), addr, addr));
    let mut session = Session::new(server.clone(), shared);
    session.client.authenticated = true;
    (server, session)
}

fn call(session: &mut Session, args: &[&str]) -> Frame {
    let mut bytes = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        bytes.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    session.input.extend_from_slice(&bytes);
    session.process_input();
    let (frame, used) = decode(&session.output)
        .expect("RESP")
        .expect("a whole reply");
    assert_eq!(used, session.output.len(), "one reply");
    session.output.clear();
    frame
}

fn names(frame: &Frame) -> BTreeSet<String> {
    let Frame::Array(items) = frame else {
        panic!("not an array: {frame:?}");
    };
    items
        .iter()
        .map(|f| match f {
            Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("not a bulk: {other:?}"),
        })
        .collect()
}

fn integer(frame: Frame) -> i64 {
    match frame {
        Frame::Integer(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// Every key a full SCAN returns, walking with a small COUNT so cursors cross hidden tables.
fn scan_all(session: &mut Session) -> BTreeSet<String> {
    let mut cursor = "0".to_string();
    let mut seen = BTreeSet::new();
    for _ in 0..100_000 {
        let Frame::Array(reply) = call(session, &["SCAN", &cursor, "COUNT", "3"]) else {
            panic!("SCAN reply");
        };
        let Frame::Bulk(next) = &reply[0] else {
            panic!("cursor");
        };
        seen.extend(names(&reply[1]));
        cursor = String::from_utf8_lossy(next).into_owned();
        if cursor == "0" {
            return seen;
        }
    }
    panic!("SCAN did not end");
}

fn keyspace_line(session: &mut Session) -> String {
    let Frame::Bulk(info) = call(session, &["INFO", "keyspace"]) else {
        panic!("INFO reply");
    };
    let text = String::from_utf8_lossy(&info).into_owned();
    text.lines()
        .find(|l| l.starts_with("db0:"))
        .unwrap_or("")
        .to_string()
}

#[test]
fn walks_over_the_keyspace_pass_hidden_slots_by() {
    let (server, mut s) = session();
    // Keys in many slots, some with a TTL; the hidden ones share two hash tags (two slots).
    let mut visible = BTreeSet::new();
    for i in 0..VISIBLE {
        let key = format!("shown:{i}");
        let mut args = vec!["SET", &key, "v"];
        if i % 4 == 0 {
            args.extend(["EX", "1000"]);
        }
        call(&mut s, &args);
        visible.insert(key);
    }
    let mut hidden = BTreeSet::new();
    for i in 0..HIDDEN {
        let key = format!("{{{}}}:{i}", ["imported", "copied"][i % 2]);
        call(&mut s, &["SET", &key, "v", "EX", "1000"]);
        hidden.insert(key);
    }
    let hidden_slots: BTreeSet<u16> = hidden
        .iter()
        .map(|k| proto::slot::key_slot(k.as_bytes()))
        .collect();
    assert!(visible
        .iter()
        .all(|k| !hidden_slots.contains(&proto::slot::key_slot(k.as_bytes()))));
    let all: BTreeSet<String> = visible.union(&hidden).cloned().collect();

    server
        .keyspace
        .hidden()
        .replace(hidden_slots.iter().copied());
    assert_eq!(integer(call(&mut s, &["DBSIZE"])), VISIBLE as i64);
    let line = keyspace_line(&mut s);
    assert!(
        line.starts_with(&format!("db0:keys={VISIBLE},expires={},", VISIBLE / 4)),
        "{line}"
    );
    assert_eq!(names(&call(&mut s, &["KEYS", "*"])), visible);
    assert!(names(&call(&mut s, &["KEYS", "{imported}*"])).is_empty());
    assert_eq!(scan_all(&mut s), visible);
    for _ in 0..200 {
        match call(&mut s, &["RANDOMKEY"]) {
            Frame::Bulk(k) => {
                let k = String::from_utf8_lossy(&k).into_owned();
                assert!(visible.contains(&k), "RANDOMKEY drew {k}");
            }
            other => panic!("RANDOMKEY answered {other:?}"),
        }
    }
    // The keys are stored all the same: per-slot introspection still counts them.
    let slot = hidden_slots.iter().next().copied().expect("a hidden slot");
    assert!(server.keyspace.count_in_slot(slot) > 0);

    // The commit shows them all at once.
    server.keyspace.hidden().replace([]);
    assert_eq!(
        integer(call(&mut s, &["DBSIZE"])),
        (VISIBLE + HIDDEN) as i64
    );
    assert!(keyspace_line(&mut s).starts_with(&format!(
        "db0:keys={},expires={},",
        VISIBLE + HIDDEN,
        VISIBLE / 4 + HIDDEN
    )));
    assert_eq!(names(&call(&mut s, &["KEYS", "*"])), all);
    assert_eq!(scan_all(&mut s), all);
    s.cleanup();
}
