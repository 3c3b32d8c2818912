//! Writing a rewrite's base: the keyspace as it was at the image's instant (see
//! `db/image.rs`), in the snapshot format (`snapshot_format::format`), as Redis writes an RDB
//! preamble into its base. Slots arrive in any order (writers capture the slots they are
//! about to change, the walk the rest), so the base lists them in that order; each key is
//! in it once.
//!
//! Memory: slots captured by writers wait in a queue until the walk writes them out. A
//! write-heavy load during a rewrite can queue much of the dataset (the cost Redis pays in
//! copy-on-write pages); the walk drains the queue after every slot.

use super::files::{failed, FileError};
use crate::db::databases::Dbs;
use crate::db::image::ImageSink;
use crate::db::keyspace::{SlotTable, SHARD_COUNT, SLOTS_PER_SHARD};
use crate::server::persistence::snapshot::FILE_BUFFER_BYTES;
use crate::snapshot_format::checksum::CrcWriter;
use crate::snapshot_format::format::{
    put_aux, put_end, put_entry, put_function, put_header, put_select_db,
};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Serialized slots waiting to be written.
#[derive(Default)]
struct Queue {
    chunks: VecDeque<Vec<u8>>,
    keys: u64,
}

/// Receives the image's slots and serializes them.
pub struct BaseSink {
    queue: Mutex<Queue>,
    /// The rewrite gave up: captures only clear their slot's mark.
    cancelled: AtomicBool,
    /// The instant's time: entries expired by then are left out (they would not load).
    now_ms: u64,
}

impl BaseSink {
    pub fn new(now_ms: u64) -> Self {
        BaseSink {
            queue: Mutex::default(),
            cancelled: AtomicBool::new(false),
            now_ms,
        }
    }

    pub fn cancel(&self) {
        self.cancelled.store(true, Relaxed);
        self.queue.lock().chunks.clear();
    }
}

impl ImageSink for BaseSink {
    fn capture(&self, db: usize, _slot: u16, table: &SlotTable) {
        if table.is_empty() || self.cancelled.load(Relaxed) {
            return;
        }
        // Slots of different databases arrive interleaved: each chunk names its own.
        let mut buf = Vec::new();
        put_select_db(&mut buf, db);
        let mut keys = 0;
        for (key, entry) in table.iter() {
            if !entry.is_expired(self.now_ms) {
                put_entry(&mut buf, key, entry.expires_at, &entry.value);
                keys += 1;
            }
        }
        if keys > 0 {
            let mut q = self.queue.lock();
            q.chunks.push_back(buf);
            q.keys += keys;
        }
    }
}

/// What a base holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct BaseStats {
    pub keys: u64,
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    #[error("aborted")]
    Aborted,
    #[error(transparent)]
    File(#[from] FileError),
}

/// Walks every slot (capturing those no writer captured yet) and writes the base to `path`,
/// fsynced. `abort` is checked between slots. On error the image is cancelled and its walk
/// finished, so no slot stays marked, and `path` is removed.
pub fn write(
    dbs: Dbs<'_>,
    functions: &[std::sync::Arc<[u8]>],
    sink: &BaseSink,
    path: &Path,
    abort: &AtomicBool,
) -> Result<BaseStats, BaseError> {
    let result = write_walking(dbs, functions, sink, path, abort);
    if result.is_err() {
        abandon(dbs, sink);
        let _ = std::fs::remove_file(path);
    }
    result
}

/// Gives the image up: no slot stays marked (each is cleared without being serialized).
pub fn abandon(dbs: Dbs<'_>, sink: &BaseSink) {
    sink.cancel();
    for keyspace in dbs.iter() {
        for shard in 0..SHARD_COUNT {
            for table in 0..SLOTS_PER_SHARD {
                keyspace.capture_pending(shard, table);
            }
        }
    }
}

fn write_walking(
    dbs: Dbs<'_>,
    functions: &[std::sync::Arc<[u8]>],
    sink: &BaseSink,
    path: &Path,
    abort: &AtomicBool,
) -> Result<BaseStats, BaseError> {
    let io = |action| failed(action, path);
    let file = File::create(path).map_err(io("create"))?;
    let mut w = CrcWriter::new(BufWriter::with_capacity(FILE_BUFFER_BYTES, file));
    let mut head = Vec::new();
    put_header(&mut head);
    put_aux(&mut head, b"node-ver", env!("CARGO_PKG_VERSION").as_bytes());
    put_aux(
        &mut head,
        b"ctime",
        (sink.now_ms / 1000).to_string().as_bytes(),
    );
    put_aux(&mut head, b"aof-base", b"1");
    for code in functions {
        put_function(&mut head, code);
    }
    w.write_all(&head).map_err(io("write"))?;
    for keyspace in dbs.iter() {
        for shard in 0..SHARD_COUNT {
            for table in 0..SLOTS_PER_SHARD {
                if abort.load(Relaxed) {
                    return Err(BaseError::Aborted);
                }
                keyspace.capture_pending(shard, table);
                drain(sink, &mut w).map_err(io("write"))?;
            }
        }
    }
    let mut tail = Vec::new();
    put_end(&mut tail);
    w.write_all(&tail).map_err(io("write"))?;
    let crc = w.sum64();
    let bytes = w.written() + 8;
    let mut out = w.into_inner();
    out.write_all(&crc.to_le_bytes()).map_err(io("write"))?;
    let file = out.into_inner().map_err(|e| io("write")(e.into_error()))?;
    file.sync_all().map_err(io("fsync"))?;
    let keys = sink.queue.lock().keys;
    Ok(BaseStats { keys, bytes })
}

fn drain(sink: &BaseSink, w: &mut impl Write) -> std::io::Result<()> {
    loop {
        // Taken one at a time: writers go on queueing while this one is written.
        let Some(chunk) = sink.queue.lock().chunks.pop_front() else {
            return Ok(());
        };
        w.write_all(&chunk)?;
    }
}
