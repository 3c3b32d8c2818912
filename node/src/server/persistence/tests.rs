//! Snapshots end to end without a network: keyspace -> file -> keyspace, corruption of every
//! byte, the shutdown modes, and the save bookkeeping.

use super::load::{load_file, load_from, LoadError};
use super::*;
use crate::config::{Config, SaveRule};
use crate::db::keyspace::SHARD_COUNT;
use crate::db::packed::PackLimits;
use crate::db::packing::Packing;
use crate::db::set::SetLimits;
use crate::db::value::{HashValue, SetValue};
use crate::db::zset::ZSet;
use crate::db::{Entry, Key, Keyspace, Locked, Value};
use crate::snapshot_format::format::tests::{same, value as any_value};
use crate::snapshot_format::format::{self, Decoder};
use proptest::prelude::*;
use std::sync::atomic::AtomicBool;

fn server_in(dir: &std::path::Path, save: Vec<SaveRule>) -> Arc<Server> {
    let config = Config {
        dir: dir.to_path_buf(),
        save,
        ..Config::default()
    };
    crate::commands::install_table();
    let server = Arc::new(Server::new(config));
    server.attach(&server);
    server
}

fn put(ks: &Keyspace, key: &[u8], value: Value, expires_at: u64) {
    let mut db = Locked::lock_all(ks, unix_millis(), 0);
    let mut e = Entry::new(value);
    e.expires_at = expires_at;
    db.insert(key, e);
}

/// Every entry, sorted by key.
fn entries(ks: &Keyspace) -> Vec<(Key, Entry)> {
    let mut out = Vec::new();
    for s in 0..SHARD_COUNT {
        let shard = ks.lock_shard(s);
        for t in shard.tables().iter() {
            out.extend(t.iter().map(|(k, e)| (k.to_key(), e.clone())));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn assert_same_entries(a: &Keyspace, b: &Keyspace) {
    let (a, b) = (entries(a), entries(b));
    assert_eq!(a.len(), b.len());
    for ((ka, ea), (kb, eb)) in a.iter().zip(&b) {
        assert_eq!(ka, kb);
        assert_eq!(ea.expires_at, eb.expires_at, "ttl of {ka:?}");
        assert!(
            same(&ea.value, &eb.value),
            "{ka:?}: {:?} vs {:?}",
            ea.value,
            eb.value
        );
    }
}

/// One value of each type (and both string forms).
fn sample_values() -> Vec<(&'static [u8], Value)> {
    let mut hash = HashValue::default();
    hash.insert(b"f1", b"v1", PackLimits::HASH_DEFAULT);
    hash.insert(b"f2", b"", PackLimits::HASH_DEFAULT);
    let mut set = SetValue::default();
    set.insert(b"a", SetLimits::DEFAULT);
    set.insert(b"b", SetLimits::DEFAULT);
    let mut zset = ZSet::default();
    zset.insert(b"x", 1.5, PackLimits::ZSET_DEFAULT).unwrap();
    zset.insert(b"y", f64::NEG_INFINITY, PackLimits::ZSET_DEFAULT)
        .unwrap();
    vec![
        (b"str", Value::Str(b"hello".as_slice().into())),
        (b"int", Value::Int(-42)),
        (
            b"list",
            Value::List(Box::new(
                [b"1".as_slice(), b"", b"three"].iter().copied().collect(),
            )),
        ),
        (b"hash", Value::Hash(Box::new(hash))),
        (b"set", Value::Set(Box::new(set))),
        (b"zset", Value::ZSet(Box::new(zset))),
    ]
}

/// A keyspace holding the sample values, half of them with a TTL an hour away.
fn sample_keyspace(server: &Server) {
    let in_an_hour = unix_millis() + 3_600_000;
    for (i, (k, v)) in sample_values().into_iter().enumerate() {
        put(
            &server.keyspace,
            k,
            v,
            if i % 2 == 0 { in_an_hour } else { 0 },
        );
    }
}

#[test]
fn save_then_load_keeps_every_type_and_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let a = server_in(dir.path(), vec![]);
    sample_keyspace(&a);
    put(&a.keyspace, b"soon", Value::Int(1), unix_millis() + 5_000);
    a.snapshot.add_dirty(7);
    let stats = save(&a).unwrap();
    assert_eq!(stats.keys, 7);
    assert_eq!(a.snapshot.dirty(), 0);
    assert!(!snapshot::temp_path(dir.path()).exists());

    let b = server_in(dir.path(), vec![]);
    load_at_start(&b).unwrap();
    assert_same_entries(&a.keyspace, &b.keyspace);
    assert_eq!(b.snapshot.info().rdb_last_load_keys_loaded, 7);

    // Loaded later than "soon" expires: that key is skipped, the rest are there.
    let c = Keyspace::new();
    let path = dir.path().join("dump.snap");
    let st = load_file(&c, &path, unix_millis() + 60_000, Packing::DEFAULT)
        .unwrap()
        .unwrap();
    assert_eq!((st.keys, st.expired), (6, 1));
}

#[test]
fn missing_file_is_a_fresh_start() {
    let dir = tempfile::tempdir().unwrap();
    let s = server_in(dir.path(), vec![]);
    load_at_start(&s).unwrap();
    assert_eq!(s.keyspace.key_count(), 0);
}

/// Writes the sample snapshot and returns its bytes.
fn sample_file(dir: &std::path::Path) -> Vec<u8> {
    let s = server_in(dir, vec![]);
    sample_keyspace(&s);
    save(&s).unwrap();
    std::fs::read(dir.join("dump.snap")).unwrap()
}

#[test]
fn every_flipped_byte_and_every_truncation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let good = sample_file(dir.path());
    let path = dir.path().join("bad.snap");
    let check = |bytes: &[u8], what: &str| {
        std::fs::write(&path, bytes).unwrap();
        let e = load_file(&Keyspace::new(), &path, unix_millis(), Packing::DEFAULT).unwrap_err();
        assert!(matches!(e, LoadError::Corrupt { .. }), "{what}: {e}");
        assert!(e.to_string().contains("bad.snap"), "{e}");
    };
    for i in 0..good.len() {
        for flip in [0x01, 0x80, 0xFF] {
            let mut bad = good.clone();
            bad[i] ^= flip;
            check(&bad, &format!("byte {i} ^ {flip:#x}"));
        }
    }
    for cut in 0..good.len() {
        check(&good[..cut], &format!("cut at {cut}"));
    }
    let mut longer = good.clone();
    longer.push(0);
    check(&longer, "one byte more");
    // And the untouched file loads.
    std::fs::write(&path, &good).unwrap();
    assert!(load_file(&Keyspace::new(), &path, unix_millis(), Packing::DEFAULT).is_ok());
}

#[test]
fn corrupt_file_errors_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = sample_file(dir.path());
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(dir.path().join("dump.snap"), &bytes).unwrap();
    let s = server_in(dir.path(), vec![]);
    let e = format!("{:#}", load_at_start(&s).unwrap_err());
    assert!(
        e.contains("dump.snap") && e.contains("checksum mismatch"),
        "{e}"
    );
    std::fs::write(dir.path().join("dump.snap"), b"REDIS0011 not ours").unwrap();
    let e = format!("{:#}", load_at_start(&s).unwrap_err());
    assert!(e.contains("bad magic"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn any_keyspace_streams_and_loads_back(
        items in prop::collection::vec((prop::collection::vec(any::<u8>(), 0..12), any_value(), any::<bool>()), 0..40)
    ) {
        let ks = Keyspace::new();
        let in_a_day = unix_millis() + 86_400_000;
        for (k, v, ttl) in items {
            put(&ks, &k, v, if ttl { in_a_day } else { 0 });
        }
        let mut out = Vec::new();
        let stats = snapshot::stream(&ks, &[], None, &mut out, &AtomicBool::new(false)).unwrap();
        prop_assert_eq!(stats.bytes, out.len() as u64);
        let body = out.len() - 8;
        prop_assert_eq!(
            u64::from_le_bytes(out[body..].try_into().unwrap()),
            format::crc64(&out[..body])
        );
        let back = Keyspace::new();
        let mut d = Decoder::new(&out[..body], body as u64);
        load_from(&back, &mut d, unix_millis()).unwrap();
        assert_same_entries(&ks, &back);
    }
}

#[test]
fn shutdown_saves_by_mode_and_rules() {
    let one_rule = vec![SaveRule {
        seconds: 3600,
        changes: 1,
    }];
    for (rules, mode, saves) in [
        (vec![], ShutdownMode::Default, false),
        (vec![], ShutdownMode::Save, true),
        (one_rule.clone(), ShutdownMode::Default, true),
        (one_rule.clone(), ShutdownMode::NoSave, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let s = server_in(dir.path(), rules.clone());
        put(&s.keyspace, b"k", Value::Int(1), 0);
        s.shutdown.trigger(mode);
        save_on_shutdown(&s);
        assert_eq!(
            dir.path().join("dump.snap").exists(),
            saves,
            "{rules:?} {mode:?}"
        );
    }
}

#[test]
fn bgsave_runs_once_at_a_time_and_keeps_the_books() {
    let dir = tempfile::tempdir().unwrap();
    let s = server_in(dir.path(), vec![]);
    sample_keyspace(&s);
    s.snapshot.add_dirty(3);
    // A save holding the slot makes both kinds refuse.
    s.snapshot.begin(SaveKind::Foreground).unwrap();
    assert!(matches!(bgsave(&s), Err(SaveError::InProgress)));
    assert!(matches!(save(&s), Err(SaveError::InProgress)));
    s.snapshot.finish(false);

    bgsave(&s).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.snapshot.in_progress().is_some() {
        assert!(Instant::now() < deadline, "bgsave did not finish");
        std::thread::sleep(Duration::from_millis(5));
    }
    let info = s.snapshot.info();
    assert!(info.rdb_last_bgsave_ok && !info.rdb_bgsave_in_progress);
    assert_eq!(info.rdb_changes_since_last_save, 0);
    assert_eq!(info.rdb_saves, 1);
    assert!(info.rdb_last_bgsave_time_sec >= 0);
    let back = Keyspace::new();
    load_file(
        &back,
        &dir.path().join("dump.snap"),
        unix_millis(),
        Packing::DEFAULT,
    )
    .unwrap()
    .unwrap();
    assert_same_entries(&s.keyspace, &back);
}

#[test]
fn failed_saves_leave_no_temp_file_and_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let s = server_in(dir.path(), vec![]);
    put(&s.keyspace, b"k", Value::Int(1), 0);
    s.snapshot.add_dirty(1);
    // The target name is a directory: the rename fails after the temp file was written.
    std::fs::create_dir(dir.path().join("dump.snap")).unwrap();
    std::fs::write(dir.path().join("dump.snap/x"), b"x").unwrap();
    let e = save(&s).unwrap_err();
    assert!(matches!(e, SaveError::Io { .. }), "{e}");
    assert!(!snapshot::temp_path(dir.path()).exists());
    assert_eq!(s.snapshot.dirty(), 1);

    bgsave(&s).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.snapshot.in_progress().is_some() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!s.snapshot.last_bgsave_ok());
    // A failed bgsave holds the save rules back for the retry delay.
    let view = s.snapshot.cron_view();
    assert!(rules::decide(
        &[SaveRule {
            seconds: 0,
            changes: 0
        }],
        rules::CronView {
            secs_since_save: 10,
            ..view
        }
    )
    .is_none());
}

#[test]
fn abort_stops_a_stream() {
    let ks = Keyspace::new();
    put(&ks, b"k", Value::Int(1), 0);
    let e = snapshot::stream(&ks, &[], None, &mut Vec::new(), &AtomicBool::new(true)).unwrap_err();
    assert!(matches!(e, snapshot::StreamError::Aborted));
}
