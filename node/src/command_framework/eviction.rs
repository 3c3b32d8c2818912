//! `maxmemory` before a command: evicting keys by the configured policy (the choice is the
//! keyspace's [`crate::db::eviction`] core) or refusing the command with Redis's OOM error
//! under `noeviction`.
//!
//! The random source and the wall clock are passed in ([`make_room_with`]), so that a test
//! can drive which keys go; [`make_room`] gives the thread's rng and the system clock.

use crate::clock::{lru_clock, unix_millis};
use crate::command_framework::CmdError;
use crate::db::eviction::{choose_victim, EvictionPolicy};
use crate::db::keyspace::SHARD_COUNT;
use crate::node_state::services::WriteStream;
use crate::node_state::stats::Stats;
use crate::node_state::NodeState;
use rand::Rng;
use std::sync::atomic::Ordering::Relaxed;

/// Most keys evicted to admit one command; past it the command is refused with OOM rather
/// than stall the client indefinitely.
pub const MAX_EVICTIONS_PER_COMMAND: usize = 10_000;
/// Evictions between two fresh readings of the allocator.
const EVICTIONS_PER_REFRESH: usize = 8;

/// Ensures used memory is under `maxmemory`, evicting if the policy allows. Ok(true): it
/// had work to do (eviction, which may take a while). `now`: the command's clock reading.
pub fn make_room(
    server: &NodeState,
    stream: &dyn WriteStream,
    now: std::time::Instant,
) -> Result<bool, CmdError> {
    make_room_with(server, stream, now, &mut rand::thread_rng(), &unix_millis)
}

/// [`make_room`] with the random source (which shard, which sampled keys) and the wall
/// clock (unix ms: the evicting shard's "now" for expiry and LRU) given.
pub fn make_room_with(
    server: &NodeState,
    stream: &dyn WriteStream,
    now: std::time::Instant,
    rng: &mut impl Rng,
    wall_clock: &dyn Fn() -> u64,
) -> Result<bool, CmdError> {
    let max = server.hot.maxmemory.load(Relaxed);
    if max == 0 || server.memory.used_at(now) <= max {
        return Ok(false);
    }
    let policy = server.hot.policy();
    if policy == EvictionPolicy::NoEviction {
        return Err(CmdError::OutOfMemory);
    }
    let samples = server.hot.maxmemory_samples.load(Relaxed).max(1) as usize;
    for round in 0..MAX_EVICTIONS_PER_COMMAND {
        if round % EVICTIONS_PER_REFRESH == 0 && server.memory.refresh() <= max {
            return Ok(true);
        }
        if !evict_one(server, stream, policy, samples, rng, wall_clock) {
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
fn evict_one(
    server: &NodeState,
    stream: &dyn WriteStream,
    policy: EvictionPolicy,
    samples: usize,
    rng: &mut impl Rng,
    wall_clock: &dyn Fn() -> u64,
) -> bool {
    let now = wall_clock();
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
                    stream.feed(&mut outgoing);
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
