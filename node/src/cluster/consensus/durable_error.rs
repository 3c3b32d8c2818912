//! Errors of a topology log's store ([`super::log_file::LogFile`], [`super::LogStore`]):
//! the node's file (`server::persistence::topology_log`) names itself in them. Clone and comparable like
//! [`LogError`](super::LogError), which carries them, so I/O errors keep their kind and text
//! rather than the `std::io::Error` itself.

use crate::cluster::id::NodeId;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurableError {
    #[error("{what} {path}: {message}")]
    Io {
        what: &'static str,
        path: PathBuf,
        kind: std::io::ErrorKind,
        message: String,
    },
    /// `with_file` never overwrites a file: it may hold a vote this node must keep (open it).
    #[error("{0} already exists: open it instead of starting a new log over it")]
    Exists(PathBuf),
    /// Damage that is not a write cut short by a crash: the file cannot be trusted.
    #[error("{path} is corrupt at byte {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    /// The file is another node's log (the node id changed, or a directory was copied).
    #[error("{path} is the topology log of node {owner}")]
    OtherNode { path: PathBuf, owner: NodeId },
    #[error("record of {len} bytes, at most {max}")]
    RecordTooLarge { len: usize, max: usize },
    #[error("{path} holds {len} bytes, at most {max}")]
    FileTooLarge { path: PathBuf, len: u64, max: u64 },
    #[error("encoding a record: {0}")]
    Encode(String),
    /// An earlier write failed part way: appending more could bury a torn record mid-file.
    #[error("an earlier write to the log file failed; reopen it")]
    Failed,
}

/// Wraps an I/O error with what was being done and to which file.
pub fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> DurableError {
    let path = path.to_path_buf();
    move |e| DurableError::Io {
        what,
        path,
        kind: e.kind(),
        message: e.to_string(),
    }
}
