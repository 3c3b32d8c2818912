//! `maxmemory` before a command: evicting keys by the configured policy (the choice is the
//! keyspace's [`crate::db::eviction`] core) or refusing the command with Redis's OOM error
//! under `noeviction`.
//!
//! The random source and the wall clock are passed in ([`make_room_with`]), so that a test
//! can drive which keys go; [`make_room`] gives the thread's rng and the system clock.

use crate::clock::{lru_clock, unix_millis};
use crate::command_framework::CmdError;
use crate::config::keyspace_events::EVICTED;
use crate::db::eviction::{choose_victim, Ages, EvictionPolicy};
use crate::db::keyspace::SHARD_COUNT;
use crate::node_state::keyspace_events;
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
/// had work to do (eviction, which may take a while). `now`: the command's clock reading,
/// taken only when a limit is set (every write command comes here).
///
/// Inlined for its first test, no limit (see `acl_check::check`).
#[inline]
pub fn make_room(
    server: &NodeState,
    stream: &dyn WriteStream,
    now: impl FnOnce() -> std::time::Instant,
) -> Result<bool, CmdError> {
    // Checked before the random source is fetched: `thread_rng` is a thread-local and a
    // reference count on every write command's path, for nothing when under the limit.
    let max = server.hot.maxmemory.load(Relaxed);
    if max == 0 {
        return Ok(false);
    }
    make_room_under_limit(server, stream, now(), max)
}

/// [`make_room`] with `maxmemory` set (to `max`).
fn make_room_under_limit(
    server: &NodeState,
    stream: &dyn WriteStream,
    now: std::time::Instant,
    max: u64,
) -> Result<bool, CmdError> {
    if server.memory.used_at(now) <= max {
        return Ok(false);
    }
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
    // No eviction (and no refusal) while CLIENT PAUSE holds the dataset still, as Redis 7.0
    // does during any pause.
    if server.client_pause.suspends_key_removal(wall_clock()) {
        return Ok(false);
    }
    let policy = server.hot.policy();
    if policy == EvictionPolicy::NoEviction {
        return Err(CmdError::OutOfMemory);
    }
    let samples = server.hot.maxmemory_samples.load(Relaxed).max(1) as usize;
    for round in 0..MAX_EVICTIONS_PER_COMMAND {
        if round % EVICTIONS_PER_REFRESH == 0 && server.memory.refresh_at(now) <= max {
            return Ok(true);
        }
        if !evict_one(server, stream, policy, samples, rng, wall_clock) {
            break;
        }
    }
    if server.memory.refresh_at(now) <= max {
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
    let dbs: Vec<&crate::db::Keyspace> = server.dbs().iter().collect();
    let first_db = rng.gen_range(0..dbs.len());
    (0..dbs.len()).any(|i| {
        let keyspace = dbs[(first_db + i) % dbs.len()];
        evict_one_in(server, keyspace, stream, policy, samples, rng, wall_clock)
    })
}

/// [`evict_one`] in one database.
fn evict_one_in(
    server: &NodeState,
    keyspace: &crate::db::Keyspace,
    stream: &dyn WriteStream,
    policy: EvictionPolicy,
    samples: usize,
    rng: &mut impl Rng,
    wall_clock: &dyn Fn() -> u64,
) -> bool {
    let now = wall_clock();
    let db = keyspace.index();
    let start = rng.gen_range(0..SHARD_COUNT);
    for offset in 0..SHARD_COUNT {
        let shard_idx = (start + offset) % SHARD_COUNT;
        let shard = keyspace.lock_shard(shard_idx);
        if policy == EvictionPolicy::NoEviction {
            return false;
        }
        let ages = Ages {
            lru_clock: lru_clock(now),
            lfu: server.hot.lfu(),
        };
        let hidden = keyspace.hidden();
        let victim = choose_victim(&shard, hidden, policy, samples, ages, rng);
        if let Some(key) = victim {
            let mut locked =
                crate::db::Locked::from_guard(keyspace, shard_idx, shard, now, lru_clock(now));
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
                    outgoing.key_removed(db, &expired);
                }
                if evicted {
                    outgoing.key_removed(db, &key);
                }
                if !outgoing.is_empty() {
                    stream.feed(&mut outgoing);
                }
            }
            if evicted {
                keyspace_events::publish_one(server, db, EVICTED, "evicted", &key);
            }
            if evicted && server.tracking.active() {
                // Told with the shard still locked, like a command's changes.
                server
                    .tracking
                    .removed_outside_commands(&server.clients, std::slice::from_ref(&key));
            }
            if evicted || locked.expired > 0 {
                Stats::add(&server.stats.evicted_keys, 1);
                if server.watches.active() {
                    server.watches.touch(db, &[key]);
                }
            }
            return true;
        }
        drop(shard);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::db::{Locked, Value};
    use crate::node_state::services::write_stream::Fed;
    use crate::replication::outgoing::Outgoing;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    /// Nothing replicates in these tests: eviction must not feed anything.
    struct NoStream;

    impl WriteStream for NoStream {
        fn feed(&self, _outgoing: &mut Outgoing) -> Fed {
            panic!("nothing is replicated, nothing is fed");
        }
        fn refusing_writes(&self) -> Option<String> {
            None
        }
        fn log_end(&self) -> u64 {
            0
        }
    }

    /// The fixed wall clock of these tests (unix ms), before every expiry below.
    const NOW: u64 = 1_000;

    /// Keys of one slot (one hash tag), so that every eviction looks at the same shard.
    fn state_with(keys: &[(&str, Option<u64>)]) -> NodeState {
        let state = NodeState::new(Config::default(), Vec::new(), &mut rand::thread_rng());
        let mut db = Locked::lock_all(&state.keyspace, NOW, lru_clock(NOW));
        for (key, expires_at) in keys {
            db.set(key.as_bytes(), Value::Int(1));
            if let Some(at) = expires_at {
                db.set_expiry(key.as_bytes(), *at);
            }
        }
        drop(db);
        state
    }

    fn present(state: &NodeState, keys: &[&str]) -> Vec<String> {
        let mut db = Locked::lock_all(&state.keyspace, NOW, lru_clock(NOW));
        keys.iter()
            .filter(|k| db.exists(k.as_bytes()))
            .map(|k| k.to_string())
            .collect()
    }

    /// Evicts one key after another; returns the keys in the order they went.
    fn eviction_order(
        state: &NodeState,
        policy: EvictionPolicy,
        keys: &[&str],
        seed: u64,
    ) -> Vec<String> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut order = Vec::new();
        let mut left = present(state, keys);
        while evict_one(state, &NoStream, policy, 16, &mut rng, &|| NOW) {
            let now_left = present(state, keys);
            let gone: Vec<_> = left.iter().filter(|k| !now_left.contains(k)).collect();
            assert_eq!(gone.len(), 1, "one key per eviction: {gone:?}");
            order.push(gone[0].clone());
            left = now_left;
        }
        order
    }

    #[test]
    fn volatile_ttl_evicts_the_nearest_expiry_first_and_never_a_persistent_key() {
        let keys = ["{s}a", "{s}b", "{s}c", "{s}p"];
        let state = state_with(&[
            ("{s}a", Some(5_000)),
            ("{s}b", Some(3_000)),
            ("{s}c", Some(9_000)),
            ("{s}p", None),
        ]);
        let order = eviction_order(&state, EvictionPolicy::VolatileTtl, &keys, 7);
        assert_eq!(order, ["{s}b", "{s}a", "{s}c"]);
        assert_eq!(present(&state, &keys), ["{s}p"]);
        assert_eq!(state.stats.evicted_keys.load(Relaxed), 3);
    }

    #[test]
    fn lfu_policies_evict_the_least_used_key_first() {
        let keys = ["{s}a", "{s}b", "{s}c", "{s}p"];
        let state = state_with(&[
            ("{s}a", Some(5_000)),
            ("{s}b", Some(5_000)),
            ("{s}c", Some(5_000)),
            ("{s}p", None),
        ]);
        let mut db = Locked::lock_all(&state.keyspace, NOW, lru_clock(NOW));
        for (key, freq) in [("{s}a", 50), ("{s}b", 3), ("{s}c", 20), ("{s}p", 0)] {
            db.update_access(key.as_bytes(), |access| access.freq = freq);
        }
        drop(db);
        let order = eviction_order(&state, EvictionPolicy::VolatileLfu, &keys, 7);
        assert_eq!(order, ["{s}b", "{s}c", "{s}a"]);
        assert_eq!(present(&state, &keys), ["{s}p"]);
    }

    #[test]
    fn a_seeded_random_source_evicts_the_same_keys_in_the_same_order() {
        let keys: Vec<String> = (0..20).map(|i| format!("{{s}}k{i}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let entries: Vec<(&str, Option<u64>)> = keys.iter().map(|k| (*k, None)).collect();
        let run = |seed| {
            let state = state_with(&entries);
            eviction_order(&state, EvictionPolicy::AllKeysRandom, &keys, seed)
        };
        let first = run(42);
        assert_eq!(first.len(), keys.len(), "every key goes: {first:?}");
        assert_eq!(run(42), first);
        // The order is the random source's, not the keys' (a fixed seed that shuffles).
        assert_ne!(first, keys);
    }
}
