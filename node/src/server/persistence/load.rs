//! Reading a snapshot into the keyspace: from the snapshot file at start-up, or from any
//! reader (full sync later).
//!
//! Entries are inserted as they are decoded and the checksum is compared at the end, so a
//! corrupt file is detected only after some entries went in. At start-up that is harmless:
//! a corrupt file is fatal and the process exits. A later caller that must not keep a
//! partial load (a replica's full sync) clears what it loaded on error.

use super::snapshot::aux;
use crate::db::databases::Dbs;
use crate::db::packing::Packing;
use crate::db::{Entry, Locked};
use crate::replication::ids::ReplId;
use crate::server::lru_clock;
use crate::snapshot_format::checksum::CrcReader;
use crate::snapshot_format::format::{Decoder, FormatError, Record};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// Read buffer: large reads, so that the checksum sees large chunks.
pub const READ_BUFFER_BYTES: usize = 1 << 20;
/// Bytes of the trailing checksum.
const CHECKSUM_LEN: u64 = 8;

pub use crate::node_state::snapshot_state::LoadStats;

/// The history aux fields as read, before they are judged.
#[derive(Default)]
struct HistoryFields {
    replid: Option<ReplId>,
    offset: Option<u64>,
    offset_end: Option<u64>,
    stream_db: Option<u64>,
}

impl HistoryFields {
    fn note(&mut self, name: &[u8], value: &[u8]) {
        let number = || std::str::from_utf8(value).ok()?.parse::<u64>().ok();
        match name {
            aux::REPL_ID => self.replid = ReplId::parse(value),
            aux::REPL_OFFSET => self.offset = number(),
            aux::REPL_OFFSET_END => self.offset_end = number(),
            aux::REPL_STREAM_DB => self.stream_db = number(),
            _ => {}
        }
    }

    /// Exact only when the start and the end agree.
    fn exact(&self) -> Option<(ReplId, u64)> {
        match (self.replid, self.offset, self.offset_end) {
            (Some(id), Some(start), Some(end)) if start == end => Some((id, start)),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    // The faults are not `source`s: the messages already say them, and anyhow's `{:#}`
    // would print them twice.
    #[error("cannot read snapshot file {path}: {fault}")]
    Read {
        path: PathBuf,
        fault: std::io::Error,
    },
    #[error("snapshot file {path} is corrupt: {fault} (the node will not start over it; move it away to start empty)")]
    Corrupt { path: PathBuf, fault: FormatError },
}

/// Loads `path` into `keyspace`. `Ok(None)` if there is no such file (a fresh node).
/// Aggregates are packed by `packing` (the node's configured thresholds).
pub fn load_file<'k>(
    dbs: impl Into<Dbs<'k>>,
    path: &Path,
    now: u64,
    packing: Packing,
) -> Result<Option<LoadStats>, LoadError> {
    let read_err = |fault| LoadError::Read {
        path: path.to_path_buf(),
        fault,
    };
    let corrupt = |fault| LoadError::Corrupt {
        path: path.to_path_buf(),
        fault,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    let len = file.metadata().map_err(read_err)?.len();
    let Some(body) = len.checked_sub(CHECKSUM_LEN) else {
        return Err(corrupt(FormatError::Truncated {
            offset: 0,
            needed: CHECKSUM_LEN,
            available: len,
        }));
    };
    let reader = BufReader::with_capacity(READ_BUFFER_BYTES, CrcReader::new(file, body));
    let mut decoder = Decoder::new(reader, body).with_packing(packing);
    let mut stats = load_from(dbs, &mut decoder, now).map_err(|e| match e {
        FormatError::Io(fault) => read_err(fault),
        other => corrupt(other),
    })?;
    let mut reader = decoder.into_inner();
    let mut stored = [0u8; CHECKSUM_LEN as usize];
    reader.read_exact(&mut stored).map_err(|_| {
        corrupt(FormatError::Truncated {
            offset: body,
            needed: CHECKSUM_LEN,
            available: 0,
        })
    })?;
    let stored = u64::from_le_bytes(stored);
    let computed = reader.get_ref().sum64();
    if stored != computed {
        return Err(corrupt(FormatError::Checksum { stored, computed }));
    }
    // The file grew while we read it: not the file we sized, so not one to trust.
    let mut extra = [0u8; 1];
    if reader.read(&mut extra).map_err(read_err)? != 0 {
        return Err(corrupt(FormatError::Trailing {
            count: 1,
            offset: len,
        }));
    }
    stats.bytes = len;
    Ok(Some(stats))
}

/// Decodes a snapshot body (header, records, end; not the checksum, which the caller
/// checks) and inserts its live entries. Entries already expired at `now` are skipped.
/// Holds every shard of the database being loaded (one at a time, as the file selects them).
pub fn load_from<'k, R: Read>(
    dbs: impl Into<Dbs<'k>>,
    decoder: &mut Decoder<R>,
    now: u64,
) -> Result<LoadStats, FormatError> {
    let mut stats = LoadStats {
        version: decoder.header()?,
        ..LoadStats::default()
    };
    let dbs = dbs.into();
    let mut db = Locked::lock_all(dbs.first, now, lru_clock(now));
    let mut history = HistoryFields::default();
    loop {
        match decoder.record()? {
            Record::End => break,
            Record::Function { code } => stats.functions.push(code),
            Record::SelectDb { db: index, offset } => {
                let keyspace = usize::try_from(index)
                    .ok()
                    .and_then(|i| dbs.get_or_create(i))
                    .ok_or(FormatError::DbOutOfRange {
                        db: index,
                        databases: dbs.count(),
                        offset,
                    })?;
                // One database's shards at a time: taking the next before letting the
                // previous go could meet a command's (database, shard) order backwards.
                drop(db);
                db = Locked::lock_all(keyspace, now, lru_clock(now));
            }
            Record::Aux { name, value } => {
                history.note(&name, &value);
                tracing::debug!(
                    name = %String::from_utf8_lossy(&name),
                    value = %String::from_utf8_lossy(&value),
                    "snapshot aux field"
                );
            }
            Record::Entry {
                key,
                expires_at,
                value,
                offset,
            } => {
                if expires_at != 0 && expires_at <= now {
                    stats.expired += 1;
                    continue;
                }
                let mut entry = Entry::new(value);
                entry.expires_at = expires_at;
                if db.insert(&key, entry).is_some() {
                    return Err(FormatError::Duplicate {
                        what: "key",
                        offset,
                    });
                }
                stats.keys += 1;
            }
        }
    }
    decoder.expect_end()?;
    stats.history = history.exact();
    // A file without it (an older node's): its stream named the database of every request
    // outside database 0, so 0 is right there.
    stats.history_stream_db = history.stream_db.unwrap_or(0) as usize;
    Ok(stats)
}
