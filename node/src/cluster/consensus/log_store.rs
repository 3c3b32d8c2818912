//! Where a topology log's state is kept, behind a trait: the log ([`TopologyLog`]) does no
//! I/O; each turn it hands out a [`Persist`] and the driver makes it durable with a
//! [`LogStore`] before it sends or applies anything of that turn. The node's store is its
//! log file (`DurableLog`, handed out by a [`LogFile`](super::log_file::LogFile) of the
//! server layer); [`MemoryStore`] keeps the state in memory (a node without a directory,
//! simulations).
//!
//! The driver's turn, raft-rs style:
//!
//! ```text
//! let out = log.ready()?;
//! if let Some(p) = &out.persist { save(&mut log, &mut store, p)? }   (write + fsync)
//! send out.messages; out.apply_to(&mut topology);
//! if out.snapshot_due { if let Some(p) = log.compact(&topology)? { save(&mut log, &mut store, &p)? } }
//! ```

use super::durable_error::DurableError;
use super::log::TopologyLog;
use super::log_error::LogError;
use super::storage::{StoredState, TopologyStorage};
use raft::prelude::{Entry, HardState};

/// What one turn (or a compaction) must make durable.
#[derive(Debug, Clone, PartialEq)]
pub enum Persist {
    /// A ready turn: its new entries and hard state (appended), or everything anew when it
    /// installed a snapshot. `commit_learned`: a commit index raft learned after the turn's
    /// write; not needed for safety (the leader tells it again), it only spares re-learning,
    /// so a store keeps it with its next write rather than syncing it alone.
    Turn {
        snapshot_installed: bool,
        entries: Vec<Entry>,
        hard_state: Option<HardState>,
        commit_learned: Option<HardState>,
    },
    /// A snapshot was taken: replace what is kept by the in-memory state (snapshot, entries
    /// after it, hard state).
    Rewrite,
}

/// Keeps a topology log's state across restarts.
pub trait LogStore: Send + std::fmt::Debug {
    /// Makes `persist` durable; `memory` is the log's in-memory storage, which already holds
    /// it (a rewrite reads the whole state from there). An error leaves the store unusable
    /// for this log: the driver calls [`TopologyLog::persist_failed`] and reopens.
    fn save(&mut self, persist: &Persist, memory: &TopologyStorage) -> Result<(), DurableError>;
}

/// A boxed store saves through the store it holds (the agent holds one of any kind).
impl<S: LogStore + ?Sized> LogStore for Box<S> {
    fn save(&mut self, persist: &Persist, memory: &TopologyStorage) -> Result<(), DurableError> {
        (**self).save(persist, memory)
    }
}

/// A store in memory: what a restart would find is the state at the last save.
#[derive(Debug, Default)]
pub struct MemoryStore {
    kept: StoredState,
    saves: u64,
}

impl MemoryStore {
    /// What a restart would find.
    pub fn kept(&self) -> &StoredState {
        &self.kept
    }

    pub fn saves(&self) -> u64 {
        self.saves
    }
}

impl LogStore for MemoryStore {
    fn save(&mut self, _persist: &Persist, memory: &TopologyStorage) -> Result<(), DurableError> {
        self.kept = memory
            .stored_state()
            .map_err(|e| DurableError::Encode(e.to_string()))?;
        self.saves += 1;
        Ok(())
    }
}

/// The driver's write: `persist` into `store`, or, when that fails, `log` poisoned (nothing
/// of the turn may leave).
pub fn save(
    log: &mut TopologyLog,
    store: &mut dyn LogStore,
    persist: &Persist,
) -> Result<(), LogError> {
    if let Err(e) = store.save(persist, log.storage()) {
        log.persist_failed();
        tracing::error!(error = %e, "topology log store write failed; the log must be reopened");
        return Err(e.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::sim::{add_node, SimNet};
    use super::super::storage::TopologyStorage;
    use super::super::TopologyImage;

    /// Goal: what the drivers saved into their memory stores is what each member's log
    /// holds, and a log restored from it has the same state; a store that missed the last
    /// turns does not (the comparison can fail).
    #[test]
    fn a_memory_store_keeps_what_the_log_holds() {
        let mut net = SimNet::new(3, 0, 11);
        let leader = net.elect(200);
        for n in 0..4 {
            net.log(leader).propose(&add_node(n)).unwrap();
            net.settle();
        }
        for i in 0..3 {
            let node = &net.nodes[i];
            let held = node.log.as_ref().unwrap().storage().stored_state().unwrap();
            assert!(node.memory.saves() > 0);
            assert_eq!(node.memory.kept(), &held, "node {i}");
            let restored = TopologyStorage::restored(node.memory.kept().clone()).unwrap();
            assert_eq!(restored.stored_state().unwrap(), held);
        }
        let before = net.nodes[0].memory.kept().clone();
        net.log(leader).propose(&add_node(9)).unwrap();
        net.settle();
        let held = net.nodes[0]
            .log
            .as_ref()
            .unwrap()
            .storage()
            .stored_state()
            .unwrap();
        assert_ne!(before, held, "the commit changed what must be kept");
        assert_eq!(
            TopologyImage::capture(&net.nodes[0].topology).version,
            held.hard_state.commit
        );
    }
}
