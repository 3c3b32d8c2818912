//! Redis's encoding thresholds (`hash-max-listpack-entries` and the rest). Redis switches a
//! small value between a compact and a general encoding at these sizes. Here hashes and sets
//! do too (`db::hash`, `db::set`: packed until a write takes them past
//! `hash-max-listpack-*` / `set-max-listpack-*`, Redis 7.2's names for sets); streams fill
//! their nodes up to the `stream-node-*` limits; lists and sorted sets keep one
//! representation, so their thresholds are kept, shown by CONFIG GET and rewritten, and only
//! shape OBJECT ENCODING's answer (README: differences).

use crate::db::packed::PackLimits;
use crate::db::set::SetLimits;

/// The thresholds, with Redis 7.0's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodingLimits {
    pub hash_max_listpack_entries: u64,
    pub hash_max_listpack_value: u64,
    pub list_max_listpack_size: i64,
    pub list_compress_depth: u64,
    pub set_max_intset_entries: u64,
    /// Redis 7.2's listpack-set thresholds: sets are packed up to them (`db::set`).
    pub set_max_listpack_entries: u64,
    pub set_max_listpack_value: u64,
    pub zset_max_listpack_entries: u64,
    pub zset_max_listpack_value: u64,
    /// Streams do use these two: nodes fill up to them, and `~` trims whole nodes.
    pub stream_node_max_entries: u64,
    pub stream_node_max_bytes: u64,
}

impl Default for EncodingLimits {
    fn default() -> Self {
        EncodingLimits {
            // The keyspace's packing defaults (what loaded values are packed by), so the
            // two cannot drift apart.
            hash_max_listpack_entries: PackLimits::HASH_DEFAULT.entries as u64,
            hash_max_listpack_value: PackLimits::HASH_DEFAULT.value as u64,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            set_max_intset_entries: SetLimits::DEFAULT.intset_entries as u64,
            set_max_listpack_entries: SetLimits::DEFAULT.packed.entries as u64,
            set_max_listpack_value: SetLimits::DEFAULT.packed.value as u64,
            zset_max_listpack_entries: PackLimits::ZSET_DEFAULT.entries as u64,
            zset_max_listpack_value: PackLimits::ZSET_DEFAULT.value as u64,
            stream_node_max_entries: 100,
            stream_node_max_bytes: 4096,
        }
    }
}
