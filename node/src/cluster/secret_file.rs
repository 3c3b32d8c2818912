//! The cluster secret a node was given at run time (`CLUSTER SET-SECRET`, which
//! `operator cluster create` sends to nodes started without one), kept in `cluster-secret`
//! in the node's `dir` so that a restart keeps talking to its cluster. The file is created
//! 0600 and refused at start when other users may read it: the secret is what keeps a local
//! process off the bus.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file's name in the node's `dir`.
pub const SECRET_FILE: &str = "cluster-secret";
/// Shortest secret a node takes at run time (bytes of text): an operator's typo or a
/// placeholder must not become the cluster's only protection.
pub const SECRET_MIN: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} may be read by other users (mode {mode:o}); chmod 600 it")]
    Readable { path: PathBuf, mode: u32 },
    #[error("{path} does not hold a usable secret (empty, too long or not one line)")]
    Malformed { path: PathBuf },
}

pub fn path_in(dir: &Path) -> PathBuf {
    dir.join(SECRET_FILE)
}

/// At start: a node whose config names no secret takes the one saved in its `dir`; a config
/// that names one wins (a saved one that differs is reported).
pub fn adopt(config: &mut crate::config::Config) -> Result<(), SecretFileError> {
    let saved = load(&config.dir, crate::config::params::CLUSTER_SECRET_MAX)?;
    match saved {
        Some(saved) if config.cluster.secret.is_empty() => {
            tracing::info!(path = %path_in(&config.dir).display(), "cluster secret loaded");
            config.cluster.secret = saved;
        }
        Some(saved) if saved != config.cluster.secret => tracing::warn!(
            path = %path_in(&config.dir).display(),
            "the config's cluster-secret differs from the one saved in dir; the config's is used"
        ),
        _ => {}
    }
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
    let text = std::fs::read_to_string(&path).map_err(io)?;
    let secret = text.strip_suffix('\n').unwrap_or(&text);
    if secret.is_empty() || secret.len() > max_len || secret.contains(['\n', '\r']) {
        return Err(SecretFileError::Malformed { path });
    }
    Ok(Some(secret.to_string()))
}

/// Saves `secret` in `dir` durably: a 0600 temp file, synced, renamed over, the dir synced.
pub fn save(dir: &Path, secret: &str) -> Result<(), SecretFileError> {
    let path = path_in(dir);
    let temp = dir.join(format!(".{SECRET_FILE}.tmp-{}", std::process::id()));
    let io = |source| SecretFileError::Io {
        path: path.clone(),
        source,
    };
    let _ = std::fs::remove_file(&temp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .map_err(io)?;
    file.write_all(secret.as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.sync_all())
        .map_err(io)?;
    drop(file);
    std::fs::rename(&temp, &path).map_err(io)?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io)?;
    Ok(())
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
        std::fs::write(&path, "a\nb\n").unwrap();
        assert!(matches!(
            load(dir.path(), 256),
            Err(SecretFileError::Malformed { .. })
        ));
        std::fs::write(&path, "").unwrap();
        assert!(matches!(
            load(dir.path(), 256),
            Err(SecretFileError::Malformed { .. })
        ));
    }
}
