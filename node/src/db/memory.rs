//! Memory as the allocator sees it. The node allocates through jemalloc (as redis-server
//! does), so `used_memory` means the same thing for both: bytes allocated and not yet freed.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How stale a cached reading may be. Reading jemalloc's statistics means advancing its
/// epoch (a few microseconds), too slow to do per command, so `maxmemory` checks read a
/// value refreshed at most this often.
pub const REFRESH_INTERVAL: Duration = Duration::from_millis(1);
/// Bytes a thread may allocate before its next look reads the allocator again, however
/// fresh the cached reading: a command that grew the dataset by more (SETBIT far out, a big
/// SET) is seen by the very next command's `maxmemory` check, as Redis sees it, rather than
/// by whichever command comes a millisecond later.
pub const GROWTH_REFRESH_BYTES: u64 = 64 * 1024;

thread_local! {
    /// jemalloc's count of the bytes this thread allocated so far (a pointer read once per
    /// thread; reading through it is a plain load). None when the statistics are missing.
    static THREAD_ALLOCATED: Option<tikv_jemalloc_ctl::thread::ThreadLocal<u64>> =
        tikv_jemalloc_ctl::thread::allocatedp::read().ok();
    /// That count when this thread last read the allocator for a look.
    static ALLOCATED_AT_LAST_READ: Cell<u64> = const { Cell::new(0) };
}

/// Whether this thread allocated [`GROWTH_REFRESH_BYTES`] or more since it last said so.
fn thread_grew() -> bool {
    let Some(now) = THREAD_ALLOCATED.with(|a| a.map(|a| a.get())) else {
        return false;
    };
    ALLOCATED_AT_LAST_READ.with(|last| {
        let grew = now.saturating_sub(last.get()) >= GROWTH_REFRESH_BYTES;
        if grew {
            last.set(now);
        }
        grew
    })
}

pub struct MemoryGauge {
    cached: AtomicU64,
    peak: AtomicU64,
    /// The first reading, taken as the node's state was created (MEMORY STATS
    /// `startup.allocated`).
    startup: AtomicU64,
    /// When `cached` was read, in nanoseconds since `epoch`. An atomic, not a lock: with
    /// `maxmemory` set every write asks (perf: the lock and its own clock reading cost 5%
    /// of a pipelined SET's CPU).
    refreshed_ns: AtomicU64,
    epoch: Instant,
}

impl MemoryGauge {
    /// A gauge whose clock starts at `now` (the caller's reading: the keyspace reads no clock).
    pub fn new(now: Instant) -> Self {
        let gauge = MemoryGauge {
            cached: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            startup: AtomicU64::new(0),
            refreshed_ns: AtomicU64::new(0),
            epoch: now,
        };
        let startup = gauge.refresh_at(now);
        gauge.startup.store(startup, Ordering::Relaxed);
        gauge
    }

    /// Bytes allocated now (reads the allocator), `now` being the caller's clock reading.
    pub fn refresh_at(&self, now: Instant) -> u64 {
        let bytes = self.read_into_cache();
        // Never backwards: a caller's reading may predate another thread's refresh.
        self.refreshed_ns
            .fetch_max(self.nanos_at(now), Ordering::Relaxed);
        bytes
    }

    /// Bytes allocated, at most `REFRESH_INTERVAL` old at `now` (the caller's clock
    /// reading, e.g. a command's start). Read afresh, too, when this thread allocated much
    /// since its last reading.
    pub fn used_at(&self, now: Instant) -> u64 {
        let now_ns = self.nanos_at(now);
        if thread_grew() {
            self.refreshed_ns.store(now_ns, Ordering::Relaxed);
            return self.read_into_cache();
        }
        let at = self.refreshed_ns.load(Ordering::Relaxed);
        let stale = now_ns.saturating_sub(at) >= REFRESH_INTERVAL.as_nanos() as u64;
        // One thread refreshes (the one whose swap lands); the others use the cached value,
        // as they would while it reads.
        if stale
            && self
                .refreshed_ns
                .compare_exchange(at, now_ns, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return self.read_into_cache();
        }
        self.cached.load(Ordering::Relaxed)
    }

    fn read_into_cache(&self) -> u64 {
        let now = read_allocated();
        self.cached.store(now, Ordering::Relaxed);
        self.peak.fetch_max(now, Ordering::Relaxed);
        now
    }

    fn nanos_at(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    pub fn startup(&self) -> u64 {
        self.startup.load(Ordering::Relaxed)
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

/// jemalloc's `stats.active`: bytes in the pages of active allocations (read after
/// [`read_allocated`], which advances the epoch).
pub fn read_active() -> u64 {
    tikv_jemalloc_ctl::stats::active::read()
        .map(|v| v as u64)
        .unwrap_or(0)
}

/// jemalloc's `stats.resident` (for `used_memory_rss`).
pub fn read_resident() -> u64 {
    tikv_jemalloc_ctl::stats::resident::read()
        .map(|v| v as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Unit tests do not run on jemalloc (only the binary sets it as the allocator), so
    // these check when the allocator is read, not what it says.

    #[test]
    fn a_reading_is_reused_within_the_interval_and_taken_again_after_it() {
        let gauge = MemoryGauge::new(Instant::now());
        let refreshed = |g: &MemoryGauge| g.refreshed_ns.load(Ordering::Relaxed);
        let start = gauge.epoch + Duration::from_secs(1);
        gauge.used_at(start);
        let first = refreshed(&gauge);
        assert_eq!(first, gauge.nanos_at(start), "stale at start: read");
        gauge.used_at(start + REFRESH_INTERVAL / 2);
        assert_eq!(refreshed(&gauge), first, "within the interval: cached");
        let later = start + REFRESH_INTERVAL;
        gauge.used_at(later);
        assert_eq!(
            refreshed(&gauge),
            gauge.nanos_at(later),
            "after it: read again"
        );
    }

    #[test]
    fn a_clock_reading_older_than_the_last_refresh_uses_the_cache() {
        let gauge = MemoryGauge::new(Instant::now());
        let at = gauge.refreshed_ns.load(Ordering::Relaxed);
        // A command whose reading predates another thread's refresh.
        gauge.used_at(gauge.epoch);
        assert_eq!(gauge.refreshed_ns.load(Ordering::Relaxed), at);
    }
}
