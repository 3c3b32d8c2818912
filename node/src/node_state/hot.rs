//! Config values consulted on every command, kept as atomics so the hot path takes no lock.

use crate::config::{Config, EvictionPolicy};
use crate::db::frequency::LfuParams;
use crate::db::list::ListLimits;
use crate::db::packed::PackLimits;
use crate::db::packing::Packing;
use crate::db::set::SetLimits;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};

pub struct HotConfig {
    pub maxmemory: AtomicU64,
    policy: AtomicU8,
    pub maxmemory_samples: AtomicU64,
    /// `lfu-log-factor` and `lfu-decay-time`, read by every access under an LFU policy.
    lfu_log_factor: AtomicU32,
    lfu_decay_minutes: AtomicU32,
    pub proto_max_bulk_len: AtomicU64,
    pub query_buffer_limit: AtomicU64,
    pub protected_mode: AtomicBool,
    pub timeout_secs: AtomicU64,
    pub maxclients: AtomicU64,
    pub slowlog_slower_than: AtomicU64,
    pub slowlog_max_len: AtomicU64,
    pub tracking_table_max_keys: AtomicU64,
    /// `latency-monitor-threshold` in ms (0: the latency monitor is off).
    pub latency_monitor_threshold_ms: AtomicU64,
    /// `min-replicas-to-write` and `min-replicas-max-lag`, read by every write's admission.
    pub min_replicas_to_write: AtomicU64,
    pub min_replicas_max_lag: AtomicU64,
    /// `repl-sync-acks` and `repl-sync-timeout`, read after every write.
    pub repl_sync_acks: AtomicU64,
    pub repl_sync_timeout_ms: AtomicU64,
    /// `io-busy-poll-us`, read by the busy-polling task on every turn and by every read.
    pub io_busy_poll_us: AtomicU64,
    /// `notify-keyspace-events` bits, read by every key change to know whether to record it.
    pub notify_keyspace_events: AtomicU32,
    /// `busy-reply-threshold` in ms: how long a script runs before other clients get BUSY.
    pub busy_reply_threshold_ms: AtomicU64,
    /// `replica-serve-stale-data`, read by every command of a replica.
    pub replica_serve_stale_data: AtomicBool,
    /// The packing thresholds (`*-max-listpack-*`, `set-max-intset-entries`), read by every
    /// write to a hash, set, sorted set or list.
    encodings: EncodingAtomics,
}

/// The encoding thresholds as atomics, see [`HotConfig::hash_limits`] and the rest.
#[derive(Default)]
struct EncodingAtomics {
    hash_entries: AtomicU64,
    hash_value: AtomicU64,
    set_entries: AtomicU64,
    set_value: AtomicU64,
    set_intset_entries: AtomicU64,
    zset_entries: AtomicU64,
    zset_value: AtomicU64,
    list_size: AtomicI64,
}

const POLICIES: [EvictionPolicy; 8] = [
    EvictionPolicy::NoEviction,
    EvictionPolicy::AllKeysLru,
    EvictionPolicy::VolatileLru,
    EvictionPolicy::AllKeysRandom,
    EvictionPolicy::VolatileRandom,
    EvictionPolicy::VolatileTtl,
    EvictionPolicy::AllKeysLfu,
    EvictionPolicy::VolatileLfu,
];

impl From<&Config> for HotConfig {
    fn from(c: &Config) -> Self {
        let hot = HotConfig {
            maxmemory: AtomicU64::new(0),
            policy: AtomicU8::new(0),
            maxmemory_samples: AtomicU64::new(5),
            lfu_log_factor: AtomicU32::new(0),
            lfu_decay_minutes: AtomicU32::new(0),
            proto_max_bulk_len: AtomicU64::new(0),
            query_buffer_limit: AtomicU64::new(0),
            protected_mode: AtomicBool::new(true),
            timeout_secs: AtomicU64::new(0),
            maxclients: AtomicU64::new(0),
            slowlog_slower_than: AtomicU64::new(0),
            slowlog_max_len: AtomicU64::new(0),
            tracking_table_max_keys: AtomicU64::new(0),
            latency_monitor_threshold_ms: AtomicU64::new(0),
            min_replicas_to_write: AtomicU64::new(0),
            min_replicas_max_lag: AtomicU64::new(0),
            repl_sync_acks: AtomicU64::new(0),
            repl_sync_timeout_ms: AtomicU64::new(5000),
            io_busy_poll_us: AtomicU64::new(0),
            notify_keyspace_events: AtomicU32::new(0),
            busy_reply_threshold_ms: AtomicU64::new(5000),
            replica_serve_stale_data: AtomicBool::new(true),
            encodings: EncodingAtomics::default(),
        };
        hot.update(c);
        hot
    }
}

impl HotConfig {
    pub fn update(&self, c: &Config) {
        self.busy_reply_threshold_ms
            .store(c.busy_reply_threshold, Relaxed);
        self.replica_serve_stale_data
            .store(c.replica_serve_stale_data, Relaxed);
        self.maxmemory.store(c.maxmemory, Relaxed);
        let idx = POLICIES
            .iter()
            .position(|p| *p == c.maxmemory_policy)
            .unwrap_or(0);
        self.policy.store(idx as u8, Relaxed);
        self.maxmemory_samples
            .store(c.maxmemory_samples as u64, Relaxed);
        self.lfu_log_factor.store(c.lfu.log_factor, Relaxed);
        self.lfu_decay_minutes.store(c.lfu.decay_minutes, Relaxed);
        self.proto_max_bulk_len.store(c.proto_max_bulk_len, Relaxed);
        self.query_buffer_limit
            .store(c.client_query_buffer_limit, Relaxed);
        self.protected_mode.store(c.protected_mode, Relaxed);
        self.timeout_secs.store(c.timeout, Relaxed);
        self.notify_keyspace_events
            .store(c.notify_keyspace_events, Relaxed);
        self.io_busy_poll_us.store(c.io_busy_poll_us, Relaxed);
        self.maxclients.store(c.maxclients, Relaxed);
        // -1 (never log) is stored as u64::MAX.
        self.slowlog_slower_than.store(
            if c.slowlog_log_slower_than < 0 {
                u64::MAX
            } else {
                c.slowlog_log_slower_than as u64
            },
            Relaxed,
        );
        self.slowlog_max_len.store(c.slowlog_max_len, Relaxed);
        self.tracking_table_max_keys
            .store(c.tracking_table_max_keys, Relaxed);
        self.latency_monitor_threshold_ms
            .store(c.latency.monitor_threshold_ms, Relaxed);
        self.min_replicas_to_write
            .store(c.min_replicas_to_write, Relaxed);
        self.min_replicas_max_lag
            .store(c.min_replicas_max_lag, Relaxed);
        self.repl_sync_acks.store(c.repl_sync_acks, Relaxed);
        self.repl_sync_timeout_ms
            .store(c.repl_sync_timeout_ms, Relaxed);
        let (e, a) = (&c.encodings, &self.encodings);
        a.hash_entries.store(e.hash_max_listpack_entries, Relaxed);
        a.hash_value.store(e.hash_max_listpack_value, Relaxed);
        a.set_entries.store(e.set_max_listpack_entries, Relaxed);
        a.set_value.store(e.set_max_listpack_value, Relaxed);
        a.set_intset_entries
            .store(e.set_max_intset_entries, Relaxed);
        a.zset_entries.store(e.zset_max_listpack_entries, Relaxed);
        a.zset_value.store(e.zset_max_listpack_value, Relaxed);
        a.list_size.store(e.list_max_listpack_size, Relaxed);
    }

    /// What a hash write packs by (`hash-max-listpack-entries`, `hash-max-listpack-value`).
    pub fn hash_limits(&self) -> PackLimits {
        let a = &self.encodings;
        PackLimits::new(a.hash_entries.load(Relaxed), a.hash_value.load(Relaxed))
    }

    /// What a set write packs by (`set-max-listpack-*`) and the intset bound OBJECT ENCODING
    /// answers by (`set-max-intset-entries`).
    pub fn set_limits(&self) -> SetLimits {
        let a = &self.encodings;
        SetLimits {
            packed: PackLimits::new(a.set_entries.load(Relaxed), a.set_value.load(Relaxed)),
            intset_entries: a.set_intset_entries.load(Relaxed).min(usize::MAX as u64) as usize,
        }
    }

    /// What a sorted set write packs by (`zset-max-listpack-entries`, `-value`).
    pub fn zset_limits(&self) -> PackLimits {
        let a = &self.encodings;
        PackLimits::new(a.zset_entries.load(Relaxed), a.zset_value.load(Relaxed))
    }

    /// Every type's thresholds, for a loader.
    pub fn packing(&self) -> Packing {
        Packing {
            hash: self.hash_limits(),
            set: self.set_limits(),
            zset: self.zset_limits(),
            list: self.list_limits(),
        }
    }

    /// What a list write packs by (`list-max-listpack-size`).
    pub fn list_limits(&self) -> ListLimits {
        ListLimits::from_size(self.encodings.list_size.load(Relaxed))
    }

    pub fn policy(&self) -> EvictionPolicy {
        POLICIES[self.policy.load(Relaxed) as usize % POLICIES.len()]
    }

    pub fn lfu(&self) -> LfuParams {
        LfuParams {
            log_factor: self.lfu_log_factor.load(Relaxed),
            decay_minutes: self.lfu_decay_minutes.load(Relaxed),
        }
    }

    /// The LFU counters' parameters when the policy counts accesses, None otherwise.
    pub fn lfu_counting(&self) -> Option<LfuParams> {
        self.policy().is_lfu().then(|| self.lfu())
    }
}
