//! The topology log's file (`<dir>/topology-raft.log`): what a voter must never forget across
//! a restart (term, vote, entries it acknowledged, the snapshot it holds) as framed records
//! ([`super::durable_record`]) appended to one file.
//!
//! - Each ready turn appends its new entries and hard state, then fsyncs once; the driver
//!   saves a turn ([`LogStore::save`]) before it sends the messages that acknowledge them or
//!   applies anything of the turn (raft-rs's persisted-messages rule).
//! - A commit index learned after the turn is only noted; it goes out with the next write.
//!   Raft does not need it for safety (the leader tells it again), it only spares re-learning.
//! - A snapshot (installed or taken) rewrites the file atomically (temp file, fsync, rename,
//!   fsync of the directory) with the snapshot, the entries after it and the hard state; so
//!   does a file that grew past [`REWRITE_RECORDS_MAX`] records or [`REWRITE_BYTES_MAX`].
//! - Loading ([`super::durable_load`]) replays the records; a record cut short at the end is a
//!   crash mid-append and is dropped, damage anywhere else is [`DurableError::Corrupt`].
//!
//! [`TopologyLogFile`] is the file at a path as the consensus layer sees it (its
//! [`LogFile`]); [`DurableLog`] is the file open for saving turns (its [`LogStore`]).

use super::durable_record::{encode, RecordKind};
use crate::cluster::consensus::durable_error::{io, DurableError};
use crate::cluster::consensus::log::LOG_ENTRIES_MAX;
use crate::cluster::consensus::log_file::{Loaded, LogFile};
use crate::cluster::consensus::log_store::{LogStore, Persist};
use crate::cluster::consensus::storage::{StoredState, TopologyStorage};
use crate::cluster::id::{NodeId, ID_LEN};
use raft::prelude::{Entry, HardState};
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The file's first bytes: what it is and the record format's version.
pub const MAGIC: &[u8; 9] = b"TOPORAFT\x01";

/// The magic, then the owner's node id (40 hex digits): a log is one node's memory of its
/// votes and must not be taken up by another (a node id reset, a copied directory).
pub const FILE_HEADER_LEN: usize = MAGIC.len() + ID_LEN;

pub fn file_header(owner: &NodeId) -> Vec<u8> {
    let mut header = MAGIC.to_vec();
    header.extend_from_slice(owner.as_bytes());
    header
}

/// The usual file name, inside the node's directory.
pub const FILE_NAME: &str = "topology-raft.log";

/// Records appended since the last rewrite before the next turn rewrites: hard-state records
/// pile up (one per vote or commit), entries are replaced on conflicts; a rewrite keeps only
/// the live ones. Several times the entries a snapshot leaves, so rewrites stay rare.
pub const REWRITE_RECORDS_MAX: usize = 4 * LOG_ENTRIES_MAX as usize;

/// File bytes past which the next turn rewrites (large replaced entries).
pub const REWRITE_BYTES_MAX: u64 = 128 * 1024 * 1024;

/// Largest file a load accepts (a load holds the live entries in memory). A turn rewrites
/// once the file passes REWRITE_BYTES_MAX, and the live state a rewrite leaves is at most
/// about LOG_ENTRIES_MAX entries of up to 96 KiB, the uncommitted entries and a snapshot
/// (about 100 MiB): a file past this was not written by this code.
pub const FILE_BYTES_MAX: u64 = 2 * REWRITE_BYTES_MAX + 128 * 1024 * 1024;

/// The topology log file at a path: where a node's log is kept across restarts.
#[derive(Clone, Debug)]
pub struct TopologyLogFile {
    path: PathBuf,
}

impl TopologyLogFile {
    pub fn new(path: &Path) -> Self {
        TopologyLogFile {
            path: path.to_path_buf(),
        }
    }
}

impl LogFile for TopologyLogFile {
    type Store = DurableLog;

    fn path(&self) -> &Path {
        &self.path
    }

    fn load(&self) -> Result<Option<Loaded>, DurableError> {
        super::durable_load::load(&self.path)
    }

    fn create(&self, owner: &NodeId, state: &StoredState) -> Result<DurableLog, DurableError> {
        DurableLog::create(&self.path, owner, state)
    }

    fn reopen(&self, owner: &NodeId) -> Result<DurableLog, DurableError> {
        DurableLog::append_to(&self.path, owner)
    }

    fn remove(&self) -> std::io::Result<()> {
        match fs::remove_file(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

pub struct DurableLog {
    path: PathBuf,
    owner: NodeId,
    /// Opened for appending.
    file: File,
    /// Bytes in the file (all synced: records wait in `pending` until a sync).
    len: u64,
    pending: Vec<u8>,
    /// A commit index learned after a turn, written ahead of the next records.
    noted: Option<HardState>,
    records_since_rewrite: usize,
    /// Rewrites since this file was opened or created.
    rewrites: u64,
    /// Set by a failed write: nothing more may be appended.
    failed: bool,
}

impl std::fmt::Debug for DurableLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableLog")
            .field("path", &self.path)
            .field("len", &self.len)
            .finish()
    }
}

impl DurableLog {
    /// Creates `owner`'s file holding `state`; refuses an existing one (it may hold a vote).
    pub fn create(path: &Path, owner: &NodeId, state: &StoredState) -> Result<Self, DurableError> {
        if path.exists() {
            return Err(DurableError::Exists(path.to_path_buf()));
        }
        let tmp = write_temp(path, owner, state)?;
        // A hard link fails if the name exists, so a file made meanwhile is not clobbered.
        let linked = fs::hard_link(&tmp, path);
        let _ = fs::remove_file(&tmp);
        linked.map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => DurableError::Exists(path.to_path_buf()),
            _ => io("cannot link", path)(e),
        })?;
        sync_dir(path)?;
        Self::append_to(path, owner)
    }

    /// The file at `path`, already loaded (see [`super::durable_load::load`]), for appending.
    pub fn append_to(path: &Path, owner: &NodeId) -> Result<Self, DurableError> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io("cannot open", path))?;
        let len = file.metadata().map_err(io("cannot stat", path))?.len();
        Ok(DurableLog {
            path: path.to_path_buf(),
            owner: *owner,
            file,
            len,
            pending: Vec::new(),
            noted: None,
            records_since_rewrite: 0,
            rewrites: 0,
            failed: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes on disk.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Rewrites since this file was opened or created.
    pub fn rewrites(&self) -> u64 {
        self.rewrites
    }

    /// Whether the file holds no record (only its header).
    pub fn is_empty(&self) -> bool {
        self.len <= FILE_HEADER_LEN as u64
    }

    /// Persists one ready turn: rewrites when `snapshot_installed` or the file is due for it,
    /// else appends `entries` and `hard_state`; fsyncs either way when anything was written.
    pub fn save_turn(
        &mut self,
        store: &TopologyStorage,
        snapshot_installed: bool,
        entries: &[Entry],
        hard_state: Option<&HardState>,
    ) -> Result<(), DurableError> {
        self.check()?;
        let due =
            self.records_since_rewrite >= REWRITE_RECORDS_MAX || self.len >= REWRITE_BYTES_MAX;
        if snapshot_installed || due {
            return self.rewrite_from(store);
        }
        if entries.is_empty() && hard_state.is_none() {
            return Ok(());
        }
        if let Some(noted) = self.noted.take() {
            if hard_state.is_none() {
                self.push(RecordKind::HardState, &noted)?;
            }
        }
        for entry in entries {
            self.push(RecordKind::Entry, entry)?;
        }
        if let Some(hs) = hard_state {
            self.push(RecordKind::HardState, hs)?;
        }
        self.sync()
    }

    /// Notes a commit index raft learned after the turn's write; no fsync of its own.
    pub fn note_hard_state(&mut self, hard_state: HardState) {
        self.noted = Some(hard_state);
    }

    /// Replaces the file with `store`'s state (snapshot, entries after it, hard state).
    pub fn rewrite_from(&mut self, store: &TopologyStorage) -> Result<(), DurableError> {
        self.check()?;
        let state = store
            .stored_state()
            .map_err(|e| DurableError::Encode(e.to_string()))?;
        self.rewrite(&state)
    }

    pub fn rewrite(&mut self, state: &StoredState) -> Result<(), DurableError> {
        self.check()?;
        self.failed = true;
        let tmp = write_temp(&self.path, &self.owner, state)?;
        fs::rename(&tmp, &self.path).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            io("cannot rename the new log file to", &self.path)(e)
        })?;
        sync_dir(&self.path)?;
        let rewrites = self.rewrites + 1;
        *self = Self::append_to(&self.path, &self.owner)?;
        self.rewrites = rewrites;
        Ok(())
    }

    fn push<M: protobuf::Message>(
        &mut self,
        kind: RecordKind,
        message: &M,
    ) -> Result<(), DurableError> {
        let payload = message
            .write_to_bytes()
            .map_err(|e| DurableError::Encode(e.to_string()))?;
        encode(kind, &payload, &mut self.pending).inspect_err(|_| self.pending.clear())?;
        self.records_since_rewrite += 1;
        Ok(())
    }

    /// Writes the pending records and fsyncs. A failure leaves the file unusable for appends
    /// (part of a record may be on disk); reopening drops that torn tail.
    fn sync(&mut self) -> Result<(), DurableError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.failed = true;
        self.file
            .write_all(&self.pending)
            .map_err(io("cannot append to", &self.path))?;
        self.file
            .sync_data()
            .map_err(io("cannot fsync", &self.path))?;
        self.len += self.pending.len() as u64;
        self.pending.clear();
        self.failed = false;
        Ok(())
    }

    fn check(&self) -> Result<(), DurableError> {
        if self.failed {
            Err(DurableError::Failed)
        } else {
            Ok(())
        }
    }
}

/// Writes `state` to a temp file beside `path` and fsyncs it; returns the temp file's path.
fn write_temp(path: &Path, owner: &NodeId, state: &StoredState) -> Result<PathBuf, DurableError> {
    let tmp = temp_path(path);
    let result = (|| {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io("cannot create", &tmp))?;
        let mut out = BufWriter::new(file);
        let mut buf = file_header(owner);
        if !state.snapshot.is_empty() {
            encode(RecordKind::Snapshot, &bytes(&state.snapshot)?, &mut buf)?;
        }
        for entry in &state.entries {
            encode(RecordKind::Entry, &bytes(entry)?, &mut buf)?;
            // Flush as it goes: the entries may run to many megabytes.
            out.write_all(&buf).map_err(io("cannot write", &tmp))?;
            buf.clear();
        }
        encode(RecordKind::HardState, &bytes(&state.hard_state)?, &mut buf)?;
        out.write_all(&buf).map_err(io("cannot write", &tmp))?;
        let file = out
            .into_inner()
            .map_err(|e| io("cannot write", &tmp)(e.into_error()))?;
        file.sync_all().map_err(io("cannot fsync", &tmp))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map(|()| tmp)
}

impl LogStore for DurableLog {
    fn save(&mut self, persist: &Persist, memory: &TopologyStorage) -> Result<(), DurableError> {
        match persist {
            Persist::Turn {
                snapshot_installed,
                entries,
                hard_state,
                commit_learned,
            } => {
                self.save_turn(memory, *snapshot_installed, entries, hard_state.as_ref())?;
                if let Some(hs) = commit_learned {
                    self.note_hard_state(hs.clone());
                }
                Ok(())
            }
            Persist::Rewrite => self.rewrite_from(memory),
        }
    }
}

/// Where a rewrite is staged: beside the file, so the rename stays on one file system.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| FILE_NAME.into());
    path.with_file_name(format!(".{name}.tmp"))
}

fn bytes<M: protobuf::Message>(message: &M) -> Result<Vec<u8>, DurableError> {
    message
        .write_to_bytes()
        .map_err(|e| DurableError::Encode(e.to_string()))
}

/// A rename or a new name is durable only once its directory is.
fn sync_dir(path: &Path) -> Result<(), DurableError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("cannot fsync directory", dir))
}
