//! The view of the keyspace a command runs against: the shards of its keys, locked.
//!
//! Every read goes through lazy expiry (an expired key is deleted on access, as Redis does),
//! and every write keeps the shard's key count and expiry queue in step with its tables.

use super::entry::{Entry, UnixMillis};
use super::frequency::{self, LfuParams};
use super::guards::Guards;
use super::keyspace::{shard_of_slot, Keyspace, Shard, ALL_SHARDS};
use super::stored_key::Access;
use super::value::{Key, Value};
use parking_lot::MutexGuard;
use proto::slot::key_slot;

pub struct Locked<'a> {
    keyspace: &'a Keyspace,
    guards: Guards<'a>,
    /// The slot of the command's first key, computed once by the dispatcher: (address,
    /// length, slot) of that argument. Saves hashing the same key twice per command. The
    /// slot is held as a usize, not a u16: with 18 bytes here the view's construction zeroed
    /// this field and its neighbour with two overlapping 16-byte stores, and moving the view
    /// into the command context loaded the first of them back before either retired: a
    /// failed store-to-load forward on every command (`perf annotate` of `dispatch::run`:
    /// 14-24% of its samples on that load). Another load of that copy, past `lru_clock`,
    /// still stalls (the compiler builds the view in a temporary): not solved.
    slot_hint: (usize, usize, usize),
    highest: Option<usize>,
    /// The command's clock: one reading per command, as Redis uses for a whole command.
    pub now: UnixMillis,
    /// LRU clock (seconds) stamped on accessed entries.
    pub lru_clock: u32,
    /// Set under an LFU maxmemory policy: accesses also count in the entries' LFU counters,
    /// with draws in [0, 1) from the given source (Redis's counter is probabilistic).
    lfu: Option<(LfuParams, fn() -> f64)>,
    /// Keys deleted by lazy expiry during this command (for stats and WATCH).
    pub expired: u64,
    /// Lookups that found a live key, and that found none (INFO keyspace_hits/misses).
    pub hits: u32,
    pub misses: u32,
    /// Names of the keys lazy expiry deleted, kept only while writes are replicated
    /// ([`Locked::record_removed`]): each becomes a DEL in the replication stream.
    removed: Option<Vec<Key>>,
    /// Names of the keys created during this command, kept only while `new` keyspace
    /// events are published ([`Locked::record_created`]).
    created: Option<Vec<Key>>,
    /// Names of the keys looked up and not found during this command, kept only while
    /// `keymiss` events are published ([`Locked::record_missed`]).
    missed: Option<Vec<Key>>,
}

/// Expired keys one command may record for its replicas. A command reaches only the keys it
/// names, so this is never reached by well-formed requests; it bounds one that walks far.
pub const REMOVED_KEYS_MAX: usize = 1 << 20;

impl<'a> Locked<'a> {
    /// Locks the given shards, which must be sorted ascending without duplicates.
    pub fn lock(keyspace: &'a Keyspace, shards: &[usize], now: UnixMillis, lru_clock: u32) -> Self {
        let mut locked = Self::empty(keyspace, now, lru_clock);
        let taken = locked.take_shards(shards, |s| Some(keyspace.lock_shard(s)));
        debug_assert!(taken.is_some(), "a blocking lock always takes its shard");
        locked
    }

    /// [`Locked::lock`], except that a wait for a shard held elsewhere ends, with the shards
    /// taken so far released, once `give_up` says so (see [`Keyspace::lock_shard_unless`]).
    pub fn lock_unless(
        keyspace: &'a Keyspace,
        shards: &[usize],
        now: UnixMillis,
        lru_clock: u32,
        give_up: &mut dyn FnMut() -> bool,
    ) -> Option<Self> {
        let mut locked = Self::empty(keyspace, now, lru_clock);
        locked.take_shards(shards, |s| keyspace.lock_shard_unless(s, give_up))?;
        Some(locked)
    }

    /// Takes `shards` (sorted ascending without duplicates, the order every lock follows)
    /// with `lock_shard`; stops at the first it does not get (None), the others taken so far
    /// released with this view.
    fn take_shards(
        &mut self,
        shards: &[usize],
        mut lock_shard: impl FnMut(usize) -> Option<MutexGuard<'a, Shard>>,
    ) -> Option<()> {
        debug_assert!(
            shards.windows(2).all(|w| w[0] < w[1]),
            "shards must be sorted and unique"
        );
        self.guards.reserve(shards.len());
        for &s in shards {
            self.guards.insert(s, lock_shard(s)?);
            self.highest = Some(s);
        }
        Some(())
    }

    /// A view of `keyspace` that holds no shard yet: [`Locked::take_unless`] adds them.
    pub fn unlocked(keyspace: &'a Keyspace, now: UnixMillis, lru_clock: u32) -> Self {
        Self::empty(keyspace, now, lru_clock)
    }

    /// Locks `shards` (sorted ascending without duplicates, none held yet, all above the
    /// ones held) into this view, waiting for each unless `give_up` says to stop: None
    /// then, the shards taken so far still held by the view.
    pub fn take_unless(
        &mut self,
        shards: &[usize],
        give_up: &mut dyn FnMut() -> bool,
    ) -> Option<()> {
        let keyspace = self.keyspace;
        self.take_shards(shards, |s| keyspace.lock_shard_unless(s, give_up))
    }

    /// Unlocks every shard this view holds; the view stays (its counters are still read),
    /// holding nothing. Done in place: the dispatcher unlocks before its bookkeeping
    /// without moving the view out of the command's context.
    pub fn release(&mut self) {
        self.guards.release_all();
        self.highest = None;
    }

    fn empty(keyspace: &'a Keyspace, now: UnixMillis, lru_clock: u32) -> Self {
        Locked {
            keyspace,
            guards: Guards::default(),
            slot_hint: (0, 0, 0),
            highest: None,
            now,
            lru_clock,
            lfu: None,
            expired: 0,
            hits: 0,
            misses: 0,
            removed: None,
            created: None,
            missed: None,
        }
    }

    /// A view over one shard whose guard the caller already holds (eviction, active expiry).
    pub fn from_guard(
        keyspace: &'a Keyspace,
        shard: usize,
        guard: MutexGuard<'a, Shard>,
        now: UnixMillis,
        lru_clock: u32,
    ) -> Self {
        let mut locked = Self::empty(keyspace, now, lru_clock);
        locked.highest = Some(shard);
        locked.guards.insert(shard, guard);
        locked
    }

    pub fn lock_all(keyspace: &'a Keyspace, now: UnixMillis, lru_clock: u32) -> Self {
        Self::lock(keyspace, &ALL_SHARDS, now, lru_clock)
    }

    /// Makes accesses count in the entries' LFU counters (an LFU maxmemory policy is set);
    /// `draw` gives the counter's random numbers in [0, 1) (the keyspace reads no random
    /// source of its own).
    pub fn count_frequency(&mut self, params: LfuParams, draw: fn() -> f64) {
        self.lfu = Some((params, draw));
    }

    /// Starts recording the names of keys deleted because they had expired (see
    /// [`Locked::take_removed`]).
    pub fn record_removed(&mut self) {
        self.removed.get_or_insert_with(Vec::new);
    }

    /// The expired keys deleted since the last call (none unless recording).
    pub fn take_removed(&mut self) -> Vec<Key> {
        match self.removed.as_mut() {
            Some(keys) if !keys.is_empty() => std::mem::take(keys),
            _ => Vec::new(),
        }
    }

    /// Starts recording the names of keys created (see [`Locked::take_created`]).
    pub fn record_created(&mut self) {
        self.created.get_or_insert_with(Vec::new);
    }

    /// The keys created since the last call (none unless recording).
    pub fn take_created(&mut self) -> Vec<Key> {
        match self.created.as_mut() {
            Some(keys) if !keys.is_empty() => std::mem::take(keys),
            _ => Vec::new(),
        }
    }

    /// Starts recording the names of keys looked up and not found (see
    /// [`Locked::take_missed`]).
    pub fn record_missed(&mut self) {
        self.missed.get_or_insert_with(Vec::new);
    }

    /// The keys missed since the last call (none unless recording).
    pub fn take_missed(&mut self) -> Vec<Key> {
        match self.missed.as_mut() {
            Some(keys) if !keys.is_empty() => std::mem::take(keys),
            _ => Vec::new(),
        }
    }

    fn note_missed(&mut self, key: &[u8]) {
        self.misses += 1;
        if let Some(keys) = self.missed.as_mut() {
            // Bounded like `removed`: past it, `keymiss` events are dropped.
            if keys.len() < REMOVED_KEYS_MAX {
                keys.push(key.into());
            }
        }
    }

    fn note_created(&mut self, key: &[u8]) {
        if let Some(keys) = self.created.as_mut() {
            // Bounded like `removed`: past it, `new` events are dropped.
            if keys.len() < REMOVED_KEYS_MAX {
                keys.push(key.into());
            }
        }
    }

    fn note_removed(&mut self, key: &[u8]) {
        if let Some(keys) = self.removed.as_mut() {
            if keys.len() < REMOVED_KEYS_MAX {
                keys.push(key.into());
            } else {
                tracing::error!(
                    "a command expired more than {REMOVED_KEYS_MAX} keys; replicas keep the rest"
                );
            }
        }
    }

    /// Tells the view the slot of one of the command's key arguments (already computed to
    /// pick the shards to lock).
    pub fn hint_slot(&mut self, key: &[u8], slot: u16) {
        self.slot_hint = (key.as_ptr() as usize, key.len(), usize::from(slot));
    }

    /// The hash slot of `key`, from the hint when `key` is that very argument (same address
    /// and length: the arguments outlive the command, so no other bytes can be there).
    fn slot_of(&self, key: &[u8]) -> u16 {
        let (addr, len, slot) = self.slot_hint;
        if key.as_ptr() as usize == addr && key.len() == len && len != 0 {
            slot as u16
        } else {
            key_slot(key)
        }
    }

    pub fn keyspace(&self) -> &'a Keyspace {
        self.keyspace
    }

    /// The database number of the keyspace this view locks.
    pub fn db_index(&self) -> usize {
        self.keyspace.index()
    }

    /// The flags of what this view records (removed, created and missed keys, LFU
    /// counting) carried over to `other`: SELECT inside EXEC or a script switches views.
    pub fn recording_like(&self, other: &mut Locked<'_>) {
        if self.removed.is_some() {
            other.record_removed();
        }
        if self.created.is_some() {
            other.record_created();
        }
        if self.missed.is_some() {
            other.record_missed();
        }
        other.lfu = self.lfu;
    }

    pub fn holds_all(&self) -> bool {
        self.guards.holds_all()
    }

    /// The shard holding `slot`. The dispatcher locked it from the command's key positions;
    /// if a command reaches a key it did not declare, the shard is locked here when that keeps
    /// the ascending order, which is the only order that cannot deadlock.
    #[inline]
    pub fn shard_mut(&mut self, slot: u16) -> &mut Shard {
        let s = shard_of_slot(slot);
        // One guard search on the path every command takes; the late lock is out of line.
        let at = match self.guards.position(s) {
            Ok(at) => at,
            Err(_) => {
                self.lock_undeclared(s);
                self.guards.position(s).expect("locked above")
            }
        };
        self.guards.at_mut(at)
    }

    /// A command touched a shard it did not declare: a bug, survived by locking it now.
    #[cold]
    #[inline(never)]
    fn lock_undeclared(&mut self, s: usize) {
        debug_assert!(false, "command touched undeclared shard {s}");
        tracing::warn!(
            shard = s,
            "command touched a key it did not declare; locking late"
        );
        if self.highest.is_some_and(|h| h > s) {
            // Out of order: wait politely rather than risk a deadlock cycle forever.
            let guard = loop {
                if let Some(g) = self.keyspace.try_lock_shard(s) {
                    break g;
                }
                std::thread::yield_now();
            };
            self.guards.insert(s, guard);
        } else {
            let guard = self.keyspace.lock_shard(s);
            self.guards.insert(s, guard);
            self.highest = Some(s);
        }
    }

    /// Runs `f` on one shard: through the guard this view holds, or with the shard locked
    /// for the call only. For commands that walk the keyspace a shard at a time and declare
    /// no keys (SCAN, DBSIZE, INFO): inside EXEC the view may already hold every shard, and
    /// locking one again would deadlock.
    pub fn with_shard<R>(&mut self, shard: usize, f: impl FnOnce(&mut Shard) -> R) -> R {
        if let Some(guard) = self.guards.get_mut(shard) {
            return f(guard);
        }
        let mut guard = if self.highest.is_some_and(|h| h > shard) {
            // Below a shard we hold: out of order, so try-lock as `shard_mut` does. Only a
            // view holding some shards but not all gets here, which no caller builds today.
            loop {
                if let Some(g) = self.keyspace.try_lock_shard(shard) {
                    break g;
                }
                std::thread::yield_now();
            }
        } else {
            self.keyspace.lock_shard(shard)
        };
        f(&mut guard)
    }

    /// Shards held, in ascending order (for commands over the whole keyspace).
    pub fn shards_mut(&mut self) -> impl Iterator<Item = (usize, &mut Shard)> + use<'_, 'a> {
        self.guards.iter_mut()
    }

    /// The live entry of `key`, touching its access time; deletes it if it has expired.
    pub fn get(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let slot = self.slot_of(key);
        let (now, lru) = (self.now, self.lru_clock);
        // One hash lookup: the index found is reused to reach the entry (perf: looking the key
        // up twice was a tenth of a pipelined GET's cycles on a million keys).
        let (index, expired) = {
            let table = self.shard_mut(slot).table(slot);
            match table.get_full(key) {
                None => {
                    self.note_missed(key);
                    return None;
                }
                Some((i, _, e)) => (i, e.is_expired(now)),
            }
        };
        if expired {
            self.expire_now(slot, key);
            self.note_missed(key);
            return None;
        }
        self.hits += 1;
        let lfu = self.lfu;
        let table = self.shard_mut(slot).table_mut(slot);
        table.update_access(index, |access| {
            if let Some((params, draw)) = lfu {
                // Decay from the previous access first, as Redis's updateLFU does.
                let idle = lru.saturating_sub(access.lru);
                let freq = frequency::decayed(access.freq, idle, params);
                access.freq = frequency::incremented(freq, params, draw());
            }
            access.lru = lru;
        });
        table.get_index_mut(index).map(|(_, entry)| entry)
    }

    /// Like `get`, without touching the access time (OBJECT, TTL, TYPE-free inspection).
    pub fn peek(&mut self, key: &[u8]) -> Option<&Entry> {
        let slot = self.slot_of(key);
        let now = self.now;
        let expired = match self.shard_mut(slot).table(slot).get(key) {
            None => return None,
            Some(e) => e.is_expired(now),
        };
        if expired {
            self.expire_now(slot, key);
            return None;
        }
        self.shard_mut(slot).table(slot).get(key)
    }

    /// Like `peek`, with the key's access stamps (OBJECT IDLETIME, FREQ, ENCODING).
    pub fn peek_with_access(&mut self, key: &[u8]) -> Option<(&Entry, Access)> {
        self.peek(key)?;
        let slot = self.slot_of(key);
        let (_, stored, entry) = self.shard_mut(slot).table(slot).get_full(key)?;
        Some((entry, stored.access()))
    }

    /// Changes the access stamps of `key` if it is held (whether or not it has expired:
    /// callers change a key they just read or wrote).
    pub fn update_access(&mut self, key: &[u8], f: impl FnOnce(&mut Access)) {
        let slot = self.slot_of(key);
        let table = self.shard_mut(slot).table_mut(slot);
        if let Some(i) = table.get_index_of(key) {
            table.update_access(i, f);
        }
    }

    /// The live entry of `key` through a shared borrow, so that a command can hold several
    /// at once (SINTER, SUNION). Touches nothing and deletes nothing: call `get` on each key
    /// first for lazy expiry and access times. Sees only the shards this command locked.
    pub fn get_shared(&self, key: &[u8]) -> Option<&Entry> {
        let slot = self.slot_of(key);
        let shard = self.guards.get(shard_of_slot(slot));
        debug_assert!(shard.is_some(), "command read an undeclared key");
        shard?
            .table(slot)
            .get(key)
            .filter(|e| !e.is_expired(self.now))
    }

    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.peek(key).is_some()
    }

    /// Stores `value` under `key` with no TTL, replacing any previous entry. Returns the old.
    pub fn set(&mut self, key: &[u8], value: Value) -> Option<Entry> {
        let entry = Entry::new(value);
        self.insert(key, entry)
    }

    /// Stores `value`, keeping the key's TTL if it has one (SET KEEPTTL, SETRANGE, APPEND...).
    pub fn set_keep_ttl(&mut self, key: &[u8], value: Value) {
        self.store_keep_ttl(key, value, false);
    }

    /// Like `set_keep_ttl`, for a string the command edited (SETRANGE): marked as edited in
    /// place, which OBJECT ENCODING reports as Redis does (`raw`).
    pub fn set_edited_keep_ttl(&mut self, key: &[u8], value: Value) {
        self.store_keep_ttl(key, value, true);
    }

    fn store_keep_ttl(&mut self, key: &[u8], value: Value, edited_in_place: bool) {
        let lru = self.lru_clock;
        if let Some(entry) = self.get(key) {
            entry.value = value;
            // `get` stamped the access time.
            self.update_access(key, |access| access.edited_in_place = edited_in_place);
        } else {
            let access = Access {
                edited_in_place,
                ..Access::fresh(lru)
            };
            self.insert_with_access(key, Entry::new(value), access);
        }
    }

    /// Inserts a whole entry (its TTL included), replacing any previous one; the key counts
    /// as accessed now.
    pub fn insert(&mut self, key: &[u8], entry: Entry) -> Option<Entry> {
        let access = Access::fresh(self.lru_clock);
        self.insert_with_access(key, entry, access)
    }

    /// Like `insert`, with the access stamps given (RESTORE's IDLETIME and FREQ, RENAME
    /// keeping the source's).
    pub fn insert_with_access(
        &mut self,
        key: &[u8],
        entry: Entry,
        access: Access,
    ) -> Option<Entry> {
        let slot = self.slot_of(key);
        let now = self.now;
        let at = entry.expires_at;
        let shard = self.shard_mut(slot);
        // One hash lookup for both outcomes (replace or add); the table grows its record
        // array by an eighth, and only for a new key.
        let old = shard.table_mut(slot).insert(key, entry, access);
        if old.is_none() {
            shard.keys += 1;
        }
        let had_ttl = old.as_ref().is_some_and(|o| o.expires_at != 0);
        if at != 0 {
            shard.expiry.add(key, at, had_ttl);
        } else if had_ttl {
            shard.expiry.remove();
        }
        rebuild_expiry_if_needed(shard);
        match old {
            Some(o) if o.is_expired(now) => {
                self.expired += 1;
                self.note_removed(key);
                self.note_created(key);
                None
            }
            None => {
                self.note_created(key);
                None
            }
            other => other,
        }
    }

    /// The entry of `key`, created with `make()` if absent (pushes, HSET, SADD, ZADD).
    pub fn get_or_insert_with(&mut self, key: &[u8], make: impl FnOnce() -> Value) -> &mut Entry {
        if self.get(key).is_none() {
            self.set(key, make());
        }
        let slot = self.slot_of(key);
        self.shard_mut(slot)
            .table_mut(slot)
            .get_mut(key)
            .expect("present: checked or inserted above")
    }

    /// Deletes `key`; returns its entry if it was live.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        self.take(key).map(|(entry, _)| entry)
    }

    /// Deletes `key`; returns its entry and access stamps if it was live (RENAME).
    pub fn take(&mut self, key: &[u8]) -> Option<(Entry, Access)> {
        let slot = self.slot_of(key);
        let now = self.now;
        let shard = self.shard_mut(slot);
        let (old, access) = shard.table_mut(slot).swap_remove(key)?;
        shard.keys -= 1;
        if old.expires_at != 0 {
            shard.expiry.remove();
        }
        if old.is_expired(now) {
            self.expired += 1;
            self.note_removed(key);
            return None;
        }
        Some((old, access))
    }

    /// Deletes `key` if its value is an aggregate that became empty (Redis never keeps those).
    pub fn remove_if_empty(&mut self, key: &[u8]) -> bool {
        let empty = self.peek(key).is_some_and(|e| e.value.is_empty_aggregate());
        if empty {
            self.remove(key);
        }
        empty
    }

    /// Sets or clears (`at == 0`) the expiry of a live key. Returns false if there is no key.
    pub fn set_expiry(&mut self, key: &[u8], at: UnixMillis) -> bool {
        let slot = self.slot_of(key);
        if self.get(key).is_none() {
            return false;
        }
        let shard = self.shard_mut(slot);
        let entry = shard
            .table_mut(slot)
            .get_mut(key)
            .expect("live: checked above");
        let had_ttl = entry.expires_at != 0;
        entry.expires_at = at;
        if at != 0 {
            shard.expiry.add(key, at, had_ttl);
        } else if had_ttl {
            shard.expiry.remove();
        }
        rebuild_expiry_if_needed(shard);
        true
    }

    fn expire_now(&mut self, slot: u16, key: &[u8]) {
        let shard = self.shard_mut(slot);
        if let Some((old, _)) = shard.table_mut(slot).swap_remove(key) {
            shard.keys -= 1;
            if old.expires_at != 0 {
                shard.expiry.remove();
            }
            self.expired += 1;
            self.note_removed(key);
        }
    }

    /// Deletes every key in the held shards; returns how many were deleted.
    pub fn clear_held(&mut self) -> usize {
        let mut removed = 0;
        for (_, shard) in self.shards_mut() {
            removed += shard.keys;
            shard.clear();
        }
        removed
    }
}

/// Rebuilds `shard`'s expiry index from its keys once too many of its entries are stale.
/// Takes the shard the caller already holds: looking it up again cost a second guard search
/// on every write.
fn rebuild_expiry_if_needed(shard: &mut Shard) {
    if shard.expiry.needs_rebuild() {
        rebuild_expiry(shard);
    }
}

#[cold]
fn rebuild_expiry(shard: &mut Shard) {
    let live: Vec<(UnixMillis, Key)> = shard
        .tables()
        .iter()
        .flat_map(|t| {
            t.iter()
                .filter(|(_, e)| e.expires_at != 0)
                .map(|(k, e)| (e.expires_at, k.to_key()))
        })
        .collect();
    shard.expiry.rebuild(live.into_iter());
}
