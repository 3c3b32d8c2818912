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
    /// What carried the last batch's data (`Link::carrier`).
    pub link: String,
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
            link: String::new(),
        }
    }
}

impl Progress {
    pub fn stats(&self) -> MigrationStats {
        let elapsed = self.elapsed.unwrap_or_else(|| self.started.elapsed());
        MigrationStats {
            link: self.link.clone(),
            ..MigrationStats::new(
                &self.pauses,
                self.keys_copied,
                self.bytes_streamed,
                elapsed.as_millis() as u64,
            )
        }
    }
}

#[derive(Default)]
pub struct DriverState {
    pub cancel: AtomicBool,
    pub progress: Mutex<Progress>,
}

/// What the migrations this node drove since it started add up to (the metrics'
/// counters): the finished ones' figures, plus the running ones' so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub started: u64,
    pub running: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub keys_copied: u64,
    pub bytes_streamed: u64,
    pub slots_moved: u64,
    pub pauses: u64,
    pub pause_us: u64,
}

impl Totals {
    fn add_progress(&mut self, p: &Progress) {
        self.keys_copied += p.keys_copied;
        self.bytes_streamed += p.bytes_streamed;
        self.slots_moved += p.slots_done;
        self.pauses += p.pauses.count();
        self.pause_us += p.pauses.total_us();
    }
}

#[derive(Default)]
pub struct Registry {
    running: Mutex<HashMap<MigrationId, Arc<DriverState>>>,
    finished: Mutex<VecDeque<(MigrationId, Arc<DriverState>)>>,
    /// The finished migrations' figures added up (`started` counts every one). Locked
    /// after `running` (in [`Registry::remove`] and [`Registry::totals`] alike), so a
    /// migration moving from running to finished is counted once in every reading.
    ended: Mutex<Totals>,
}

impl Registry {
    pub fn add(&self, id: MigrationId) -> Arc<DriverState> {
        let state = Arc::new(DriverState::default());
        let mut running = self.running.lock();
        running.insert(id, state.clone());
        self.ended.lock().started += 1;
        state
    }

    /// The driver of `id` ended: its progress moves to the finished ones.
    pub fn remove(&self, id: MigrationId) {
        let mut running = self.running.lock();
        let Some(state) = running.remove(&id) else {
            return;
        };
        {
            let progress = state.progress.lock();
            let mut ended = self.ended.lock();
            ended.add_progress(&progress);
            match &progress.outcome {
                Some(Outcome::Succeeded) => ended.succeeded += 1,
                Some(Outcome::Cancelled(_)) => ended.cancelled += 1,
                // A driver that ended without an outcome gave up: the log aborts it.
                Some(Outcome::Failed(_)) | None => ended.failed += 1,
            }
        }
        drop(running);
        let mut finished = self.finished.lock();
        if finished.len() == FINISHED_KEPT {
            finished.pop_front();
        }
        finished.push_back((id, state));
    }

    /// Every migration this node drove since it started, added up.
    pub fn totals(&self) -> Totals {
        let running = self.running.lock();
        let mut totals = *self.ended.lock();
        totals.running = running.len() as u64;
        for state in running.values() {
            totals.add_progress(&state.progress.lock());
        }
        totals
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

    #[test]
    fn totals_count_running_and_finished_migrations_once() {
        let registry = Registry::default();
        let (a, b) = (MigrationId(1), MigrationId(2));
        let state = registry.add(a);
        {
            let mut p = state.progress.lock();
            p.keys_copied = 10;
            p.slots_done = 3;
            p.pauses.record(2_000);
            p.pauses.record(3_000);
        }
        registry.add(b).progress.lock().outcome = Some(Outcome::Cancelled("cancelled".into()));
        let running = registry.totals();
        assert_eq!((running.started, running.running), (2, 2));
        assert_eq!((running.keys_copied, running.slots_moved), (10, 3));
        assert_eq!((running.pauses, running.pause_us), (2, 5_000));
        state.progress.lock().outcome = Some(Outcome::Succeeded);
        registry.remove(a);
        registry.remove(b);
        let ended = registry.totals();
        assert_eq!(ended.running, 0);
        assert_eq!((ended.succeeded, ended.cancelled, ended.failed), (1, 1, 0));
        assert_eq!(
            (ended.keys_copied, ended.slots_moved, ended.pause_us),
            (10, 3, 5_000)
        );
    }
}
