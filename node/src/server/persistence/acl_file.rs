//! The ACL file (`aclfile`) on disk: reading it for ACL LOAD and the start-up load, and
//! ACL SAVE's write (atomic, mode 0600: a crash leaves the old file or the new one, and no
//! other local user can read the password hashes). The format is
//! `node_state::acl::file`'s; this is its I/O, reached through
//! `node_state::services::AclFile`.

use crate::atomic_file::{self, Access};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Largest ACL file read: USERS_MAX users with a few KiB of rules each.
pub const FILE_MAX: u64 = 64 * 1024 * 1024;

/// Reads an ACL file (at most [`FILE_MAX`] bytes). A file other local users can read is
/// accepted with a warning: it holds password hashes, and ACL SAVE rewrites it 0600.
pub fn read(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("Error loading ACLs, opening file '{}': {e}", path.display()))?;
    if let Ok(meta) = file.metadata() {
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                "the ACL file can be read by other local users (it holds password hashes): chmod 600 it"
            );
        }
    }
    let mut text = String::new();
    // One byte over the limit tells an oversized file from one exactly at it.
    file.take(FILE_MAX + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("Error loading ACLs, reading '{}': {e}", path.display()))?;
    if text.len() as u64 > FILE_MAX {
        return Err(format!(
            "Error loading ACLs, '{}' is larger than {FILE_MAX} bytes",
            path.display()
        ));
    }
    Ok(text)
}

/// Replaces the file with `text` atomically, mode 0600 (ACL SAVE).
pub fn write(path: &Path, text: &str) -> std::io::Result<()> {
    atomic_file::write(path, text.as_bytes(), Access::OwnerOnly)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_state::acl::file::render;

    /// Goal: ACL SAVE's file is written whole and readable by its owner only, and reads
    /// back as written.
    #[test]
    fn the_acl_file_is_written_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.acl");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write(
            &path,
            &render(&["user default on nopass ~* &* +@all".into()]),
        )
        .unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(read(&path).unwrap(), "user default on nopass ~* &* +@all\n");
    }

    /// Goal: a missing file names itself in Redis's words.
    #[test]
    fn a_missing_acl_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = read(&dir.path().join("none.acl")).unwrap_err();
        assert!(
            e.starts_with("Error loading ACLs, opening file") && e.contains("none.acl"),
            "{e}"
        );
    }
}
