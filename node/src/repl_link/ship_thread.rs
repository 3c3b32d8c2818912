//! A primary's thread for one replica's link: copies new backlog bytes into a thread-local
//! mirror, pumps the [`Shipper`] (ring WRITEs), and reports the replica's acknowledged offset
//! to WAIT and INFO; it ends when the link fails, the replica links again, or it falls silent.

use crate::replication::backlog::Backlog;
use crate::replication::ship::Shipper;
use crate::server::replication::ReplicaId;
use crate::server::{unix_millis, Server};
use bus::Connection;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A shipper sleeps at most this long without new bytes: acks arrive with no event on this
/// side, so it looks at the applied word this often (WAIT's latency floor when idle).
const SHIP_IDLE: Duration = Duration::from_millis(2);
/// A replica that acknowledges none of the bytes shipped to it for this long is gone (RDM
/// providers report no dead peer): its link is dropped and it is detached.
const REPLICA_SILENCE_LIMIT: Duration = Duration::from_secs(10);
/// The mirror's size: twice the ring. At most half of it is copied but unshipped (the ring
/// cannot take more at once), so a round copies at most one ring's worth.
fn mirror_size(ring_data_len: u64) -> usize {
    (ring_data_len as usize).saturating_mul(2)
}

/// Pumps one replica's link until it fails or the node shuts down. The backlog's bytes are
/// copied into a thread-local mirror (bounded by twice the ring) so that writers never wait
/// for ring WRITE posts.
pub fn ship_loop<C: Connection>(
    server: Arc<Server>,
    mut shipper: Shipper<C>,
    id: ReplicaId,
    online_at: u64,
    stop: Arc<AtomicBool>,
) {
    let size = mirror_size(shipper.ring_data_len());
    let mut mirror = match Backlog::new(size, shipper.next_offset() - 1) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(replica = id, error = %e, "replication mirror");
            server.replication.detach_replica(id);
            return;
        }
    };
    let mut online = false;
    let mut behind_since: Option<Instant> = None;
    while !server.shutdown.is_triggered() {
        if stop.load(Relaxed) {
            tracing::info!(replica = id, "replica linked again; this link ends");
            break;
        }
        // Copy what the mirror has room for (its unshipped part stays under one ring).
        let unshipped = mirror.master_repl_offset() + 1 - shipper.next_offset();
        let room = (size / 2).saturating_sub(unshipped as usize);
        if room > 0 && server.replication.master_repl_offset() > mirror.master_repl_offset() {
            let copied =
                server
                    .replication
                    .read_backlog(mirror.master_repl_offset() + 1, |range| {
                        range.map(|r| {
                            let mut out = Vec::with_capacity(r.len().min(room));
                            for chunk in r.chunks() {
                                let take = chunk.len().min(room - out.len());
                                out.extend_from_slice(&chunk[..take]);
                                if out.len() == room {
                                    break;
                                }
                            }
                            out
                        })
                    });
            match copied {
                Some(bytes) => {
                    mirror.append(&bytes);
                }
                None => {
                    tracing::warn!(
                        replica = id,
                        "replica fell out of the backlog; dropping link"
                    );
                    break;
                }
            }
        }
        let progress = match shipper.pump(&mirror) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(replica = id, error = %e, "replication link failed");
                break;
            }
        };
        let now = unix_millis();
        if !online && progress.snapshot_remaining == 0 && progress.acked_offset >= online_at {
            online = true;
            server.replication.replica_online(id, now);
            tracing::info!(
                replica = id,
                offset = progress.acked_offset,
                "replica online"
            );
        }
        server
            .replication
            .observe_ack(id, progress.acked_offset, now);
        if progress.acked_offset + 1 >= progress.next_offset {
            behind_since = None;
        } else if behind_since.get_or_insert_with(Instant::now).elapsed() > REPLICA_SILENCE_LIMIT {
            tracing::warn!(replica = id, "replica acknowledges nothing; dropping link");
            break;
        }
        if progress.shipped_bytes == 0 {
            // Nothing moved: sleep until bytes beyond what the node has now arrive (or the
            // idle timer, to read acks), without spinning while the ring is full.
            let seen = server.replication.master_repl_offset();
            server
                .replication
                .wait_for_bytes(seen.max(mirror.master_repl_offset()), SHIP_IDLE);
        }
    }
    server.replication.detach_replica(id);
}
