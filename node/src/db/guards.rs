//! The shard guards a command holds, kept small: most commands hold one or two shards, and
//! this view is created and dropped for every command, so it stores guards inline, sorted by
//! shard index, instead of a 64-slot array that would be initialised and moved each time.

use super::keyspace::{Shard, SHARD_COUNT};
use parking_lot::MutexGuard;
use smallvec::SmallVec;

#[derive(Default)]
pub struct Guards<'a> {
    /// Sorted by shard index, no duplicates. When all shards are held, position == index.
    held: SmallVec<[(usize, MutexGuard<'a, Shard>); 2]>,
}

impl<'a> Guards<'a> {
    /// Where `shard`'s guard is held (Ok), or where it would go (Err).
    pub fn position(&self, shard: usize) -> Result<usize, usize> {
        if self.held.len() == SHARD_COUNT {
            return Ok(shard);
        }
        self.held.binary_search_by_key(&shard, |(s, _)| *s)
    }

    pub fn contains(&self, shard: usize) -> bool {
        self.position(shard).is_ok()
    }

    /// Room for `more` guards at once: a command taking every shard (EVAL, FLUSHALL, KEYS)
    /// grew the list five times (2, 4, ... 64) on every call.
    pub fn reserve(&mut self, more: usize) {
        self.held.reserve(more);
    }

    pub fn insert(&mut self, shard: usize, guard: MutexGuard<'a, Shard>) {
        debug_assert!(shard < SHARD_COUNT);
        // Shards are taken in ascending order: past the last one held, append.
        if self.held.last().is_none_or(|(last, _)| *last < shard) {
            self.held.push((shard, guard));
            return;
        }
        match self.position(shard) {
            Ok(_) => debug_assert!(false, "shard {shard} locked twice"),
            Err(at) => self.held.insert(at, (shard, guard)),
        }
    }

    pub fn get(&self, shard: usize) -> Option<&Shard> {
        self.position(shard).ok().map(|i| &*self.held[i].1)
    }

    /// The shard held at `position` (from [`Guards::position`]).
    pub fn at_mut(&mut self, position: usize) -> &mut Shard {
        &mut self.held[position].1
    }

    pub fn get_mut(&mut self, shard: usize) -> Option<&mut Shard> {
        self.position(shard).ok().map(move |i| &mut *self.held[i].1)
    }

    /// Unlocks every shard held, in place.
    pub fn release_all(&mut self) {
        self.held.clear();
    }

    pub fn holds_all(&self) -> bool {
        self.held.len() == SHARD_COUNT
    }

    /// Held shards in ascending order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut Shard)> + use<'_, 'a> {
        self.held.iter_mut().map(|(s, g)| (*s, &mut **g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::keyspace::Keyspace;

    fn held(guards: &mut Guards<'_>) -> Vec<usize> {
        guards.iter_mut().map(|(s, _)| s).collect()
    }

    /// Ascending takes append, others go to their place; either way the list stays sorted
    /// and every shard is found, with all 64 held or a few.
    #[test]
    fn guards_stay_sorted_whatever_the_order() {
        let keyspace = Keyspace::new();
        let mut guards = Guards::default();
        for shard in [3, 9, 1, 60, 5] {
            guards.insert(shard, keyspace.lock_shard(shard));
        }
        assert_eq!(held(&mut guards), [1, 3, 5, 9, 60]);
        assert!(guards.contains(5) && !guards.contains(4));
        guards.release_all();
        guards.reserve(SHARD_COUNT);
        for shard in 0..SHARD_COUNT {
            guards.insert(shard, keyspace.lock_shard(shard));
        }
        assert!(guards.holds_all());
        assert_eq!(held(&mut guards), (0..SHARD_COUNT).collect::<Vec<_>>());
        assert!((0..SHARD_COUNT).all(|s| guards.get(s).is_some()));
    }
}
