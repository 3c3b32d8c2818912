//! The keys of one hash slot: a dense array of (key, entry) records in insertion order, plus a
//! hash index of positions into it.
//!
//! Position access in O(1) gives cheap random sampling (RANDOMKEY, eviction) and a SCAN
//! cursor that is stable under deletion (removal moves only the last record into the hole).
//! This is the shape of `indexmap::IndexMap`, minus two costs that dominate at a million keys
//! (about 61 keys a slot): indexmap stores each key's 8-byte hash beside its record and
//! indexes with 8-byte positions. Here hashes are recomputed from the keys (inline, so
//! cheap) when the index grows, and positions are 2 bytes (4 in a table past 65,536 keys:
//! [`super::slot_index`]): 17 bytes a key less (measured with `scripts/memory-per-key.sh`).
//! The record array grows by an eighth of its length instead of doubling (a doubled array
//! of 64-byte records would waste up to half of them).

use super::entry::Entry;
use super::slot_index::SlotIndex;
use super::stored_key::{Access, StoredKey};
use super::value::Hasher;

/// A full record array grows by this fraction of its length (but at least [`MIN_GROWTH`]).
pub const GROWTH_DIVISOR: usize = 8;
/// Fewest records a full array grows by, so small tables do not reallocate on every insert.
pub const MIN_GROWTH: usize = 4;
/// Most keys one slot can hold: positions are `u32`. Far beyond any node's memory (a key
/// takes at least 70 bytes), so reaching it is a bug, not a client's doing.
pub const MAX_KEYS_PER_SLOT: usize = u32::MAX as usize;

#[derive(Clone)]
pub struct SlotTable {
    records: Vec<(StoredKey, Entry)>,
    index: SlotIndex,
    hasher: Hasher,
}

impl SlotTable {
    pub fn with_hasher(hasher: Hasher) -> Self {
        SlotTable {
            records: Vec::new(),
            index: SlotIndex::default(),
            hasher,
        }
    }

    pub fn hasher(&self) -> &Hasher {
        &self.hasher
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.records.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Records the array holds without growing.
    pub fn capacity(&self) -> usize {
        self.records.capacity()
    }

    #[inline]
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Position of `key`'s record.
    #[inline]
    pub fn get_index_of(&self, key: &[u8]) -> Option<usize> {
        let records = &self.records;
        self.index
            .find(self.hash(key), |i| records[i].0.as_bytes() == key)
    }

    /// `key`'s position, stored key and entry.
    #[inline]
    pub fn get_full(&self, key: &[u8]) -> Option<(usize, &StoredKey, &Entry)> {
        let i = self.get_index_of(key)?;
        let (k, e) = &self.records[i];
        Some((i, k, e))
    }

    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        self.get_index_of(key).map(|i| &self.records[i].1)
    }

    #[inline]
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let i = self.get_index_of(key)?;
        Some(&mut self.records[i].1)
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.get_index_of(key).is_some()
    }

    #[inline]
    pub fn get_index(&self, i: usize) -> Option<(&StoredKey, &Entry)> {
        self.records.get(i).map(|(k, e)| (k, e))
    }

    #[inline]
    pub fn get_index_mut(&mut self, i: usize) -> Option<(&StoredKey, &mut Entry)> {
        self.records.get_mut(i).map(|(k, e)| (&*k, e))
    }

    /// `key`'s access stamps changed by `f` at position `i` (the key's bytes cannot be).
    #[inline]
    pub fn update_access(&mut self, i: usize, f: impl FnOnce(&mut Access)) {
        if let Some((key, _)) = self.records.get_mut(i) {
            let mut access = key.access();
            f(&mut access);
            key.set_access(access);
        }
    }

    /// Stores `entry` under `key` with `access`: replaces and returns the entry of a present
    /// key (keeping its position), or appends a new record. One hash lookup either way.
    pub fn insert(&mut self, key: &[u8], entry: Entry, access: Access) -> Option<Entry> {
        let hash = self.hash(key);
        let SlotTable {
            records,
            index,
            hasher,
        } = self;
        if let Some(i) = index.find(hash, |i| records[i].0.as_bytes() == key) {
            let (stored, old) = &mut records[i];
            stored.set_access(access);
            return Some(std::mem::replace(old, entry));
        }
        assert!(records.len() < MAX_KEYS_PER_SLOT, "slot table full");
        if records.len() == records.capacity() {
            records.reserve_exact((records.len() / GROWTH_DIVISOR).max(MIN_GROWTH));
        }
        let position = records.len();
        records.push((StoredKey::new(key, access), entry));
        index.insert_unique(hash, position, |i| hasher.hash_one(records[i].0.as_bytes()));
        None
    }

    /// Removes `key`'s record; the last record moves into its position (so positions above
    /// it shift by none, and only the last one changes: what SCAN's cursor relies on).
    pub fn swap_remove(&mut self, key: &[u8]) -> Option<(Entry, Access)> {
        let hash = self.hash(key);
        let SlotTable {
            records,
            index,
            hasher,
        } = self;
        let position = index.remove(hash, |i| records[i].0.as_bytes() == key)?;
        let last = records.len() - 1;
        let (stored, entry) = records.swap_remove(position);
        if position != last {
            let moved_hash = hasher.hash_one(records[position].0.as_bytes());
            index.move_position(moved_hash, last, position);
        }
        Some((entry, stored.access()))
    }

    /// Every record, in position order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&StoredKey, &Entry)> + '_ {
        self.records.iter().map(|(k, e)| (k, e))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &StoredKey> + '_ {
        self.records.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Entry> + '_ {
        self.records.iter().map(|(_, e)| e)
    }

    /// Where the record array lives, 0 while it has no allocation: the order compaction
    /// moves tables in (see [`super::compaction`]).
    pub fn records_address(&self) -> usize {
        if self.records.capacity() == 0 {
            0
        } else {
            self.records.as_ptr() as usize
        }
    }

    /// Moves the record array and the index to fresh allocations of the same sizes (each
    /// allocated before the old one is freed), positions and contents unchanged: what
    /// compaction does to gather tables out of the slabs their growth left sparse.
    pub fn relocate(&mut self) {
        let mut records = Vec::with_capacity(self.records.capacity());
        records.append(&mut self.records);
        self.records = records;
        self.index = self.index.clone();
    }

    /// Bytes the table itself holds on the heap: the record array (to its capacity) and the
    /// index. Keys' and values' own allocations aside.
    pub fn heap_bytes(&self) -> usize {
        self.records.capacity() * std::mem::size_of::<(StoredKey, Entry)>()
            + self.index.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Value;

    fn entry(n: i64) -> Entry {
        Entry::new(Value::Int(n))
    }

    fn stamp(lru: u32) -> Access {
        Access::fresh(lru)
    }

    fn int(e: Option<&Entry>) -> Option<i64> {
        match e.map(|e| &e.value) {
            Some(Value::Int(n)) => Some(*n),
            _ => None,
        }
    }

    /// Goal: lookups, replacement and swap-removal keep every key reachable at the position
    /// it was reported at. Method: insert, remove every third key, check the rest both ways.
    #[test]
    fn removal_moves_the_last_record_and_keeps_every_key_found() {
        let mut t = SlotTable::with_hasher(Hasher::new());
        for i in 0..1000 {
            assert!(t
                .insert(format!("key:{i}").as_bytes(), entry(i), stamp(i as u32))
                .is_none());
        }
        assert_eq!(
            int(t.insert(b"key:5", entry(-5), stamp(5)).as_ref()),
            Some(5),
            "replaced"
        );
        assert_eq!(t.get_index_of(b"key:5"), Some(5), "kept its position");
        for i in (0..1000).step_by(3) {
            let last = t.get_index(t.len() - 1).unwrap().0.to_key();
            let at = t.get_index_of(format!("key:{i}").as_bytes()).unwrap();
            let (_, access) = t.swap_remove(format!("key:{i}").as_bytes()).unwrap();
            assert_eq!(access.lru, i as u32, "the removed key's stamps come back");
            if at < t.len() {
                assert_eq!(
                    &*t.get_index(at).unwrap().0.to_key(),
                    &*last,
                    "last moved in"
                );
            }
        }
        assert!(t.swap_remove(b"key:0").is_none());
        assert_eq!(t.len(), 666);
        for i in 0..1000 {
            let key = format!("key:{i}");
            let found = t.get_full(key.as_bytes());
            assert_eq!(found.is_some(), i % 3 != 0, "{key}");
            if let Some((pos, k, e)) = found {
                assert_eq!(k.as_bytes(), key.as_bytes());
                assert_eq!(int(Some(e)), Some(if i == 5 { -5 } else { i }));
                assert_eq!(t.get_index(pos).unwrap().0.as_bytes(), key.as_bytes());
                assert_eq!(k.access().lru, i as u32);
            }
        }
        assert_eq!(t.iter().count(), t.len());
    }

    /// Goal: relocation changes where a table lives, not what it holds or where each key
    /// sits. Method: relocate a table with removals behind it and look every key up.
    #[test]
    fn relocation_keeps_positions_and_contents() {
        let mut t = SlotTable::with_hasher(Hasher::new());
        for i in 0..300 {
            t.insert(format!("key:{i}").as_bytes(), entry(i), stamp(i as u32));
        }
        for i in (0..300).step_by(7) {
            t.swap_remove(format!("key:{i}").as_bytes());
        }
        let before: Vec<(Vec<u8>, Option<i64>)> = t
            .iter()
            .map(|(k, e)| (k.as_bytes().to_vec(), int(Some(e))))
            .collect();
        let (capacity, heap, address) = (t.capacity(), t.heap_bytes(), t.records_address());
        t.relocate();
        assert_eq!((t.capacity(), t.heap_bytes()), (capacity, heap));
        assert_ne!(address, 0);
        let after: Vec<(Vec<u8>, Option<i64>)> = t
            .iter()
            .map(|(k, e)| (k.as_bytes().to_vec(), int(Some(e))))
            .collect();
        assert_eq!(before, after);
        for (position, (key, value)) in before.iter().enumerate() {
            assert_eq!(t.get_index_of(key), Some(position));
            assert_eq!(int(t.get(key)), *value);
        }
        assert_eq!(SlotTable::with_hasher(Hasher::new()).records_address(), 0);
    }

    #[test]
    fn the_record_array_grows_by_an_eighth() {
        let mut t = SlotTable::with_hasher(Hasher::new());
        for i in 0..5000 {
            t.insert(format!("k{i}").as_bytes(), entry(i), stamp(0));
            let bound = t.len() + (t.len() / GROWTH_DIVISOR).max(MIN_GROWTH);
            assert!(t.capacity() <= bound, "{} > {bound}", t.capacity());
        }
        assert!(t.heap_bytes() >= t.len() * std::mem::size_of::<(StoredKey, Entry)>());
    }
}
