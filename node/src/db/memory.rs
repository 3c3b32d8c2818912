//! Memory as the allocator sees it. The node allocates through jemalloc (as redis-server
//! does), so `used_memory` means the same thing for both: bytes allocated and not yet freed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How stale a cached reading may be. Reading jemalloc's statistics means advancing its
/// epoch (a few microseconds), too slow to do per command, so `maxmemory` checks read a
/// value refreshed at most this often.
pub const REFRESH_INTERVAL: Duration = Duration::from_millis(1);

pub struct MemoryGauge {
    cached: AtomicU64,
    peak: AtomicU64,
    refreshed_at: parking_lot::Mutex<Instant>,
}

impl Default for MemoryGauge {
    fn default() -> Self {
        let gauge = MemoryGauge {
            cached: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            refreshed_at: parking_lot::Mutex::new(Instant::now()),
        };
        gauge.refresh();
        gauge
    }
}

impl MemoryGauge {
    /// Bytes allocated now (reads the allocator).
    pub fn refresh(&self) -> u64 {
        let now = read_allocated();
        self.cached.store(now, Ordering::Relaxed);
        self.peak.fetch_max(now, Ordering::Relaxed);
        *self.refreshed_at.lock() = Instant::now();
        now
    }

    /// Bytes allocated, at most `REFRESH_INTERVAL` old.
    pub fn used(&self) -> u64 {
        let stale = self
            .refreshed_at
            .try_lock()
            .map(|at| at.elapsed() >= REFRESH_INTERVAL)
            .unwrap_or(false);
        if stale {
            self.refresh()
        } else {
            self.cached.load(Ordering::Relaxed)
        }
    }

    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

/// jemalloc's `stats.allocated` after advancing its epoch; 0 if the statistics are missing.
pub fn read_allocated() -> u64 {
    if tikv_jemalloc_ctl::epoch::advance().is_err() {
        return 0;
    }
    tikv_jemalloc_ctl::stats::allocated::read()
        .map(|v| v as u64)
        .unwrap_or(0)
}

/// jemalloc's `stats.resident` (for `used_memory_rss`).
pub fn read_resident() -> u64 {
    tikv_jemalloc_ctl::stats::resident::read()
        .map(|v| v as u64)
        .unwrap_or(0)
}
