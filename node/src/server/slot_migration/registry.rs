//! The migrations this node drives as their source, while their driver threads run: for
//! progress, cancellation, and for the supervisor to tell a running migration from an
//! orphan the log still shows running.

use crate::cluster::migration::source::Outcome;
use crate::cluster::migration::MigrationId;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Clone, Debug, Default)]
pub struct Progress {
    pub slots_done: u64,
    pub keys_copied: u64,
    pub bytes_streamed: u64,
    pub outcome: Option<Outcome>,
}

#[derive(Default)]
pub struct DriverState {
    pub cancel: AtomicBool,
    pub progress: Mutex<Progress>,
}

#[derive(Default)]
pub struct Registry {
    running: Mutex<HashMap<MigrationId, Arc<DriverState>>>,
}

impl Registry {
    pub fn add(&self, id: MigrationId) -> Arc<DriverState> {
        let state = Arc::new(DriverState::default());
        self.running.lock().insert(id, state.clone());
        state
    }

    pub fn remove(&self, id: MigrationId) {
        self.running.lock().remove(&id);
    }

    pub fn runs(&self, id: MigrationId) -> bool {
        self.running.lock().contains_key(&id)
    }

    pub fn get(&self, id: MigrationId) -> Option<Arc<DriverState>> {
        self.running.lock().get(&id).cloned()
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
