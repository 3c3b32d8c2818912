//! The replication identity file `<dir>/repl-identity` on disk: reading it at start and the
//! [`IdentityStore`] that `node_state::replication` writes it through whenever the ids
//! change. The format and what it means are `node_state::identity`; this is its I/O.

use crate::node_state::identity::{Identity, IdentityStore};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The file's name in `dir`.
pub const IDENTITY_FILE: &str = "repl-identity";
/// Largest file read: a few short lines; anything bigger is not ours.
pub const IDENTITY_FILE_MAX: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is corrupt: {fault} (the node will not start over it; remove it to start without a replication history)")]
    Corrupt { path: PathBuf, fault: String },
}

/// The identity file's path in `dir`.
pub fn path_in(dir: &Path) -> PathBuf {
    dir.join(IDENTITY_FILE)
}

/// Reads the file: `Ok(None)` when there is none (a node that never started with this
/// build, or whose operator removed it).
pub fn load(path: &Path) -> Result<Option<Identity>, IdentityError> {
    let read = |source| IdentityError::Read {
        path: path.to_path_buf(),
        source,
    };
    let corrupt = |fault: String| IdentityError::Corrupt {
        path: path.to_path_buf(),
        fault,
    };
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read(e)),
    };
    let mut bytes = Vec::new();
    // One byte over the limit tells an oversized file from one exactly at it.
    file.take(IDENTITY_FILE_MAX as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    if bytes.len() > IDENTITY_FILE_MAX {
        return Err(corrupt(format!("larger than {IDENTITY_FILE_MAX} bytes")));
    }
    let text = std::str::from_utf8(&bytes).map_err(|_| corrupt("not UTF-8".into()))?;
    Identity::parse(text).map(Some).map_err(corrupt)
}

/// Writes the file atomically (temp file, fsync, rename, fsync of the directory).
pub fn save(path: &Path, identity: &Identity) -> std::io::Result<()> {
    crate::atomic_file::write(
        path,
        identity.encode().as_bytes(),
        crate::atomic_file::Access::Default,
    )
}

/// The identity file at a path, as the replication state's store.
pub struct IdentityFile(pub PathBuf);

impl IdentityStore for IdentityFile {
    fn save(&self, identity: &Identity) -> std::io::Result<()> {
        save(&self.0, identity)
    }
    fn describe(&self) -> String {
        self.0.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_state::identity::{RunState, Succession};
    use crate::replication::ids::{ReplId, ReplicationIds};

    fn id(c: u8) -> ReplId {
        ReplId::parse(&[c; 40]).unwrap()
    }

    fn sample() -> Identity {
        Identity {
            node: Some(id(b'a')),
            ids: ReplicationIds::from_parts(id(b'b'), Some((id(b'c'), 42))),
            offset: 1234,
            primary: Some(id(b'a')),
            epoch: 7,
            succeeds: Some(Succession {
                old: id(b'9'),
                new: id(b'b'),
            }),
            state: RunState::Stopped,
            stream_db: 0,
        }
    }

    #[test]
    fn the_file_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path());
        assert_eq!(load(&path).unwrap(), None);
        for identity in [
            sample(),
            Identity {
                node: None,
                ids: ReplicationIds::with_replid(id(b'd')),
                primary: None,
                succeeds: None,
                state: RunState::Running,
                ..sample()
            },
        ] {
            save(&path, &identity).unwrap();
            assert_eq!(load(&path).unwrap(), Some(identity));
        }
    }

    #[test]
    fn oversized_and_corrupt_files_refuse() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_in(dir.path());
        let good = sample().encode();
        let cases: Vec<(String, &str)> = vec![
            (good.replace("offset 1234", "offset x"), "offset"),
            (good.replace("replid bbbb", "replid zzzz"), "replid"),
            (good.replace("state stopped", "state maybe"), "state"),
            (good.replace("version 1", "version 2"), "version"),
            (good.replace("epoch 7\n", ""), "no epoch"),
            (format!("{good}offset 5\n"), "twice"),
            (good.replace("replid2 cccc", "replid2"), "replid2"),
            (
                good.replace(&format!(" {}\nstate", "b".repeat(40)), "\nstate"),
                "succeeds",
            ),
            (good.replace("succeeds 9999", "succeeds zzzz"), "succeeds"),
            ("x".repeat(IDENTITY_FILE_MAX + 1), "larger"),
            ("nonsense".into(), "without a value"),
        ];
        for (text, fault) in cases {
            std::fs::write(&path, &text).unwrap();
            let e = load(&path).unwrap_err().to_string();
            assert!(
                e.contains(fault) && e.contains(IDENTITY_FILE),
                "{fault}: {e}"
            );
        }
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("UTF-8"));
    }

    #[test]
    fn the_store_writes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = IdentityFile(path_in(dir.path()));
        store.save(&sample()).unwrap();
        assert_eq!(load(&store.0).unwrap(), Some(sample()));
        assert!(store.describe().ends_with(IDENTITY_FILE));
    }
}
