//! `maxmemory`: evicting keys by the configured policy before a command that may grow memory
//! runs, or refusing it with Redis's OOM error under `noeviction`.

use super::entry::UnixMillis;
use super::keyspace::{Shard, SHARD_COUNT};
use super::value::Key;
use crate::command::CmdError;
use crate::config::EvictionPolicy;
use crate::server::stats::Stats;
use crate::server::{lru_clock, unix_millis, Server};
use rand::Rng;
use std::sync::atomic::Ordering::Relaxed;

/// Most keys evicted to admit one command; past it the command is refused with OOM rather
/// than stall the client indefinitely.
pub const MAX_EVICTIONS_PER_COMMAND: usize = 10_000;
/// Evictions between two fresh readings of the allocator.
const EVICTIONS_PER_REFRESH: usize = 8;
/// Random tables probed in a shard before falling back to a scan for a non-empty one.
const TABLE_PROBES: usize = 16;

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
        let victim = match policy {
            EvictionPolicy::NoEviction => return false,
            EvictionPolicy::AllKeysRandom => sample_any(&shard, 1, rng).into_iter().next(),
            EvictionPolicy::AllKeysLru => oldest(&shard, sample_any(&shard, samples, rng)),
            EvictionPolicy::VolatileRandom => sample_volatile(&shard, 1, rng).into_iter().next(),
            EvictionPolicy::VolatileLru => oldest(&shard, sample_volatile(&shard, samples, rng)),
            EvictionPolicy::VolatileTtl => soonest(&shard, sample_volatile(&shard, samples, rng)),
        };
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

fn sample_any(shard: &Shard, n: usize, rng: &mut impl Rng) -> Vec<Key> {
    let mut out = Vec::with_capacity(n);
    if shard.keys == 0 {
        return out;
    }
    for _ in 0..n {
        if let Some(table) = non_empty_table(shard, rng) {
            let i = rng.gen_range(0..table.len());
            if let Some((k, _)) = table.get_index(i) {
                out.push(k.clone());
            }
        }
    }
    out
}

fn non_empty_table<'s>(
    shard: &'s Shard,
    rng: &mut impl Rng,
) -> Option<&'s super::keyspace::SlotTable> {
    for _ in 0..TABLE_PROBES {
        let t = &shard.tables()[rng.gen_range(0..shard.tables().len())];
        if !t.is_empty() {
            return Some(t);
        }
    }
    shard.tables().iter().find(|t| !t.is_empty())
}

fn sample_volatile(shard: &Shard, n: usize, rng: &mut impl Rng) -> Vec<Key> {
    let mut out = Vec::with_capacity(n);
    if shard.expiry.live() == 0 {
        return out;
    }
    // Heap records may be stale: keep only keys whose entry still has that expiry.
    let is_live = |at: &UnixMillis, key: &Key| {
        shard
            .table(proto::slot::key_slot(key))
            .get(&**key)
            .is_some_and(|e| e.expires_at == *at)
    };
    for _ in 0..n * 4 {
        if out.len() >= n {
            break;
        }
        if let Some((at, key)) = shard.expiry.sample(rng.gen()) {
            if is_live(at, key) {
                out.push(key.clone());
            }
        }
    }
    // Keys with a TTL exist but every sample hit a stale record (few live among many
    // stale): find one by scanning, rather than answer OOM with evictable keys left.
    if out.is_empty() {
        if let Some((_, key)) = shard.expiry.records().find(|(at, key)| is_live(at, key)) {
            out.push(key.clone());
        }
    }
    out
}

fn oldest(shard: &Shard, keys: Vec<Key>) -> Option<Key> {
    keys.into_iter().min_by_key(|k| {
        shard
            .table(proto::slot::key_slot(k))
            .get(&**k)
            .map(|e| e.lru)
            .unwrap_or(u32::MAX)
    })
}

fn soonest(shard: &Shard, keys: Vec<Key>) -> Option<Key> {
    keys.into_iter().min_by_key(|k| {
        shard
            .table(proto::slot::key_slot(k))
            .get(&**k)
            .map(|e| e.expires_at)
            .unwrap_or(u64::MAX)
    })
}
