//! Bringing a pipeline's keys into the cache before its commands run.
//!
//! Why: with a million keys, a lookup is three dependent cache misses (the index's control
//! bytes, its position, the record) plus the value's bytes, and perf of `GET -r 1000000 -P 16`
//! put 28% of the node's CPU on those stalls, one command after the other. Looked up back to
//! back in a tight loop, the keys of a batch are independent chains: the CPU overlaps their
//! misses (memory-level parallelism), and the commands then find their records in cache.
//! Valkey 8 prefetches a batch's keys for the same reason.
//!
//! Only reads, with the shards held; a shard another thread holds is skipped (the lookup is a
//! hint, never worth a wait).

use super::keyspace::{shard_of_slot, Keyspace};
use super::value::Value;
use smallvec::SmallVec;

/// Most keys warmed at once: a batch's shards are all held while its keys are looked up.
pub const WARM_KEYS_MAX: usize = 16;

/// Keys from which a keyspace is warmed: about 18 MB of records and values at 100,000
/// keys, past what a core's share of the cache holds. Below it lookups mostly hit the cache
/// anyway, and the look ahead only costs (a second parse of each request: the default
/// `redis-benchmark` tests, on a handful of keys, lost a fifth of their -P 16 throughput).
pub const WARM_FROM_KEYS: usize = 100_000;

impl Keyspace {
    /// Whether lookups are worth warming (the key count at the last
    /// [`Keyspace::refresh_warmth`]).
    pub fn worth_warming(&self) -> bool {
        self.large.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Counts the keys (each shard held in turn, briefly) and decides
    /// [`Keyspace::worth_warming`]. Called periodically, from a thread that serves clients:
    /// a shard someone holds (a long script holds them all) is not waited for, and the count
    /// is left for the next call.
    pub fn refresh_warmth(&self) {
        if let Some(keys) = self.try_key_count() {
            self.large
                .store(keys >= WARM_FROM_KEYS, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Looks up `keys` (at most [`WARM_KEYS_MAX`]; the rest are ignored), touching each
    /// record and the first byte of a string value, so that the commands about to run on
    /// them find them in cache.
    pub fn warm(&self, keys: &[&[u8]]) {
        let keys = &keys[..keys.len().min(WARM_KEYS_MAX)];
        let slots: SmallVec<[u16; WARM_KEYS_MAX]> =
            keys.iter().map(|k| proto::slot::key_slot(k)).collect();
        let mut shards: SmallVec<[usize; WARM_KEYS_MAX]> =
            slots.iter().map(|&s| shard_of_slot(s)).collect();
        shards.sort_unstable();
        shards.dedup();
        // Every shard first: a lock is an atomic read-modify-write, which waits for the loads
        // before it and would serialize the misses this overlaps.
        let guards: SmallVec<[_; WARM_KEYS_MAX]> = shards
            .iter()
            .filter_map(|&s| self.try_lock_shard(s).map(|guard| (s, guard)))
            .collect();
        let mut touched = 0u8;
        for (key, &slot) in keys.iter().zip(&slots) {
            let shard = shard_of_slot(slot);
            let Some((_, guard)) = guards.iter().find(|(s, _)| *s == shard) else {
                continue;
            };
            if let Some(entry) = guard.table(slot).get(key) {
                touched ^= match &entry.value {
                    Value::Str(bytes) => bytes.first().copied().unwrap_or(0),
                    _ => 1,
                };
            }
        }
        std::hint::black_box(touched);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Locked;

    /// Goal: warming reads only: it finds present keys, ignores missing ones and more than
    /// the limit, and leaves every value as it was. Method: warm present, missing and too
    /// many keys, then read them back.
    #[test]
    fn warming_reads_only() {
        let keyspace = Keyspace::new();
        let names: Vec<Vec<u8>> = (0..40).map(|i| format!("key:{i}").into_bytes()).collect();
        {
            let mut db = Locked::lock_all(&keyspace, 0, 0);
            for (i, name) in names.iter().enumerate().take(30) {
                db.set(name, Value::Str(format!("v{i}").into_bytes().into()));
            }
        }
        let keys: Vec<&[u8]> = names.iter().map(|n| n.as_slice()).collect();
        keyspace.warm(&keys);
        keyspace.warm(&keys[25..]);
        keyspace.warm(&[]);
        let mut db = Locked::lock_all(&keyspace, 0, 0);
        for (i, name) in names.iter().enumerate() {
            let got = db.get(name).map(|e| match &e.value {
                Value::Str(b) => b.to_vec(),
                _ => panic!("not a string"),
            });
            let want = (i < 30).then(|| format!("v{i}").into_bytes());
            assert_eq!(got, want, "{i}");
        }
    }

    /// Goal: warming is worth it from [`WARM_FROM_KEYS`] keys on, as the last refresh
    /// counted. Method: refresh below and at the threshold.
    #[test]
    fn worth_warming_from_the_threshold() {
        let keyspace = Keyspace::new();
        let mut db = Locked::lock_all(&keyspace, 0, 0);
        for i in 0..WARM_FROM_KEYS - 1 {
            db.set(format!("k{i}").as_bytes(), Value::Int(1));
        }
        drop(db);
        keyspace.refresh_warmth();
        assert!(!keyspace.worth_warming());
        Locked::lock_all(&keyspace, 0, 0).set(b"last", Value::Int(1));
        assert!(!keyspace.worth_warming(), "until the next refresh");
        keyspace.refresh_warmth();
        assert!(keyspace.worth_warming());
    }

    /// Goal: the periodic refresh never waits for a held shard (it runs on a thread that
    /// serves clients), nor decides from a partial count. Method: mark an empty keyspace
    /// large, hold a shard, refresh from this thread (it would deadlock if it waited): the
    /// flag keeps its value; released, the refresh counts zero keys.
    #[test]
    fn refresh_skips_while_a_shard_is_held() {
        let keyspace = Keyspace::new();
        keyspace
            .large
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let guard = keyspace.lock_shard(3);
        keyspace.refresh_warmth();
        assert!(keyspace.worth_warming(), "no decision from a partial count");
        drop(guard);
        keyspace.refresh_warmth();
        assert!(!keyspace.worth_warming());
    }

    /// Goal: a shard another thread holds is skipped, not waited for. Method: hold the
    /// shard of a key, warm it from this thread (it would deadlock if it waited).
    #[test]
    fn a_held_shard_is_skipped() {
        let keyspace = Keyspace::new();
        let shard = shard_of_slot(proto::slot::key_slot(b"held"));
        let _guard = keyspace.lock_shard(shard);
        keyspace.warm(&[b"held".as_slice(), b"other".as_slice()]);
    }
}
