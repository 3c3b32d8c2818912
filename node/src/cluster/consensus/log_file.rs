//! A topology log that survives restarts, as this layer sees it: a [`LogFile`] is where a
//! log is kept (the node's file, `TopologyLogFile`, which the server layer opens in the
//! node's dir); this layer does no I/O. [`TopologyLog::with_file`] starts keeping a new
//! log's state there, [`TopologyLog::open`] brings a log back from what is kept. Both hand
//! back the store the driver saves each turn's [`Persist`](super::log_store::Persist) into
//! ([`super::log_store`]).
//!
//! Reopened, a log starts from its snapshot: `applied` is the snapshot's index, the first
//! turn hands out the snapshot's image (unless it is the empty bootstrap one), and raft hands
//! the committed entries after it out again. A topology that kept them (nodes.conf) refuses
//! them as already applied and changes nothing; one that starts empty is rebuilt.

use super::durable_error::DurableError;
use super::log::{TopologyLog, BOOTSTRAP_INDEX};
use super::log_error::LogError;
use super::log_store::LogStore;
use super::raft_id::{raft_id, Directory};
use super::snapshot::SnapshotPayload;
use super::storage::{StoredState, TopologyStorage};
use crate::cluster::id::{HexId, NodeId};
use protobuf::Message as _;
use raft::prelude::{ConfChange, EntryType};
use std::path::Path;

/// What a load found.
#[derive(Debug)]
pub struct Loaded {
    /// The node whose log this is.
    pub owner: NodeId,
    pub state: StoredState,
    /// Bytes of a torn tail dropped (0: none).
    pub dropped: u64,
}

/// Where a topology log is kept across restarts. Errors name [`Self::path`].
pub trait LogFile {
    /// What [`Self::create`] and [`Self::reopen`] hand out: the store the driver saves each
    /// turn into.
    type Store: LogStore;
    /// Where it is, for messages.
    fn path(&self) -> &Path;
    /// What is kept, replayed (a write a crash cut short dropped); None when nothing is.
    fn load(&self) -> Result<Option<Loaded>, DurableError>;
    /// Keeps `state`, the state of `owner`'s new log. Refuses when something is kept
    /// already ([`DurableError::Exists`]): it may hold a vote this node must keep.
    fn create(&self, owner: &NodeId, state: &StoredState) -> Result<Self::Store, DurableError>;
    /// What [`Self::load`] found, open for saving the turns after it.
    fn reopen(&self, owner: &NodeId) -> Result<Self::Store, DurableError>;
    /// Nothing is kept any more (nothing kept is no error).
    fn remove(&self) -> std::io::Result<()>;
}

/// A [`LogFile`] whose stores come boxed, for a holder of stores of any kind (the agent).
#[derive(Clone, Debug)]
pub struct BoxedStores<F>(pub F);

impl<F: LogFile> LogFile for BoxedStores<F>
where
    F::Store: 'static,
{
    type Store = Box<dyn LogStore>;

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn load(&self) -> Result<Option<Loaded>, DurableError> {
        self.0.load()
    }

    fn create(&self, owner: &NodeId, state: &StoredState) -> Result<Self::Store, DurableError> {
        Ok(Box::new(self.0.create(owner, state)?))
    }

    fn reopen(&self, owner: &NodeId) -> Result<Self::Store, DurableError> {
        Ok(Box::new(self.0.reopen(owner)?))
    }

    fn remove(&self) -> std::io::Result<()> {
        self.0.remove()
    }
}

impl TopologyLog {
    /// Starts keeping this (new) log's state in `file`; the store is returned for the
    /// driver to keep up to date. Refuses a file that holds something
    /// ([`DurableError::Exists`]): it may hold a vote this node must keep, so
    /// [`Self::open`] it instead.
    pub fn with_file<F: LogFile + ?Sized>(self, file: &F) -> Result<(Self, F::Store), LogError> {
        let state = self.raw().store().stored_state()?;
        let store = file.create(&self.me(), &state)?;
        Ok((self, store))
    }

    /// The log `me` left in `file` and the store to go on with, or None when nothing is
    /// kept (start one with [`Self::new`] and [`Self::with_file`]). `seed` drives the
    /// election timeouts.
    pub fn open<F: LogFile + ?Sized>(
        me: NodeId,
        file: &F,
        seed: u64,
    ) -> Result<Option<(TopologyLog, F::Store)>, LogError> {
        let Some(loaded) = file.load()? else {
            return Ok(None);
        };
        if loaded.owner != me {
            return Err(DurableError::OtherNode {
                path: file.path().to_path_buf(),
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
        let store = file.reopen(&me)?;
        log.reopened_from_store(reopened, next_proposal);
        tracing::info!(
            path = %file.path().display(),
            term = log.term(),
            snapshot = snapshot_index,
            entries = entries.len(),
            dropped = loaded.dropped,
            "topology log reopened"
        );
        Ok(Some((log, store)))
    }
}
