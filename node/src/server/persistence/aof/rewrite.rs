//! Rewriting the AOF: a new base from a point-in-time image of the keyspace and a new
//! increment that starts at the image's instant, so that base + increment hold every write
//! exactly once. A write that appended before the instant changed its slot before the
//! slot was captured (it is in the base); one after it appends to the new increment, and
//! its slot was captured before it changed anything (it is not in the base). The instant is
//! one moment for every slot: the switch happens with every shard held, and writes append
//! while they hold theirs. Writes go on during the rewrite.
//!
//! The steps, each a safe place to crash:
//! 1. the new increment is created. While the log runs (`Running`) the manifest lists it at
//!    once after the old files (old base + old increments + new increment is still the
//!    whole dataset); when the log starts (`Starting`) it is a temporary file until the end,
//!    and the old manifest, if any, stays as it was;
//! 2. the instant: with every shard held, the log switches to the new increment;
//! 3. the base is written to a temporary file, fsynced, renamed into place;
//! 4. the manifest switches to new base + new increment (written atomically);
//! 5. the files the old manifest named are removed.

use super::base::{self, BaseError, BaseSink, BaseStats};
use super::files::{self, failed, FileError};
use super::log::{IncrFile, LogError};
use super::manifest::{names, FileKind, Manifest, ManifestFile};
use super::LogState;
use crate::db::keyspace::ImageRunning;
use crate::server::{unix_millis, Server};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The log runs: BGREWRITEAOF, the automatic rewrite.
    Running,
    /// The log starts from a first base (CONFIG SET appendonly yes, after a full sync, at
    /// start without an AOF).
    Starting,
    /// The log is off: a base alone (BGREWRITEAOF with appendonly no).
    BaseOnly,
}

#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    #[error("Background append only file rewriting already in progress")]
    InProgress,
    #[error("the node has not finished starting")]
    NotStarted,
    #[error("cannot start the rewrite thread: {0}")]
    Spawn(std::io::Error),
    #[error("aborted")]
    Aborted,
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Image(#[from] ImageRunning),
}

impl From<BaseError> for RewriteError {
    fn from(e: BaseError) -> Self {
        match e {
            BaseError::Aborted => RewriteError::Aborted,
            BaseError::File(f) => RewriteError::File(f),
        }
    }
}

/// Runs a rewrite that holds the rewrite slot to its end, and records the outcome.
pub fn run(server: &Arc<Server>, mode: Mode) {
    let started = Instant::now();
    let result = attempt(server, mode);
    finish(server, mode, started, &result);
}

/// At start, with no AOF yet: the first base of what was loaded (the snapshot, or
/// nothing), on the calling thread, before clients are served.
pub fn run_at_start(server: &Arc<Server>) -> Result<(), RewriteError> {
    server.aof.ensure_fsync_thread()?;
    server.aof.control.lock().state = LogState::Starting;
    server.aof.claim_rewrite()?;
    let started = Instant::now();
    let result = attempt(server, Mode::Starting);
    finish(server, Mode::Starting, started, &result);
    result.map(|_| ())
}

/// Where the new files go and what they are called.
struct Plan {
    dir: PathBuf,
    prefix: String,
    /// The manifest the new one replaces.
    old: Manifest,
    base: ManifestFile,
    incr: ManifestFile,
}

impl Plan {
    fn new(server: &Server, mode: Mode) -> Result<Plan, RewriteError> {
        let (dir, prefix, known) = {
            let c = server.aof.control.lock();
            (c.dir.clone(), c.prefix.clone(), c.manifest.clone())
        };
        std::fs::create_dir_all(&dir).map_err(failed("create directory", &dir))?;
        // While the log runs its manifest is the one on disk. Otherwise the folder may
        // hold another run's files: the new names must not reuse the ones it lists.
        let old = match mode {
            Mode::Running => known,
            Mode::Starting | Mode::BaseOnly => match files::read_manifest(&dir, &prefix) {
                Ok(m) => m.unwrap_or_default(),
                Err(e) => {
                    tracing::warn!("{e}; the new AOF replaces it");
                    Manifest::default()
                }
            },
        };
        let base_seq = old.next_base_seq();
        let incr_seq = old.next_incr_seq();
        Ok(Plan {
            base: ManifestFile {
                name: names::base(&prefix, base_seq),
                seq: base_seq,
                kind: FileKind::Base,
            },
            incr: ManifestFile {
                name: names::incr(&prefix, incr_seq),
                seq: incr_seq,
                kind: FileKind::Incr,
            },
            dir,
            prefix,
            old,
        })
    }

    fn base_temp(&self) -> PathBuf {
        self.dir.join(names::temp(&self.base.name))
    }

    /// The increment's path while the rewrite runs.
    fn incr_now(&self, mode: Mode) -> PathBuf {
        match mode {
            Mode::Starting => self.dir.join(names::temp(&self.incr.name)),
            Mode::Running | Mode::BaseOnly => self.dir.join(&self.incr.name),
        }
    }
}

fn attempt(server: &Server, mode: Mode) -> Result<BaseStats, RewriteError> {
    let plan = Plan::new(server, mode)?;
    let result = attempt_planned(server, mode, &plan);
    if result.is_err() && mode == Mode::Starting {
        undo_start(server, &plan.incr_now(mode));
    }
    result
}

fn attempt_planned(server: &Server, mode: Mode, plan: &Plan) -> Result<BaseStats, RewriteError> {
    let aof = &server.aof;
    let mut incr_file = None;
    if mode != Mode::BaseOnly {
        let path = plan.incr_now(mode);
        let file = files::create_incr(&path)?;
        incr_file = Some(IncrFile::new(file, path.clone(), 0).map_err(failed("duplicate", &path))?);
        if mode == Mode::Running {
            let mut listed = plan.old.clone();
            listed.incrs.push(plan.incr.clone());
            files::write_manifest(&plan.dir, &plan.prefix, &listed)?;
            aof.control.lock().manifest = listed;
        }
        // The switch below must not meet an earlier one still unwritten.
        aof.log.write_pending()?;
    }
    let sink = Arc::new(BaseSink::new(unix_millis()));
    let mut switched = false;
    // The function libraries at the image's instant: FUNCTION LOAD holds every shard.
    let mut functions = Vec::new();
    let dbs = server.dbs();
    let images: Vec<&crate::db::Keyspace> = dbs.iter().collect();
    let image_sink: Arc<dyn crate::db::image::ImageSink> = sink.clone();
    crate::db::databases::begin_images(&images, &image_sink, &mut || {
        functions = server
            .functions
            .get()
            .libraries
            .values()
            .map(|l| l.code.clone())
            .collect();
        switched = at_instant(server, incr_file.take(), mode);
    })?;
    if !switched {
        base::abandon(dbs, &sink);
        return Err(RewriteError::Aborted);
    }
    if mode != Mode::BaseOnly {
        // Lets the old increment go (fsynced) now rather than at the next reply.
        if let Err(e) = aof.log.write_pending() {
            tracing::warn!("cannot write the AOF yet: {e}; trying again later");
        }
    }
    let stats = base::write(dbs, &functions, &sink, &plan.base_temp(), &aof.abort)?;
    install(server, mode, plan, stats)?;
    Ok(stats)
}

/// The image's instant (every shard held): the log switches to the new increment, and
/// starts taking writes if it is starting. False if the rewrite was called off meanwhile.
fn at_instant(server: &Server, incr: Option<IncrFile>, mode: Mode) -> bool {
    let aof = &server.aof;
    let c = aof.control.lock();
    if aof.abort.load(Relaxed) {
        return false;
    }
    let expected = match mode {
        Mode::Running => LogState::On,
        Mode::Starting => LogState::Starting,
        Mode::BaseOnly => c.state,
    };
    if c.state != expected {
        return false;
    }
    if let Some(f) = incr {
        aof.log.switch_at_instant(f);
    }
    if mode == Mode::Starting {
        server.replication.set_log_consumer(true);
    }
    true
}

/// Puts the new base and manifest in place and removes what the old manifest named.
fn install(server: &Server, mode: Mode, plan: &Plan, stats: BaseStats) -> Result<(), RewriteError> {
    let aof = &server.aof;
    let base_temp = plan.base_temp();
    let new = {
        let mut c = aof.control.lock();
        let installed = (|| {
            if aof.abort.load(Relaxed) {
                return Err(RewriteError::Aborted);
            }
            let base_path = plan.dir.join(&plan.base.name);
            std::fs::rename(&base_temp, &base_path)
                .map_err(failed("rename the new base to", &base_path))?;
            if mode == Mode::Starting {
                let path = plan.dir.join(&plan.incr.name);
                std::fs::rename(plan.incr_now(mode), &path)
                    .map_err(failed("rename the new increment to", &path))?;
                aof.log.renamed(path);
            }
            files::fsync_dir(&plan.dir)?;
            let new = Manifest {
                base: Some(plan.base.clone()),
                incrs: match mode {
                    Mode::BaseOnly => Vec::new(),
                    Mode::Running | Mode::Starting => vec![plan.incr.clone()],
                },
            };
            files::write_manifest(&plan.dir, &plan.prefix, &new)?;
            Ok(new)
        })();
        let new = match installed {
            Ok(new) => new,
            Err(e) => {
                let _ = std::fs::remove_file(&base_temp);
                return Err(e);
            }
        };
        c.manifest = new.clone();
        c.base_file_size = stats.bytes;
        c.base_size = stats.bytes + aof.log.current_size();
        if mode == Mode::Starting {
            c.state = LogState::On;
        }
        new
    };
    remove_replaced(&plan.dir, &plan.old, &new);
    Ok(())
}

/// Removes the files `old` named that `new` does not.
fn remove_replaced(dir: &Path, old: &Manifest, new: &Manifest) {
    let mut removed = false;
    for f in old.files() {
        if new.files().any(|n| n.name == f.name) {
            continue;
        }
        let path = dir.join(&f.name);
        match std::fs::remove_file(&path) {
            Ok(()) => removed = true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), "cannot remove a replaced AOF file: {e}")
            }
        }
    }
    if removed {
        if let Err(e) = files::fsync_dir(dir) {
            tracing::warn!("{e}");
        }
    }
}

/// A start that failed: the log stops writing into its temporary increment, which goes.
fn undo_start(server: &Server, temp_incr: &Path) {
    let aof = &server.aof;
    {
        let c = aof.control.lock();
        if c.state == LogState::Starting {
            aof.stop_logging();
        }
    }
    let _ = std::fs::remove_file(temp_incr);
}

fn finish(server: &Server, mode: Mode, started: Instant, result: &Result<BaseStats, RewriteError>) {
    let aof = &server.aof;
    let secs = started.elapsed().as_secs();
    let mut c = aof.control.lock();
    c.rewrite = None;
    c.last_rewrite_secs = Some(secs);
    match result {
        Ok(stats) => {
            c.last_rewrite_ok = true;
            tracing::info!(
                keys = stats.keys,
                base_bytes = stats.bytes,
                secs = started.elapsed().as_secs_f64(),
                "background AOF rewrite finished successfully"
            );
        }
        Err(RewriteError::Aborted) => tracing::info!("AOF rewrite stopped"),
        Err(e) => {
            c.last_rewrite_ok = false;
            tracing::error!("background AOF rewrite failed: {e}");
            if mode == Mode::Starting && c.state == LogState::Starting {
                c.retry_at = Some(Instant::now() + super::RETRY_DELAY);
            }
        }
    }
    drop(c);
    aof.rewrite_done.notify_all();
}
