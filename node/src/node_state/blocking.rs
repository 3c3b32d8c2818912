//! Clients blocked on keys (BLPOP and friends), first come first served per key.
//!
//! A blocked client's connection waits on its wake-up signal; when a command adds elements
//! to a key, the first client waiting on that key is woken and runs its command again. A
//! client that is served wakes the next one in line on the same keys when it leaves, so one
//! push of many elements serves many clients, in the order they blocked.
//!
//! Stream readers (XREAD, XREADGROUP) wait differently: an entry added to a stream serves
//! every reader at once (nothing is consumed), and a reader blocked on a group must learn
//! when its key or group goes away. So they are woken by every signal on their keys, not
//! only when first in line.

use super::client::ClientShared;
use crate::db::Key;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// A client in a key's line.
struct Waiter {
    client: Arc<ClientShared>,
    /// Woken by every signal on the key, wherever it stands in line (stream readers).
    every_signal: bool,
}

#[derive(Default)]
pub struct Blocking {
    waiting: AtomicUsize,
    /// Keyed by (database, key): a push in one database wakes none of another's waiters.
    by_key: Mutex<HashMap<(usize, Key), VecDeque<Waiter>>>,
}

impl Blocking {
    /// Whether any client is blocked (checked by every push, lock-free).
    pub fn active(&self) -> bool {
        self.waiting.load(Relaxed) > 0
    }

    pub fn blocked_clients(&self) -> usize {
        self.waiting.load(Relaxed)
    }

    /// Keys with at least one client waiting on them (INFO `total_blocking_keys`).
    pub fn blocking_keys(&self) -> usize {
        self.by_key.lock().len()
    }

    /// Puts the client at the end of each key's line. Returns whether it is first in some
    /// line: only then may elements pushed before it registered be left for it (with a
    /// client ahead on a key, that client was woken by the push, and wakes the next one
    /// when it leaves), so only then should it look again before waiting.
    /// `every_signal`: the client is woken by every signal on its keys (stream readers),
    /// and is always told to look again.
    pub fn register(
        &self,
        db: usize,
        keys: &[Key],
        client: &Arc<ClientShared>,
        every_signal: bool,
    ) -> bool {
        let mut map = self.by_key.lock();
        let mut first = every_signal;
        for key in keys {
            let line = map.entry((db, key.clone())).or_default();
            line.push_back(Waiter {
                client: client.clone(),
                every_signal,
            });
            first |= line.len() == 1;
        }
        self.waiting.fetch_add(1, Relaxed);
        first
    }

    /// Removes the client from every key's line and wakes the next client on each key, who
    /// may now be served by what this one left.
    pub fn unregister(&self, db: usize, keys: &[Key], client: &Arc<ClientShared>) {
        let mut map = self.by_key.lock();
        for key in keys {
            let key = (db, key.clone());
            if let Some(line) = map.get_mut(&key) {
                line.retain(|w| w.client.id != client.id);
                if let Some(next) = line.front() {
                    next.client.wake();
                } else {
                    map.remove(&key);
                }
            }
        }
        self.waiting.fetch_sub(1, Relaxed);
    }

    /// Wakes the first client waiting on each (database, key), and every stream reader on it.
    pub fn wake(&self, keys: &[(usize, Key)]) {
        let map = self.by_key.lock();
        for key in keys {
            if let Some(line) = map.get(key) {
                for (i, w) in line.iter().enumerate() {
                    if i == 0 || w.every_signal {
                        w.client.wake();
                    }
                }
            }
        }
    }

    /// Wakes every blocked client (FLUSHALL/FLUSHDB that removed keys).
    pub fn wake_all(&self) {
        for line in self.by_key.lock().values() {
            for w in line {
                w.client.wake();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: u64) -> Arc<ClientShared> {
        let addr = "127.0.0.1:1".parse().expect("address");
        Arc::new(ClientShared::new(id, addr, addr))
    }

    fn keys(names: &[&str]) -> Vec<Key> {
        names.iter().map(|n| n.as_bytes().into()).collect()
    }

    #[test]
    fn lines_form_and_clear() {
        let b = Blocking::default();
        let (one, two) = (client(1), client(2));
        assert!(
            b.register(0, &keys(&["a", "b"]), &one, false),
            "first on both keys"
        );
        assert!(
            !b.register(0, &keys(&["a"]), &two, false),
            "behind client 1 on its only key"
        );
        assert!(b.active());
        assert_eq!((b.blocked_clients(), b.blocking_keys()), (2, 2));
        b.unregister(0, &keys(&["a", "b"]), &one);
        assert_eq!((b.blocked_clients(), b.blocking_keys()), (1, 1));
        b.unregister(0, &keys(&["a"]), &two);
        assert!(!b.active());
        assert_eq!(b.blocking_keys(), 0);
    }

    /// Goal: a signal wakes the first client in line and every stream reader, not the
    /// other clients behind the first. Method: three clients on one key, wake-up flags read.
    #[test]
    fn stream_readers_are_woken_wherever_they_stand() {
        let b = Blocking::default();
        let (pop1, pop2, reader) = (client(1), client(2), client(3));
        b.register(0, &keys(&["k"]), &pop1, false);
        b.register(0, &keys(&["k"]), &pop2, false);
        assert!(
            b.register(0, &keys(&["k"]), &reader, true),
            "a reader always looks again"
        );
        // The same key in another database wakes nobody.
        b.wake(&[(1, keys(&["k"])[0].clone())]);
        assert!(!pop1.take_wakeup() && !reader.take_wakeup());
        b.wake(&[(0, keys(&["k"])[0].clone())]);
        assert!(pop1.take_wakeup());
        assert!(!pop2.take_wakeup());
        assert!(reader.take_wakeup());
    }
}
