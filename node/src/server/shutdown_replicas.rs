//! A primary's last act before it stops (SHUTDOWN without NOW, SIGTERM, SIGINT), as Redis 7
//! does it: pause clients' writes, then wait up to `shutdown-timeout` seconds for every
//! online replica to acknowledge the last write. A rolling restart of a primary then loses
//! no acknowledged write: its replicas hold everything it answered.
//!
//! For SHUTDOWN the wait holds the connection's thread (with one io-thread, other clients'
//! reads wait too, for at most `shutdown-timeout`; Redis keeps serving them); for a signal it
//! runs on a blocking thread, and a second signal stops waiting. Writes get the failover
//! pause's TRYAGAIN meanwhile. The acknowledgements arrive on the replication threads.

use super::Server;
use std::time::{Duration, Instant};

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
    server.keyspace.barrier();
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
