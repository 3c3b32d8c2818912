//! A slot table's hash index: the positions of its records, found by hash.
//!
//! Positions are 2 bytes while the table holds at most [`NARROW_MAX_KEYS`] records, 4 bytes
//! beyond. A slot holds about 61 keys at a million keys, so the narrow form is the common
//! one: a bucket is 3 bytes (position and control byte) instead of 5, and the index of a
//! 57-112 key table fits jemalloc's 448-byte class instead of the 768-byte one (4.4 bytes a
//! key less at a million keys; `scripts/memory-per-key.sh`). The wide form exists because
//! one slot may hold every key of a hash tag. Every operation costs one predictable branch
//! on the form more than a plain `HashTable<u32>`.

use hashbrown::HashTable;

/// Most records a table indexes with 2-byte positions (positions 0..=u16::MAX).
pub const NARROW_MAX_KEYS: usize = u16::MAX as usize + 1;

#[derive(Clone)]
pub struct SlotIndex {
    form: Form,
}

#[derive(Clone)]
enum Form {
    Narrow(HashTable<u16>),
    Wide(HashTable<u32>),
}

impl Default for SlotIndex {
    fn default() -> Self {
        SlotIndex {
            form: Form::Narrow(HashTable::new()),
        }
    }
}

impl SlotIndex {
    /// The position whose record `eq` accepts, among those stored under `hash`.
    #[inline]
    pub fn find(&self, hash: u64, mut eq: impl FnMut(usize) -> bool) -> Option<usize> {
        match &self.form {
            Form::Narrow(t) => t.find(hash, |&p| eq(p as usize)).map(|&p| p as usize),
            Form::Wide(t) => t.find(hash, |&p| eq(p as usize)).map(|&p| p as usize),
        }
    }

    /// Stores `position` (not present yet) under `hash`. `rehash` gives the hash of any
    /// stored position's record, for when the index grows or widens.
    #[inline]
    pub fn insert_unique(&mut self, hash: u64, position: usize, rehash: impl Fn(usize) -> u64) {
        if position >= NARROW_MAX_KEYS {
            self.widen(&rehash);
        }
        match &mut self.form {
            Form::Narrow(t) => {
                t.insert_unique(hash, position as u16, |&p| rehash(p as usize));
            }
            Form::Wide(t) => {
                let position = u32::try_from(position).expect("slot table positions fit u32");
                t.insert_unique(hash, position, |&p| rehash(p as usize));
            }
        }
    }

    /// Removes and returns the position `eq` accepts under `hash`.
    #[inline]
    pub fn remove(&mut self, hash: u64, mut eq: impl FnMut(usize) -> bool) -> Option<usize> {
        match &mut self.form {
            Form::Narrow(t) => t
                .find_entry(hash, |&p| eq(p as usize))
                .ok()
                .map(|found| found.remove().0 as usize),
            Form::Wide(t) => t
                .find_entry(hash, |&p| eq(p as usize))
                .ok()
                .map(|found| found.remove().0 as usize),
        }
    }

    /// Changes the stored position `from` (under `hash`) to `to`, which is lower (a record
    /// moved down by a swap-removal), so it fits the form `from` did.
    #[inline]
    pub fn move_position(&mut self, hash: u64, from: usize, to: usize) {
        debug_assert!(to < from);
        match &mut self.form {
            Form::Narrow(t) => {
                let p = t
                    .find_mut(hash, |&p| p as usize == from)
                    .expect("every record has an index entry");
                *p = to as u16;
            }
            Form::Wide(t) => {
                let p = t
                    .find_mut(hash, |&p| p as usize == from)
                    .expect("every record has an index entry");
                *p = to as u32;
            }
        }
    }

    /// Positions stored.
    pub fn len(&self) -> usize {
        match &self.form {
            Form::Narrow(t) => t.len(),
            Form::Wide(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether positions take 4 bytes (the table outgrew [`NARROW_MAX_KEYS`]).
    pub fn is_wide(&self) -> bool {
        matches!(self.form, Form::Wide(_))
    }

    /// Bytes the index holds on the heap: a position and a control byte per bucket.
    pub fn heap_bytes(&self) -> usize {
        let (capacity, width) = match &self.form {
            Form::Narrow(t) => (t.capacity(), std::mem::size_of::<u16>()),
            Form::Wide(t) => (t.capacity(), std::mem::size_of::<u32>()),
        };
        if capacity == 0 {
            return 0;
        }
        // hashbrown keeps buckets at most 7/8 full, in a power of two.
        let buckets = (capacity * 8 / 7).next_power_of_two();
        buckets * (width + 1)
    }

    /// Moves every position to the 4-byte form (once, when the table's
    /// [`NARROW_MAX_KEYS`]+1th record arrives).
    #[cold]
    fn widen(&mut self, rehash: &impl Fn(usize) -> u64) {
        let Form::Narrow(narrow) = &self.form else {
            return;
        };
        let mut wide = HashTable::with_capacity(narrow.len() + narrow.len() / 2);
        for &p in narrow.iter() {
            let p = p as usize;
            wide.insert_unique(rehash(p), p as u32, |&q| rehash(q as usize));
        }
        self.form = Form::Wide(wide);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in hash with many collisions, so `eq` is what tells positions apart.
    fn hash_of(position: usize) -> u64 {
        (position % 97) as u64
    }

    /// Goal: a table crossing [`NARROW_MAX_KEYS`] keeps finding, moving and removing every
    /// position. Method: insert one past the narrow limit (it widens), check all are found,
    /// move the last down over a removed one, remove a few.
    #[test]
    fn widens_past_the_narrow_limit_and_keeps_every_position() {
        let mut index = SlotIndex::default();
        for p in 0..NARROW_MAX_KEYS {
            index.insert_unique(hash_of(p), p, hash_of);
        }
        assert!(!index.is_wide(), "{NARROW_MAX_KEYS} positions fit 2 bytes");
        let narrow_bytes = index.heap_bytes();
        let last = NARROW_MAX_KEYS + 9;
        for p in NARROW_MAX_KEYS..=last {
            index.insert_unique(hash_of(p), p, hash_of);
        }
        assert!(index.is_wide());
        assert!(index.heap_bytes() > narrow_bytes);
        assert_eq!(index.len(), last + 1);
        for p in [
            0,
            1,
            96,
            97,
            40_000,
            NARROW_MAX_KEYS - 1,
            NARROW_MAX_KEYS,
            last,
        ] {
            assert_eq!(index.find(hash_of(p), |q| q == p), Some(p), "{p}");
        }
        // Swap-removal of position 5: the last record moves into it.
        assert_eq!(index.remove(hash_of(5), |q| q == 5), Some(5));
        index.move_position(hash_of(last), last, 5);
        assert_eq!(index.find(hash_of(last), |q| q == 5), Some(5));
        assert_eq!(index.find(hash_of(last), |q| q == last), None);
        assert_eq!(index.remove(hash_of(last), |q| q == 5), Some(5));
        assert_eq!(index.find(hash_of(last), |q| q == 5), None);
        assert_eq!(index.len(), last - 1);
    }

    #[test]
    fn a_narrow_bucket_is_three_bytes() {
        let mut index = SlotIndex::default();
        for p in 0..100 {
            index.insert_unique(hash_of(p), p, hash_of);
        }
        assert!(!index.is_wide());
        assert_eq!(index.heap_bytes(), 128 * 3);
        assert_eq!(index.find(hash_of(42), |q| q == 42), Some(42));
        assert_eq!(index.find(hash_of(142), |q| q == 142), None);
    }
}
