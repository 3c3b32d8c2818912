//! The migrations this node drives as their source, while their driver threads run: for
//! progress, cancellation, and for the supervisor to tell a running migration from an
//! orphan the log still shows running. The last few finished ones are kept too, so that
//! CLUSTER GETSLOTMIGRATIONS can still show what their source measured.

use crate::cluster::migration::source::Outcome;
use crate::cluster::migration::{MigrationId, MigrationStats, PauseLog};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Finished migrations whose progress is kept (the oldest goes first).
pub const FINISHED_KEPT: usize = 64;

#[derive(Clone, Debug)]
pub struct Progress {
    pub slots_done: u64,
    pub keys_copied: u64,
    pub bytes_streamed: u64,
    pub outcome: Option<Outcome>,
    /// Every write pause of the migration's batches.
    pub pauses: PauseLog,
    pub started: Instant,
    /// Set when the driver finished.
    pub elapsed: Option<Duration>,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            slots_done: 0,
            keys_copied: 0,
            bytes_streamed: 0,
            outcome: None,
            pauses: PauseLog::default(),
            started: Instant::now(),
            elapsed: None,
        }
    }
}

impl Progress {
    pub fn stats(&self) -> MigrationStats {
        let elapsed = self.elapsed.unwrap_or_else(|| self.started.elapsed());
        MigrationStats::new(
            &self.pauses,
            self.keys_copied,
            self.bytes_streamed,
            elapsed.as_millis() as u64,
        )
    }
}

#[derive(Default)]
pub struct DriverState {
    pub cancel: AtomicBool,
    pub progress: Mutex<Progress>,
}

#[derive(Default)]
pub struct Registry {
    running: Mutex<HashMap<MigrationId, Arc<DriverState>>>,
    finished: Mutex<VecDeque<(MigrationId, Arc<DriverState>)>>,
}

impl Registry {
    pub fn add(&self, id: MigrationId) -> Arc<DriverState> {
        let state = Arc::new(DriverState::default());
        self.running.lock().insert(id, state.clone());
        state
    }

    /// The driver of `id` ended: its progress moves to the finished ones.
    pub fn remove(&self, id: MigrationId) {
        let Some(state) = self.running.lock().remove(&id) else {
            return;
        };
        let mut finished = self.finished.lock();
        if finished.len() == FINISHED_KEPT {
            finished.pop_front();
        }
        finished.push_back((id, state));
    }

    pub fn runs(&self, id: MigrationId) -> bool {
        self.running.lock().contains_key(&id)
    }

    pub fn get(&self, id: MigrationId) -> Option<Arc<DriverState>> {
        self.running.lock().get(&id).cloned()
    }

    /// What the driver of `id` measured, running or among the last finished.
    pub fn stats(&self, id: MigrationId) -> Option<MigrationStats> {
        let state = self.get(id).or_else(|| {
            self.finished
                .lock()
                .iter()
                .find(|(f, _)| *f == id)
                .map(|(_, s)| s.clone())
        })?;
        let stats = state.progress.lock().stats();
        Some(stats)
    }

    /// Asks every running driver to cancel; returns how many were asked.
    pub fn cancel_all(&self) -> usize {
        let running = self.running.lock();
        for state in running.values() {
            state
                .cancel
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        running.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_migrations_keep_their_stats_up_to_a_bound() {
        let registry = Registry::default();
        let first = MigrationId(1);
        registry.add(first).progress.lock().pauses.record(2_000);
        registry.remove(first);
        assert!(!registry.runs(first));
        assert_eq!(registry.stats(first).map(|s| s.pauses), Some(1));
        for i in 2..=(FINISHED_KEPT as u64 + 1) {
            registry.add(MigrationId(i));
            registry.remove(MigrationId(i));
        }
        assert_eq!(registry.stats(first), None, "the oldest was let go");
        assert!(registry.stats(MigrationId(2)).is_some());
    }
}
