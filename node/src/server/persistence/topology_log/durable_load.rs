//! Loading the topology log file: its records replayed into raft's storage state with the
//! same rules raft-rs's storage follows (an entry replaces any at its index or after, a
//! snapshot replaces every entry). A record cut short or garbled at the very end (or followed
//! only by zeros, as a file system may leave after a crash) is a write the crash interrupted:
//! it was never acknowledged, so it is dropped and the file truncated before it. Anything
//! else that does not check out is [`DurableError::Corrupt`].

use super::durable::{FILE_BYTES_MAX, FILE_HEADER_LEN, MAGIC};
use super::durable_record::{Header, RecordKind, HEADER_LEN, RECORD_BYTES_MAX};
use crate::cluster::consensus::durable_error::{io, DurableError};
use crate::cluster::consensus::log_file::Loaded;
use crate::cluster::consensus::storage::StoredState;
use crate::cluster::id::HexId;
use protobuf::Message as _;
use raft::prelude::{Entry, HardState, Snapshot};
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// Reads the file at `path`; None when there is none.
pub fn load(path: &Path) -> Result<Option<Loaded>, DurableError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("cannot open", path)(e)),
    };
    // A rewrite that a crash interrupted left its temp file; the old file is intact.
    let _ = std::fs::remove_file(super::durable::temp_path(path));
    let file_len = file.metadata().map_err(io("cannot stat", path))?.len();
    if file_len > FILE_BYTES_MAX {
        return Err(DurableError::FileTooLarge {
            path: path.to_path_buf(),
            len: file_len,
            max: FILE_BYTES_MAX,
        });
    }
    let corrupt = |offset: u64, reason: String| DurableError::Corrupt {
        path: path.to_path_buf(),
        offset,
        reason,
    };
    let mut reader = BufReader::new(file);
    let mut header = [0u8; FILE_HEADER_LEN];
    // The file is created whole (temp file and link), so a short or foreign start is damage.
    if reader.read_exact(&mut header).is_err() || header[..MAGIC.len()] != *MAGIC {
        return Err(corrupt(0, "not a topology log file".into()));
    }
    let owner = HexId::parse(&header[MAGIC.len()..])
        .ok_or_else(|| corrupt(MAGIC.len() as u64, "owner is not a node id".into()))?;
    let mut replay = Replay::default();
    let mut offset = FILE_HEADER_LEN as u64;
    while offset < file_len {
        match read_record(&mut reader, file_len - offset).map_err(io("cannot read", path))? {
            Scanned::Record { kind, payload } => {
                replay
                    .apply(kind, &payload)
                    .map_err(|reason| corrupt(offset, reason))?;
                offset += (HEADER_LEN + payload.len()) as u64;
            }
            Scanned::Torn => break,
            Scanned::Bad { reason, end } => {
                if end != Some(file_len)
                    && !zeros_from(&mut reader, offset).map_err(io("cannot read", path))?
                {
                    return Err(corrupt(offset, reason));
                }
                break;
            }
        }
    }
    let dropped = file_len - offset;
    if dropped > 0 {
        tracing::warn!(path = %path.display(), offset, dropped, "topology log: dropping a record cut short by a crash");
        let f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io("cannot open", path))?;
        f.set_len(offset).map_err(io("cannot truncate", path))?;
        f.sync_all().map_err(io("cannot fsync", path))?;
    }
    Ok(Some(Loaded {
        owner,
        state: replay.finish(),
        dropped,
    }))
}

enum Scanned {
    Record {
        kind: RecordKind,
        payload: Vec<u8>,
    },
    /// The file ends inside this record.
    Torn,
    /// The record does not check out; `end` is where it claims to end, if plausible.
    Bad {
        reason: String,
        end: Option<u64>,
    },
}

fn read_record(reader: &mut BufReader<File>, remaining: u64) -> std::io::Result<Scanned> {
    if remaining < HEADER_LEN as u64 {
        return Ok(Scanned::Torn);
    }
    let at = reader.stream_position()?;
    let mut header = [0u8; HEADER_LEN];
    reader.read_exact(&mut header)?;
    let header = Header::parse(&header);
    if !header.is_intact() {
        return Ok(Scanned::Bad {
            reason: "header checksum mismatch".into(),
            end: None,
        });
    }
    let len = header.len as usize;
    if len > RECORD_BYTES_MAX {
        return Ok(Scanned::Bad {
            reason: format!("record length {len} over {RECORD_BYTES_MAX}"),
            end: None,
        });
    }
    let size = (HEADER_LEN + len) as u64;
    if size > remaining {
        return Ok(Scanned::Torn);
    }
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload)?;
    let end = Some(at + size);
    if !header.matches(&payload) {
        return Ok(Scanned::Bad {
            reason: "checksum mismatch".into(),
            end,
        });
    }
    match RecordKind::from_byte(header.kind) {
        Some(kind) => Ok(Scanned::Record { kind, payload }),
        None => Ok(Scanned::Bad {
            reason: format!("unknown record kind {}", header.kind),
            end: None,
        }),
    }
}

/// Whether every byte from `offset` to the end is zero.
fn zeros_from(reader: &mut BufReader<File>, offset: u64) -> std::io::Result<bool> {
    reader.seek(SeekFrom::Start(offset))?;
    let mut chunk = [0u8; 8192];
    loop {
        let n = reader.read(&mut chunk)?;
        if n == 0 {
            return Ok(true);
        }
        if chunk[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
    }
}

/// Raft's storage state, built record by record.
#[derive(Default)]
struct Replay {
    state: StoredState,
}

impl Replay {
    fn apply(&mut self, kind: RecordKind, payload: &[u8]) -> Result<(), String> {
        let s = &mut self.state;
        match kind {
            RecordKind::HardState => {
                s.hard_state = HardState::parse_from_bytes(payload).map_err(|e| e.to_string())?;
            }
            RecordKind::Entry => {
                let entry = Entry::parse_from_bytes(payload).map_err(|e| e.to_string())?;
                let first = s.snapshot.get_metadata().index + 1;
                let next = first + s.entries.len() as u64;
                if entry.index < first || entry.index > next {
                    return Err(format!(
                        "entry {} outside the log ({first}..={next})",
                        entry.index
                    ));
                }
                s.entries.truncate((entry.index - first) as usize);
                s.entries.push(entry);
            }
            RecordKind::Snapshot => {
                let snapshot = Snapshot::parse_from_bytes(payload).map_err(|e| e.to_string())?;
                let meta = snapshot.get_metadata();
                if meta.index == 0 || meta.index < s.snapshot.get_metadata().index {
                    return Err(format!("snapshot at {} goes backwards", meta.index));
                }
                // As raft's storage installs one: the entries go, the commit moves to it.
                s.hard_state.term = s.hard_state.term.max(meta.term);
                s.hard_state.commit = meta.index;
                s.entries.clear();
                s.snapshot = snapshot;
            }
        }
        Ok(())
    }

    /// The state, with the commit index inside the log: raft-rs refuses (panics on) one
    /// outside, and a commit noted lazily may lag or, after a torn tail, run past the log.
    fn finish(mut self) -> StoredState {
        let s = &mut self.state;
        let first = s.snapshot.get_metadata().index;
        let last = s.entries.last().map_or(first, |e| e.index);
        s.hard_state.commit = s.hard_state.commit.clamp(first, last);
        self.state
    }
}
