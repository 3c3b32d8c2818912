//! `maxmemory` before a command: evicting keys by the configured policy (the choice is the
//! keyspace's [`crate::db::eviction`] core) or refusing the command with Redis's OOM error
//! under `noeviction`.

use crate::command_framework::CmdError;
use crate::db::eviction::{choose_victim, EvictionPolicy};
use crate::db::keyspace::SHARD_COUNT;
use crate::server::stats::Stats;
use crate::server::{lru_clock, unix_millis, Server};
use rand::Rng;
use std::sync::atomic::Ordering::Relaxed;

/// Most keys evicted to admit one command; past it the command is refused with OOM rather
/// than stall the client indefinitely.
pub const MAX_EVICTIONS_PER_COMMAND: usize = 10_000;
/// Evictions between two fresh readings of the allocator.
const EVICTIONS_PER_REFRESH: usize = 8;

/// Ensures used memory is under `maxmemory`, evicting if the policy allows. Ok(true): it
/// had work to do (eviction, which may take a while). `now`: the command's clock reading.
pub fn make_room(server: &Server, now: std::time::Instant) -> Result<bool, CmdError> {
    let max = server.hot.maxmemory.load(Relaxed);
    if max == 0 || server.memory.used_at(now) <= max {
        return Ok(false);
    }
    let policy = server.hot.policy();
    if policy == EvictionPolicy::NoEviction {
        return Err(CmdError::OutOfMemory);
    }
    let samples = server.hot.maxmemory_samples.load(Relaxed).max(1) as usize;
    let mut rng = rand::thread_rng();
    for round in 0..MAX_EVICTIONS_PER_COMMAND {
        if round % EVICTIONS_PER_REFRESH == 0 && server.memory.refresh() <= max {
            return Ok(true);
        }
        if !evict_one(server, policy, samples, &mut rng) {
            break;
        }
    }
    if server.memory.refresh() <= max {
        Ok(true)
    } else {
        Err(CmdError::OutOfMemory)
    }
}

/// Evicts one key chosen by `policy` from a random shard. Returns false if no key qualifies.
fn evict_one(server: &Server, policy: EvictionPolicy, samples: usize, rng: &mut impl Rng) -> bool {
    let now = unix_millis();
    let start = rng.gen_range(0..SHARD_COUNT);
    for offset in 0..SHARD_COUNT {
        let shard_idx = (start + offset) % SHARD_COUNT;
        let shard = server.keyspace.lock_shard(shard_idx);
        if policy == EvictionPolicy::NoEviction {
            return false;
        }
        let victim = choose_victim(&shard, policy, samples, rng);
        if let Some(key) = victim {
            let mut locked = crate::db::Locked::from_guard(
                &server.keyspace,
                shard_idx,
                shard,
                now,
                lru_clock(now),
            );
            let replicating = server.replication.active();
            if replicating {
                locked.record_removed();
            }
            let evicted = locked.remove(&key).is_some();
            if replicating {
                // The replica deletes what the primary evicted (or found expired), fed while
                // the shard is still locked.
                let mut outgoing = crate::replication::outgoing::Outgoing::default();
                for expired in locked.take_removed() {
                    outgoing.key_removed(&expired);
                }
                if evicted {
                    outgoing.key_removed(&key);
                }
                if !outgoing.is_empty() {
                    crate::server::write_stream::feed(server, &mut outgoing);
                }
            }
            if evicted || locked.expired > 0 {
                Stats::add(&server.stats.evicted_keys, 1);
                if server.watches.active() {
                    server.watches.touch(&[key]);
                }
            }
            return true;
        }
        drop(shard);
    }
    false
}
