//! A primary's last act before it stops (SHUTDOWN without NOW, SIGTERM, SIGINT), as Redis 7
//! does it: pause clients' writes, then wait up to `shutdown-timeout` seconds for every
//! online replica to acknowledge the last write. A rolling restart of a primary then loses
//! no acknowledged write: its replicas hold everything it answered.
//!
//! The wait polls, so it runs on a thread whose own loop it is, never on a connection's: for
//! SHUTDOWN a thread of its own ([`start`]; the client parks meanwhile and other clients
//! are served, as in Redis), for a signal a blocking thread, where a second signal stops
//! waiting. Writes get the failover pause's TRYAGAIN meanwhile. The acknowledgements arrive
//! on the replication threads.

use super::Server;
use crate::command_framework::ctx::SHUTDOWN_FAILED_ERROR;
use crate::node_state::services::shutdown::ShutdownOutcome;
use crate::node_state::shutdown::ShutdownMode;
use crate::node_state::ClientShared;
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// SHUTDOWN without NOW, on a thread of its own: waits for the replicas, saves, stops the
/// node; then puts the outcome in the returned channel and wakes `client`.
pub fn start(
    server: Arc<Server>,
    mode: ShutdownMode,
    force: bool,
    client: Arc<ClientShared>,
) -> std::io::Result<Receiver<ShutdownOutcome>> {
    let (outcome, answer) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("node-shutdown".into())
        .spawn(move || {
            // Woken also if this thread panics: the parked client then finds no outcome.
            let _wake = WakeOnDrop(client);
            let _ = outcome.send(finish(&server, mode, force));
        })?;
    Ok(answer)
}

struct WakeOnDrop(Arc<ClientShared>);

impl Drop for WakeOnDrop {
    fn drop(&mut self) {
        self.0.wake();
    }
}

/// The replicas get the last writes, the final save happens (a failure keeps the node up
/// as Redis does, unless `force`), the node stops.
fn finish(server: &Server, mode: ShutdownMode, force: bool) -> ShutdownOutcome {
    wait_for_replicas(server);
    if let Err(e) = super::persistence::prepare_shutdown(server, mode) {
        tracing::error!(error = %e, "final save before SHUTDOWN failed");
        if !force {
            resume_writes(server);
            return Err(SHUTDOWN_FAILED_ERROR.to_string());
        }
    }
    server.shutdown.trigger(mode);
    Ok(())
}

/// How often the acknowledgements are looked at while waiting.
const POLL: Duration = Duration::from_millis(5);

/// Waits as described above; true when the replicas caught up (also when there are none or
/// `shutdown-timeout` is 0), false at the timeout. Writes stay paused either way; the caller
/// lifts the pause ([`resume_writes`]) if it does not stop after all.
pub fn wait_for_replicas(server: &Server) -> bool {
    let timeout = Duration::from_secs(server.config.read().shutdown_timeout);
    let replication = &server.replication;
    if timeout.is_zero() || replication.online_replicas() == 0 {
        tracing::info!("no online replica to wait for; shutting down");
        return true;
    }
    let deadline = Instant::now() + timeout;
    // Until the process ends (or resume_writes): a pause that lapsed during a slow final
    // save would let writes be acknowledged that no replica and no snapshot has.
    replication.pause_writes(u64::MAX);
    // Every write admitted before the pause has fed the stream once each shard was taken.
    server.dbs().barrier();
    let offset = replication.master_repl_offset();
    tracing::info!(
        offset,
        "waiting for replicas to acknowledge the last write before shutting down"
    );
    loop {
        if replication.all_online_acked(offset) {
            tracing::info!(offset, "replicas caught up; shutting down");
            return true;
        }
        if server.shutdown.is_triggered() {
            // A second signal, or SHUTDOWN NOW meanwhile: stop waiting.
            return false;
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                offset,
                ?timeout,
                "replicas did not catch up within shutdown-timeout; shutting down anyway"
            );
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// Lifts the pause of [`wait_for_replicas`] when the shutdown was abandoned (a failed final
/// save without FORCE).
pub fn resume_writes(server: &Server) {
    server.replication.pause_writes(0);
}
