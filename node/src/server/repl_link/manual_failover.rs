//! CLUSTER FAILOVER on a replica (Redis's manual failover), through the topology group:
//!
//! - default: the primary is asked (`REPLCONF FAILOVER-PAUSE`, over TCP to its client port)
//!   to pause clients' writes and answer its offset; once this replica has executed up to
//!   that offset, it proposes its promotion. No write the primary answered is lost. If the
//!   replica does not catch up within the pause, nothing changes and writes resume.
//! - FORCE: no coordination with the primary (it may be down): the promotion is proposed at
//!   once. Writes the primary answered after this replica's offset are lost unless the
//!   cluster runs `repl-sync-acks`.
//! - TAKEOVER: as FORCE. Redis's takeover skips the vote of the other primaries; here the
//!   topology log needs its majority for any change, so there is nothing more to skip.
//!
//! The coordinator runs on its own thread: Redis answers CLUSTER FAILOVER at once and the
//! switch happens in the background (its progress is in the log and in CLUSTER NODES).

use super::control::{Control, ControlError};
use crate::cluster::consensus::TopologyCommand;
use crate::cluster::ClusterError;
use crate::server::Server;
use proto::resp::Frame;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the primary pauses writes, and so how long this replica may take to catch up
/// (Redis: `CLUSTER_MF_TIMEOUT`, 5 s).
pub const MANUAL_FAILOVER_TIMEOUT: Duration = Duration::from_secs(5);
/// Between looks at this replica's offset while it catches up.
const CATCH_UP_POLL: Duration = Duration::from_millis(1);

pub use crate::node_state::services::failover::FailoverMode;

#[derive(Debug, thiserror::Error)]
pub enum ManualFailoverError {
    #[error("this node follows no primary")]
    NoPrimary,
    #[error("pausing the primary: {0}")]
    Pause(#[from] ControlError),
    #[error("the primary answered the pause with {0:?}")]
    PauseReply(Frame),
    #[error("caught up only to offset {reached} of {wanted} within the pause")]
    CatchUp { reached: u64, wanted: u64 },
    #[error("the promotion was not committed: {0}")]
    Propose(#[from] ClusterError),
    #[error("not in cluster mode")]
    NotCluster,
}

/// Starts the failover of `mode` in the background.
pub fn start(server: Arc<Server>, mode: FailoverMode) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("node-manual-failover".into())
        .spawn(move || match run(&server, mode) {
            Ok(()) => tracing::info!(?mode, "manual failover: promoted"),
            Err(e) => tracing::warn!(?mode, error = %e, "manual failover failed"),
        })
        .map(drop)
}

/// Runs the failover on the calling thread (blocking up to the pause and a proposal).
pub fn run(server: &Server, mode: FailoverMode) -> Result<(), ManualFailoverError> {
    let cluster = server
        .cluster
        .as_ref()
        .ok_or(ManualFailoverError::NotCluster)?;
    if mode == FailoverMode::Default {
        let (host, port) = server
            .replica_of
            .current_target()
            .ok_or(ManualFailoverError::NoPrimary)?;
        let mut control =
            Control::connect_to_primary(server, &host, port, MANUAL_FAILOVER_TIMEOUT)?;
        let ms = MANUAL_FAILOVER_TIMEOUT.as_millis().to_string();
        let wanted = match control.call(&[b"REPLCONF", b"FAILOVER-PAUSE", ms.as_bytes()])? {
            Frame::Integer(o) if o >= 0 => o as u64,
            other => return Err(ManualFailoverError::PauseReply(other)),
        };
        tracing::info!(wanted, "manual failover: primary paused; catching up");
        let deadline = Instant::now() + MANUAL_FAILOVER_TIMEOUT;
        loop {
            let reached = server.replication.master_repl_offset();
            if reached >= wanted {
                break;
            }
            if Instant::now() >= deadline {
                return Err(ManualFailoverError::CatchUp { reached, wanted });
            }
            std::thread::sleep(CATCH_UP_POLL);
        }
    }
    let me = cluster.topology.read().myself().id;
    cluster.propose(TopologyCommand::Promote { replica: me })?;
    Ok(())
}
