//! The replication history a snapshot names: exact only when nothing reached the stream or
//! the dataset while it was written.

use super::load::load_from;
use super::snapshot::{self, aux};
use super::*;
use crate::config::Config;
use crate::db::{Entry, Keyspace, Locked, Value};
use crate::node_state::replication::Replication;
use crate::node_state::shutdown::ShutdownMode;
use crate::replication::outgoing::Outgoing;
use crate::replication::propagate::WriteEffect;
use crate::snapshot_format::format::{put_aux, put_end, put_header, Decoder};
use std::io::Write;
use std::sync::atomic::AtomicBool;

fn feed_set(r: &Replication, key: &[u8]) -> u64 {
    let mut out = Outgoing::default();
    out.command(0, &[b"SET", key, b"v"], &WriteEffect::None)
        .unwrap();
    r.feed(&mut out)
}

fn put(ks: &Keyspace, key: &[u8]) {
    let mut db = Locked::lock_all(ks, unix_millis(), 0);
    db.insert(key, Entry::new(Value::Int(1)));
}

/// Decodes a streamed snapshot (checksum cut off) into a fresh keyspace.
fn load(bytes: &[u8]) -> load::LoadStats {
    let body = bytes.len() - 8;
    let mut d = Decoder::new(&bytes[..body], body as u64);
    load_from(&Keyspace::new(), &mut d, unix_millis()).unwrap()
}

/// A writer that runs `during` at its first write: the save's first bytes go out after its
/// first mark and before its entries, so whatever `during` does happens mid-save.
struct Meddling<F: FnMut()> {
    bytes: Vec<u8>,
    during: Option<F>,
}

impl<F: FnMut()> Write for Meddling<F> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(mut f) = self.during.take() {
            f();
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn stream_meddled(server: &Server, during: impl FnMut()) -> Vec<u8> {
    let mut out = Meddling {
        bytes: Vec::new(),
        during: Some(during),
    };
    snapshot::stream(
        &server.keyspace,
        &[],
        Some(&server.replication),
        &mut out,
        &AtomicBool::new(false),
    )
    .unwrap();
    out.bytes
}

/// Goal: a save during which nothing is written names its history, and it loads back as
/// exactly that `(replid, offset)`.
#[test]
fn a_quiescent_save_round_trips_its_history() {
    crate::commands::install_table();
    let s = Server::new(Config::default());
    s.replication.ensure_backlog().unwrap();
    put(&s.keyspace, b"k");
    let offset = feed_set(&s.replication, b"k");
    let stats = load(&stream_meddled(&s, || {}));
    assert_eq!(stats.history, Some((s.replication.ids().replid(), offset)));
    assert_eq!(stats.keys, 1);
}

/// Goal: a save that a write overlapped names no history: fed while the save ran (the
/// offsets differ), or executed and not yet fed (a replica's applier holds an unfed write),
/// or with no backlog at all (writes are not fed, the offset means nothing).
#[test]
fn a_save_that_a_write_overlapped_names_no_history() {
    crate::commands::install_table();
    let s = Server::new(Config::default());
    s.replication.ensure_backlog().unwrap();
    feed_set(&s.replication, b"a");
    let fed = stream_meddled(&s, || {
        feed_set(&s.replication, b"b");
    });
    assert_eq!(load(&fed).history, None, "a write fed mid-save");

    let mut held = None;
    let begun_mid_save = stream_meddled(&s, || held = Some(s.replication.unfed_write()));
    assert_eq!(load(&begun_mid_save).history, None, "an unfed write began");
    let still_running = stream_meddled(&s, || {});
    assert_eq!(
        load(&still_running).history,
        None,
        "an unfed write still running at the start"
    );
    drop(held);
    assert!(
        load(&stream_meddled(&s, || {})).history.is_some(),
        "once it ended"
    );

    crate::commands::install_table();
    let idle = Server::new(Config::default());
    assert!(!idle.replication.active());
    assert_eq!(
        load(&stream_meddled(&idle, || {})).history,
        None,
        "no backlog"
    );
}

/// Goal: files of earlier versions (no history fields) and files whose fields disagree or
/// are malformed load, with no history.
#[test]
fn files_without_exact_history_fields_load_without_history() {
    let id = crate::replication::ids::ReplId::parse(&[b'a'; 40]).unwrap();
    let file = |fields: &[(&[u8], &[u8])]| {
        let mut bytes = Vec::new();
        put_header(&mut bytes);
        put_aux(&mut bytes, b"ctime", b"1");
        for (name, value) in fields {
            put_aux(&mut bytes, name, value);
        }
        put_end(&mut bytes);
        bytes.extend_from_slice(&[0; 8]);
        load(&bytes).history
    };
    assert_eq!(file(&[]), None);
    let idb = id.as_bytes();
    assert_eq!(
        file(&[
            (aux::REPL_ID, idb),
            (aux::REPL_OFFSET, b"7"),
            (aux::REPL_OFFSET_END, b"7")
        ]),
        Some((id, 7))
    );
    assert_eq!(file(&[(aux::REPL_ID, idb), (aux::REPL_OFFSET, b"7")]), None);
    assert_eq!(
        file(&[
            (aux::REPL_ID, idb),
            (aux::REPL_OFFSET, b"7"),
            (aux::REPL_OFFSET_END, b"9")
        ]),
        None
    );
    assert_eq!(
        file(&[
            (aux::REPL_ID, b"not an id"),
            (aux::REPL_OFFSET, b"7"),
            (aux::REPL_OFFSET_END, b"7")
        ]),
        None
    );
}

/// Goal: SAVE writes the history into the snapshot file (the path a restart reads).
#[test]
fn save_writes_the_history_into_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        dir: dir.path().to_path_buf(),
        ..Config::default()
    };
    crate::commands::install_table();
    let s = Arc::new(Server::new(config));
    s.attach(&s);
    s.replication.ensure_backlog().unwrap();
    put(&s.keyspace, b"k");
    let offset = feed_set(&s.replication, b"k");
    save(&s).unwrap();
    let stats = load::load_file(
        &Keyspace::new(),
        &dir.path().join("dump.snap"),
        unix_millis(),
        crate::db::packing::Packing::DEFAULT,
    )
    .unwrap()
    .unwrap();
    assert_eq!(stats.history, Some((s.replication.ids().replid(), offset)));
}

fn server_in(dir: &std::path::Path) -> Arc<Server> {
    let config = Config {
        dir: dir.to_path_buf(),
        ..Config::default()
    };
    crate::commands::install_table();
    Arc::new(Server::new(config))
}

/// Goal: a clean stop (final save, identity `stopped`) restarts with the same ids and
/// offset, covered, and a replica at that offset continues from the (empty) backlog; a
/// crash after the same save is not covered, and the primary continues the history under a
/// new id from the loaded offset; without an exact snapshot the ids are fresh.
#[test]
fn a_restart_continues_the_history_its_snapshot_is() {
    let dir = tempfile::tempdir().unwrap();
    let a = server_in(dir.path());
    load_at_start(&a).unwrap();
    a.replication.ensure_backlog().unwrap();
    put(&a.keyspace, b"k");
    let offset = feed_set(&a.replication, b"k");
    let ids = a.replication.ids();
    a.shutdown.trigger(ShutdownMode::Save);
    save_on_shutdown(&a);
    let stopped = identity_file::load(&identity_file::path_in(dir.path()))
        .unwrap()
        .unwrap();
    assert_eq!(stopped.state, identity::RunState::Stopped);
    assert_eq!((stopped.ids, stopped.offset), (ids, offset));

    let b = server_in(dir.path());
    load_at_start(&b).unwrap();
    assert_eq!(b.replication.ids(), ids);
    assert_eq!(b.replication.master_repl_offset(), offset);
    assert!(b.loaded_history.lock().covered());
    let continued = b
        .replication
        .psync(&crate::replication::psync::PsyncRequest {
            history: Some((ids.replid(), offset + 1)),
        });
    assert!(
        matches!(
            continued,
            crate::replication::psync::PsyncDecision::Continue { .. }
        ),
        "{continued:?}"
    );
    // b runs (its identity says so) and is killed: same exact snapshot, not covered.
    let running = identity_file::load(&identity_file::path_in(dir.path()))
        .unwrap()
        .unwrap();
    assert_eq!(running.state, identity::RunState::Running);
    drop(b);
    // A standalone primary then shifts to a new id at the loaded offset: it may have
    // written past it under the old one.
    let c = server_in(dir.path());
    load_at_start(&c).unwrap();
    let shifted = c.replication.ids();
    assert!(!c.loaded_history.lock().covered());
    assert_ne!(shifted.replid(), ids.replid());
    assert_eq!(shifted.replid2(), Some(ids.replid()));
    assert_eq!(shifted.second_replid_offset(), Some(offset + 1));
    assert_eq!(c.replication.master_repl_offset(), offset);

    // Without the snapshot the ids are new and start at 0.
    std::fs::remove_file(dir.path().join("dump.snap")).unwrap();
    let d = server_in(dir.path());
    load_at_start(&d).unwrap();
    assert_ne!(d.replication.ids().replid(), ids.replid());
    assert_eq!(d.replication.master_repl_offset(), 0);
    assert!(!d.loaded_history.lock().covered());

    // A damaged identity refuses the start.
    std::fs::write(identity_file::path_in(dir.path()), "version 1\n").unwrap();
    let e = format!("{:#}", load_at_start(&server_in(dir.path())).unwrap_err());
    assert!(e.contains("repl-identity"), "{e}");
}
