//! WATCH: which clients watch which keys, and a dirty flag per watching client that any
//! change to a watched key sets, so that EXEC can refuse to run.
//!
//! Writers mark watchers dirty before they release their shard locks (the dispatcher does
//! it), so an EXEC, which locks every shard, sees every change made before it. Keys deleted
//! by expiry are not reported here: EXEC checks the keys that were live when watched instead.

use crate::db::Key;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// Most keys one client may WATCH; each costs a registry entry.
pub const MAX_WATCHED_KEYS_PER_CLIENT: usize = 100_000;

/// A client's watch: its dirty flag and the keys it watches.
#[derive(Default)]
pub struct WatchHandle {
    pub dirty: Arc<AtomicBool>,
    /// (database, key) pairs. A set, so that watching many keys costs O(keys), not
    /// O(keys squared).
    pub keys: HashSet<(usize, Key)>,
    /// The watched keys that existed when watched: if one is gone at EXEC, it expired (any
    /// other deletion would have set `dirty`), and Redis then refuses the EXEC as well.
    pub live_when_watched: Vec<(usize, Key)>,
}

impl WatchHandle {
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Relaxed)
    }
}

/// A watched key: its database and name.
pub type WatchedKey = (usize, Key);

#[derive(Default)]
pub struct Watches {
    /// (client, key) pairs registered; zero means no write needs to report its keys.
    entries: AtomicUsize,
    by_key: Mutex<HashMap<WatchedKey, Vec<Arc<AtomicBool>>>>,
}

impl Watches {
    /// Whether any client watches anything (checked by every write, lock-free).
    pub fn active(&self) -> bool {
        self.entries.load(Relaxed) > 0
    }

    /// Adds `key` to `handle`'s watch; `live` says whether the key exists now. Returns false
    /// if the client watches too many keys.
    pub fn watch(&self, handle: &mut WatchHandle, db: usize, key: &[u8], live: bool) -> bool {
        let key: (usize, Key) = (db, key.into());
        if handle.keys.contains(&key) {
            return true;
        }
        if handle.keys.len() >= MAX_WATCHED_KEYS_PER_CLIENT {
            return false;
        }
        handle.keys.insert(key.clone());
        if live {
            handle.live_when_watched.push(key.clone());
        }
        self.by_key
            .lock()
            .entry(key)
            .or_default()
            .push(handle.dirty.clone());
        self.entries.fetch_add(1, Relaxed);
        true
    }

    /// Marks every client watching one of `keys` of database `db` dirty.
    pub fn touch(&self, db: usize, keys: &[Key]) {
        let map = self.by_key.lock();
        for key in keys {
            if let Some(flags) = map.get(&(db, key.clone())) {
                for f in flags {
                    f.store(true, Relaxed);
                }
            }
        }
    }

    /// Marks every client watching one of the (database, key) pairs dirty.
    pub fn touch_each(&self, keys: &[(usize, Key)]) {
        let map = self.by_key.lock();
        for key in keys {
            if let Some(flags) = map.get(key) {
                for f in flags {
                    f.store(true, Relaxed);
                }
            }
        }
    }

    /// Marks every watching client dirty (FLUSHALL, FLUSHDB, snapshot load).
    pub fn touch_all(&self) {
        for flags in self.by_key.lock().values() {
            for f in flags {
                f.store(true, Relaxed);
            }
        }
    }

    /// Marks dirty the watchers of each watched key for which `exists` holds. FLUSHALL and
    /// FLUSHDB call it before emptying the keyspace (with every shard locked): Redis
    /// invalidates only watches of keys the flush actually deletes.
    pub fn touch_where(&self, mut exists: impl FnMut(usize, &[u8]) -> bool) {
        for ((db, key), flags) in self.by_key.lock().iter() {
            if exists(*db, key) {
                for f in flags {
                    f.store(true, Relaxed);
                }
            }
        }
    }

    /// Removes all of a client's watches (UNWATCH, EXEC, DISCARD, disconnect).
    pub fn unwatch_all(&self, handle: WatchHandle) {
        let mut map = self.by_key.lock();
        for key in &handle.keys {
            if let Some(flags) = map.get_mut(key) {
                flags.retain(|f| !Arc::ptr_eq(f, &handle.dirty));
                if flags.is_empty() {
                    map.remove(key);
                }
            }
        }
        self.entries.fetch_sub(handle.keys.len(), Relaxed);
    }

    pub fn watched_key_count(&self) -> usize {
        self.by_key.lock().len()
    }
}
