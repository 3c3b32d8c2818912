//! Periodic work, `hz` times a second: active expiry, the CLIENT TRACKING table's size
//! limit, idle-client timeouts, `save` rules, whether each keyspace is large enough to warm,
//! the ops/sec sample, the memory reading and MIGRATE's idle links.

use super::{lru_clock, unix_millis, Server};
use crate::config::keyspace_events::EXPIRED;
use crate::db::keyspace::SHARD_COUNT;
use crate::db::Locked;
use crate::node_state::keyspace_events;
use crate::node_state::stats::Stats;
use crate::replication::outgoing::Outgoing;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Expired keys removed per shard per tick at most, so one tick never holds a shard long;
/// a shard with more due keys continues at the next tick (lazy expiry covers reads).
pub const EXPIRE_BUDGET_PER_SHARD: usize = 256;

pub async fn run(server: Arc<Server>) {
    let mut shutdown = server.shutdown.subscribe();
    let mut last_ops = (Instant::now(), Stats::get(&server.stats.commands_processed));
    loop {
        let hz = server.config.read().hz.max(1);
        let tick = tokio::time::sleep(Duration::from_millis(1000 / hz as u64));
        tokio::select! {
            _ = tick => {}
            _ = shutdown.changed() => return,
        }
        active_expire(&server);
        if server.tracking.active() {
            // A lowered `tracking-table-max-keys` is reached even while no command runs.
            let max_keys = server.hot.tracking_table_max_keys.load(Relaxed);
            server.tracking.enforce_limit(&server.clients, max_keys);
        }
        close_idle_clients(&server);
        server.migrate_links.close_idle(Instant::now());
        server.memory.refresh_at(std::time::Instant::now());
        for keyspace in server.dbs().iter() {
            keyspace.refresh_warmth();
        }
        crate::server::persistence::cron(&server);
        let (at, ops) = last_ops;
        if at.elapsed() >= Duration::from_secs(1) {
            let now_ops = Stats::get(&server.stats.commands_processed);
            let per_sec = (now_ops.saturating_sub(ops) as f64 / at.elapsed().as_secs_f64()) as u64;
            server.stats.instantaneous_ops.store(per_sec, Relaxed);
            last_ops = (Instant::now(), now_ops);
        }
    }
}

/// Deletes due keys from every shard, a bounded number per shard.
pub fn active_expire(server: &Server) {
    // A replica expires nothing on its own clock (Redis's `activeExpireCycle` runs only on
    // primaries): its primary's DELs arrive in the stream, so both stay identical.
    if server.replica_of.is_replica() {
        return;
    }
    let now = unix_millis();
    // CLIENT PAUSE keeps the dataset as it is until it ends (Redis 7.0 stops active expiry
    // during any pause): a failover waiting on it must find replicas with the same keys.
    if server.client_pause.suspends_key_removal(now) {
        return;
    }
    let started = Instant::now();
    let mut expired_total = 0;
    for keyspace in server.dbs().iter() {
        expired_total += active_expire_in(server, keyspace, now);
    }
    Stats::add(&server.stats.expired_keys, expired_total);
    // A cycle over `latency-monitor-threshold` is a LATENCY event (Redis's `expire-cycle`):
    // freeing a large expired key happens here.
    let threshold_ms = server.hot.latency_monitor_threshold_ms.load(Relaxed);
    let took_ms = started.elapsed().as_millis() as u64;
    if threshold_ms > 0 && took_ms >= threshold_ms {
        server
            .latency_monitor
            .add("expire-cycle", now / 1000, took_ms);
    }
}

/// [`active_expire`] in one database; returns the keys it expired.
fn active_expire_in(server: &Server, keyspace: &crate::db::Keyspace, now: u64) -> u64 {
    let db = keyspace.index();
    let mut expired_total = 0;
    for shard_idx in 0..SHARD_COUNT {
        // A shard held by a long command (MIGRATE waiting on its target) is left for the
        // next tick: the cron must not stall its runtime worker behind it.
        let Some(mut shard) = keyspace.try_lock_shard(shard_idx) else {
            continue;
        };
        if shard.expiry.live() == 0 {
            continue;
        }
        let mut due = Vec::new();
        // Due keys of slots being imported: their source expires them and streams the DEL;
        // their records go back, to expire here once the slots are this node's.
        let mut deferred = Vec::new();
        let hidden = keyspace.hidden();
        while due.len() + deferred.len() < EXPIRE_BUDGET_PER_SHARD {
            let Some((at, key)) = shard.expiry.pop_due(now) else {
                break;
            };
            let slot = proto::slot::key_slot(&key);
            if shard
                .table(slot)
                .get(&key)
                .is_some_and(|e| e.expires_at == at)
            {
                if hidden.any() && hidden.contains(slot) {
                    deferred.push((at, key));
                } else {
                    due.push(key);
                }
            }
            // A record whose entry changed or vanished is stale: dropping it is all.
        }
        for (at, key) in deferred {
            shard.expiry.add(&key, at, true);
        }
        if due.is_empty() {
            continue;
        }
        let shard = {
            let mut locked = Locked::from_guard(keyspace, shard_idx, shard, now, lru_clock(now));
            let replicating = server.replication.active();
            if replicating {
                locked.record_removed();
            }
            for key in &due {
                locked.remove(key);
            }
            expired_total += locked.expired;
            // Published with the shard still locked, like a command's events.
            if keyspace_events::wanted(server, EXPIRED) {
                for key in &due {
                    keyspace_events::publish_one(server, db, EXPIRED, "expired", key);
                }
            }
            if server.tracking.active() {
                server
                    .tracking
                    .removed_outside_commands(&server.clients, &due);
            }
            if replicating {
                // Replicas never expire keys on their own clock: they get these DELs, fed
                // while the shard is still locked, each on its own as Redis propagates them
                // (no transaction for the replica to hold open).
                for key in locked.take_removed() {
                    let mut outgoing = Outgoing::default();
                    outgoing.key_removed(db, &key);
                    super::write_stream::feed(server, &mut outgoing);
                }
            }
            locked
        };
        drop(shard);
        if server.watches.active() {
            server.watches.touch(db, &due);
        }
    }
    expired_total
}

fn close_idle_clients(server: &Server) {
    let timeout = server.hot.timeout_secs.load(Relaxed);
    if timeout == 0 {
        return;
    }
    for client in server.clients.all() {
        // Blocked and subscribed clients are waiting by design, as in Redis.
        if client.blocked.load(Relaxed) || client.subscription_count() > 0 {
            continue;
        }
        if client.idle_secs() >= timeout {
            tracing::debug!(client = client.id, "idle timeout");
            client.kill();
        }
    }
}
