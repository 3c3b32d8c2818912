//! What a migration's source measured of it: every write pause (from the pause of the
//! batch's slots to their resume, the time a writer to those slots waits), the keys and
//! bytes put on the link, and how long the migration ran. Only the source measures; CLUSTER
//! GETSLOTMIGRATIONS shows zeros elsewhere.

/// Pauses kept exactly; past this only their count, sum and the longest are kept. A
/// migration of all 16384 slots at the default 1024 slots per batch pauses 16 times when
/// every first pause succeeds, and at most 16 x `pauses_max` (20) = 320 times (at one slot
/// per batch, 16384 x 20).
pub const PAUSES_KEPT: usize = 4096;

/// The write pauses of one migration, in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PauseLog {
    kept: Vec<u64>,
    count: u64,
    max_us: u64,
    total_us: u64,
}

impl PauseLog {
    pub fn record(&mut self, pause_us: u64) {
        if self.kept.len() < PAUSES_KEPT {
            self.kept.push(pause_us);
        }
        self.count += 1;
        self.max_us = self.max_us.max(pause_us);
        self.total_us = self.total_us.saturating_add(pause_us);
    }

    /// Every pause's length added up (the time writers to the moving slots waited, as
    /// seen by one writer per batch).
    pub fn total_us(&self) -> u64 {
        self.total_us
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn max_us(&self) -> u64 {
        self.max_us
    }

    /// Nearest-rank percentile (`q` in 0..=1) of the kept pauses; 0 without pauses.
    pub fn percentile_us(&self, q: f64) -> u64 {
        if self.kept.is_empty() {
            return 0;
        }
        let mut sorted = self.kept.clone();
        sorted.sort_unstable();
        let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }
}

/// A migration's figures as its source reports them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MigrationStats {
    pub pauses: u64,
    pub pause_p50_ms: f64,
    pub pause_p99_ms: f64,
    pub pause_max_ms: f64,
    /// Keys copied by the slot copies (writes streamed after a slot's copy not counted).
    pub keys_moved: u64,
    /// Bytes put on the links: the copies and the writes streamed after them.
    pub bytes_moved: u64,
    /// From the driver's start to its end (or to now while it runs).
    pub elapsed_ms: u64,
    /// What carried the last batch's data (`tcp`, `fabric/<provider>`); empty before any.
    pub link: String,
}

impl MigrationStats {
    pub fn new(pauses: &PauseLog, keys_moved: u64, bytes_moved: u64, elapsed_ms: u64) -> Self {
        let ms = |us: u64| us as f64 / 1000.0;
        MigrationStats {
            pauses: pauses.count(),
            pause_p50_ms: ms(pauses.percentile_us(0.50)),
            pause_p99_ms: ms(pauses.percentile_us(0.99)),
            pause_max_ms: ms(pauses.max_us()),
            keys_moved,
            bytes_moved,
            elapsed_ms,
            link: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_and_empty_is_zero() {
        let mut log = PauseLog::default();
        assert_eq!(log.percentile_us(0.99), 0);
        for us in (1..=100).rev() {
            log.record(us * 1000);
        }
        assert_eq!(log.percentile_us(0.50), 50_000);
        assert_eq!(log.percentile_us(0.99), 99_000);
        assert_eq!(log.percentile_us(1.0), 100_000);
        let stats = MigrationStats::new(&log, 7, 8, 9);
        assert_eq!(stats.pauses, 100);
        assert_eq!(stats.pause_p99_ms, 99.0);
        assert_eq!(stats.pause_max_ms, 100.0);
    }

    #[test]
    fn past_the_kept_pauses_only_count_and_max_grow() {
        let mut log = PauseLog::default();
        for _ in 0..PAUSES_KEPT {
            log.record(10);
        }
        log.record(1_000_000);
        assert_eq!(log.count(), PAUSES_KEPT as u64 + 1);
        assert_eq!(log.max_us(), 1_000_000);
        assert_eq!(log.kept.len(), PAUSES_KEPT);
    }
}
