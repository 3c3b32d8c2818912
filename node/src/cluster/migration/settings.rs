//! The limits a migration runs under (`cluster-migration-slots-per-batch` and
//! `cluster-migration-queue-max` set two of them; the rest are fixed).

/// Limits of one slot migration, in the units the core is driven with (ms, bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MigrationSettings {
    /// Slots moved per batch: each batch is copied, paused and committed on its own, so the
    /// write pause a client sees covers one batch's last bytes, and a failure loses at most
    /// one batch's work.
    pub slots_per_batch: usize,
    /// The source pauses writes once the target is this few bytes behind.
    pub pause_lag_bytes: u64,
    /// Longest write pause: past it the source resumes writes and tries again later.
    pub pause_max_ms: u64,
    /// Pauses tried per batch before the migration gives up (the target never catches up).
    pub pauses_max: u32,
    /// How long a proposed topology change (begin, commit, abort) may take to be applied
    /// before it is proposed again.
    pub propose_retry_ms: u64,
    /// How long after a commit is proposed the source, still paused, proposes an abort
    /// instead (the leader is gone or the log stalls; one of the two will be applied).
    pub commit_wait_max_ms: u64,
    /// Longest silence from the target (no ack of anything new while bytes are outstanding)
    /// before the link counts as failed.
    pub link_silence_max_ms: u64,
    /// Most bytes a batch's link holds unsent. The copy waits above a quarter of it (the
    /// high-water mark) for the target to drain; client writes past it fail the migration.
    pub link_queue_bytes_max: usize,
}

impl Default for MigrationSettings {
    fn default() -> Self {
        MigrationSettings {
            slots_per_batch: crate::config::params::MIGRATION_SLOTS_PER_BATCH_DEFAULT,
            pause_lag_bytes: 64 * 1024,
            pause_max_ms: 50,
            pauses_max: 20,
            propose_retry_ms: 1_000,
            commit_wait_max_ms: 5_000,
            link_silence_max_ms: 10_000,
            link_queue_bytes_max: crate::config::params::MIGRATION_QUEUE_DEFAULT as usize,
        }
    }
}
