//! The cluster config file (nodes.conf) on disk: the cluster state's `ConfigStore`. Read
//! whole (bounded), replaced atomically (temp file, fsync, rename, fsync of the
//! directory); temp files a crashed writer left are removed when the store is opened, at
//! start. The text is `cluster::config_file`'s.

use crate::atomic_file::{self, Access};
use crate::cluster::config_file::CONFIG_FILE_MAX;
use crate::cluster::config_store::ConfigStore;
use crate::cluster::shared::StartError;
use crate::cluster::Cluster;
use crate::config::Config;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The config file at a path.
#[derive(Debug)]
pub struct NodesConfFile {
    path: PathBuf,
}

impl NodesConfFile {
    /// The store for `path`, after removing the temp files of writers that died.
    pub fn open(path: PathBuf) -> Self {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::stale_files::remove_stale(dir, &atomic_file::temp_prefix(&path), "");
        }
        NodesConfFile { path }
    }
}

/// The cluster state of a node started with `config`, kept in the config file it names;
/// a new node's ids come from the operating system's random source.
pub fn start_cluster(config: &Config) -> Result<Cluster, StartError> {
    use rand::SeedableRng as _;
    let store = NodesConfFile::open(config.cluster_config_path());
    Cluster::start(
        config,
        Box::new(store),
        &mut rand::rngs::StdRng::from_entropy(),
    )
}

impl ConfigStore for NodesConfFile {
    fn read(&self) -> std::io::Result<Option<String>> {
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut text = String::new();
        // One byte over the limit tells an oversized file from one exactly at it.
        file.take(CONFIG_FILE_MAX as u64 + 1)
            .read_to_string(&mut text)?;
        Ok(Some(text))
    }

    fn write(&self, text: &str) -> std::io::Result<()> {
        atomic_file::write(&self.path, text.as_bytes(), Access::Default)
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::config_store::{load, save};
    use crate::cluster::id::HexId;
    use crate::cluster::node::ClusterNode;
    use crate::cluster::Topology;
    use rand::SeedableRng;
    use std::fs;

    #[test]
    fn save_then_load_keeps_the_identity() {
        let dir = tempfile::tempdir().unwrap();
        let store = NodesConfFile::open(dir.path().join("nodes.conf"));
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        assert!(load(&store, &mut rng).unwrap().is_none());
        let mut t = Topology::new(ClusterNode::new(
            HexId::random(&mut rng),
            HexId::random(&mut rng),
        ));
        t.add_slots(&[(0, 100)]).unwrap();
        t.current_epoch = 5;
        save(&store, &t).unwrap();
        let back = load(&store, &mut rng).unwrap().unwrap();
        assert_eq!(back, t);
        // No temp file left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_corrupt_file_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodes.conf");
        fs::write(
            &path,
            "vars currentEpoch 0 lastVoteEpoch 0\nnot a node line\n",
        )
        .unwrap();
        let store = NodesConfFile::open(path.clone());
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let e = load(&store, &mut rng).unwrap_err().to_string();
        assert!(e.contains("nodes.conf") && e.contains("line 2"), "{e}");
        fs::write(&path, "").unwrap();
        assert!(load(&store, &mut rng).unwrap().is_none());
    }

    /// Goal: a file past the limit is refused, not read without end.
    #[test]
    fn an_oversized_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodes.conf");
        fs::write(&path, "x".repeat(CONFIG_FILE_MAX + 10)).unwrap();
        let store = NodesConfFile::open(path);
        assert_eq!(store.read().unwrap().unwrap().len(), CONFIG_FILE_MAX + 1);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let e = load(&store, &mut rng).unwrap_err().to_string();
        assert!(e.contains("larger than"), "{e}");
    }

    /// Goal: a temp file a dead writer left is removed when the store opens; one of a
    /// running process (this one) is kept.
    #[test]
    fn stale_temp_files_go_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodes.conf");
        let prefix = atomic_file::temp_prefix(&path);
        // Above the kernel's largest pid: never a running process.
        let dead = dir.path().join(format!("{prefix}4000000000"));
        let alive = dir.path().join(format!("{prefix}{}", std::process::id()));
        fs::write(&dead, "torn").unwrap();
        fs::write(&alive, "busy").unwrap();
        NodesConfFile::open(path);
        assert!(!dead.exists());
        assert!(alive.exists());
    }
}
