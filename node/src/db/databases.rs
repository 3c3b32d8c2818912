//! The numbered databases of a standalone node (SELECT, `databases`): database 0 is the
//! node's keyspace, always there; the others are keyspaces created on first use, so that a
//! node configured with 16 databases and using one pays for one (a keyspace's empty slot
//! tables take about a megabyte). Cluster mode has database 0 only, as Redis Cluster.

use super::keyspace::Keyspace;
use super::Locked;
use std::sync::OnceLock;

/// Most databases a node may be configured with: a bound on the table below (each slot is
/// a few words until used), far above Redis's default of 16.
pub const MAX_DATABASES: usize = 1 << 16;

/// Databases 1 and up (database 0 is `NodeState::keyspace`).
pub struct ExtraDatabases {
    dbs: Box<[OnceLock<Keyspace>]>,
}

impl ExtraDatabases {
    /// Room for databases `1..count`.
    pub fn new(count: usize) -> Self {
        let extra = count.clamp(1, MAX_DATABASES) - 1;
        ExtraDatabases {
            dbs: (0..extra).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Databases in all, database 0 included.
    pub fn count(&self) -> usize {
        self.dbs.len() + 1
    }

    /// Database `index` (>= 1), created if it was never used. None past the configured count.
    pub fn get_or_create(&self, index: usize) -> Option<&Keyspace> {
        let slot = self.dbs.get(index.checked_sub(1)?)?;
        Some(slot.get_or_init(|| Keyspace::for_db(index)))
    }

    /// Database `index` (>= 1) if it was ever used.
    pub fn existing(&self, index: usize) -> Option<&Keyspace> {
        self.dbs.get(index.checked_sub(1)?)?.get()
    }

    /// The databases ever used, in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = &Keyspace> {
        self.dbs.iter().filter_map(OnceLock::get)
    }
}

/// Every database of a node, as the walks over the whole dataset see them (saves, loads,
/// active expiry, INFO). From a lone keyspace, the one database of a test or a tool.
#[derive(Clone, Copy)]
pub struct Dbs<'a> {
    pub first: &'a Keyspace,
    pub extra: Option<&'a ExtraDatabases>,
}

impl<'a> From<&'a Keyspace> for Dbs<'a> {
    fn from(first: &'a Keyspace) -> Self {
        Dbs { first, extra: None }
    }
}

impl<'a> Dbs<'a> {
    /// Databases in all.
    pub fn count(&self) -> usize {
        self.extra.map_or(1, ExtraDatabases::count)
    }

    /// Database `index`, created if never used; None past the count.
    pub fn get_or_create(&self, index: usize) -> Option<&'a Keyspace> {
        if index == 0 {
            return Some(self.first);
        }
        self.extra?.get_or_create(index)
    }

    /// Database `index` if it was ever used.
    pub fn existing(&self, index: usize) -> Option<&'a Keyspace> {
        if index == 0 {
            return Some(self.first);
        }
        self.extra?.existing(index)
    }

    /// [`Keyspace::barrier`] over every database: a write that held shards of any when
    /// this started has finished (and fed the stream) when this returns.
    pub fn barrier(&self) {
        for keyspace in self.iter() {
            keyspace.barrier();
        }
    }

    /// Keys held in every database, hidden ones too, and those with a TTL.
    pub fn key_and_volatile_counts(&self) -> (usize, usize) {
        self.iter()
            .map(|k| (k.key_count(), k.volatile_count()))
            .fold((0, 0), |(a, b), (k, v)| (a + k, b + v))
    }

    /// The databases ever used, database 0 first, in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = &'a Keyspace> + 'a {
        std::iter::once(self.first).chain(self.extra.into_iter().flat_map(ExtraDatabases::iter))
    }
}

/// Starts one point-in-time image over several databases (`Keyspace::begin_image` for
/// each, nested, so that `at_instant` runs with every shard of every one held; taken in
/// ascending database order). Databases created after the instant were empty at it.
pub fn begin_images(
    dbs: &[&Keyspace],
    sink: &std::sync::Arc<dyn super::image::ImageSink>,
    at_instant: &mut dyn FnMut(),
) -> Result<(), super::keyspace::ImageRunning> {
    match dbs.split_first() {
        None => {
            at_instant();
            Ok(())
        }
        Some((first, rest)) => {
            let mut inner = Ok(());
            first.begin_image(sink.clone(), || {
                inner = begin_images(rest, sink, at_instant)
            })?;
            inner
        }
    }
}

/// Exchanges the contents of two databases (SWAPDB) through views holding every shard of
/// both, so that no command sees one half swapped.
pub fn swap(a: &mut Locked<'_>, b: &mut Locked<'_>) {
    debug_assert!(
        a.holds_all() && b.holds_all(),
        "SWAPDB holds both databases"
    );
    for ((_, x), (_, y)) in a.shards_mut().zip(b.shards_mut()) {
        x.swap_contents(y);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Value;

    #[test]
    fn databases_are_created_on_first_use_and_bounded_by_the_count() {
        let dbs = ExtraDatabases::new(16);
        assert_eq!(dbs.count(), 16);
        assert!(dbs.existing(3).is_none());
        assert_eq!(dbs.get_or_create(3).map(Keyspace::index), Some(3));
        assert!(dbs.existing(3).is_some());
        assert!(dbs.get_or_create(16).is_none());
        assert!(dbs.get_or_create(0).is_none());
        assert_eq!(dbs.iter().count(), 1);
    }

    #[test]
    fn swap_exchanges_keys_and_counts() {
        let (a, b) = (Keyspace::for_db(0), Keyspace::for_db(1));
        let mut db = Locked::lock_all(&a, 1, 0);
        db.set(b"k", Value::Int(1));
        assert!(db.set_expiry(b"k", 10_000));
        drop(db);
        swap(
            &mut Locked::lock_all(&a, 1, 0),
            &mut Locked::lock_all(&b, 1, 0),
        );
        assert_eq!(a.visible_counts(), (0, 0));
        assert_eq!(b.visible_counts(), (1, 1));
        let mut db = Locked::lock_all(&b, 1, 0);
        assert!(db.exists(b"k"));
    }
}
