//! The tracking table of default-mode CLIENT TRACKING: which clients read which keys, so a
//! change to a key can invalidate exactly the clients that may cache it. An entry is
//! forgotten when its key is invalidated (the clients must read it again to be told again),
//! or evicted at random when the table holds more keys than `tracking-table-max-keys`.
//!
//! Striped like the pub/sub channel map: a read by a tracking client and a write by anyone
//! touch one stripe, so connections on different keys rarely meet. Entries name client ids,
//! not clients: a client that stopped tracking or left is skipped when its keys change
//! (Redis does the same; it costs no walk of the table when a client goes).

use crate::db::Key;
use indexmap::IndexMap;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Lock stripes of the table.
pub const STRIPES: usize = 16;

/// The ids of the clients that read one key, sorted (a binary search per read, however many
/// clients share a hot key).
pub type Readers = SmallVec<[u64; 2]>;

pub struct TrackingTable {
    stripes: [Mutex<IndexMap<Key, Readers>>; STRIPES],
    hasher: ahash::RandomState,
    /// Keys in the table (INFO `tracking_total_keys`).
    keys: AtomicUsize,
    /// (key, client) pairs in the table (INFO `tracking_total_items`).
    items: AtomicUsize,
}

impl Default for TrackingTable {
    fn default() -> Self {
        TrackingTable {
            stripes: std::array::from_fn(|_| Mutex::new(IndexMap::new())),
            hasher: ahash::RandomState::new(),
            keys: AtomicUsize::new(0),
            items: AtomicUsize::new(0),
        }
    }
}

impl TrackingTable {
    fn stripe(&self, key: &[u8]) -> &Mutex<IndexMap<Key, Readers>> {
        &self.stripes[(self.hasher.hash_one(key) as usize) % STRIPES]
    }

    /// Records that `client` read `key`.
    pub fn remember(&self, key: &[u8], client: u64) {
        let mut map = self.stripe(key).lock();
        let readers = match map.get_mut(key) {
            Some(readers) => readers,
            None => {
                self.keys.fetch_add(1, Relaxed);
                map.entry(key.into()).or_default()
            }
        };
        if let Err(at) = readers.binary_search(&client) {
            readers.insert(at, client);
            self.items.fetch_add(1, Relaxed);
        }
    }

    /// Forgets `key` and hands back the clients that read it (None if nobody did).
    pub fn take(&self, key: &[u8]) -> Option<Readers> {
        let readers = self.stripe(key).lock().swap_remove(key)?;
        self.forgotten(&readers);
        Some(readers)
    }

    fn forgotten(&self, readers: &Readers) {
        self.keys.fetch_sub(1, Relaxed);
        self.items.fetch_sub(readers.len(), Relaxed);
    }

    /// Forgets one key chosen at random (`pick` chooses a stripe and a position from the
    /// given bounds), for the table's size limit. None when the table is empty.
    pub fn evict_one(&self, pick: &mut impl FnMut(usize) -> usize) -> Option<(Key, Readers)> {
        if self.keys() == 0 {
            return None;
        }
        let first = pick(STRIPES);
        for i in 0..STRIPES {
            let mut map = self.stripes[(first + i) % STRIPES].lock();
            if map.is_empty() {
                continue;
            }
            let at = pick(map.len());
            if let Some((key, readers)) = map.swap_remove_index(at) {
                drop(map);
                self.forgotten(&readers);
                return Some((key, readers));
            }
        }
        None
    }

    /// Forgets everything (FLUSHALL, or the last tracking client gone).
    pub fn clear(&self) {
        for stripe in &self.stripes {
            let mut map = stripe.lock();
            let items: usize = map.values().map(|r| r.len()).sum();
            self.keys.fetch_sub(map.len(), Relaxed);
            self.items.fetch_sub(items, Relaxed);
            map.clear();
            map.shrink_to_fit();
        }
    }

    pub fn keys(&self) -> usize {
        self.keys.load(Relaxed)
    }

    pub fn items(&self) -> usize {
        self.items.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_remembers_each_reader_once_until_taken() {
        let t = TrackingTable::default();
        t.remember(b"k", 7);
        t.remember(b"k", 3);
        t.remember(b"k", 7);
        t.remember(b"other", 7);
        assert_eq!((t.keys(), t.items()), (2, 3));
        assert_eq!(t.take(b"k").unwrap().as_slice(), &[3, 7]);
        assert_eq!(t.take(b"k"), None, "taken once: a reader must read again");
        assert_eq!((t.keys(), t.items()), (1, 1));
        t.clear();
        assert_eq!((t.keys(), t.items()), (0, 0));
        assert_eq!(t.take(b"other"), None);
    }

    #[test]
    fn eviction_empties_the_table_one_key_at_a_time() {
        let t = TrackingTable::default();
        for i in 0..100u64 {
            t.remember(format!("key:{i}").as_bytes(), i % 3);
        }
        let mut seed = 12345usize;
        let mut pick = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut seen = std::collections::HashSet::new();
        while let Some((key, readers)) = t.evict_one(&mut pick) {
            assert_eq!(readers.len(), 1);
            assert!(seen.insert(key), "each key evicted once");
        }
        assert_eq!(seen.len(), 100);
        assert_eq!((t.keys(), t.items()), (0, 0));
    }
}
