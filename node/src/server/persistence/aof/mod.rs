//! The append-only file (AOF), laid out as Redis 7 lays it out: in `dir/appenddirname`, a
//! base (the keyspace at a rewrite's instant, in the snapshot format, as Redis's RDB
//! preamble), increments of RESP commands (every write the node executed since, encoded as
//! the replication stream encodes it, MULTI/EXEC blocks included), and a manifest naming
//! them. With `appendonly yes` the node loads from it at start instead of the snapshot.
//!
//! - [`manifest`]: the manifest's text and the files' names, bounded parsing;
//! - [`files`]: atomic manifest writes, increments, temporary files left by a crash;
//! - [`log`]: the running log: appends, writes, fsyncs (group commit), and the gate a
//!   connection's replies pass (`appendfsync always`: nothing answered before it is synced);
//! - [`base`]: a rewrite's base, from a point-in-time image of the keyspace;
//! - [`rewrite`]: BGREWRITEAOF, the automatic rewrite, turning the log on;
//! - [`replay`]: running an increment's commands;
//! - [`startup`]: loading at start.
//!
//! This file holds what ties them together: whether the log runs, the manifest as on disk,
//! the running rewrite, and the outcomes INFO reports.
//!
//! Lock order: keyspace shards, then `control`, then the log's locks. A rewrite's instant
//! takes `control` with every shard held, so nothing may take shards while holding it.

pub mod base;
pub mod files;
pub mod log;
pub mod manifest;
pub mod replay;
pub mod rewrite;
pub mod startup;

use crate::config::Config;
use crate::server::Server;
use manifest::Manifest;
use parking_lot::{Condvar, Mutex};
use rewrite::{Mode, RewriteError};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// How long after a failed start of the log the cron tries again (Redis retries the
/// rewrite that turns the AOF on until one succeeds).
pub const RETRY_DELAY: Duration = Duration::from_secs(5);
/// Most time shutdown waits for a running rewrite to stop (it checks between slots).
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogState {
    Off,
    /// A rewrite is making the first base; the log runs into a temporary increment that
    /// the manifest lists once the base is in place (Redis's `AOF_WAIT_REWRITE`).
    Starting,
    On,
}

pub(crate) struct Control {
    pub(crate) state: LogState,
    /// Where the files are (`dir/appenddirname`) and their prefix (`appendfilename`): fixed
    /// when the log starts.
    pub(crate) dir: PathBuf,
    pub(crate) prefix: String,
    /// The manifest as last written or loaded.
    pub(crate) manifest: Manifest,
    /// Bytes of the base file.
    pub(crate) base_file_size: u64,
    /// The log's size after the last rewrite or load: the automatic rewrite measures
    /// growth against it (INFO `aof_base_size`).
    pub(crate) base_size: u64,
    /// When the running rewrite started.
    pub(crate) rewrite: Option<Instant>,
    /// A failed start is tried again after this.
    pub(crate) retry_at: Option<Instant>,
    pub(crate) last_rewrite_secs: Option<u64>,
    pub(crate) last_rewrite_ok: bool,
    pub(crate) rewrites: u64,
}

pub use crate::node_state::services::persistence::AofInfo;

pub struct Aof {
    pub log: log::AppendLog,
    pub(crate) control: Mutex<Control>,
    /// Signalled when a rewrite ends.
    pub(crate) rewrite_done: Condvar,
    /// Asks the running rewrite to stop (the log stops, the node shuts down).
    pub(crate) abort: AtomicBool,
    rewrite_percentage: AtomicU64,
    rewrite_min_size: AtomicU64,
    owner: OnceLock<Weak<Server>>,
    /// Whether the fsync thread runs (started before the log first takes writes).
    fsync_thread: Mutex<bool>,
}

impl Aof {
    pub fn new(config: &Config) -> Self {
        let aof = Aof {
            log: log::AppendLog::default(),
            control: Mutex::new(Control {
                state: LogState::Off,
                dir: config.aof_dir(),
                prefix: config.aof.filename.clone(),
                manifest: Manifest::default(),
                base_file_size: 0,
                base_size: 0,
                rewrite: None,
                retry_at: None,
                last_rewrite_secs: None,
                last_rewrite_ok: true,
                rewrites: 0,
            }),
            rewrite_done: Condvar::new(),
            abort: AtomicBool::new(false),
            rewrite_percentage: AtomicU64::new(0),
            rewrite_min_size: AtomicU64::new(0),
            owner: OnceLock::new(),
            fsync_thread: Mutex::new(false),
        };
        aof.mirror_config(config);
        aof
    }

    /// Remembers the node, for the threads the log and its rewrites run on.
    pub fn attach(&self, server: &Arc<Server>) {
        let _ = self.owner.set(Arc::downgrade(server));
    }

    fn owner(&self) -> Option<Arc<Server>> {
        self.owner.get().and_then(Weak::upgrade)
    }

    fn mirror_config(&self, config: &Config) {
        self.log.set_policy(config.aof.fsync);
        self.rewrite_percentage
            .store(config.aof.rewrite_percentage, Relaxed);
        self.rewrite_min_size
            .store(config.aof.rewrite_min_size, Relaxed);
    }

    /// CONFIG SET: the fsync policy and rewrite thresholds at once; `appendonly yes` starts
    /// the log (a first base is written, as Redis's rewrite does), `no` stops it. Never
    /// waits for a rewrite: it may be called with every shard held (inside EXEC).
    pub fn apply_config(&self, config: &Config) {
        self.mirror_config(config);
        let state = self.control.lock().state;
        match (config.aof.enabled, state) {
            (true, LogState::Off) => self.start(config.aof_dir(), config.aof.filename.clone()),
            (false, LogState::Starting | LogState::On) => self.stop(),
            _ => {}
        }
    }

    /// Starts the log with a fresh base, on a thread of its own (after a rewrite that is
    /// still running has ended).
    pub fn start(&self, dir: PathBuf, prefix: String) {
        {
            let mut c = self.control.lock();
            if c.state != LogState::Off {
                return;
            }
            c.state = LogState::Starting;
            c.dir = dir;
            c.prefix = prefix;
            c.retry_at = None;
        }
        tracing::info!("AOF turned on: writing its first base");
        let started = self
            .ensure_fsync_thread()
            .and_then(|()| self.spawn_rewrite(Mode::Starting));
        if let Err(e) = started {
            tracing::error!("cannot start the AOF: {e}");
            self.control.lock().retry_at = Some(Instant::now() + RETRY_DELAY);
        }
    }

    /// Stops the log: a running rewrite is told to give up, everything appended is
    /// written and fsynced, the files stay as they are.
    pub fn stop(&self) {
        let mut c = self.control.lock();
        if c.state == LogState::Off {
            return;
        }
        c.state = LogState::Off;
        c.retry_at = None;
        self.abort.store(true, Relaxed);
        self.stop_logging();
        tracing::info!("AOF turned off");
    }

    /// The log stops taking writes and closes its file. With `control` held.
    pub(crate) fn stop_logging(&self) {
        if let Some(server) = self.owner() {
            server.replication.set_log_consumer(false);
        }
        if let Err(e) = self.log.close() {
            tracing::error!("error closing the AOF: {e}");
        }
    }

    /// BGREWRITEAOF: a new base and increment on a thread of their own. With the log off,
    /// a base alone (as Redis writes one then).
    pub fn bgrewrite(&self, config: &Config) -> Result<(), RewriteError> {
        let mode = {
            let mut c = self.control.lock();
            if c.rewrite.is_some() || c.state == LogState::Starting {
                return Err(RewriteError::InProgress);
            }
            match c.state {
                LogState::On => Mode::Running,
                _ => {
                    c.dir = config.aof_dir();
                    c.prefix = config.aof.filename.clone();
                    Mode::BaseOnly
                }
            }
        };
        self.spawn_rewrite(mode)
    }

    fn spawn_rewrite(&self, mode: Mode) -> Result<(), RewriteError> {
        let server = self.owner().ok_or(RewriteError::NotStarted)?;
        // BGREWRITEAOF claims the slot here so that a second one is refused at once; a
        // start waits on its thread for a rewrite still running (an aborted one).
        if mode != Mode::Starting {
            self.claim_rewrite()?;
        }
        let spawned = std::thread::Builder::new()
            .name("aof-rewrite".into())
            .spawn(move || {
                if mode == Mode::Starting && !server.aof.wait_and_claim_for_start() {
                    return;
                }
                rewrite::run(&server, mode);
            });
        if let Err(e) = spawned {
            if mode != Mode::Starting {
                self.release_rewrite();
            }
            return Err(RewriteError::Spawn(e));
        }
        Ok(())
    }

    /// Claims the single rewrite slot.
    pub(crate) fn claim_rewrite(&self) -> Result<(), RewriteError> {
        let mut c = self.control.lock();
        if c.rewrite.is_some() {
            return Err(RewriteError::InProgress);
        }
        c.rewrite = Some(Instant::now());
        // Counted when started, as Redis counts `aof_rewrites`.
        c.rewrites += 1;
        self.abort.store(false, Relaxed);
        Ok(())
    }

    pub(crate) fn release_rewrite(&self) {
        self.control.lock().rewrite = None;
        self.rewrite_done.notify_all();
    }

    /// For a start: waits until no rewrite runs, then claims the slot. False if the log
    /// was stopped meanwhile (nothing to start any more).
    fn wait_and_claim_for_start(&self) -> bool {
        let mut c = self.control.lock();
        while c.rewrite.is_some() {
            self.rewrite_done.wait(&mut c);
        }
        if c.state != LogState::Starting {
            return false;
        }
        c.rewrite = Some(Instant::now());
        c.rewrites += 1;
        self.abort.store(false, Relaxed);
        true
    }

    /// Called `hz` times a second: the automatic rewrite (`auto-aof-rewrite-percentage`,
    /// `auto-aof-rewrite-min-size`), and another try at a start that failed.
    pub fn cron(&self) {
        self.log.nudge();
        let retry_start = {
            let c = self.control.lock();
            if c.rewrite.is_some() {
                return;
            }
            match c.state {
                LogState::Starting if c.retry_at.is_some_and(|at| Instant::now() >= at) => true,
                LogState::On if self.growth_calls_for_rewrite(&c) => false,
                _ => return,
            }
        };
        if retry_start {
            self.control.lock().retry_at = None;
            tracing::info!("trying again to turn the AOF on");
            let started = self
                .ensure_fsync_thread()
                .and_then(|()| self.spawn_rewrite(Mode::Starting));
            if let Err(e) = started {
                tracing::error!("cannot start the AOF: {e}");
                self.control.lock().retry_at = Some(Instant::now() + RETRY_DELAY);
            }
            return;
        }
        tracing::info!("starting an automatic AOF rewrite");
        match self.spawn_rewrite(Mode::Running) {
            Ok(()) | Err(RewriteError::InProgress) => {}
            Err(e) => tracing::error!("cannot start an automatic AOF rewrite: {e}"),
        }
    }

    fn growth_calls_for_rewrite(&self, c: &Control) -> bool {
        let percentage = self.rewrite_percentage.load(Relaxed);
        if percentage == 0 {
            return false;
        }
        let current = self.current_size(c);
        if current < self.rewrite_min_size.load(Relaxed) {
            return false;
        }
        let base = c.base_size.max(1);
        let growth = current.saturating_sub(base).saturating_mul(100) / base;
        growth >= percentage
    }

    /// The base and every increment (INFO `aof_current_size`).
    fn current_size(&self, c: &Control) -> u64 {
        let listed = c.manifest.incrs.len();
        let older: u64 = c
            .manifest
            .incrs
            .iter()
            .take(listed.saturating_sub(1))
            .map(|f| files::size_of(&c.dir.join(&f.name)))
            .sum();
        c.base_file_size + older + self.log.current_size()
    }

    pub fn info(&self) -> AofInfo {
        let c = self.control.lock();
        let running = c.rewrite;
        // A start whose rewrite has not claimed the slot yet is in progress too (unless it
        // failed and waits for its retry).
        let starting = c.state == LogState::Starting && c.retry_at.is_none();
        AofInfo {
            enabled: c.state != LogState::Off,
            rewrite_in_progress: running.is_some() || starting,
            rewrite_scheduled: c.retry_at.is_some(),
            last_rewrite_time_sec: c.last_rewrite_secs.map_or(-1, |s| s as i64),
            current_rewrite_time_sec: running.map_or(-1, |at| at.elapsed().as_secs() as i64),
            last_bgrewrite_ok: c.last_rewrite_ok,
            rewrites: c.rewrites,
            last_write_ok: !self.log.write_failed(),
            current_size: if c.state == LogState::Off {
                0
            } else {
                self.current_size(&c)
            },
            base_size: c.base_size,
            buffer_length: self.log.buffered(),
        }
    }

    /// Whether writes must be refused: the log cannot write (Redis's MISCONF for the AOF).
    /// `Some(reason)` then.
    pub fn refusing_writes(&self) -> Option<String> {
        if !self.log.write_failed() {
            return None;
        }
        Some(
            self.log
                .last_error()
                .unwrap_or_else(|| "unknown error".into()),
        )
    }

    /// Before a replica replaces its dataset (a full sync): the log stops (its files are
    /// the old dataset's). True if it ran, so that [`Aof::dataset_replaced`] starts it again.
    pub fn dataset_replacing(&self) -> bool {
        let running = self.control.lock().state != LogState::Off;
        if running {
            self.stop();
        }
        running
    }

    /// After the dataset was replaced: the log starts again from a base of the new one.
    pub fn dataset_replaced(&self, was_running: bool, config: &Config) {
        if was_running && config.aof.enabled {
            self.start(config.aof_dir(), config.aof.filename.clone());
        }
    }

    /// The node stops: a running rewrite gives up, the log is written and fsynced.
    pub fn shutdown(&self) {
        let mut c = self.control.lock();
        self.abort.store(true, Relaxed);
        let deadline = Instant::now() + SHUTDOWN_WAIT;
        while c.rewrite.is_some() {
            if self.rewrite_done.wait_until(&mut c, deadline).timed_out() {
                tracing::warn!("an AOF rewrite did not stop within {SHUTDOWN_WAIT:?}");
                break;
            }
        }
        if c.state != LogState::Off {
            if let Err(e) = self.log.close() {
                tracing::error!("error flushing the AOF at shutdown: {e}");
            }
        }
    }

    /// Starts the fsync thread if it does not run yet: before the log first takes writes
    /// (a reply under `always` waits for it). It idles while the log is off and ends when
    /// the node is gone.
    pub(crate) fn ensure_fsync_thread(&self) -> Result<(), RewriteError> {
        let owner = self.owner.get().cloned().ok_or(RewriteError::NotStarted)?;
        let mut running = self.fsync_thread.lock();
        if *running {
            return Ok(());
        }
        std::thread::Builder::new()
            .name("aof-fsync".into())
            .spawn(move || {
                let mut last_sync = Instant::now();
                while let Some(server) = owner.upgrade() {
                    server.aof.log.turn(&mut last_sync);
                    let wait = server.aof.log.next_wait(last_sync);
                    server.aof.log.wait_for_work(wait);
                }
            })
            .map_err(RewriteError::Spawn)?;
        *running = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
