//! The replication identity (the file `<dir>/repl-identity`; its reading and writing are
//! `server::persistence::identity_file`, reached through [`IdentityStore`]): which history
//! this node's dataset belongs to, and whether the process stopped cleanly after saving it. A restart compares
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
    /// The database the stream is in at `offset` (`stream-db`; 0 when the file has none):
    /// where a replica that restarts from a log replayed to `offset` continues executing.
    pub stream_db: usize,
}

/// A history that began from a complete replay of another (see the module comment): it
/// holds everything `old` acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Succession {
    pub old: ReplId,
    pub new: ReplId,
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
            "version {IDENTITY_VERSION}\nnode {}\nreplid {}\nreplid2 {replid2}\noffset {}\nprimary {}\nepoch {}\nsucceeds {succeeds}\nstate {}\nstream-db {}\n",
            id(self.node),
            self.ids.replid(),
            self.offset,
            id(self.primary),
            self.epoch,
            self.state.name(),
            self.stream_db,
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
            stream_db: match get("stream-db").ok() {
                None => 0,
                Some(db) => db
                    .parse::<usize>()
                    .map_err(|_| "stream-db is not a number".to_string())?,
            },
        })
    }
}

/// Where the identity is kept. The layer that owns files implements it
/// (`server::persistence::identity_file`); `node_state::replication` decides when it is
/// written and what it says.
pub trait IdentityStore: Send {
    /// Replaces what is kept with `identity`, atomically.
    fn save(&self, identity: &Identity) -> std::io::Result<()>;
    /// Where it is kept, for logs and errors.
    fn describe(&self) -> String;
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
    /// The database the stream is in at the loaded offset (the save's `repl-stream-db`, or
    /// the identity's `stream-db` for a replayed log).
    pub stream_db: usize,
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
            stream_db: 0,
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
                stream_db: 0,
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
