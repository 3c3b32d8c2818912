//! The ACL file (`aclfile`): one `user <name> <rules...>` line per user, as ACL SAVE writes
//! it and ACL LOAD reads it back (all or nothing). Written to a temporary file, mode 0600,
//! then renamed over the old one: a crash leaves the old file or the new one, and no other
//! local user can read the password hashes.

use super::catalog::Catalog;
use super::rules::Rules;
use super::{valid_username, USERS_MAX};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Largest ACL file read: USERS_MAX users with a few KiB of rules each.
pub const FILE_MAX: u64 = 64 * 1024 * 1024;

/// Parses an ACL file's text. Errors name the file and line, as Redis's do.
pub fn parse(
    text: &str,
    path: &str,
    catalog: &Catalog,
    all_channels_default: bool,
) -> Result<BTreeMap<String, Rules>, String> {
    let mut users = BTreeMap::new();
    let mut errors = String::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_ascii_whitespace().collect();
        if words[0] != "user" || words.len() < 2 {
            errors.push_str(&format!(
                "{path}:{}: line should start with user keyword. ",
                n + 1
            ));
            continue;
        }
        let name = words[1];
        if !valid_username(name.as_bytes()) {
            errors.push_str(&format!(
                "{path}:{}: Usernames can't contain spaces or null characters. ",
                n + 1
            ));
            continue;
        }
        if users.contains_key(name) {
            errors.push_str(&format!(
                "{path}:{}: Duplicate user '{name}' found. ",
                n + 1
            ));
            continue;
        }
        if users.len() >= USERS_MAX {
            errors.push_str(&format!("{path}:{}: too many users. ", n + 1));
            break;
        }
        // A user of a file starts as a new user does (its channels by acl-pubsub-default);
        // a file without `default` gives it its start-up rules (see `Acl::replace_all`).
        let mut rules = Rules::new(all_channels_default);
        let mut failed = false;
        for op in &words[2..] {
            if let Err(e) = rules.apply(catalog, op, all_channels_default) {
                errors.push_str(&format!(
                    "{path}:{}: Error in user declaration '{name}': {e}. ",
                    n + 1
                ));
                failed = true;
                break;
            }
        }
        if !failed {
            users.insert(name.to_string(), rules);
        }
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        Err(errors.trim_end().to_string())
    }
}

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

/// Writes `lines` to `path` atomically, mode 0600 (ACL SAVE).
pub fn write(path: &Path, lines: &[String]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp_name = format!(".{name}.tmp-{}", std::process::id());
    let temp = match dir {
        Some(d) => d.join(temp_name),
        None => Path::new(&temp_name).to_path_buf(),
    };
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)?;
        // An old temp file left with wider permissions keeps them through open(): narrow it.
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        for line in lines {
            f.write_all(line.as_bytes())?;
            f.write_all(b"\n")?;
        }
        f.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}
