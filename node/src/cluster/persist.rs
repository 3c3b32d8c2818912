//! Reading and writing the cluster config file. Writes are atomic: a temp file in the same
//! directory, fsync, rename over the old file, fsync of the directory, so a crash leaves
//! either the old or the new file, never a torn one.

use super::config_file::{self, CONFIG_FILE_MAX};
use super::topology::Topology;
use rand::Rng;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cluster config file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cluster config file {path} is corrupt at {source}")]
    Corrupt {
        path: PathBuf,
        source: config_file::ParseError,
    },
}

/// Loads the file; Ok(None) when it does not exist or is empty (a new node), as Redis does.
pub fn load(path: &Path, rng: &mut impl Rng) -> Result<Option<Topology>, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mut text = String::new();
    // One byte over the limit tells an oversized file from one exactly at it.
    file.take(CONFIG_FILE_MAX as u64 + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    config_file::parse(&text, rng)
        .map(Some)
        .map_err(|source| LoadError::Corrupt {
            path: path.to_path_buf(),
            source,
        })
}

/// Writes the file atomically.
pub fn save(path: &Path, t: &Topology) -> std::io::Result<()> {
    write_atomically(path, config_file::render(t).as_bytes())
}

/// The start of the temp file names [`write_atomically`] uses for `path` (the writer's pid
/// follows), for removing those a crash left.
pub fn temp_prefix(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "nodes.conf".into());
    format!(".{name}.tmp-")
}

/// Replaces `path` with `bytes` so that a crash leaves the old file or the new one, never a
/// mix: temp file, fsync, rename, fsync of the directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(format!("{}{}", temp_prefix(path), std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        // The rename is durable only once the directory entry is.
        File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::id::HexId;
    use crate::cluster::node::ClusterNode;
    use rand::SeedableRng;

    #[test]
    fn save_then_load_keeps_the_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodes.conf");
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        assert!(load(&path, &mut rng).unwrap().is_none());
        let mut t = Topology::new(ClusterNode::new(
            HexId::random(&mut rng),
            HexId::random(&mut rng),
        ));
        t.add_slots(&[(0, 100)]).unwrap();
        t.current_epoch = 5;
        save(&path, &t).unwrap();
        let back = load(&path, &mut rng).unwrap().unwrap();
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
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let e = load(&path, &mut rng).unwrap_err().to_string();
        assert!(e.contains("nodes.conf") && e.contains("line 2"), "{e}");
        fs::write(&path, "").unwrap();
        assert!(load(&path, &mut rng).unwrap().is_none());
    }
}
