//! Replacing a small file so that a crash leaves the old file or the new one, never a torn
//! mix: a temp file beside it (`.<name>.tmp-<pid>`), fsync, rename over the old one, fsync
//! of the directory (the rename is durable only once the directory entry is). The node's
//! small state files are all written this way (nodes.conf, the replication identity, the
//! topology group file, the ACL file, the cluster secret); a temp file a crash left is
//! removed at start by [`crate::stale_files`] with [`temp_prefix`].

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Who may read the new file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The process's umask decides (0666 before it), as for any new file.
    Default,
    /// Mode 0600: the file holds secrets (password hashes, the cluster secret).
    OwnerOnly,
}

/// The start of the temp file names [`write`] uses for `path` (the writer's pid follows),
/// for removing those a crash left.
pub fn temp_prefix(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    format!(".{name}.tmp-")
}

/// Replaces `path` with `bytes` atomically and durably (see the module doc).
pub fn write(path: &Path, bytes: &[u8], access: Access) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(format!("{}{}", temp_prefix(path), std::process::id()));
    // A temp file of this pid is a failed earlier write's: created anew rather than opened,
    // so that neither its permissions nor a link someone put in its place carry over.
    let _ = fs::remove_file(&tmp);
    let result = (|| {
        let mode = match access {
            Access::Default => 0o666,
            Access::OwnerOnly => 0o600,
        };
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        if access == Access::OwnerOnly {
            // The umask can only narrow 0600; set it anyway so the mode is stated once.
            f.set_permissions(fs::Permissions::from_mode(0o600))?;
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
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

    /// Goal: the new text replaces the old, no temp file is left, and a private file is
    /// made 0600 even over an old file others could read.
    #[test]
    fn a_write_replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        // A temp file an earlier failed write of this pid left, readable by others.
        let stale = dir
            .path()
            .join(format!("{}{}", temp_prefix(&path), std::process::id()));
        fs::write(&stale, "stale").unwrap();
        fs::set_permissions(&stale, fs::Permissions::from_mode(0o644)).unwrap();
        write(&path, b"new\n", Access::OwnerOnly).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// Goal: a write that cannot finish leaves the old file and no temp file.
    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        fs::write(&path, "old").unwrap();
        // Renaming over a directory fails after the temp file was written.
        let blocked = dir.path().join("sub");
        fs::create_dir(&blocked).unwrap();
        fs::write(blocked.join("x"), "x").unwrap();
        assert!(write(&blocked, b"new", Access::Default).is_err());
        assert_eq!(fs::read_to_string(&path).unwrap(), "old");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
