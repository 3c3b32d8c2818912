//! A topology log that survives restarts: [`TopologyLog::with_file`] creates the file for a
//! new log's state, [`TopologyLog::open`] brings a log back from one. Both hand the file
//! back beside the log: the driver saves each turn's [`Persist`](super::log_store::Persist)
//! into it ([`super::log_store`]). The file and its rules are in [`super::durable`].
//!
//! Reopened, a log starts from its snapshot: `applied` is the snapshot's index, the first
//! turn hands out the snapshot's image (unless it is the empty bootstrap one), and raft hands
//! the committed entries after it out again. A topology that kept them (nodes.conf) refuses
//! them as already applied and changes nothing; one that starts empty is rebuilt.

use super::durable::DurableLog;
use super::durable_error::DurableError;
use super::durable_load::load;
use super::log::{TopologyLog, BOOTSTRAP_INDEX};
use super::log_error::LogError;
use super::raft_id::{raft_id, Directory};
use super::snapshot::SnapshotPayload;
use super::storage::TopologyStorage;
use crate::cluster::id::{HexId, NodeId};
use protobuf::Message as _;
use raft::prelude::{ConfChange, EntryType};
use std::path::Path;

impl TopologyLog {
    /// Writes this (new) log's state to a new file at `path`, returned for the driver to
    /// keep up to date. Refuses an existing file ([`DurableError::Exists`]):
    /// it may hold a vote this node must keep, so [`Self::open`] it instead.
    pub fn with_file(self, path: &Path) -> Result<(Self, DurableLog), LogError> {
        let state = self.raw().store().stored_state()?;
        let file = DurableLog::create(path, &self.me(), &state)?;
        Ok((self, file))
    }

    /// The log `me` left in the file at `path` and the file to go on with, or None when
    /// there is no file (start one with [`Self::new`] and [`Self::with_file`]). `seed`
    /// drives the election timeouts.
    pub fn open(
        me: NodeId,
        path: &Path,
        seed: u64,
    ) -> Result<Option<(TopologyLog, DurableLog)>, LogError> {
        let Some(loaded) = load(path)? else {
            return Ok(None);
        };
        if loaded.owner != me {
            return Err(DurableError::OtherNode {
                path: path.to_path_buf(),
                owner: loaded.owner,
            }
            .into());
        }
        let state = loaded.state;
        let mut directory = Directory::default();
        directory.check(&me)?;
        directory.learn(&me);
        let snapshot_index = state.snapshot.get_metadata().index;
        let mut reopened = None;
        if !state.snapshot.is_empty() {
            let payload =
                SnapshotPayload::decode(&state.snapshot.data).map_err(LogError::BadSnapshot)?;
            for m in &payload.members {
                directory.learn(m);
            }
            // A founder's bootstrap snapshot holds the topology it founded with; only an
            // empty one (groups started with `new`) has nothing to give back.
            if snapshot_index > BOOTSTRAP_INDEX || !payload.image.nodes.is_empty() {
                reopened = Some((snapshot_index, payload.image));
            }
        }
        // Members added after the snapshot: raft re-applies their changes on the next turns,
        // but messages may have to reach them before.
        for entry in &state.entries {
            if entry.get_entry_type() != EntryType::EntryConfChange {
                continue;
            }
            let Ok(cc) = ConfChange::parse_from_bytes(&entry.data) else {
                continue;
            };
            if let Some(node) = HexId::parse(&cc.context).filter(|n| raft_id(n) == cc.node_id) {
                directory.learn(&node);
            }
        }
        let entries = state.entries.clone();
        let storage = TopologyStorage::restored(state)?;
        let mut log = TopologyLog::start(me, directory, storage, snapshot_index, seed)?;
        // Entries this node proposed before the restart may still commit: new proposals take
        // ids past theirs, so an id names one proposal only.
        let next_proposal = entries
            .iter()
            .filter_map(|e| log.own_proposal(&e.context))
            .map(|id| id.0 + 1)
            .max()
            .unwrap_or(0);
        let file = DurableLog::append_to(path, &me)?;
        log.reopened_from_store(reopened, next_proposal);
        tracing::info!(
            path = %path.display(),
            term = log.term(),
            snapshot = snapshot_index,
            entries = entries.len(),
            dropped = loaded.dropped,
            "topology log reopened"
        );
        Ok(Some((log, file)))
    }
}
