//! Temp files a crashed process left behind (`temp-<pid>.snap`, `.nodes.conf.tmp-<pid>`):
//! each is written whole, fsynced and renamed over its target, so one still there after its
//! writer died is garbage. A file whose pid is still running is left alone: it may be
//! another process's save in progress (two nodes sharing a directory is a mistake, but not
//! one to make worse).

use std::path::Path;

/// Directory entries looked at, at most: a directory holding millions of files is not
/// searched to the end at every start.
const ENTRIES_SCANNED_MAX: usize = 100_000;

/// Removes `dir/<prefix><pid><suffix>` for every pid that is not a running process (other
/// than this one). Returns how many were removed; failures are logged, not fatal.
pub fn remove_stale(dir: &Path, prefix: &str, suffix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.take(ENTRIES_SCANNED_MAX).flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| writer_pid(n, prefix, suffix)) else {
            continue;
        };
        if pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => {
                tracing::warn!(path = %entry.path().display(), "removed a temp file a crash left");
                removed += 1;
            }
            Err(e) => {
                tracing::warn!(path = %entry.path().display(), error = %e, "cannot remove a stale temp file")
            }
        }
    }
    removed
}

/// The pid in `name` if it is `<prefix><digits><suffix>`.
fn writer_pid(name: &str, prefix: &str, suffix: &str) -> Option<u32> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_of_dead_writers_go() {
        let dir = tempfile::tempdir().unwrap();
        // pid 0 is never a process; this process is alive.
        let dead = dir.path().join("temp-4000000000.snap");
        let mine = dir.path().join(format!("temp-{}.snap", std::process::id()));
        let alive = dir.path().join("temp-1.snap"); // init
        let other = dir.path().join("temp-x1.snap");
        let data = dir.path().join("dump.snap");
        for p in [&dead, &mine, &alive, &other, &data] {
            std::fs::write(p, b"x").unwrap();
        }
        assert_eq!(remove_stale(dir.path(), "temp-", ".snap"), 1);
        assert!(!dead.exists());
        for p in [&mine, &alive, &other, &data] {
            assert!(p.exists(), "{}", p.display());
        }
    }

    #[test]
    fn names_are_matched_exactly() {
        assert_eq!(writer_pid("temp-12.snap", "temp-", ".snap"), Some(12));
        assert_eq!(writer_pid("temp-.snap", "temp-", ".snap"), None);
        assert_eq!(writer_pid("temp-12.snapx", "temp-", ".snap"), None);
        assert_eq!(
            writer_pid(".nodes.conf.tmp-7", ".nodes.conf.tmp-", ""),
            Some(7)
        );
        assert_eq!(
            writer_pid(".nodes.conf.tmp-99999999999", ".nodes.conf.tmp-", ""),
            None
        );
    }
}
