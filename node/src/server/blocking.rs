//! Clients blocked on keys (BLPOP and friends), first come first served per key.
//!
//! A blocked client's connection waits on its wake-up signal; when a command adds elements
//! to a key, the first client waiting on that key is woken and runs its command again. A
//! client that is served wakes the next one in line on the same keys when it leaves, so one
//! push of many elements serves many clients, in the order they blocked.

use super::client::ClientShared;
use crate::db::Key;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

#[derive(Default)]
pub struct Blocking {
    waiting: AtomicUsize,
    by_key: Mutex<HashMap<Key, VecDeque<Arc<ClientShared>>>>,
}

impl Blocking {
    /// Whether any client is blocked (checked by every push, lock-free).
    pub fn active(&self) -> bool {
        self.waiting.load(Relaxed) > 0
    }

    pub fn blocked_clients(&self) -> usize {
        self.waiting.load(Relaxed)
    }

    pub fn register(&self, keys: &[Key], client: &Arc<ClientShared>) {
        let mut map = self.by_key.lock();
        for key in keys {
            map.entry(key.clone())
                .or_default()
                .push_back(client.clone());
        }
        self.waiting.fetch_add(1, Relaxed);
    }

    /// Removes the client from every key's line and wakes the next client on each key, who
    /// may now be served by what this one left.
    pub fn unregister(&self, keys: &[Key], client: &Arc<ClientShared>) {
        let mut map = self.by_key.lock();
        for key in keys {
            if let Some(line) = map.get_mut(key) {
                line.retain(|c| c.id != client.id);
                if let Some(next) = line.front() {
                    next.wakeup.notify_one();
                } else {
                    map.remove(key);
                }
            }
        }
        self.waiting.fetch_sub(1, Relaxed);
    }

    /// Wakes the first client waiting on each key.
    pub fn wake(&self, keys: &[Key]) {
        let map = self.by_key.lock();
        for key in keys {
            if let Some(first) = map.get(key).and_then(|line| line.front()) {
                first.wakeup.notify_one();
            }
        }
    }

    /// Wakes every blocked client (FLUSHALL, CLIENT UNBLOCK, shutdown).
    pub fn wake_all(&self) {
        for line in self.by_key.lock().values() {
            for c in line {
                c.wakeup.notify_one();
            }
        }
    }
}
