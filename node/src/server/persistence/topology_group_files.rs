//! The topology group's files in the node's dir (`topology-group` naming the group,
//! `topology-raft.log` its Raft log): the cluster agent's [`GroupFiles`]. What their absence
//! or damage means is the agent's ([`crate::cluster::agent::store`]).

use super::topology_log::durable::{TopologyLogFile, FILE_NAME};
use crate::atomic_file::{self, Access};
use crate::cluster::agent::store::{GroupFiles, GroupStore};
use crate::cluster::consensus::log_file::{BoxedStores, LogFile};
use crate::cluster::consensus::LogStore;
use std::path::{Path, PathBuf};

pub const GROUP_FILE_NAME: &str = "topology-group";

/// The group file and the Raft log file in one directory.
#[derive(Debug)]
pub struct TopologyGroupFiles {
    group_path: PathBuf,
    log: BoxedStores<TopologyLogFile>,
}

impl TopologyGroupFiles {
    pub fn in_dir(dir: &Path) -> Self {
        TopologyGroupFiles {
            group_path: dir.join(GROUP_FILE_NAME),
            log: BoxedStores(TopologyLogFile::new(&dir.join(FILE_NAME))),
        }
    }
}

/// The agent's store of a node whose files are in `dir`.
pub fn group_store(dir: &Path) -> GroupStore {
    GroupStore::new(Box::new(TopologyGroupFiles::in_dir(dir)))
}

impl GroupFiles for TopologyGroupFiles {
    fn group_path(&self) -> &Path {
        &self.group_path
    }

    fn read_group(&self) -> std::io::Result<Option<String>> {
        match std::fs::read_to_string(&self.group_path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn write_group(&self, text: &str) -> std::io::Result<()> {
        atomic_file::write(&self.group_path, text.as_bytes(), Access::Default)
    }

    fn remove_group(&self) -> std::io::Result<()> {
        match std::fs::remove_file(&self.group_path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn log(&self) -> &dyn LogFile<Store = Box<dyn LogStore>> {
        &self.log
    }
}
