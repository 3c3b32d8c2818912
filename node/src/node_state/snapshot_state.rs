//! What a node knows about its snapshots: changes since the last save, the save running now
//! (at most one), and the outcome of past saves, for `save` rules, LASTSAVE and INFO
//! persistence.

use crate::replication::ids::ReplId;
use parking_lot::{Condvar, Mutex};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveKind {
    /// SAVE, or the save at shutdown: the caller waits for it.
    Foreground,
    /// BGSAVE or a `save` rule: runs on its own thread.
    Background,
}

/// The INFO persistence fields, read together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersistenceInfo {
    pub rdb_changes_since_last_save: u64,
    pub rdb_bgsave_in_progress: bool,
    /// Unix seconds of the last successful save (the start time if none yet).
    pub rdb_last_save_time: u64,
    /// "ok" or "err": the outcome of the last background save.
    pub rdb_last_bgsave_ok: bool,
    /// Duration of the last background save, -1 if none.
    pub rdb_last_bgsave_time_sec: i64,
    /// Duration so far of the running background save, -1 if none.
    pub rdb_current_bgsave_time_sec: i64,
    /// Successful saves since start.
    pub rdb_saves: u64,
    pub rdb_last_load_keys_loaded: u64,
    pub rdb_last_load_keys_expired: u64,
}

impl PersistenceInfo {
    /// INFO `rdb_last_bgsave_status`.
    pub fn last_bgsave_status(&self) -> &'static str {
        if self.rdb_last_bgsave_ok {
            "ok"
        } else {
            "err"
        }
    }
}

struct Running {
    kind: SaveKind,
    started: Instant,
    /// The dirty counter when the save began: changes after that are not in the snapshot,
    /// so only these many are subtracted when it succeeds.
    dirty_at_start: u64,
}

struct Inner {
    running: Option<Running>,
    last_save_unix: u64,
    last_attempt: Option<Instant>,
    last_bgsave_ok: bool,
    last_bgsave_secs: Option<u64>,
    scheduled: bool,
    saves: u64,
    last_load: LoadStats,
    final_save_done: bool,
}

pub struct SnapshotState {
    dirty: AtomicU64,
    inner: Mutex<Inner>,
    /// Signalled when a save finishes (shutdown waits for a running one).
    done: Condvar,
    /// Asks the running save to stop at the next slot (shutdown).
    abort: AtomicBool,
}

impl Default for SnapshotState {
    fn default() -> Self {
        SnapshotState {
            dirty: AtomicU64::new(0),
            inner: Mutex::new(Inner {
                running: None,
                // Redis starts LASTSAVE at the start time.
                last_save_unix: unix_secs(),
                last_attempt: None,
                last_bgsave_ok: true,
                last_bgsave_secs: None,
                scheduled: false,
                saves: 0,
                last_load: LoadStats::default(),
                final_save_done: false,
            }),
            done: Condvar::new(),
            abort: AtomicBool::new(false),
        }
    }
}

/// What a load found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadStats {
    pub keys: u64,
    /// Entries skipped because they had expired by load time.
    pub expired: u64,
    pub bytes: u64,
    pub version: u16,
    /// The replication history the file is exactly (its dataset is `replid`'s stream up to
    /// the offset), when the save saw that history stand still from its first key to its
    /// last (`snapshot.rs`); `None` for an inexact save or a file without the fields.
    pub history: Option<(ReplId, u64)>,
    /// The database the stream is in at that offset (`repl-stream-db`).
    pub history_stream_db: usize,
    /// The function libraries' codes the file held (the loader runs them again); taken out
    /// before the stats are kept.
    pub functions: Vec<Box<[u8]>>,
}

/// What a save wrote.
#[derive(Debug, Clone, Copy, Default)]
pub struct SaveStats {
    pub keys: u64,
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error("a save is already in progress")]
    InProgress,
    #[error("the node has not finished starting")]
    NotStarted,
    #[error("cannot start the background save thread: {0}")]
    Spawn(std::io::Error),
    #[error("aborted: the node is shutting down")]
    Aborted,
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What the cron's `save` rules decide on (`persistence::rules`).
#[derive(Debug, Clone, Copy)]
pub struct CronView {
    /// Changes since the last successful save.
    pub dirty: u64,
    /// Seconds since the last successful save (or since start).
    pub secs_since_save: u64,
    /// Seconds since the last save attempt, if there was one.
    pub secs_since_attempt: Option<u64>,
    pub last_ok: bool,
    /// BGSAVE SCHEDULE (or BGSAVE inside MULTI) asked for one.
    pub scheduled: bool,
}

pub fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl SnapshotState {
    pub fn add_dirty(&self, n: u64) {
        self.dirty.fetch_add(n, Relaxed);
    }

    /// Changes since the last successful save (INFO `rdb_changes_since_last_save`).
    pub fn dirty(&self) -> u64 {
        self.dirty.load(Relaxed)
    }

    pub fn in_progress(&self) -> Option<SaveKind> {
        self.inner.lock().running.as_ref().map(|r| r.kind)
    }

    pub fn bgsave_in_progress(&self) -> bool {
        self.in_progress() == Some(SaveKind::Background)
    }

    /// LASTSAVE: unix seconds of the last successful save.
    pub fn last_save_unix(&self) -> u64 {
        self.inner.lock().last_save_unix
    }

    pub fn last_bgsave_ok(&self) -> bool {
        self.inner.lock().last_bgsave_ok
    }

    pub fn info(&self) -> PersistenceInfo {
        let inner = self.inner.lock();
        let bg = inner
            .running
            .as_ref()
            .filter(|r| r.kind == SaveKind::Background);
        PersistenceInfo {
            rdb_changes_since_last_save: self.dirty(),
            rdb_bgsave_in_progress: bg.is_some(),
            rdb_last_save_time: inner.last_save_unix,
            rdb_last_bgsave_ok: inner.last_bgsave_ok,
            rdb_last_bgsave_time_sec: inner.last_bgsave_secs.map_or(-1, |s| s as i64),
            rdb_current_bgsave_time_sec: bg.map_or(-1, |r| r.started.elapsed().as_secs() as i64),
            rdb_saves: inner.saves,
            rdb_last_load_keys_loaded: inner.last_load.keys,
            rdb_last_load_keys_expired: inner.last_load.expired,
        }
    }

    /// Claims the single save slot. Fails if a save is running.
    pub(crate) fn begin(&self, kind: SaveKind) -> Result<(), SaveError> {
        let mut inner = self.inner.lock();
        if inner.running.is_some() {
            return Err(SaveError::InProgress);
        }
        inner.running = Some(Running {
            kind,
            started: Instant::now(),
            dirty_at_start: self.dirty(),
        });
        inner.last_attempt = Some(Instant::now());
        self.abort.store(false, Relaxed);
        Ok(())
    }

    /// Releases the save slot and records the outcome.
    pub(crate) fn finish(&self, ok: bool) {
        let mut inner = self.inner.lock();
        let Some(run) = inner.running.take() else {
            debug_assert!(false, "finish without begin");
            return;
        };
        if ok {
            // Changes made while saving may be missing from the file: they stay counted.
            self.dirty
                .fetch_sub(run.dirty_at_start.min(self.dirty()), Relaxed);
            inner.last_save_unix = unix_secs();
            inner.last_bgsave_ok = true;
            inner.saves += 1;
        } else if run.kind == SaveKind::Background {
            inner.last_bgsave_ok = false;
        }
        if run.kind == SaveKind::Background {
            inner.last_bgsave_secs = Some(run.started.elapsed().as_secs());
        }
        drop(inner);
        self.done.notify_all();
    }

    pub fn abort_flag(&self) -> &AtomicBool {
        &self.abort
    }

    /// Asks a running save to stop and waits for it, at most `max_wait`. True if none runs.
    pub(crate) fn abort_running(&self, max_wait: Duration) -> bool {
        let deadline = Instant::now() + max_wait;
        let mut inner = self.inner.lock();
        if inner.running.is_none() {
            return true;
        }
        self.abort.store(true, Relaxed);
        while inner.running.is_some() {
            if self.done.wait_until(&mut inner, deadline).timed_out() {
                return inner.running.is_none();
            }
        }
        true
    }

    /// BGSAVE SCHEDULE: the cron starts one as soon as it can.
    pub fn schedule(&self) {
        self.inner.lock().scheduled = true;
    }

    pub(crate) fn clear_scheduled(&self) {
        self.inner.lock().scheduled = false;
    }

    pub(crate) fn cron_view(&self) -> CronView {
        let inner = self.inner.lock();
        CronView {
            dirty: self.dirty(),
            secs_since_save: unix_secs().saturating_sub(inner.last_save_unix),
            secs_since_attempt: inner.last_attempt.map(|a| a.elapsed().as_secs()),
            last_ok: inner.last_bgsave_ok,
            scheduled: inner.scheduled,
        }
    }

    pub(crate) fn set_last_load(&self, stats: LoadStats) {
        self.inner.lock().last_load = stats;
    }

    pub(crate) fn final_save_done(&self) -> bool {
        self.inner.lock().final_save_done
    }

    pub(crate) fn mark_final_save_done(&self) {
        self.inner.lock().final_save_done = true;
    }
}
