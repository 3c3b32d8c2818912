//! Snapshots: SAVE, BGSAVE, load at start, `save` rules. Filled in by the persistence work.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default)]
pub struct SnapshotState {
    dirty: AtomicU64,
}

impl SnapshotState {
    pub fn add_dirty(&self, n: u64) {
        self.dirty.fetch_add(n, Relaxed);
    }

    pub fn dirty(&self) -> u64 {
        self.dirty.load(Relaxed)
    }
}

pub fn cron(_server: &crate::server::Server) {}

/// Loads the snapshot file, if there is one, before clients are accepted.
pub fn load_at_start(_server: &crate::server::Server) -> anyhow::Result<()> {
    Ok(())
}

/// Saves on shutdown when save rules are set or SHUTDOWN SAVE asked for it.
pub fn save_on_shutdown(_server: &crate::server::Server) {}
