//! `maxmemory`'s core: which key a policy evicts from a shard, sampling with the random
//! source it is given (no clock, no I/O). The command framework runs it before a command that
//! may grow memory (the command layer's `eviction`).

use super::entry::UnixMillis;
use super::frequency::{self, LfuParams};
use super::hidden_slots::HiddenSlots;
use super::keyspace::Shard;
use super::value::Key;
use rand::Rng;

/// Random tables probed in a shard before falling back to a scan for a non-empty one.
const TABLE_PROBES: usize = 16;

/// `maxmemory-policy`: which keys may go, and which first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionPolicy {
    NoEviction,
    AllKeysLru,
    VolatileLru,
    AllKeysRandom,
    VolatileRandom,
    VolatileTtl,
    AllKeysLfu,
    VolatileLfu,
}

impl EvictionPolicy {
    /// In Redis's order (its CONFIG SET error lists them so).
    pub const NAMES: [(EvictionPolicy, &'static str); 8] = [
        (EvictionPolicy::VolatileLru, "volatile-lru"),
        (EvictionPolicy::VolatileLfu, "volatile-lfu"),
        (EvictionPolicy::VolatileRandom, "volatile-random"),
        (EvictionPolicy::VolatileTtl, "volatile-ttl"),
        (EvictionPolicy::AllKeysLru, "allkeys-lru"),
        (EvictionPolicy::AllKeysLfu, "allkeys-lfu"),
        (EvictionPolicy::AllKeysRandom, "allkeys-random"),
        (EvictionPolicy::NoEviction, "noeviction"),
    ];

    /// Whether accesses are counted in the entries' LFU counters (and OBJECT FREQ answers).
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu
        )
    }

    /// Redis's CONFIG SET error for a name that is none of the policies.
    pub fn parse_error() -> String {
        let names: Vec<&str> = Self::NAMES.iter().map(|(_, n)| *n).collect();
        format!(
            "argument(s) must be one of the following: {}",
            names.join(", ")
        )
    }

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(p, _)| *p == self)
            .map(|(_, n)| *n)
            .unwrap_or("noeviction")
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(s))
            .map(|(p, _)| *p)
    }
}

/// When a victim is chosen: the LRU clock (seconds) and the LFU counters' decay, for the
/// LFU policies' comparison of decayed counters.
#[derive(Debug, Clone, Copy)]
pub struct Ages {
    pub lru_clock: u32,
    pub lfu: LfuParams,
}

/// The key `policy` would evict from `shard`, sampling `samples` keys where the policy
/// compares (LRU, LFU, TTL); None if no key qualifies. Keys of `hidden` slots never qualify:
/// they are a migration's copy of keys the source still owns, and evicting one here would
/// lose it silently at the commit (the source keeps serving it until then). They count
/// toward `maxmemory` all the same, so an import that does not fit makes the node evict its
/// own keys by its policy, or refuse the import's writes (OOM) and so abort the migration.
pub fn choose_victim(
    shard: &Shard,
    hidden: &HiddenSlots,
    policy: EvictionPolicy,
    samples: usize,
    ages: Ages,
    rng: &mut impl Rng,
) -> Option<Key> {
    let from = Sampled { shard, hidden };
    match policy {
        EvictionPolicy::NoEviction => None,
        EvictionPolicy::AllKeysRandom => from.any(1, rng).into_iter().next(),
        EvictionPolicy::AllKeysLru => oldest(shard, from.any(samples, rng)),
        EvictionPolicy::VolatileRandom => from.volatile(1, rng).into_iter().next(),
        EvictionPolicy::VolatileLru => oldest(shard, from.volatile(samples, rng)),
        EvictionPolicy::VolatileTtl => soonest(shard, from.volatile(samples, rng)),
        EvictionPolicy::AllKeysLfu => least_used(shard, from.any(samples, rng), ages),
        EvictionPolicy::VolatileLfu => least_used(shard, from.volatile(samples, rng), ages),
    }
}

/// Where candidates are drawn from: the shard's tables but the hidden ones.
struct Sampled<'s> {
    shard: &'s Shard,
    hidden: &'s HiddenSlots,
}

impl<'s> Sampled<'s> {
    fn any(&self, n: usize, rng: &mut impl Rng) -> Vec<Key> {
        let mut out = Vec::with_capacity(n);
        if self.shard.visible_keys(self.hidden) == 0 {
            return out;
        }
        for _ in 0..n {
            if let Some(table) = self.non_empty_table(rng) {
                let i = rng.gen_range(0..table.len());
                if let Some((k, _)) = table.get_index(i) {
                    out.push(k.to_key());
                }
            }
        }
        out
    }

    fn non_empty_table(&self, rng: &mut impl Rng) -> Option<&'s super::keyspace::SlotTable> {
        let tables = self.shard.tables();
        for _ in 0..TABLE_PROBES {
            let i = rng.gen_range(0..tables.len());
            if !tables[i].is_empty() && !self.shard.table_hidden(i, self.hidden) {
                return Some(&tables[i]);
            }
        }
        self.shard
            .visible_tables(self.hidden)
            .map(|(_, t)| t)
            .find(|t| !t.is_empty())
    }

    fn volatile(&self, n: usize, rng: &mut impl Rng) -> Vec<Key> {
        let shard = self.shard;
        let mut out = Vec::with_capacity(n);
        if shard.expiry.live() == 0 {
            return out;
        }
        // Heap records may be stale: keep only keys whose entry still has that expiry (and
        // whose slot is not hidden).
        let is_live = |at: &UnixMillis, key: &Key| {
            let slot = proto::slot::key_slot(key);
            !(self.hidden.any() && self.hidden.contains(slot))
                && shard
                    .table(slot)
                    .get(key)
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
}

fn oldest(shard: &Shard, keys: Vec<Key>) -> Option<Key> {
    keys.into_iter().min_by_key(|k| {
        shard
            .table(proto::slot::key_slot(k))
            .get_full(k)
            .map(|(_, stored, _)| stored.access().lru)
            .unwrap_or(u32::MAX)
    })
}

/// The sampled key with the lowest decayed LFU counter.
fn least_used(shard: &Shard, keys: Vec<Key>, ages: Ages) -> Option<Key> {
    keys.into_iter().min_by_key(|k| {
        shard
            .table(proto::slot::key_slot(k))
            .get_full(k)
            .map(|(_, stored, _)| {
                let access = stored.access();
                let idle = ages.lru_clock.saturating_sub(access.lru);
                u16::from(frequency::decayed(access.freq, idle, ages.lfu))
            })
            .unwrap_or(u16::MAX)
    })
}

fn soonest(shard: &Shard, keys: Vec<Key>) -> Option<Key> {
    keys.into_iter().min_by_key(|k| {
        shard
            .table(proto::slot::key_slot(k))
            .get(k)
            .map(|e| e.expires_at)
            .unwrap_or(u64::MAX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::keyspace::{shard_of_slot, Keyspace};
    use crate::db::{Locked, Value};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    /// The first `n` keys `k:<i>` that land in `shard`.
    fn keys_in_shard(shard: usize, n: usize) -> Vec<String> {
        (0..)
            .map(|i| format!("k:{i}"))
            .filter(|k| shard_of_slot(proto::slot::key_slot(k.as_bytes())) == shard)
            .take(n)
            .collect()
    }

    #[test]
    fn no_policy_evicts_a_key_of_a_hidden_slot() {
        // Goal: the keys of a slot being imported are never a victim, whatever the policy.
        // Method: one shard, every key with a TTL; hide the slots of half of them, draw
        // many victims under every evicting policy; then hide all and expect none.
        let keyspace = Keyspace::new();
        let keys = keys_in_shard(5, 40);
        let mut db = Locked::lock_all(&keyspace, 1, 0);
        for k in &keys {
            db.set(k.as_bytes(), Value::Int(1));
            assert!(db.set_expiry(k.as_bytes(), 1_000_000));
        }
        drop(db);
        let slots: Vec<u16> = keys
            .iter()
            .map(|k| proto::slot::key_slot(k.as_bytes()))
            .collect();
        let hidden_half: Vec<u16> = slots.iter().copied().step_by(2).collect();
        keyspace.hidden().replace(hidden_half.iter().copied());
        let mut rng = StdRng::seed_from_u64(17);
        let policies = EvictionPolicy::NAMES
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| *p != EvictionPolicy::NoEviction);
        let shard = keyspace.lock_shard(5);
        for policy in policies.clone() {
            for _ in 0..200 {
                let ages = Ages {
                    lru_clock: 0,
                    lfu: LfuParams::default(),
                };
                let victim = choose_victim(&shard, keyspace.hidden(), policy, 5, ages, &mut rng)
                    .unwrap_or_else(|| panic!("{policy:?} found no victim"));
                let slot = proto::slot::key_slot(&victim);
                assert!(
                    !keyspace.hidden().contains(slot),
                    "{policy:?} chose {victim:?}"
                );
            }
        }
        keyspace.hidden().replace(slots.iter().copied());
        for policy in policies {
            let ages = Ages {
                lru_clock: 0,
                lfu: LfuParams::default(),
            };
            let victim = choose_victim(&shard, keyspace.hidden(), policy, 5, ages, &mut rng);
            assert_eq!(victim, None, "{policy:?}");
        }
    }
}
