//! WatchCluster: the topology now (past `since_version`), then at every change, polled.
//! Polling the shared topology keeps the bus thread free of subscribers to feed.

use super::cluster_view::{cluster_message, watched_part};
use crate::server::Server;
use proto::admin::v1 as pb;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

/// Watch streams open at once on this node; more are refused (RESOURCE_EXHAUSTED).
pub const CLUSTER_WATCHERS_MAX: usize = 64;
/// Changes queued for one slow watcher before its stream waits.
const WATCH_QUEUE_MAX: usize = 16;
/// How often a watcher looks at the topology.
const WATCH_POLL: Duration = Duration::from_millis(100);

static WATCHERS: AtomicUsize = AtomicUsize::new(0);

pub type ClusterChanges = ReceiverStream<Result<pb::ClusterChange, Status>>;

pub fn watch(server: Arc<Server>, since_version: u64) -> Result<ClusterChanges, Status> {
    if server.cluster.is_none() {
        return Err(Status::failed_precondition("not in cluster mode"));
    }
    let slot = super::stream_limit::acquire(&WATCHERS, CLUSTER_WATCHERS_MAX, "WatchCluster")?;
    let (tx, rx) = tokio::sync::mpsc::channel(WATCH_QUEUE_MAX);
    tokio::spawn(async move {
        let _slot = slot;
        let mut last: Option<pb::Cluster> = None;
        let mut ticker = tokio::time::interval(WATCH_POLL);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = tx.closed() => return,
                _ = server.shutdown.wait() => return,
            }
            let Some(cluster) = server.cluster.as_ref() else {
                return;
            };
            let now = cluster_message(cluster);
            let part = watched_part(&now);
            let send = match &last {
                // The first look: resume after the version the caller saw.
                None => since_version == 0 || now.version > since_version,
                Some(prev) => *prev != part,
            };
            last = Some(part);
            if send
                && tx
                    .send(Ok(pb::ClusterChange { cluster: Some(now) }))
                    .await
                    .is_err()
            {
                return;
            }
        }
    });
    Ok(ReceiverStream::new(rx))
}
