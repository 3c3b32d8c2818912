//! Writing a snapshot of the keyspace: streamed to any writer (full sync later), or to the
//! snapshot file, atomically.
//!
//! Consistency: there is no fork here. The writer locks one shard at a time, copies the
//! entries of one hash slot of it into a buffer, unlocks, and writes the buffer out; so
//! clients wait at most for one slot's serialization, never for disk I/O. Each slot is
//! saved as of one instant (every key that exists for the whole save is saved exactly once,
//! with the value it had at that instant), but different slots, and hence different shards,
//! are saved at different instants: unlike Redis's fork-based BGSAVE, a snapshot is not a
//! point-in-time image across slots. A write made during the save may or may not be in it.
//!
//! Replication history: a save names the stream position its dataset is (`repl-id` and
//! `repl-offset` before the entries, from a [`HistoryMark`] taken before the first key) and,
//! after the last entry, `repl-offset-end` if a second mark equals the first. Only then is
//! the file exactly that history's prefix (no write reached the stream or the dataset while
//! it was written), which a restart may continue from (`load::LoadStats::history`).

use crate::db::databases::Dbs;
use crate::db::keyspace::{SHARD_COUNT, SLOTS_PER_SHARD};
use crate::node_state::replication::{HistoryMark, Replication};
use crate::server::unix_millis;
use crate::snapshot_format::checksum::CrcWriter;
use crate::snapshot_format::format::{
    put_aux, put_end, put_entry, put_function, put_header, put_select_db,
};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Buffer between the serializer and the file: large writes, few syscalls.
pub const FILE_BUFFER_BYTES: usize = 1 << 20;
/// Capacity the per-slot buffer keeps between slots; a huge slot's buffer is shrunk back to
/// this so that one big slot does not pin its memory for the rest of the save.
pub const SLOT_BUFFER_KEEP_BYTES: usize = 4 << 20;

pub use crate::node_state::snapshot_state::{SaveError, SaveStats};

/// Why streaming stopped.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("aborted")]
    Aborted,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Aux field names of the replication history a snapshot is (see the module comment).
pub mod aux {
    pub const REPL_ID: &[u8] = b"repl-id";
    pub const REPL_OFFSET: &[u8] = b"repl-offset";
    pub const REPL_OFFSET_END: &[u8] = b"repl-offset-end";
    /// Redis's name for the database the stream is in at `repl-offset`.
    pub const REPL_STREAM_DB: &[u8] = b"repl-stream-db";
}

/// Appends the history a save starts at (`repl-id`, `repl-offset`, `repl-stream-db`).
pub fn put_history_start(buf: &mut Vec<u8>, mark: &HistoryMark) {
    put_aux(buf, aux::REPL_ID, mark.replid.as_bytes());
    put_aux(buf, aux::REPL_OFFSET, mark.offset.to_string().as_bytes());
    put_aux(
        buf,
        aux::REPL_STREAM_DB,
        mark.stream_db.to_string().as_bytes(),
    );
}

/// Appends `repl-offset-end` when the history did not move since `start` (the file is then
/// exactly that history); nothing otherwise.
pub fn put_history_end(buf: &mut Vec<u8>, start: Option<&HistoryMark>, end: Option<HistoryMark>) {
    if let (Some(start), Some(end)) = (start, end) {
        if *start == end {
            put_aux(buf, aux::REPL_OFFSET_END, end.offset.to_string().as_bytes());
        }
    }
}

/// Writes a whole snapshot (header, entries, end, checksum) to `out`. Checks `abort`
/// between slots. With `history`, the file names the replication history it is exactly,
/// if it is one (see the module comment).
pub fn stream<'k, W: Write>(
    dbs: impl Into<Dbs<'k>>,
    functions: &[std::sync::Arc<[u8]>],
    history: Option<&Replication>,
    out: &mut W,
    abort: &AtomicBool,
) -> Result<SaveStats, StreamError> {
    let now = unix_millis();
    let mut w = CrcWriter::new(out);
    let mut buf = Vec::with_capacity(64 * 1024);
    put_header(&mut buf);
    put_aux(&mut buf, b"node-ver", env!("CARGO_PKG_VERSION").as_bytes());
    put_aux(&mut buf, b"ctime", (now / 1000).to_string().as_bytes());
    let start = history.and_then(Replication::mark);
    if let Some(mark) = &start {
        put_history_start(&mut buf, mark);
    }
    for code in functions {
        put_function(&mut buf, code);
    }
    w.write_all(&buf)?;
    buf.clear();
    let mut keys = 0u64;
    for keyspace in dbs.into().iter() {
        if keyspace.index() != 0 {
            if keyspace.key_count() == 0 {
                continue;
            }
            put_select_db(&mut buf, keyspace.index());
        }
        for shard in 0..SHARD_COUNT {
            for table in 0..SLOTS_PER_SHARD {
                if abort.load(Relaxed) {
                    return Err(StreamError::Aborted);
                }
                {
                    let guard = keyspace.lock_shard(shard);
                    if guard.keys == 0 {
                        break;
                    }
                    for (key, entry) in guard.tables()[table].iter() {
                        // Expired but not yet reclaimed: it would be dropped at load anyway.
                        if entry.is_expired(now) {
                            continue;
                        }
                        put_entry(&mut buf, key, entry.expires_at, &entry.value);
                        keys += 1;
                    }
                }
                if !buf.is_empty() {
                    w.write_all(&buf)?;
                    buf.clear();
                    buf.shrink_to(SLOT_BUFFER_KEEP_BYTES);
                }
            }
        }
    }
    put_history_end(
        &mut buf,
        start.as_ref(),
        history.and_then(Replication::mark),
    );
    put_end(&mut buf);
    w.write_all(&buf)?;
    let crc = w.sum64();
    let bytes = w.written() + 8;
    w.into_inner().write_all(&crc.to_le_bytes())?;
    Ok(SaveStats { keys, bytes })
}

/// The temporary file a save writes before renaming it into place. One per process: saves
/// never overlap (the caller holds the save slot in `SnapshotState`).
pub fn temp_path(dir: &Path) -> PathBuf {
    dir.join(format!("temp-{}.snap", std::process::id()))
}

/// Saves to `dir/dbfilename` atomically: writes `temp-<pid>.snap`, fsyncs it, renames it
/// over the target, and fsyncs the directory, so that a crash at any point leaves either
/// the old file or the new one, whole.
pub fn save_to_file<'k>(
    dbs: impl Into<Dbs<'k>>,
    functions: &[std::sync::Arc<[u8]>],
    history: Option<&Replication>,
    dir: &Path,
    dbfilename: &str,
    abort: &AtomicBool,
) -> Result<SaveStats, SaveError> {
    let tmp = temp_path(dir);
    let target = dir.join(dbfilename);
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| SaveError::Io {
            action,
            path,
            source,
        }
    };
    let result = (|| {
        let file = File::create(&tmp).map_err(io("cannot create", &tmp))?;
        let mut w = BufWriter::with_capacity(FILE_BUFFER_BYTES, file);
        let stats = stream(dbs, functions, history, &mut w, abort).map_err(|e| match e {
            StreamError::Aborted => SaveError::Aborted,
            StreamError::Io(source) => io("cannot write", &tmp)(source),
        })?;
        let file = w
            .into_inner()
            .map_err(|e| io("cannot write", &tmp)(e.into_error()))?;
        file.sync_all().map_err(io("cannot fsync", &tmp))?;
        drop(file);
        std::fs::rename(&tmp, &target).map_err(io("cannot rename the new snapshot to", &target))?;
        // The rename is durable only once the directory entry is.
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io("cannot fsync directory", dir))?;
        Ok(stats)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
