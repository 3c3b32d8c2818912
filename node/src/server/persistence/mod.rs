//! Snapshots: SAVE, BGSAVE, load at start, `save` rules, the save at shutdown, all in one
//! versioned, checksummed format of our own ([`crate::snapshot_format`], which also makes
//! the DUMP/RESTORE payloads).
//!
//! - [`snapshot`]: writing the keyspace (slot by slot, no fork) to a writer or atomically to
//!   the snapshot file;
//! - [`load`]: reading a snapshot into the keyspace;
//! - [`rules`]: when the cron saves;
//! - [`aof`]: the append-only file (`appendonly yes`), loaded at start instead of the
//!   snapshot when it exists.
//! - [`acl_file`]: reading and writing the ACL file (ACL LOAD/SAVE, the load at start);
//! - [`identity_file`]: the replication identity file;
//! - [`nodes_conf_file`]: the cluster config file (nodes.conf), the cluster state's store;
//! - [`cluster_secret_file`]: the cluster secret a node was given at run time;
//! - [`topology_log`]: the topology group's Raft log file (`topology-raft.log`), the
//!   consensus layer's `LogFile` and `LogStore`;
//! - [`topology_group_files`]: that log and the file naming the group (`topology-group`),
//!   the cluster agent's `GroupFiles`;
//! - [`restart`]: the ids a start continues with, from the replication identity
//!   ([`crate::node_state::identity`]) and what was loaded.
//!
//! The dirty counter, the running save and the outcomes (LASTSAVE, INFO persistence) are
//! state: [`crate::node_state::snapshot_state`].
//!
//! Background saves run on a `std::thread`, not in the async runtime: serializing is CPU
//! work and file I/O blocks.

pub mod acl_file;
pub mod aof;
pub mod cluster_secret_file;
pub mod identity_file;
pub mod load;
pub mod nodes_conf_file;
pub mod restart;
pub mod rules;
pub mod snapshot;
pub mod topology_group_files;
pub mod topology_log;

pub use crate::node_state::snapshot_state::{PersistenceInfo, SaveKind, SnapshotState};
pub use snapshot::{SaveError, SaveStats};

use crate::node_state::identity;
use crate::node_state::shutdown::ShutdownMode;
use crate::server::{unix_millis, Server};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most time shutdown waits for a running save to stop. A save checks for the request
/// between slots, so only a slow disk or a giant single slot makes it wait at all.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(30);
/// Attempts at the final save when another save keeps starting in between (a client's
/// BGSAVE racing the shutdown).
const SHUTDOWN_SAVE_ATTEMPTS: usize = 3;

/// Releases the save slot when dropped, also if the save panicked.
struct Finish<'a> {
    state: &'a SnapshotState,
    ok: bool,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.state.finish(self.ok);
    }
}

/// Writes the snapshot file named by the config; the caller holds the save slot.
fn write_configured(server: &Server) -> Result<SaveStats, SaveError> {
    let (dir, name) = {
        let config = server.config.read();
        (config.dir.clone(), config.dbfilename.clone())
    };
    let functions: Vec<_> = server
        .functions
        .get()
        .libraries
        .values()
        .map(|l| l.code.clone())
        .collect();
    snapshot::save_to_file(
        server.dbs(),
        &functions,
        Some(&server.replication),
        &dir,
        &name,
        server.snapshot.abort_flag(),
    )
}

/// SAVE: saves on the calling thread. Clients keep being served meanwhile, except that
/// each waits at most for one slot's serialization.
pub fn save(server: &Server) -> Result<SaveStats, SaveError> {
    server.snapshot.begin(SaveKind::Foreground)?;
    let mut finish = Finish {
        state: &server.snapshot,
        ok: false,
    };
    let started = Instant::now();
    let result = write_configured(server);
    finish.ok = result.is_ok();
    drop(finish);
    match &result {
        Ok(stats) => tracing::info!(
            keys = stats.keys,
            bytes = stats.bytes,
            secs = started.elapsed().as_secs_f64(),
            "DB saved on disk"
        ),
        Err(e) => tracing::error!("error saving the DB: {e}"),
    }
    result
}

/// BGSAVE: starts a save on a thread of its own and returns at once.
pub fn bgsave(server: &Server) -> Result<(), SaveError> {
    let owner = server.owner().ok_or(SaveError::NotStarted)?;
    server.snapshot.begin(SaveKind::Background)?;
    let spawned = std::thread::Builder::new()
        .name("bgsave".into())
        .spawn(move || {
            let mut finish = Finish {
                state: &owner.snapshot,
                ok: false,
            };
            let started = Instant::now();
            let result = write_configured(&owner);
            finish.ok = result.is_ok();
            drop(finish);
            match result {
                Ok(stats) => tracing::info!(
                    keys = stats.keys,
                    bytes = stats.bytes,
                    secs = started.elapsed().as_secs_f64(),
                    "background saving terminated with success"
                ),
                Err(e) => tracing::error!("background saving failed: {e}"),
            }
        });
    match spawned {
        Ok(_) => {
            tracing::info!("background saving started");
            Ok(())
        }
        Err(e) => {
            server.snapshot.finish(false);
            tracing::error!("cannot start the background save thread: {e}");
            Err(SaveError::Spawn(e))
        }
    }
}

/// Called `hz` times a second: starts a background save when a `save` rule is met or one
/// was scheduled (BGSAVE SCHEDULE), not sooner than the retry delay after a failure; the
/// AOF's automatic rewrite.
pub fn cron(server: &Server) {
    server.aof.cron();
    let state = &server.snapshot;
    if state.in_progress().is_some() {
        return;
    }
    let trigger = {
        let config = server.config.read();
        rules::decide(&config.save, state.cron_view())
    };
    let Some(trigger) = trigger else {
        return;
    };
    match trigger {
        rules::Trigger::Scheduled => tracing::info!("starting the scheduled background save"),
        rules::Trigger::Rule(r) => {
            tracing::info!("{} changes in {} seconds. Saving...", r.changes, r.seconds)
        }
    }
    match bgsave(server) {
        Ok(()) => state.clear_scheduled(),
        // A SAVE or BGSAVE from a client got there first.
        Err(SaveError::InProgress) => {}
        Err(e) => tracing::error!("cannot start a background save: {e}"),
    }
}

/// Loads the snapshot file, if there is one, before clients are accepted. A corrupt or
/// unreadable file is an error naming the file and the fault: the node must not start
/// over data it cannot read (and then overwrite it at the next save).
///
/// With `appendonly yes` the AOF is loaded instead when it exists (as Redis does); when it
/// does not, the snapshot loads and a first AOF base is written from it. Then the
/// replication identity the previous run left (a corrupt one refuses the start too)
/// decides which history the node continues ([`restart::take_over`]). An AOF names no
/// offset: after a clean stop (the identity says `stopped`, written after the log's last
/// fsync) it is exactly the identity's history; after a crash under `appendfsync always` it
/// holds every acknowledged write (complete, under a fresh id); otherwise it is neither.
pub fn load_at_start(server: &Arc<Server>) -> anyhow::Result<()> {
    server.attach(server);
    server.aof.attach(server);
    let (aof, always, dir) = {
        let config = server.config.read();
        (
            config.aof.enabled,
            config.aof.fsync == crate::config::params::FsyncPolicy::Always,
            config.dir.clone(),
        )
    };
    let identity = identity_file::load(&identity_file::path_in(&dir))?;
    let (loaded, complete, stream_db) = if aof && aof::startup::load(server)? {
        match identity {
            Some(i) if i.state == identity::RunState::Stopped => {
                (Some((i.ids.replid(), i.offset)), false, i.stream_db)
            }
            _ => (None, always, 0),
        }
    } else {
        let (history, stream_db) = load_snapshot_at_start(server)?;
        if aof {
            aof::startup::create(server)?;
        }
        (history, false, stream_db)
    };
    let loaded = identity::LoadedHistory {
        identity,
        loaded,
        complete,
        stream_db,
    };
    restart::take_over(server, loaded)
}

/// Loads the snapshot; the replication history it is exactly, if it says so, and the
/// database the stream is in at its offset.
fn load_snapshot_at_start(
    server: &Arc<Server>,
) -> anyhow::Result<(Option<(crate::replication::ids::ReplId, u64)>, usize)> {
    let path = server.config.read().snapshot_path();
    // A save that a crash interrupted left its temp file (`snapshot::temp_path`).
    if let Some(dir) = path.parent() {
        crate::stale_files::remove_stale(dir, "temp-", ".snap");
    }
    let started = Instant::now();
    let mut stats = load::load_file(server.dbs(), &path, unix_millis(), server.hot.packing())?;
    if let Some(stats) = stats.as_mut() {
        let codes = std::mem::take(&mut stats.functions);
        crate::scripting::functions::replace_from_snapshot(server, codes);
    }
    let history = stats.as_ref().and_then(|s| s.history);
    let stream_db = stats.as_ref().map_or(0, |s| s.history_stream_db);
    match stats {
        None => tracing::info!(path = %path.display(), "no snapshot file; starting empty"),
        Some(stats) => {
            tracing::info!(
                path = %path.display(),
                keys = stats.keys,
                expired_skipped = stats.expired,
                bytes = stats.bytes,
                secs = started.elapsed().as_secs_f64(),
                "DB loaded from disk"
            );
            server.snapshot.set_last_load(stats);
        }
    }
    Ok((history, stream_db))
}

/// The save that shutdown makes: stops a running save, then saves if `mode` asks for it
/// (SHUTDOWN SAVE), or by default if `save` rules are configured; never for NOSAVE.
/// Done once: after a success, later calls return Ok at once. A SHUTDOWN command calls
/// this before triggering the shutdown so that it can refuse on failure as Redis does
/// ("ERR Errors trying to SHUTDOWN. Check logs.").
pub fn prepare_shutdown(server: &Server, mode: ShutdownMode) -> Result<(), SaveError> {
    let state = &server.snapshot;
    let wanted = match mode {
        ShutdownMode::NoSave => false,
        ShutdownMode::Save => true,
        ShutdownMode::Default => !server.config.read().save.is_empty(),
    };
    let mut last = Ok(());
    for _ in 0..SHUTDOWN_SAVE_ATTEMPTS {
        if !state.abort_running(SHUTDOWN_WAIT) {
            tracing::warn!("a running save did not stop within {SHUTDOWN_WAIT:?}");
        }
        if !wanted || state.final_save_done() {
            return Ok(());
        }
        tracing::info!("saving the final snapshot before exit");
        last = save(server).map(|_| ());
        match &last {
            Ok(()) => {
                state.mark_final_save_done();
                return Ok(());
            }
            Err(SaveError::InProgress) => continue,
            Err(_) => break,
        }
    }
    last
}

/// Called once the node stops accepting work: saves as `prepare_shutdown` does. A failure
/// is logged and the process still exits (Redis would refuse to stop on SIGTERM; a node
/// under a supervisor that wants it gone should go).
/// The identity file then says `stopped` at the final offset: a restart that loads exactly
/// that offset holds everything this run had. A replica's link applies nothing more from
/// here on (its apply gate is held), so the save and the offset agree.
pub fn save_on_shutdown(server: &Server) {
    server.aof.shutdown();
    let _no_more_stream = server.replica_of.apply_gate();
    let mode = *server.shutdown.mode.lock();
    if let Err(e) = prepare_shutdown(server, mode) {
        tracing::error!("error trying to save the DB before exit, exiting anyway: {e}");
    }
    server.replication.write_identity_stopped();
}

#[cfg(test)]
mod history_tests;
#[cfg(test)]
mod tests;
