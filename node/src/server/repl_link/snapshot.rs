//! The snapshot a full sync ships, consistent with a replication offset, and its load on the
//! replica. Same format as SAVE's files (`snapshot_format::format`).
//!
//! Consistency: writers append to the backlog while they still hold their shards, so with
//! every shard held no write is in flight: the offset read then is exactly the stream position
//! of the dataset being serialized. The price is that writes wait while the snapshot is built
//! (it is copied into memory, not written to disk); a fork-less background snapshot is left for
//! later (issue 5).

use crate::db::Locked;
use crate::server::persistence::load::{load_from, LoadStats};
use crate::server::persistence::snapshot::{aux, put_history_end, put_history_start};
use crate::server::{lru_clock, unix_millis, Server};
use crate::snapshot_format::format::{
    crc64, put_aux, put_end, put_entry, put_function, put_header, put_select_db, Decoder,
    FormatError,
};

/// A snapshot of every live key and the replication offset it corresponds to.
pub struct ConsistentSnapshot {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// Serializes the keyspace with all shards held and reads `master_repl_offset` under them.
/// The backlog must already exist (so the bytes after `offset` are being kept).
pub fn take(server: &Server) -> ConsistentSnapshot {
    let now = unix_millis();
    // Every database's shards, in ascending order; again if a database was created while
    // they were being taken (its writes could precede the offset read below).
    let mut dbs = loop {
        let listed: Vec<&crate::db::Keyspace> = server.dbs().iter().collect();
        let held: Vec<Locked<'_>> = listed
            .iter()
            .map(|k| Locked::lock_all(k, now, lru_clock(now)))
            .collect();
        if server.dbs().iter().count() == held.len() {
            break held;
        }
    };
    let offset = server.replication.master_repl_offset();
    // The reader starts at `offset` knowing no database: the next write selects its own
    // (`Outgoing::encode_into`), as Redis's stream does after a replica attaches.
    server.replication.reselect();
    // With every shard held no fed write is in flight; the marks show an unfed one (the
    // same fields as a saved file's, so the load reads them the same way).
    let mark = server.replication.mark();
    let mut bytes = Vec::new();
    put_header(&mut bytes);
    put_aux(
        &mut bytes,
        b"node-ver",
        env!("CARGO_PKG_VERSION").as_bytes(),
    );
    match &mark {
        Some(m) => put_history_start(&mut bytes, m),
        None => put_aux(&mut bytes, aux::REPL_OFFSET, offset.to_string().as_bytes()),
    }
    // Read with every shard held: FUNCTION LOAD and its kin hold them all too.
    for lib in server.functions.get().libraries.values() {
        put_function(&mut bytes, &lib.code);
    }
    for db in dbs.iter_mut() {
        if db.db_index() != 0 {
            put_select_db(&mut bytes, db.db_index());
        }
        for (_, shard) in db.shards_mut() {
            for table in shard.tables().iter() {
                for (key, entry) in table.iter() {
                    if !entry.is_expired(now) {
                        put_entry(&mut bytes, key, entry.expires_at, &entry.value);
                    }
                }
            }
        }
    }
    put_history_end(&mut bytes, mark.as_ref(), server.replication.mark());
    drop(dbs);
    put_end(&mut bytes);
    let crc = crc64(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    ConsistentSnapshot { offset, bytes }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadSnapshotError {
    #[error("snapshot of {0} bytes is shorter than its checksum")]
    Short(usize),
    #[error("snapshot checksum {stored:#x} does not match {computed:#x}")]
    Checksum { stored: u64, computed: u64 },
    #[error("snapshot: {0}")]
    Format(#[from] FormatError),
}

/// Replaces the dataset with `bytes` (a full sync): every key goes, then the snapshot's
/// entries are inserted. WATCHers see every key touched.
pub fn load(server: &Server, bytes: &[u8]) -> Result<LoadStats, LoadSnapshotError> {
    let Some(body_len) = bytes.len().checked_sub(8) else {
        return Err(LoadSnapshotError::Short(bytes.len()));
    };
    let (body, stored) = bytes.split_at(body_len);
    let mut word = [0u8; 8];
    word.copy_from_slice(stored);
    let stored = u64::from_le_bytes(word);
    let computed = crc64(body);
    if stored != computed {
        return Err(LoadSnapshotError::Checksum { stored, computed });
    }
    let now = unix_millis();
    for keyspace in server.dbs().iter() {
        let mut db = Locked::lock_all(keyspace, now, lru_clock(now));
        db.clear_held();
    }
    {
        // A full sync replaces the data set: tracking clients drop everything they cached.
        server.tracking.flushed(&server.clients);
    }
    server.watches.touch_all();
    let mut decoder = Decoder::new(body, body.len() as u64).with_packing(server.hot.packing());
    let mut stats = load_from(server.dbs(), &mut decoder, now)?;
    // The primary's libraries replace this node's, as its keys do.
    let codes = std::mem::take(&mut stats.functions);
    crate::scripting::functions::replace_from_snapshot(server, codes);
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::db::{Entry, Value};
    use crate::replication::outgoing::Outgoing;
    use crate::replication::propagate::WriteEffect;

    fn put(server: &Server, key: &[u8], value: &[u8], expires_at: u64) {
        let now = unix_millis();
        let mut db = Locked::lock_all(&server.keyspace, now, 0);
        let mut e = Entry::new(Value::Str(value.into()));
        e.expires_at = expires_at;
        db.insert(key, e);
    }

    fn get(server: &Server, key: &[u8]) -> Option<(Vec<u8>, u64)> {
        let db = Locked::lock_all(&server.keyspace, unix_millis(), 0);
        db.get_shared(key).map(|e| match &e.value {
            Value::Str(b) => (b.to_vec(), e.expires_at),
            other => panic!("unexpected value {other:?}"),
        })
    }

    /// Goal: a full sync's snapshot carries the keyspace and the offset it was taken at, and
    /// loading it replaces (not merges into) the replica's dataset; a damaged one is refused.
    #[test]
    fn a_snapshot_replaces_the_replicas_dataset_and_names_its_offset() {
        crate::commands::install_table();
        let primary = Server::new(Config::default());
        primary.replication.ensure_backlog().unwrap();
        let mut out = Outgoing::default();
        out.command(0, &[b"SET", b"a", b"1"], &WriteEffect::None)
            .unwrap();
        let fed = primary.replication.feed(&mut out);
        let later = unix_millis() + 100_000;
        put(&primary, b"a", b"1", 0);
        put(&primary, b"t", b"x", later);
        put(&primary, b"gone", b"x", 1);
        let snap = take(&primary);
        assert_eq!(snap.offset, fed);

        crate::commands::install_table();
        let replica = Server::new(Config::default());
        put(&replica, b"stale", b"y", 0);
        let stats = load(&replica, &snap.bytes).unwrap();
        assert_eq!(stats.keys, 2);
        assert_eq!(get(&replica, b"a"), Some((b"1".to_vec(), 0)));
        assert_eq!(get(&replica, b"t"), Some((b"x".to_vec(), later)));
        assert_eq!(get(&replica, b"gone"), None);
        assert_eq!(get(&replica, b"stale"), None);

        let mut bad = snap.bytes.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 1;
        assert!(matches!(
            load(&replica, &bad),
            Err(LoadSnapshotError::Checksum { .. })
        ));
        assert!(matches!(
            load(&replica, &[1, 2]),
            Err(LoadSnapshotError::Short(2))
        ));
    }
}
