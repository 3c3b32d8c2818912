//! The keyspace: values, entries, shards organised by hash slot, and the locked view that
//! commands run against.

pub mod compaction;
pub mod databases;
pub mod entry;
pub mod eviction;
pub mod expiry;
pub mod footprint;
pub mod frequency;
pub mod guards;
pub mod hash;
pub mod hidden_slots;
pub mod image;
pub mod keyspace;
pub mod list;
pub mod locked;
pub mod memory;
pub mod packed;
pub mod packing;
pub mod set;
pub mod slot_index;
pub mod slot_table;
pub mod stored_key;
pub mod stream;
pub mod value;
pub mod warm;
pub mod zset;

pub use entry::Entry;
pub use keyspace::{Keyspace, Shard, SHARD_COUNT};
pub use locked::Locked;
pub use stored_key::{Access, StoredKey};
pub use value::{Key, Value};
