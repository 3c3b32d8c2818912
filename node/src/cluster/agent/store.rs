//! Where a node keeps its topology group across restarts: the Raft log file (see
//! `consensus::durable`) and a small file naming the group, both in the node's `dir`. A
//! restarted member reopens both and rejoins as the member it was (its term, its vote, the
//! entries it acknowledged); a node that left its group removes them.

use crate::cluster::consensus::durable::FILE_NAME;
use crate::cluster::consensus::{LogError, TopologyLog};
use crate::cluster::id::{HexId, NodeId};
use crate::cluster::persist::write_atomically;
use std::path::{Path, PathBuf};

pub const GROUP_FILE_NAME: &str = "topology-group";

#[derive(Clone, Debug)]
pub struct GroupStore {
    dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("topology group file {path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("topology group file {0} does not name a group")]
    BadGroup(PathBuf),
    #[error(transparent)]
    Log(#[from] LogError),
}

impl GroupStore {
    pub fn new(dir: &Path) -> Self {
        GroupStore {
            dir: dir.to_path_buf(),
        }
    }

    fn group_path(&self) -> PathBuf {
        self.dir.join(GROUP_FILE_NAME)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// The group this node was in when it stopped, with its log; None if it was in none.
    pub fn open(&self, me: NodeId, seed: u64) -> Result<Option<(NodeId, TopologyLog)>, StoreError> {
        let path = self.group_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(StoreError::Io { path, error }),
        };
        let group = HexId::parse(text.trim().as_bytes()).ok_or(StoreError::BadGroup(path))?;
        Ok(TopologyLog::open(me, &self.log_path(), seed)?.map(|log| (group, log)))
    }

    /// Makes a new log durable for `group` (any files of an earlier group go first).
    pub fn attach(&self, group: NodeId, log: TopologyLog) -> Result<TopologyLog, StoreError> {
        self.forget()?;
        let log = log.with_file(&self.log_path())?;
        let path = self.group_path();
        write_atomically(&path, group.as_str().as_bytes())
            .map_err(|error| StoreError::Io { path, error })?;
        Ok(log)
    }

    /// This node is in no group any more.
    pub fn forget(&self) -> Result<(), StoreError> {
        for path in [self.group_path(), self.log_path()] {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(StoreError::Io { path, error }),
            }
        }
        Ok(())
    }
}
