//! The replication identity file `<dir>/repl-identity`: which history this node's dataset
//! belongs to, and whether the process stopped cleanly after saving it. A restart compares
//! it with what the snapshot (later also the AOF) loaded to tell whether the node still
//! holds everything it had ([`LoadedHistory::covered`]).
//!
//! Text, one `key value` per line:
//!
//! ```text
//! version 1
//! node <node id | ->
//! replid <40 hex>
//! replid2 <40 hex | -> <second replid offset>
//! offset <master_repl_offset>
//! primary <node id | ->
//! epoch <config epoch of that primary>
//! succeeds <40 hex> <40 hex> | -
//! state running | stopped
//! ```
//!
//! `primary` names the node whose stream the history is (this node itself while it is a
//! primary). It is written at start (`running`), whenever the ids change (promotion, a full
//! sync, a continued history under a new id) and after the final save (`stopped`, with the
//! last offset); never per write. `succeeds <old> <new>`: history `new` began from a complete
//! replay of `old` (an `appendfsync always` AOF read to its end after a crash), so it holds
//! everything `old` acknowledged; a replica of `old` may take a full sync of `new` (the line
//! is optional when read: files from before it have none). A file that does not parse refuses the start, as a corrupt
//! snapshot does: a damaged identity must not quietly read as "no history".

use crate::cluster::id::NodeId;
use crate::replication::ids::{ReplId, ReplicationIds};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The file's name in `dir`.
pub const IDENTITY_FILE: &str = "repl-identity";
/// Largest file read: a few short lines; anything bigger is not ours.
pub const IDENTITY_FILE_MAX: usize = 4096;
/// The format version written and the only one read.
pub const IDENTITY_VERSION: u32 = 1;

/// Whether the process that wrote the file stopped after its final save.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    Running,
    Stopped,
}

impl RunState {
    fn name(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Stopped => "stopped",
        }
    }
}

/// What the file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// This node's cluster id; None outside cluster mode.
    pub node: Option<NodeId>,
    pub ids: ReplicationIds,
    pub offset: u64,
    /// The node whose stream the history is.
    pub primary: Option<NodeId>,
    /// That primary's config epoch when this node took the history from it, or this node's
    /// own at the promotion that made the history (0: none did).
    pub epoch: u64,
    /// `(old, new)`: history `new` began from a complete replay of `old`.
    pub succeeds: Option<Succession>,
    pub state: RunState,
}

/// A history that began from a complete replay of another (see the module comment): it
/// holds everything `old` acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Succession {
    pub old: ReplId,
    pub new: ReplId,
}

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

impl Identity {
    /// The file's text.
    pub fn encode(&self) -> String {
        let id = |n: Option<NodeId>| n.map_or_else(|| "-".to_string(), |n| n.to_string());
        let replid2 = match (self.ids.replid2(), self.ids.second_replid_offset()) {
            (Some(id), Some(until)) => format!("{id} {until}"),
            _ => "- 0".to_string(),
        };
        let succeeds = match self.succeeds {
            Some(s) => format!("{} {}", s.old, s.new),
            None => "-".to_string(),
        };
        format!(
            "version {IDENTITY_VERSION}\nnode {}\nreplid {}\nreplid2 {replid2}\noffset {}\nprimary {}\nepoch {}\nsucceeds {succeeds}\nstate {}\n",
            id(self.node),
            self.ids.replid(),
            self.offset,
            id(self.primary),
            self.epoch,
            self.state.name(),
        )
    }

    /// Parses the file's text; every field must be there exactly once.
    pub fn parse(text: &str) -> Result<Identity, String> {
        let mut fields: Vec<(&str, &str)> = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (key, value) = line
                .split_once(' ')
                .ok_or_else(|| format!("line without a value: {line:?}"))?;
            if fields.iter().any(|(k, _)| *k == key) {
                return Err(format!("{key} given twice"));
            }
            fields.push((key, value.trim()));
        }
        let get = |key: &str| {
            fields
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| *v)
                .ok_or_else(|| format!("no {key} line"))
        };
        let number = |key: &str| {
            get(key)?
                .parse::<u64>()
                .map_err(|_| format!("{key} is not a number"))
        };
        let hex = |key: &str, text: &str| {
            ReplId::parse(text.as_bytes()).ok_or_else(|| format!("{key} is not a 40-hex id"))
        };
        let optional_id = |key: &str| match get(key)? {
            "-" => Ok(None),
            other => hex(key, other).map(Some),
        };
        if number("version")? != u64::from(IDENTITY_VERSION) {
            return Err(format!("version {} is not supported", get("version")?));
        }
        let replid = hex("replid", get("replid")?)?;
        let previous = match get("replid2")?.split_once(' ') {
            Some(("-", _)) => None,
            Some((id, until)) => Some((
                hex("replid2", id)?,
                until
                    .parse::<u64>()
                    .map_err(|_| "replid2 offset is not a number".to_string())?,
            )),
            None => return Err("replid2 needs an id and an offset".into()),
        };
        let succeeds = match get("succeeds").ok() {
            None | Some("-") => None,
            Some(pair) => {
                let (old, new) = pair
                    .split_once(' ')
                    .ok_or_else(|| "succeeds needs two ids".to_string())?;
                Some(Succession {
                    old: hex("succeeds", old)?,
                    new: hex("succeeds", new)?,
                })
            }
        };
        let state = match get("state")? {
            "running" => RunState::Running,
            "stopped" => RunState::Stopped,
            other => return Err(format!("unknown state {other:?}")),
        };
        Ok(Identity {
            node: optional_id("node")?,
            ids: ReplicationIds::from_parts(replid, previous),
            offset: number("offset")?,
            primary: optional_id("primary")?,
            epoch: number("epoch")?,
            succeeds,
            state,
        })
    }
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
    crate::cluster::persist::write_atomically(path, identity.encode().as_bytes())
}

/// What a start found on disk: the identity the previous run left and the history the
/// loaded dataset is exactly, if any.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadedHistory {
    pub identity: Option<Identity>,
    /// The history the loaded snapshot is exactly (`LoadStats::history`).
    pub loaded: Option<(ReplId, u64)>,
    /// Set by a replay that provably reached everything the previous run acknowledged (an
    /// `appendfsync always` AOF read to its end); the snapshot alone never sets it.
    pub complete: bool,
}

impl LoadedHistory {
    /// Whether the dataset holds everything the previous run had: a complete replay, or a
    /// clean stop whose final save is exactly what was loaded.
    pub fn covered(&self) -> bool {
        self.complete
            || self.identity.is_some_and(|i| {
                i.state == RunState::Stopped && self.loaded == Some((i.ids.replid(), i.offset))
            })
    }

    /// Whether the previous run served this history as its primary (the identity names
    /// this node as the history's primary).
    pub fn was_primary(&self) -> bool {
        self.identity
            .is_some_and(|i| i.node.is_some() && i.primary == i.node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Goal: a file written before the `succeeds` line existed still reads (as none).
    #[test]
    fn a_file_without_succeeds_reads_as_none() {
        let old = sample()
            .encode()
            .lines()
            .filter(|l| !l.starts_with("succeeds"))
            .map(|l| format!("{l}\n"))
            .collect::<String>();
        let parsed = Identity::parse(&old).unwrap();
        assert_eq!(parsed.succeeds, None);
        assert_eq!(parsed.ids, sample().ids);
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
    fn covered_needs_a_clean_stop_at_what_was_loaded_or_a_complete_replay() {
        let stopped = sample();
        let running = Identity {
            state: RunState::Running,
            ..stopped
        };
        let exact = Some((stopped.ids.replid(), stopped.offset));
        let short = Some((stopped.ids.replid(), stopped.offset - 1));
        let other = Some((id(b'e'), stopped.offset));
        let table = [
            (Some(stopped), exact, false, true),
            (Some(stopped), short, false, false),
            (Some(stopped), other, false, false),
            (Some(stopped), None, false, false),
            (Some(running), exact, false, false),
            (None, exact, false, false),
            (None, None, true, true),
            (Some(running), None, true, true),
        ];
        for (identity, loaded, complete, covered) in table {
            let h = LoadedHistory {
                identity,
                loaded,
                complete,
            };
            assert_eq!(h.covered(), covered, "{h:?}");
        }
        let mut h = LoadedHistory {
            identity: Some(stopped),
            ..LoadedHistory::default()
        };
        assert!(h.was_primary());
        h.identity = Some(Identity {
            primary: Some(id(b'f')),
            ..stopped
        });
        assert!(!h.was_primary());
        h.identity = None;
        assert!(!h.was_primary());
    }
}
