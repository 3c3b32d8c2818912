//! MEMORY USAGE: an estimate of the bytes one key takes in this node's representation.
//!
//! It counts what the node asks the allocator for: the key's record in its slot table (the
//! key with its access stamps, the entry, its index position), the key's heap bytes when it
//! is too long to sit inline, its record in the expiry queue, and the value's tables and
//! elements. Allocator size-class rounding and bookkeeping are not counted, so the estimate
//! is a little low, never made up. Elements of aggregates are sampled as Redis does: the
//! first `samples` elements' average stands for all of them (`samples` 0: every element is
//! counted).

use super::entry::Entry;
use super::stored_key::{StoredKey, INLINE_MAX};
use super::value::{HashValue, Key, ListValue, SetValue, Value};
use super::zset::ZSet;
use std::mem::size_of;

/// Redis's default for MEMORY USAGE's SAMPLES.
pub const DEFAULT_SAMPLES: usize = 5;

/// Bytes an index-map spends per element in its hash index (hashbrown: a `usize` and a
/// control byte per bucket, buckets at most 7/8 full), rounded up.
const INDEX_BYTES_PER_ELEMENT: usize = 11;
/// The stored hash beside each index-map element.
const HASH_BYTES: usize = 8;

/// Bytes a slot table's index spends per key (a 4-byte position and a control byte per
/// bucket, buckets at most 7/8 full), rounded up.
const SLOT_INDEX_BYTES_PER_KEY: usize = 6;

/// A key's record in its slot table, its key's heap bytes and value aside: the key as
/// stored, the entry, its index (see `slot_table.rs`).
pub const KEY_SLOT_BYTES: usize =
    size_of::<StoredKey>() + size_of::<Entry>() + SLOT_INDEX_BYTES_PER_KEY;
/// A record of the expiry queue, its copy of the key's bytes aside.
pub const EXPIRY_RECORD_BYTES: usize = size_of::<(u64, Key)>();

/// The estimate for `key` holding `entry`.
pub fn key_usage(key: &[u8], entry: &Entry, samples: usize) -> u64 {
    let mut bytes = KEY_SLOT_BYTES + value_bytes(&entry.value, samples);
    if key.len() > INLINE_MAX {
        bytes += key.len();
    }
    if entry.expires_at != 0 {
        // The expiry queue's record: the deadline and its own copy of the key.
        bytes += EXPIRY_RECORD_BYTES + key.len();
    }
    bytes as u64
}

/// The value's heap bytes (the enum itself sits in the entry).
fn value_bytes(value: &Value, samples: usize) -> usize {
    match value {
        Value::Str(s) => s.len(),
        Value::Int(_) => 0,
        Value::List(l) => match l.chunks() {
            // One allocation holds the elements with their length prefixes.
            None => size_of::<ListValue>() + l.packed_bytes().unwrap_or(0),
            Some(c) => {
                let nodes = c.nodes();
                size_of::<ListValue>()
                    + size_of::<super::list::chunks::Chunks>()
                    + nodes.capacity() * size_of::<super::list::chunks::Node>()
                    + sampled(nodes.iter().map(|n| n.heap_bytes()), nodes.len(), samples)
            }
        },
        Value::Hash(h) => match h.table() {
            // One allocation holds the fields and values with their length prefixes.
            None => size_of::<HashValue>() + h.packed_bytes().unwrap_or(0),
            Some(t) => {
                size_of::<HashValue>()
                    + size_of::<super::hash::HashTable>()
                    + t.capacity() * (HASH_BYTES + 2 * size_of::<Box<[u8]>>())
                    + t.len() * INDEX_BYTES_PER_ELEMENT
                    + sampled(t.iter().map(|(f, v)| f.len() + v.len()), t.len(), samples)
            }
        },
        Value::Set(s) => match s.table() {
            // One allocation holds the members with their length prefixes.
            None => size_of::<SetValue>() + s.packed_bytes().unwrap_or(0),
            Some(t) => {
                size_of::<SetValue>()
                    + size_of::<super::set::SetTable>()
                    + t.capacity() * (HASH_BYTES + size_of::<Box<[u8]>>())
                    + t.len() * INDEX_BYTES_PER_ELEMENT
                    + sampled(t.iter().map(|m| m.len()), t.len(), samples)
            }
        },
        Value::ZSet(z) if z.is_packed() => {
            // One allocation holds the members and scores with their length prefixes.
            size_of::<ZSet>() + z.structure_bytes()
        }
        Value::ZSet(z) => {
            size_of::<ZSet>()
                + z.structure_bytes()
                + z.len() * INDEX_BYTES_PER_ELEMENT
                + sampled(z.iter_unordered().map(|(m, _)| m.len()), z.len(), samples)
        }
        // Entries are counted whole (their fields and values), not sampled.
        Value::Stream(s) => size_of::<super::stream::Stream>() + s.payload_bytes() as usize,
    }
}

/// The bytes of `len` elements from the first `samples` of them (0: all).
fn sampled(lens: impl Iterator<Item = usize>, len: usize, samples: usize) -> usize {
    let wanted = if samples == 0 { len } else { samples.min(len) };
    if wanted == 0 {
        return 0;
    }
    let seen: usize = lens.take(wanted).sum();
    if wanted == len {
        seen
    } else {
        (seen as u128 * len as u128 / wanted as u128) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&[u8]]) -> Value {
        Value::List(Box::new(items.iter().copied().collect()))
    }

    #[test]
    fn sampling_extrapolates_from_the_first_elements() {
        assert_eq!(sampled([2, 2, 8, 8].into_iter(), 4, 2), 8, "2+2 for four");
        assert_eq!(sampled([2, 2, 8, 8].into_iter(), 4, 0), 20, "all counted");
        assert_eq!(
            sampled([2, 2].into_iter(), 2, 5),
            4,
            "fewer than the samples"
        );
        assert_eq!(sampled(std::iter::empty(), 0, 5), 0);
    }

    /// Goal: the estimate grows with what the key holds and counts long keys and expiry.
    /// Method: estimates of growing values compared.
    #[test]
    fn the_estimate_grows_with_the_value_key_and_expiry() {
        let small = Entry::new(Value::Str(vec![b'x'; 10].into()));
        let big = Entry::new(Value::Str(vec![b'x'; 10_000].into()));
        let (s, b) = (key_usage(b"k", &small, 5), key_usage(b"k", &big, 5));
        assert_eq!(b - s, 9_990);
        let long_key = [b'k'; 100];
        assert_eq!(key_usage(&long_key, &small, 5) - s, 100);
        let mut volatile = small.clone();
        volatile.expires_at = 1;
        assert!(key_usage(b"k", &volatile, 5) > s);
        let short = Entry::new(list(&[b"a", b"b"]));
        let long = Entry::new(list(&[b"aaaa", b"bbbb", b"cccc"]));
        assert!(key_usage(b"k", &long, 0) > key_usage(b"k", &short, 0));
    }
}
