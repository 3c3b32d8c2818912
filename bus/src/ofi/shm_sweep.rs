//! Removes the shared-memory regions that dead processes left behind.
//!
//! libfabric 1.17's shm provider backs each endpoint by a file in `/dev/shm` named
//! `<pid>:<n>:<n>` (16 MiB each, seen here) and unlinks it when the endpoint closes. A process
//! killed with SIGKILL, or exiting without closing its endpoints, leaves them: RAM that is
//! never freed (a run of the test suite left about 40, 640 MiB), and a later process that gets
//! the same pid fails `fi_enable` with EBUSY on a name that is already taken. So before its
//! first shm endpoint a process removes the regions of pids that no longer run, and its own
//! pid's (it has made none yet: any such file is a dead process's whose pid it inherited).
//!
//! Our own listeners' regions are named by address (`bus_<ip>_<port>`, see `kind.rs`) and
//! leak the same way; one is stale when no running process maps it and it is older than
//! [`NAMED_AGE_MIN`] (a region is mapped right after it is made). Those are swept only when
//! the maps of every process that could map them (processes of this user) could be read.
//!
//! Only files owned by this process's user, named exactly `<digits>:<digits>:<digits>` or
//! `bus_...`, are touched. Processes in another pid namespace that share this `/dev/shm` would look dead:
//! `BUS_SHM_SWEEP=0` turns the sweep off for such setups.

use std::path::Path;

/// The directory libfabric's shm regions live in.
const SHM_DIR: &str = "/dev/shm";
/// Files looked at per sweep: bounds the work on a host with a crowded `/dev/shm`.
const ENTRIES_MAX: usize = 100_000;
/// A named region younger than this is never taken for stale (it may be about to be mapped).
const NAMED_AGE_MIN: std::time::Duration = std::time::Duration::from_secs(30);
/// Prefix of the names our listeners give their shm endpoints.
const NAMED_PREFIX: &str = "bus_";

/// Runs the sweep once per process (later calls do nothing).
pub fn sweep_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var("BUS_SHM_SWEEP").is_ok_and(|v| v == "0") {
            return;
        }
        let removed = sweep(
            Path::new(SHM_DIR),
            std::process::id(),
            &|pid| Path::new(&format!("/proc/{pid}")).exists(),
            &mapped_shm_files,
        );
        if removed > 0 {
            tracing::info!(
                removed,
                "removed shm regions of processes that no longer run"
            );
        }
    });
}

/// The file names some running process maps (None: not known).
type MappedFiles = Option<std::collections::HashSet<String>>;

/// Removes from `dir` the regions of pids `running` says are gone, and `me`'s, and (when
/// `mapped` can tell which file names some process maps) our named regions nobody maps;
/// returns how many it removed. `mapped` reads every process's maps, so it is called only
/// for an old named region, at most once.
fn sweep(
    dir: &Path,
    me: u32,
    running: &dyn Fn(u32) -> bool,
    mapped: &dyn Fn() -> MappedFiles,
) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    // Without knowing whose files are ours, nothing is touched.
    let Some(uid) = current_uid() else {
        return 0;
    };
    let known_mapped = std::cell::OnceCell::new();
    let mut removed = 0;
    for entry in entries.flatten().take(ENTRIES_MAX) {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Ok(meta) = entry.metadata() else { continue };
        if std::os::unix::fs::MetadataExt::uid(&meta) != uid {
            continue;
        }
        let stale = match region_pid(name) {
            Some(pid) => pid == me || !running(pid),
            None if name.starts_with(NAMED_PREFIX) => {
                let old = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age >= NAMED_AGE_MIN);
                old && known_mapped
                    .get_or_init(mapped)
                    .as_ref()
                    .is_some_and(|m| !m.contains(name))
            }
            None => false,
        };
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The pid of a region file name `<pid>:<n>:<n>` (None: not one).
fn region_pid(name: &str) -> Option<u32> {
    let mut parts = name.split(':');
    let pid = parts.next()?;
    let (a, b) = (parts.next()?, parts.next()?);
    if parts.next().is_some() || !all_digits(pid) || !all_digits(a) || !all_digits(b) {
        return None;
    }
    pid.parse().ok()
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())
}

/// The names of the `/dev/shm` files some running process maps, from every
/// `/proc/<pid>/maps` (None: one could not be read, so nothing can be said).
fn mapped_shm_files() -> MappedFiles {
    let prefix = format!("{SHM_DIR}/");
    let mut names = std::collections::HashSet::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        if !entry.file_name().to_str().is_some_and(all_digits) {
            continue;
        }
        let maps = match std::fs::read_to_string(entry.path().join("maps")) {
            Ok(m) => m,
            // Gone meanwhile: it maps nothing any more.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            // Not ours to inspect (a sandbox's init, another user's process): our regions
            // are 0600 files of our user, mapped by processes of our user, whose maps we read.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => continue,
            Err(_) => return None,
        };
        for line in maps.lines() {
            if let Some(at) = line.find(&prefix) {
                let file = line[at + prefix.len()..].trim_end_matches(" (deleted)");
                names.insert(file.to_string());
            }
        }
    }
    Some(names)
}

/// This process's user id, from the owner of its `/proc/self` (None: no /proc, and then the
/// sweep removes nothing).
fn current_uid() -> Option<u32> {
    std::fs::metadata("/proc/self")
        .ok()
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_names_are_three_numbers() {
        assert_eq!(region_pid("1003:0:1"), Some(1003));
        assert_eq!(region_pid("7:12:0"), Some(7));
        for bad in [
            "1003:0",
            "1003:0:1:2",
            "a:0:1",
            "1003::1",
            "sem.x",
            "",
            "1003:0:1x",
        ] {
            assert_eq!(region_pid(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_dead_and_own_pids_regions_go() {
        let dir = std::env::temp_dir().join(format!("shm-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["10:0:1", "10:0:2", "20:0:1", "30:0:1", "other", "10:0"] {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
        // 10 is dead, 20 runs, 30 is this process.
        // No named region: the maps of every process are not read.
        let no_maps = || -> MappedFiles { panic!("maps read without a named region") };
        let removed = sweep(&dir, 30, &|pid| pid == 20 || pid == 30, &no_maps);
        assert_eq!(removed, 3);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["10:0", "20:0:1", "other"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_named_region_goes_only_when_old_and_mapped_by_nobody() {
        let dir = std::env::temp_dir().join(format!("shm-sweep-named-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let old = std::time::SystemTime::now() - 2 * NAMED_AGE_MIN;
        for name in ["bus_a_1", "bus_a_2", "bus_a_3"] {
            let f = std::fs::File::create(dir.join(name)).unwrap();
            if name != "bus_a_3" {
                f.set_modified(old).unwrap();
            }
        }
        let running = |_| true;
        // Unknown mappings: nothing named goes.
        assert_eq!(sweep(&dir, 1, &running, &|| None), 0);
        // bus_a_1 is mapped; bus_a_3 is new.
        let mapped = || Some(["bus_a_1".to_string()].into());
        assert_eq!(sweep(&dir, 1, &running, &mapped), 1);
        assert!(!dir.join("bus_a_2").exists());
        assert!(dir.join("bus_a_1").exists() && dir.join("bus_a_3").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn maps_are_readable_and_an_unmapped_file_is_not_listed() {
        // A file in /dev/shm that nobody maps is not in the set.
        let name = format!("{NAMED_PREFIX}sweep_test_{}", std::process::id());
        let path = Path::new(SHM_DIR).join(&name);
        let Ok(file) = std::fs::File::create(&path) else {
            return; // no /dev/shm here
        };
        file.set_len(4096).unwrap();
        let mapped = mapped_shm_files().expect("maps readable");
        assert!(!mapped.contains(&name));
        std::fs::remove_file(&path).unwrap();
    }
}
