//! Where a node keeps its topology group across restarts: the Raft log (see
//! `consensus::log_file`) and a small file naming the group, both in the node's `dir`. A
//! restarted member reopens both and rejoins as the member it was (its term, its vote, the
//! entries it acknowledged); a node that left its group removes them. The files are
//! reached through [`GroupFiles`], which the server layer implements over the node's dir
//! (`server::persistence::topology_group_files`); what their absence or damage means is
//! decided here.

use crate::cluster::consensus::log_file::LogFile;
use crate::cluster::consensus::{LogError, LogStore, TopologyLog};
use crate::cluster::id::{HexId, NodeId};
use std::path::{Path, PathBuf};

/// The topology group's files, as this layer sees them.
pub trait GroupFiles: Send + Sync + std::fmt::Debug {
    /// The group file: where it is, for messages.
    fn group_path(&self) -> &Path;
    /// The group file's text; `Ok(None)` when there is no file.
    fn read_group(&self) -> std::io::Result<Option<String>>;
    /// Replaces the group file's text so that a crash leaves the old one or the new one.
    fn write_group(&self, text: &str) -> std::io::Result<()>;
    /// Removes the group file (no file is no error).
    fn remove_group(&self) -> std::io::Result<()>;
    /// The group's Raft log.
    fn log(&self) -> &dyn LogFile<Store = Box<dyn LogStore>>;
}

/// How to bring back a node whose topology files are lost or damaged: it cannot rejoin as
/// the member it was (it may have forgotten a vote), so it starts as a new node.
const RECOVERY: &str = "Refusing to start: a member that forgot its Raft state could break the group's \
    safety. To recover, remove nodes.conf, topology-group and topology-raft.log from the node's dir \
    and start it (it gets a new id), run CLUSTER FORGET <old id> on the other nodes, then CLUSTER \
    MEET it and give it its role again (CLUSTER REPLICATE or slots); its data can be loaded again \
    from a replica or a snapshot.";

/// A group a node was in when it stopped: its name, its log and the log's store.
pub type KeptGroup = (NodeId, TopologyLog, Box<dyn LogStore>);

#[derive(Debug)]
pub struct GroupStore {
    files: Box<dyn GroupFiles>,
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
    pub fn new(files: Box<dyn GroupFiles>) -> Self {
        GroupStore { files }
    }

    /// The group this node was in when it stopped, with its log; None if it was in none.
    /// `applied` is the topology version the node recorded (nodes.conf) before it stopped:
    /// the log must hold every entry up to it.
    pub fn open(
        &self,
        me: NodeId,
        seed: u64,
        applied: u64,
    ) -> Result<Option<KeptGroup>, StoreError> {
        let path = self.files.group_path().to_path_buf();
        let text = match self.files.read_group() {
            Ok(Some(t)) => t,
            Ok(None) => {
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
        let log_file = self.files.log();
        let log_path = log_file.path().to_path_buf();
        let Some((log, store)) = TopologyLog::open(me, log_file, seed)? else {
            return Err(StoreError::MissingLog { path: log_path });
        };
        if log.last_index() < applied {
            return Err(StoreError::LogBehind {
                path: log_path,
                last: log.last_index(),
                version: applied,
            });
        }
        Ok(Some((group, log, store)))
    }

    /// Makes a new log durable for `group` (any files of an earlier group go first); the
    /// store is returned for the driver to save each turn into.
    pub fn attach(
        &self,
        group: NodeId,
        log: TopologyLog,
    ) -> Result<(TopologyLog, Box<dyn LogStore>), StoreError> {
        self.forget()?;
        let (log, store) = log.with_file(self.files.log())?;
        self.files
            .write_group(group.as_str())
            .map_err(|error| StoreError::Io {
                path: self.files.group_path().to_path_buf(),
                error,
            })?;
        Ok((log, store))
    }

    /// This node is in no group any more.
    pub fn forget(&self) -> Result<(), StoreError> {
        self.files.remove_group().map_err(|error| StoreError::Io {
            path: self.files.group_path().to_path_buf(),
            error,
        })?;
        let log = self.files.log();
        log.remove().map_err(|error| StoreError::Io {
            path: log.path().to_path_buf(),
            error,
        })
    }
}
