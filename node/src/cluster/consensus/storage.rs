//! raft's `MemStorage` plus the snapshot the application made. `MemStorage` builds snapshots
//! with empty data at its commit index; a lagging learner needs the topology itself, taken at
//! the index it was applied to, so snapshots come from here and the rest from `MemStorage`.

use raft::prelude::{ConfState, Entry, HardState, Snapshot};
use raft::storage::MemStorage;
use raft::{GetEntriesContext, RaftState, Storage, StorageError};
use std::sync::atomic::{AtomicBool, Ordering};

/// What a log keeps across restarts: raft's storage state (what its store holds once
/// replayed, [`super::log_file::LogFile`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoredState {
    /// Empty (index 0) for a node that has none yet (a joiner).
    pub snapshot: Snapshot,
    /// The entries after the snapshot, contiguous.
    pub entries: Vec<Entry>,
    pub hard_state: HardState,
}

pub struct TopologyStorage {
    pub mem: MemStorage,
    /// The latest snapshot (bootstrap, compaction or received); index 0 while none.
    snapshot: Snapshot,
    /// Set when raft asked for a snapshot this one cannot serve (too old, or taken before
    /// the peer joined): the application should take a fresh one (TopologyLog::compact).
    wanted: AtomicBool,
}

impl TopologyStorage {
    /// Storage of a node that has nothing yet (a joining learner).
    pub fn empty() -> Self {
        TopologyStorage {
            mem: MemStorage::new(),
            snapshot: Snapshot::default(),
            wanted: AtomicBool::new(false),
        }
    }

    /// Storage that starts from `snapshot` (the group's bootstrap state).
    pub fn from_snapshot(snapshot: Snapshot) -> Result<Self, raft::Error> {
        let mem = MemStorage::new();
        mem.wl().apply_snapshot(snapshot.clone())?;
        Ok(TopologyStorage {
            mem,
            snapshot,
            wanted: AtomicBool::new(false),
        })
    }

    /// Storage as a node's log file left it: the snapshot, the entries after it (contiguous,
    /// as the load checked) and the hard state (its commit inside the log).
    pub fn restored(state: StoredState) -> Result<Self, raft::Error> {
        // raft's storage panics on a gap; refuse one here instead.
        let first = state.snapshot.get_metadata().index + 1;
        let contiguous = (first..).zip(&state.entries).all(|(i, e)| e.index == i);
        if !contiguous {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let mem = MemStorage::new();
        {
            let mut core = mem.wl();
            if !state.snapshot.is_empty() {
                core.apply_snapshot(state.snapshot.clone())?;
            }
            core.append(&state.entries)?;
            core.set_hardstate(state.hard_state);
        }
        Ok(TopologyStorage {
            mem,
            snapshot: state.snapshot,
            wanted: AtomicBool::new(false),
        })
    }

    /// What the log file must hold to bring this storage back: the snapshot, the entries
    /// after it and the hard state.
    pub fn stored_state(&self) -> Result<StoredState, raft::Error> {
        let low = self.mem.first_index()?.max(self.snapshot_index() + 1);
        let high = self.mem.last_index()? + 1;
        let entries = if low < high {
            self.mem
                .entries(low, high, None, GetEntriesContext::empty(false))?
        } else {
            Vec::new()
        };
        Ok(StoredState {
            snapshot: self.snapshot.clone(),
            entries,
            hard_state: self.mem.initial_state()?.hard_state,
        })
    }

    /// Installs a snapshot received from the leader: it replaces the log and is what this
    /// node will serve should it lead later.
    pub fn install(&mut self, snapshot: Snapshot) -> Result<(), raft::Error> {
        self.mem.wl().apply_snapshot(snapshot.clone())?;
        self.snapshot = snapshot;
        Ok(())
    }

    /// Keeps `snapshot` (taken at an applied index) and drops the entries before its index.
    pub fn compact(&mut self, snapshot: Snapshot) -> Result<(), raft::Error> {
        self.mem.wl().compact(snapshot.get_metadata().index)?;
        self.snapshot = snapshot;
        Ok(())
    }

    /// Whether raft asked for a snapshot newer than the one held, since the last call.
    pub fn take_wanted(&self) -> bool {
        self.wanted.swap(false, Ordering::Relaxed)
    }

    pub fn snapshot_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }

    pub fn conf_state(&self) -> ConfState {
        self.mem
            .initial_state()
            .map(|state| state.conf_state)
            .unwrap_or_default()
    }
}

impl Storage for TopologyStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        self.mem.initial_state()
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        self.mem.entries(low, high, max_size, context)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx == self.snapshot.get_metadata().index && idx != 0 {
            return Ok(self.snapshot.get_metadata().term);
        }
        self.mem.term(idx)
    }

    fn first_index(&self) -> raft::Result<u64> {
        self.mem.first_index()
    }

    fn last_index(&self) -> raft::Result<u64> {
        self.mem.last_index()
    }

    /// The held snapshot, when it can bring `to` up: raft refuses a snapshot whose
    /// configuration lacks the receiver, so one taken before `to` joined will not do. Else
    /// "temporarily unavailable" (raft retries later) and a fresh one is asked for.
    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        let meta = self.snapshot.get_metadata();
        let conf = meta.get_conf_state();
        let knows_to = conf.get_voters().contains(&to) || conf.get_learners().contains(&to);
        if meta.index == 0 || meta.index < request_index || !knows_to {
            self.wanted.store(true, Ordering::Relaxed);
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(self.snapshot.clone())
    }
}
