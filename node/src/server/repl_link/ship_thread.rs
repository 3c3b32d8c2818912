//! A primary's thread for one replica's link: copies new backlog bytes into a thread-local
//! mirror, pumps the [`Shipper`] (ring WRITEs), and reports the replica's acknowledged offset
//! to WAIT and INFO; it ends when the link fails, the replica links again, or it falls silent,
//! and in cluster mode when gossip finds the replica dead or restarted ([`PeerWatch`]).

use super::peer_watch::{PeerState, PeerWatch};
use crate::node_state::replication::ReplicaId;
use crate::replication::backlog::Backlog;
use crate::replication::ship::Shipper;
use crate::replication::ship_pace::{PaceLimits, ShipPace};
use crate::server::{unix_millis, Server};
use bus::Connection;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A shipper with nothing in flight sleeps at most this long without new bytes: acks arrive
/// with no event on this side, so it looks at the applied word this often (WAIT's latency
/// floor when idle). This bounds an idle link's CPU.
const SHIP_IDLE: Duration = Duration::from_millis(2);
/// A shipper with WRITEs in flight or bytes unacknowledged pumps again after this pause: on
/// manual-progress providers (shm, tcp) its WRITEs complete and the replica's acks land only
/// during its own calls into the provider, and shm with delivery complete carries one WRITE
/// per round trip of both processes' progress (a 2 ms sleep there made bursts take seconds).
const SHIP_BUSY_POLL: Duration = Duration::from_micros(20);
/// A link that posted nothing for this long sends a ping record, so the replica can tell an
/// idle primary from a gone one (Redis: `repl-ping-replica-period`, 10 s by default there).
/// In cluster mode a quarter of the node timeout when that is shorter ([`ping_period`]).
const PING_PERIOD: Duration = Duration::from_secs(1);
/// The shortest ping period, whatever the node timeout.
const PING_PERIOD_MIN: Duration = Duration::from_millis(10);

/// How often an idle link pings: [`PING_PERIOD`], or in cluster mode a quarter of the node
/// timeout if shorter, so that a replica's silence limit (the node timeout there) never
/// takes an idle primary for a gone one.
pub fn ping_period(server: &Server) -> Duration {
    let config = server.config.read();
    if !config.cluster.enabled || config.cluster.node_timeout_ms == 0 {
        return PING_PERIOD;
    }
    Duration::from_millis(config.cluster.node_timeout_ms / 4).clamp(PING_PERIOD_MIN, PING_PERIOD)
}
/// How long a link that ends on purpose tries to get its closed mark into the replica's ring
/// (it needs the replica's progress); past it the replica notices by `repl-timeout`.
const CLOSE_FLUSH_MAX: Duration = Duration::from_millis(200);
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
    mut watch: Option<PeerWatch>,
) {
    // The link's clock: the pacing core takes the time since this thread started.
    let origin = Instant::now();
    let mut pace = ShipPace::new(
        PaceLimits {
            ping_every: ping_period(&server),
            repl_timeout: repl_timeout(&server),
        },
        online_at,
        origin.elapsed(),
    );
    let mut live = true;
    let size = mirror_size(shipper.ring_data_len());
    let mut mirror = match Backlog::new(size, shipper.next_offset() - 1) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(replica = id, error = %e, "replication mirror");
            server.replication.detach_replica(id);
            return;
        }
    };
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
        // A stalled link (the ring full, the mirror holding a ring's worth) copies nothing, so
        // it must look whether the backlog still holds its next byte: once it does not, the
        // replica can never continue and is dropped at once (it full-syncs), not after
        // `repl-timeout`.
        if room == 0
            && server.replication.master_repl_offset() > mirror.master_repl_offset()
            && !server
                .replication
                .read_backlog(mirror.master_repl_offset() + 1, |range| range.is_some())
        {
            tracing::warn!(
                replica = id,
                "replica fell out of the backlog; dropping link"
            );
            break;
        }
        let progress = match shipper.pump(&mirror, origin.elapsed()) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(replica = id, error = %e, "replication link failed");
                break;
            }
        };
        // CONFIG SET repl-timeout applies to links already up.
        pace.set_repl_timeout(repl_timeout(&server));
        let verdict = pace.after_pump(&progress, shipper.ring_in_use(), origin.elapsed());
        if verdict.ping_due {
            match shipper.ping() {
                Ok(true) => pace.pinged(origin.elapsed()),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(replica = id, error = %e, "replication link failed");
                    break;
                }
            }
        }
        let now = unix_millis();
        if let (Some(w), Some(cluster)) = (watch.as_mut(), server.cluster.as_ref()) {
            let state = w.check(cluster);
            if let PeerState::Gone(why) = state {
                tracing::warn!(replica = id, why, "replica gone (gossip); dropping link");
                break;
            }
            let heard = state == PeerState::Alive;
            if heard != live {
                live = heard;
                server.replication.set_live(id, live, now);
            }
        }
        if verdict.went_online {
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
        if verdict.timed_out {
            tracing::warn!(replica = id, "replica acknowledges nothing; dropping link");
            break;
        }
        if progress.shipped_bytes == 0 && pace.poll_soon(shipper.busy(), origin.elapsed()) {
            std::thread::sleep(SHIP_BUSY_POLL);
        } else if progress.shipped_bytes == 0 {
            // Nothing moved: sleep until bytes beyond what the node has now arrive (or the
            // idle timer, to read acks), without spinning while the ring is full.
            let seen = server.replication.master_repl_offset();
            server
                .replication
                .wait_for_bytes(seen.max(mirror.master_repl_offset()), SHIP_IDLE);
        }
    }
    // Also after a protocol error (a broken ring refuses at once): the replica must not wait
    // for `repl-timeout` to learn that its link is gone.
    close_link(&mut shipper, id);
    server.replication.detach_replica(id);
}

/// `repl-timeout`: how long a replica may acknowledge nothing shipped to it.
fn repl_timeout(server: &Server) -> Duration {
    Duration::from_secs(server.config.read().repl_timeout_secs)
}

/// Puts the closed mark into the replica's ring (best effort, bounded by CLOSE_FLUSH_MAX),
/// so that a replica dropped on purpose reconnects at once instead of after `repl-timeout`.
fn close_link<C: Connection>(shipper: &mut Shipper<C>, id: ReplicaId) {
    let started = Instant::now();
    let deadline = started + CLOSE_FLUSH_MAX;
    let mut result = shipper.close();
    while result.is_ok() && !shipper.close_delivered() && Instant::now() < deadline {
        std::thread::sleep(SHIP_BUSY_POLL);
        result = shipper.poll_close(started.elapsed());
    }
    match result {
        Ok(()) if shipper.close_delivered() => {
            tracing::info!(replica = id, "replica told the link is closed")
        }
        Ok(()) => tracing::info!(replica = id, "closed mark not delivered in time"),
        Err(e) => tracing::info!(replica = id, error = %e, "closed mark not sent"),
    }
}
