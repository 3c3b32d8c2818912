//! The keyspace: `SHARD_COUNT` shards, each behind its own lock, each holding whole hash
//! slots. Slot `s` lives in shard `s % SHARD_COUNT`, in a table of its own, so that
//! `CLUSTER COUNTKEYSINSLOT` is O(1) and listing a slot's keys is O(keys in slot) — what slot
//! migration needs — in standalone mode as much as in cluster mode.
//!
//! Commands never lock shards themselves: the dispatcher locks the shards of a command's keys
//! in ascending order (so two commands can never deadlock) and hands the command a
//! [`super::Locked`] view. A transaction, or a command over the whole keyspace, locks all.

use super::expiry::ExpiryQueue;
use super::hidden_slots::HiddenSlots;
use super::image::{ImageSink, PendingImage};
use super::stored_key::StoredKey;
use super::value::{Hasher, Key};
use parking_lot::{Mutex, MutexGuard};
use proto::slot::SLOT_COUNT;
use std::sync::Arc;

/// Number of shards. A power of two that divides the slot count; 64 keeps lock contention
/// negligible for the thread counts a node runs (io-threads <= 16) at little fixed memory.
pub const SHARD_COUNT: usize = 64;

/// Every shard, ascending: what a whole-keyspace lock takes.
pub const ALL_SHARDS: [usize; SHARD_COUNT] = {
    let mut all = [0; SHARD_COUNT];
    let mut i = 0;
    while i < SHARD_COUNT {
        all[i] = i;
        i += 1;
    }
    all
};

/// How often a [`Keyspace::lock_shard_unless`] waiting for a held shard asks whether to give
/// up: a command waiting behind a script that runs past `busy-reply-threshold` answers BUSY
/// within this of the threshold.
pub const GIVE_UP_POLL: std::time::Duration = std::time::Duration::from_millis(5);
/// Slots held by each shard.
pub const SLOTS_PER_SHARD: usize = SLOT_COUNT / SHARD_COUNT;

const _: () = assert!(SLOT_COUNT.is_multiple_of(SHARD_COUNT));
const _: () = assert!(SHARD_COUNT.is_power_of_two() && SHARD_COUNT <= 256);

pub use super::slot_table::SlotTable;

pub fn shard_of_slot(slot: u16) -> usize {
    slot as usize % SHARD_COUNT
}

/// Index of a slot's table inside its shard.
pub fn table_of_slot(slot: u16) -> usize {
    slot as usize / SHARD_COUNT
}

/// One shard: the tables of its slots plus bookkeeping for expiry.
pub struct Shard {
    /// Private: every change to a table must pass [`Shard::table_mut`] or [`Shard::clear`],
    /// which let a running image capture the slot first (see `image.rs`).
    tables: Box<[SlotTable]>,
    /// Number of keys across all tables of this shard.
    pub keys: usize,
    /// Keys with a time to live, ordered by expiry (for active expiry and volatile-ttl).
    pub expiry: ExpiryQueue,
    /// The slots a running point-in-time image still has to capture (None: no image).
    image: Option<PendingImage>,
    /// This shard's index in the keyspace (which slots its tables hold).
    index: usize,
}

impl Shard {
    fn new(index: usize, hasher: &Hasher) -> Self {
        let tables = (0..SLOTS_PER_SHARD)
            .map(|_| SlotTable::with_hasher(hasher.clone()))
            .collect();
        Shard {
            tables,
            keys: 0,
            expiry: ExpiryQueue::default(),
            image: None,
            index,
        }
    }

    pub fn table(&self, slot: u16) -> &SlotTable {
        &self.tables[table_of_slot(slot)]
    }

    /// Every table of the shard, for reading (by table index: see [`Shard::slot_at`]).
    pub fn tables(&self) -> &[SlotTable] {
        &self.tables
    }

    /// The table of `slot`, to change. While an image runs, the slot is captured first.
    #[inline]
    pub fn table_mut(&mut self, slot: u16) -> &mut SlotTable {
        let i = table_of_slot(slot);
        if self.image.is_some() {
            self.capture_for_image(i, slot);
        }
        &mut self.tables[i]
    }

    /// Empties every table (FLUSHALL, a full sync's load); a running image captures the
    /// shard's pending slots first.
    pub fn clear(&mut self) {
        if self.image.is_some() {
            for i in 0..SLOTS_PER_SHARD {
                self.capture_for_image(i, Shard::slot_at(self.index, i));
            }
        }
        for t in self.tables.iter_mut() {
            *t = SlotTable::with_hasher(t.hasher().clone());
        }
        self.keys = 0;
        self.expiry.clear();
    }

    /// Exchanges this shard's keys with `other`'s (SWAPDB; both shards the same index of
    /// two databases). A running image of either captures its pending slots first.
    pub fn swap_contents(&mut self, other: &mut Shard) {
        for shard in [&mut *self, &mut *other] {
            if shard.image.is_some() {
                for i in 0..SLOTS_PER_SHARD {
                    shard.capture_for_image(i, Shard::slot_at(shard.index, i));
                }
            }
        }
        std::mem::swap(&mut self.tables, &mut other.tables);
        std::mem::swap(&mut self.keys, &mut other.keys);
        std::mem::swap(&mut self.expiry, &mut other.expiry);
    }

    /// Each table's record array address (tables without one left out), by table index:
    /// what compaction sorts by.
    pub fn table_addresses(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.tables
            .iter()
            .enumerate()
            .map(|(i, t)| (i, t.records_address()))
            .filter(|&(_, address)| address != 0)
    }

    /// Moves table `i` to fresh allocations ([`SlotTable::relocate`]) if its record array
    /// is still at `address` (it may have grown since it was listed) and no image runs (an
    /// image is left to read the shard as it is). True if it moved.
    pub fn relocate_table(&mut self, i: usize, address: usize) -> bool {
        if self.image.is_some() {
            return false;
        }
        match self.tables.get_mut(i) {
            Some(t) if t.records_address() == address => {
                t.relocate();
                true
            }
            _ => false,
        }
    }

    #[cold]
    fn capture_for_image(&mut self, i: usize, slot: u16) {
        if let Some(image) = self.image.as_mut() {
            if image.capture(i, slot, &self.tables[i]) {
                self.image = None;
            }
        }
    }

    /// The slot held at table index `i` of shard `shard`.
    pub fn slot_at(shard: usize, i: usize) -> u16 {
        (i * SHARD_COUNT + shard) as u16
    }

    /// Whether table `i` of this shard holds a slot `hidden` hides.
    #[inline]
    pub fn table_hidden(&self, i: usize, hidden: &HiddenSlots) -> bool {
        hidden.any() && hidden.contains(Shard::slot_at(self.index, i))
    }

    /// The shard's tables `hidden` leaves visible, with their table index.
    pub fn visible_tables<'s>(
        &'s self,
        hidden: &'s HiddenSlots,
    ) -> impl Iterator<Item = (usize, &'s SlotTable)> + 's {
        self.tables
            .iter()
            .enumerate()
            .filter(move |(i, _)| !self.table_hidden(*i, hidden))
    }

    /// Keys that `hidden` leaves visible: the shard's count less its hidden tables' lengths.
    pub fn visible_keys(&self, hidden: &HiddenSlots) -> usize {
        if !hidden.any() {
            return self.keys;
        }
        let hidden_keys: usize = (0..SLOTS_PER_SHARD)
            .filter(|&i| self.table_hidden(i, hidden))
            .map(|i| self.tables[i].len())
            .sum();
        self.keys.saturating_sub(hidden_keys)
    }

    /// The keys of `slot` (one of this shard's) and their bytes (key plus
    /// [`super::value::Value::payload_bytes`]): O(keys and elements in the slot).
    pub fn slot_footprint(&self, slot: u16) -> (u64, u64) {
        let table = self.table(slot);
        let bytes = table
            .iter()
            .map(|(k, e)| k.len() as u64 + e.value.payload_bytes())
            .sum();
        (table.len() as u64, bytes)
    }

    /// Up to `max` keys of `slot` (one of this shard's): O(returned keys).
    pub fn keys_in_slot(&self, slot: u16, max: usize) -> Vec<Key> {
        self.table(slot)
            .keys()
            .take(max)
            .map(StoredKey::to_key)
            .collect()
    }

    /// Keys, and keys with a TTL, that `hidden` leaves visible: the shard's counts, less
    /// what its hidden tables hold (O(keys of the hidden tables) for the TTL count, and only
    /// while some slot is hidden).
    pub fn visible_counts(&self, hidden: &HiddenSlots) -> (usize, usize) {
        let (mut keys, mut volatile) = (self.keys, self.expiry.live());
        if !hidden.any() {
            return (keys, volatile);
        }
        for (i, table) in self.tables.iter().enumerate() {
            if table.is_empty() || !self.table_hidden(i, hidden) {
                continue;
            }
            keys = keys.saturating_sub(table.len());
            let with_ttl = table.values().filter(|e| e.expires_at != 0).count();
            volatile = volatile.saturating_sub(with_ttl);
        }
        (keys, volatile)
    }
}

/// [`Keyspace::begin_image`] while an image is still being captured.
#[derive(Debug, thiserror::Error)]
#[error("a point-in-time image of the keyspace is already being taken")]
pub struct ImageRunning;

pub struct Keyspace {
    shards: Box<[Mutex<Shard>]>,
    /// The database number this keyspace is (SELECT's index; 0 in cluster mode).
    index: usize,
    /// Slots being imported: stored, not shown (see `hidden_slots.rs`).
    hidden: HiddenSlots,
    /// Whether it holds enough keys for a pipeline's lookups to miss the cache, so that
    /// warming them first pays (see `warm.rs`); refreshed by the server's cron.
    pub(super) large: std::sync::atomic::AtomicBool,
}

impl Default for Keyspace {
    fn default() -> Self {
        Self::new()
    }
}

impl Keyspace {
    pub fn new() -> Self {
        Self::for_db(0)
    }

    /// The keyspace of database `index` (see `databases.rs`).
    pub fn for_db(index: usize) -> Self {
        let hasher = Hasher::new();
        Keyspace {
            index,
            shards: (0..SHARD_COUNT)
                .map(|i| Mutex::new(Shard::new(i, &hasher)))
                .collect(),
            hidden: HiddenSlots::default(),
            large: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The database number this keyspace is.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The slots whose keys the walks over the whole keyspace pass by.
    pub fn hidden(&self) -> &HiddenSlots {
        &self.hidden
    }

    pub fn lock_shard(&self, shard: usize) -> MutexGuard<'_, Shard> {
        self.shards[shard].lock()
    }

    /// Takes and releases every shard in turn: a write that held any of them when this
    /// started has finished (and fed the replication stream) when this returns.
    pub fn barrier(&self) {
        for shard in 0..SHARD_COUNT {
            drop(self.lock_shard(shard));
        }
    }

    pub fn try_lock_shard(&self, shard: usize) -> Option<MutexGuard<'_, Shard>> {
        self.shards[shard].try_lock()
    }

    /// Locks `shard`, or gives up once `give_up` says so: while the shard is held by someone
    /// else, `give_up` is asked every [`GIVE_UP_POLL`]. An uncontended shard costs what
    /// [`Keyspace::lock_shard`] costs (one compare-and-swap).
    pub fn lock_shard_unless(
        &self,
        shard: usize,
        give_up: &mut dyn FnMut() -> bool,
    ) -> Option<MutexGuard<'_, Shard>> {
        if let Some(guard) = self.shards[shard].try_lock() {
            return Some(guard);
        }
        loop {
            if let Some(guard) = self.shards[shard].try_lock_for(GIVE_UP_POLL) {
                return Some(guard);
            }
            if give_up() {
                return None;
            }
        }
    }

    /// Starts a point-in-time image (see `image.rs`): with every shard held, marks every
    /// slot pending for `sink` and runs `at_instant`, which therefore happens at the image's
    /// instant (no command is between its shard locks). Fails if an image is still running.
    pub fn begin_image(
        &self,
        sink: Arc<dyn ImageSink>,
        at_instant: impl FnOnce(),
    ) -> Result<(), ImageRunning> {
        let mut guards: Vec<MutexGuard<'_, Shard>> = self.shards.iter().map(|s| s.lock()).collect();
        if guards.iter().any(|g| g.image.is_some()) {
            return Err(ImageRunning);
        }
        for g in guards.iter_mut() {
            g.image = Some(PendingImage::all(sink.clone(), self.index));
        }
        at_instant();
        Ok(())
    }

    /// The image's own walk: captures table `table` of `shard` if no write did yet.
    pub fn capture_pending(&self, shard: usize, table: usize) {
        let mut guard = self.shards[shard].lock();
        if guard.image.is_some() {
            guard.capture_for_image(table, Shard::slot_at(shard, table));
        }
    }

    /// Every key held, hidden ones too (locks each shard briefly in turn; a moment's view):
    /// what memory accounting and "the node holds keys" checks count.
    pub fn key_count(&self) -> usize {
        self.shards.iter().map(|s| s.lock().keys).sum()
    }

    /// [`Keyspace::key_count`] for a caller that must not wait (it serves clients, and a long
    /// script holds every shard): None if some shard is held.
    pub fn try_key_count(&self) -> Option<usize> {
        self.shards
            .iter()
            .map(|s| s.try_lock().map(|guard| guard.keys))
            .sum()
    }

    /// Every key held with a TTL, hidden ones too.
    pub fn volatile_count(&self) -> usize {
        self.shards.iter().map(|s| s.lock().expiry.live()).sum()
    }

    /// Visible keys, and those of them with a TTL (DBSIZE, INFO keyspace): the slots
    /// [`Self::hidden`] hides left out.
    pub fn visible_counts(&self) -> (usize, usize) {
        self.shards
            .iter()
            .map(|s| s.lock().visible_counts(&self.hidden))
            .fold((0, 0), |(k, v), (sk, sv)| (k + sk, v + sv))
    }

    /// [`Self::visible_counts`] without waiting: shards held by others are left out.
    pub fn visible_counts_unheld(&self) -> (usize, usize) {
        self.shards
            .iter()
            .filter_map(|s| s.try_lock().map(|g| g.visible_counts(&self.hidden)))
            .fold((0, 0), |(k, v), (sk, sv)| (k + sk, v + sv))
    }

    /// Keys in one slot: O(1).
    pub fn count_in_slot(&self, slot: u16) -> usize {
        self.shards[shard_of_slot(slot)].lock().table(slot).len()
    }

    /// The keys of one slot and their bytes (key plus [`super::value::Value::payload_bytes`]):
    /// O(keys and elements in the slot), under the slot's shard lock. For the admin API's
    /// slot statistics, which are asked for rarely; nothing on the write path keeps a count.
    pub fn slot_footprint(&self, slot: u16) -> (u64, u64) {
        self.shards[shard_of_slot(slot)].lock().slot_footprint(slot)
    }

    /// Up to `max` keys of one slot: O(returned keys).
    pub fn keys_in_slot(&self, slot: u16, max: usize) -> Vec<Key> {
        self.shards[shard_of_slot(slot)]
            .lock()
            .keys_in_slot(slot, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::slot_table::{GROWTH_DIVISOR, MIN_GROWTH};
    use crate::db::{Locked, Value};

    #[test]
    fn tables_filled_by_inserts_keep_their_entry_arrays_within_an_eighth_of_their_keys() {
        let keyspace = Keyspace::new();
        let mut db = Locked::lock_all(&keyspace, 1, 0);
        for i in 0..20_000u32 {
            db.set(format!("key:{i}").as_bytes(), Value::Int(i as i64));
        }
        drop(db);
        let mut tables = 0;
        for s in 0..SHARD_COUNT {
            let shard = keyspace.lock_shard(s);
            for t in shard.tables().iter().filter(|t| !t.is_empty()) {
                tables += 1;
                let bound = t.len() + (t.len() / GROWTH_DIVISOR).max(MIN_GROWTH);
                assert!(
                    t.capacity() <= bound,
                    "{} keys, capacity {} > {bound}",
                    t.len(),
                    t.capacity()
                );
            }
        }
        assert!(tables > 10_000, "the keys spread over the slots");
    }

    /// A wait for a shard held elsewhere asks `give_up` while it lasts and ends, with the
    /// shards taken before released, when it says so; a free shard is taken without asking.
    #[test]
    fn a_lock_that_may_give_up_asks_while_it_waits_and_releases_what_it_took() {
        let keyspace = Keyspace::new();
        let mut asked = 0;
        let free = Locked::lock_unless(&keyspace, &[1, 2], 1, 0, &mut || {
            asked += 1;
            true
        });
        assert!(free.is_some());
        assert_eq!(asked, 0, "free shards are taken without asking");
        drop(free);

        let held = keyspace.lock_shard(2);
        let mut asked = 0;
        let given_up = Locked::lock_unless(&keyspace, &[1, 2], 1, 0, &mut || {
            asked += 1;
            asked == 3
        });
        assert!(given_up.is_none());
        assert_eq!(asked, 3, "asked every poll until it said give up");
        assert!(
            keyspace.try_lock_shard(1).is_some(),
            "shard 1, taken before the wait, was released"
        );
        drop(held);

        // Released meanwhile: the wait ends with the lock.
        std::thread::scope(|scope| {
            let (taken_tx, taken_rx) = std::sync::mpsc::channel();
            let keyspace = &keyspace;
            scope.spawn(move || {
                let held = keyspace.lock_shard(2);
                taken_tx.send(()).expect("the test waits");
                std::thread::sleep(GIVE_UP_POLL * 3);
                drop(held);
            });
            taken_rx.recv().expect("the holder took the shard");
            let mut asked = 0;
            let taken = Locked::lock_unless(keyspace, &ALL_SHARDS, 1, 0, &mut || {
                asked += 1;
                false
            });
            assert!(taken.is_some_and(|t| t.holds_all()));
            assert!(asked >= 1, "the wait asked at least once");
        });
    }

    #[test]
    fn keys_in_slot_returns_the_stored_bytes_of_short_and_long_keys() {
        let keyspace = Keyspace::new();
        let long = vec![b'k'; 100];
        let short = b"{tag}short".to_vec();
        let long_tagged = [b"{tag}".as_slice(), &long].concat();
        let slot = proto::slot::key_slot(&short);
        let mut db = Locked::lock_all(&keyspace, 1, 0);
        db.set(&short, Value::Int(1));
        db.set(&long_tagged, Value::Int(2));
        drop(db);
        let mut keys = keyspace.keys_in_slot(slot, 10);
        keys.sort();
        let mut expected: Vec<Key> = vec![short.into(), long_tagged.into()];
        expected.sort();
        assert_eq!(keys, expected);
    }

    #[test]
    fn visible_counts_and_tables_leave_hidden_slots_out() {
        let keyspace = Keyspace::new();
        let (a, b) = (b"{a}x".as_slice(), b"{b}x".as_slice());
        let (slot_a, slot_b) = (proto::slot::key_slot(a), proto::slot::key_slot(b));
        let mut db = Locked::lock_all(&keyspace, 1, 0);
        for i in 0..5 {
            db.set(format!("{{a}}{i}").as_bytes(), Value::Int(i));
            db.set(format!("{{b}}{i}").as_bytes(), Value::Int(i));
        }
        db.set(a, Value::Int(9));
        db.set(b, Value::Int(9));
        assert!(db.set_expiry(a, 10_000) && db.set_expiry(b, 10_000));
        drop(db);
        assert_eq!(keyspace.visible_counts(), (12, 2));
        keyspace.hidden().replace([slot_b]);
        assert_eq!(keyspace.visible_counts(), (6, 1));
        // Stored all the same: what memory and "holds keys" checks count.
        assert_eq!((keyspace.key_count(), keyspace.volatile_count()), (12, 2));
        let shard = keyspace.lock_shard(shard_of_slot(slot_b));
        assert_eq!(shard.visible_keys(keyspace.hidden()), shard.keys - 6);
        assert!(shard.table_hidden(table_of_slot(slot_b), keyspace.hidden()));
        assert!(shard
            .visible_tables(keyspace.hidden())
            .all(|(i, _)| Shard::slot_at(shard_of_slot(slot_b), i) != slot_b));
        drop(shard);
        keyspace.hidden().replace([slot_a, slot_b]);
        assert_eq!(keyspace.visible_counts(), (0, 0));
    }
}
