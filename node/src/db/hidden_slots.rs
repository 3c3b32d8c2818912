//! Slots whose keys this node holds but does not show: the copy a slot migration is
//! importing into this node before the topology log commits it (Valkey 9 hides importing
//! slots the same way). Their keys are stored and written like any other, but the walks over
//! the whole keyspace (DBSIZE, INFO keyspace, KEYS, SCAN, RANDOMKEY), eviction and active
//! expiry pass them by, so a client sees the keys appear all at once, when the slots become
//! this node's.
//!
//! 16384 bits of atomics plus a count: a walk's one relaxed load tells it whether any slot is
//! hidden at all, and a set bit costs one more load per slot table. The node replaces the
//! whole set whenever its topology log applies something (`server::cluster_bus`), under the
//! topology's write lock, so whoever sees the new slot owners sees the new set too.

use proto::slot::SLOT_COUNT;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

const WORDS: usize = SLOT_COUNT / 64;
const _: () = assert!(SLOT_COUNT.is_multiple_of(64));

pub struct HiddenSlots {
    words: Box<[AtomicU64]>,
    /// Slots hidden now: the walks' one check while no migration imports into this node.
    count: AtomicUsize,
}

impl Default for HiddenSlots {
    fn default() -> Self {
        HiddenSlots {
            words: (0..WORDS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicUsize::new(0),
        }
    }
}

impl HiddenSlots {
    /// Whether any slot is hidden (one relaxed load).
    #[inline]
    pub fn any(&self) -> bool {
        self.count.load(Relaxed) != 0
    }

    #[inline]
    pub fn contains(&self, slot: u16) -> bool {
        let slot = slot as usize;
        slot < SLOT_COUNT && self.words[slot / 64].load(Relaxed) & (1 << (slot % 64)) != 0
    }

    /// How many slots are hidden.
    pub fn count(&self) -> usize {
        self.count.load(Relaxed)
    }

    /// Hides exactly `slots` (out-of-range numbers are ignored) and shows every other slot.
    /// Returns whether the set changed. One writer at a time (the caller's lock); readers
    /// may run meanwhile and see either set for a word.
    pub fn replace(&self, slots: impl IntoIterator<Item = u16>) -> bool {
        let mut wanted = [0u64; WORDS];
        for slot in slots.into_iter().map(usize::from) {
            if slot < SLOT_COUNT {
                wanted[slot / 64] |= 1 << (slot % 64);
            }
        }
        let count: usize = wanted.iter().map(|w| w.count_ones() as usize).sum();
        let mut changed = false;
        for (word, want) in self.words.iter().zip(wanted) {
            changed |= word.swap(want, Relaxed) != want;
        }
        self.count.store(count, Relaxed);
        changed
    }

    /// The hidden slots, ascending (for logs and tests).
    pub fn slots(&self) -> Vec<u16> {
        if !self.any() {
            return Vec::new();
        }
        (0..SLOT_COUNT as u16)
            .filter(|&s| self.contains(s))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_hides_exactly_the_given_slots_and_counts_them() {
        let hidden = HiddenSlots::default();
        assert!(!hidden.any());
        assert!(hidden.replace([0, 63, 64, 16383, 63]));
        assert!(hidden.any());
        assert_eq!(hidden.count(), 4);
        assert_eq!(hidden.slots(), [0, 63, 64, 16383]);
        assert!(hidden.contains(64) && !hidden.contains(65));
        // The same set again changes nothing; another one shows what it leaves out.
        assert!(!hidden.replace([16383, 64, 63, 0]));
        assert!(hidden.replace([65, 20_000]));
        assert_eq!(hidden.slots(), [65]);
        assert!(!hidden.contains(20_000));
        assert!(hidden.replace([]));
        assert!(!hidden.any());
        assert_eq!(hidden.slots(), Vec::<u16>::new());
    }
}
