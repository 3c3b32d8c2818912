//! Where a node keeps its topology group across restarts: the Raft log file (see
//! `consensus::durable`) and a small file naming the group, both in the node's `dir`. A
//! restarted member reopens both and rejoins as the member it was (its term, its vote, the
//! entries it acknowledged); a node that left its group removes them.

use crate::atomic_file::{self, Access};
use crate::cluster::consensus::durable::{DurableLog, FILE_NAME};
use crate::cluster::consensus::{LogError, TopologyLog};
use crate::cluster::id::{HexId, NodeId};
use std::path::{Path, PathBuf};

pub const GROUP_FILE_NAME: &str = "topology-group";

/// How to bring back a node whose topology files are lost or damaged: it cannot rejoin as
/// the member it was (it may have forgotten a vote), so it starts as a new node.
const RECOVERY: &str = "Refusing to start: a member that forgot its Raft state could break the group's \
    safety. To recover, remove nodes.conf, topology-group and topology-raft.log from the node's dir \
    and start it (it gets a new id), run CLUSTER FORGET <old id> on the other nodes, then CLUSTER \
    MEET it and give it its role again (CLUSTER REPLICATE or slots); its data can be loaded again \
    from a replica or a snapshot.";

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
    /// The config file says the node applied entries of a group's log, but no group file
    /// is there: the node would start as if it had never been a member, while the group
    /// still counts it (and its vote).
    #[error("the cluster config file records topology version {version} but the topology group file {path} is missing. {RECOVERY}")]
    MissingGroup { path: PathBuf, version: u64 },
    #[error(
        "the topology group file names a group but its Raft log {path} is missing. {RECOVERY}"
    )]
    MissingLog { path: PathBuf },
    /// The log ends before entries the node applied (and so acknowledged to its group):
    /// damage that cut more than a torn last write.
    #[error("the Raft log {path} ends at index {last} but this node applied the topology up to {version}. {RECOVERY}")]
    LogBehind {
        path: PathBuf,
        last: u64,
        version: u64,
    },
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
    /// `applied` is the topology version the node recorded (nodes.conf) before it stopped:
    /// the log must hold every entry up to it.
    pub fn open(
        &self,
        me: NodeId,
        seed: u64,
        applied: u64,
    ) -> Result<Option<(NodeId, TopologyLog, DurableLog)>, StoreError> {
        let path = self.group_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if applied > 0 {
                    return Err(StoreError::MissingGroup {
                        path,
                        version: applied,
                    });
                }
                return Ok(None);
            }
            Err(error) => return Err(StoreError::Io { path, error }),
        };
        let group = HexId::parse(text.trim().as_bytes()).ok_or(StoreError::BadGroup(path))?;
        let log_path = self.log_path();
        let Some((log, file)) = TopologyLog::open(me, &log_path, seed)? else {
            return Err(StoreError::MissingLog { path: log_path });
        };
        if log.last_index() < applied {
            return Err(StoreError::LogBehind {
                path: log_path,
                last: log.last_index(),
                version: applied,
            });
        }
        Ok(Some((group, log, file)))
    }

    /// Makes a new log durable for `group` (any files of an earlier group go first); the
    /// file is returned for the driver to save each turn into.
    pub fn attach(
        &self,
        group: NodeId,
        log: TopologyLog,
    ) -> Result<(TopologyLog, DurableLog), StoreError> {
        self.forget()?;
        let (log, file) = log.with_file(&self.log_path())?;
        let path = self.group_path();
        atomic_file::write(&path, group.as_str().as_bytes(), Access::Default)
            .map_err(|error| StoreError::Io { path, error })?;
        Ok((log, file))
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
