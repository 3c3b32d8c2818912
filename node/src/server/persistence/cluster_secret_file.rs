//! The cluster secret file `cluster-secret` in the node's `dir` on disk: read at start
//! (refused when other users may read it), written by CLUSTER SET-SECRET through
//! `node_state::services::ClusterSecretFile` (0600, atomically and durably). The text and
//! which secret a start takes are `cluster::secret`'s.

use crate::atomic_file::{self, Access};
use crate::cluster::secret::{self, SecretFileError};
use crate::config::Config;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The file's name in the node's `dir`.
pub const SECRET_FILE: &str = "cluster-secret";

pub fn path_in(dir: &Path) -> PathBuf {
    dir.join(SECRET_FILE)
}

/// At start: a node whose config names no secret takes the one saved in its `dir` (see
/// `cluster::secret::adopt`).
pub fn adopt(config: &mut Config) -> Result<(), SecretFileError> {
    let saved = load(&config.dir, crate::config::params::CLUSTER_SECRET_MAX)?;
    let path = path_in(&config.dir);
    secret::adopt(config, saved, &path);
    Ok(())
}

/// The secret saved in `dir`, if any.
pub fn load(dir: &Path, max_len: usize) -> Result<Option<String>, SecretFileError> {
    let path = path_in(dir);
    let io = |source| SecretFileError::Io {
        path: path.clone(),
        source,
    };
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SecretFileError::Readable { path, mode });
    }
    let mut text = String::new();
    // A line and its newline, and one byte more to tell a longer file.
    std::fs::File::open(&path)
        .and_then(|f| f.take(max_len as u64 + 2).read_to_string(&mut text))
        .map_err(io)?;
    match secret::parse(&text, max_len) {
        Some(s) => Ok(Some(s.to_string())),
        None => Err(SecretFileError::Malformed { path }),
    }
}

/// Saves `secret` in `dir` durably: a 0600 temp file, synced, renamed over, the dir synced.
pub fn save(dir: &Path, secret: &str) -> Result<(), SecretFileError> {
    let path = path_in(dir);
    atomic_file::write(&path, secret::render(secret).as_bytes(), Access::OwnerOnly)
        .map_err(|source| SecretFileError::Io { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: a saved secret loads back, and the file is the owner's only.
    #[test]
    fn a_saved_secret_loads_back_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path(), 256).unwrap().is_none());
        save(dir.path(), "0123456789abcdef0123").unwrap();
        assert_eq!(
            load(dir.path(), 256).unwrap().as_deref(),
            Some("0123456789abcdef0123")
        );
        let mode = std::fs::metadata(path_in(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    /// Goal: a file others may read, or one that is not a secret, stops the start.
    #[test]
    fn a_readable_or_malformed_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), "0123456789abcdef0123").unwrap();
        let path = path_in(dir.path());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            load(dir.path(), 256),
            Err(SecretFileError::Readable { .. })
        ));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        for bad in ["a\nb\n".to_string(), String::new(), "x".repeat(300)] {
            std::fs::write(&path, &bad).unwrap();
            assert!(
                matches!(
                    load(dir.path(), 256),
                    Err(SecretFileError::Malformed { .. })
                ),
                "{bad:?}"
            );
        }
    }

    /// Goal: a start without a configured secret takes the saved one.
    #[test]
    fn adopt_reads_the_saved_secret() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), "0123456789abcdef0123").unwrap();
        let mut config = Config {
            dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        adopt(&mut config).unwrap();
        assert_eq!(config.cluster.secret, "0123456789abcdef0123");
    }
}
