//! Client-side caching: CLIENT TRACKING, as Redis 7.0 does it.
//!
//! - Default mode: the keys a tracking client's read commands name are remembered in the
//!   [`table`]; when one changes (by any client, by expiry or eviction), the clients that
//!   read it get one invalidation for it and it is forgotten until read again.
//! - BCAST mode: no table; a client registers [`prefixes`] and hears of every change to a
//!   key under them, one message per prefix per request listing its changed keys.
//! - FLUSHALL/FLUSHDB (and a replica's full sync) invalidate everything: every tracking
//!   client gets a null key list, and the table is emptied.
//!
//! The command framework reports changes and reads here (`dispatch`: with the keys still
//! locked, so no read can slip between a change and its invalidation); delivery goes
//! through each client's push queue ([`message`]), which both transports (TCP and fabric)
//! drain. Memory: the table holds at most `tracking-table-max-keys` keys (random keys are
//! evicted past it, their readers invalidated), a client at most
//! [`prefixes::MAX_PREFIXES_PER_CLIENT`] prefixes; entries name client ids only.

pub mod client_state;
pub mod message;
pub mod prefixes;
pub mod table;

use super::client::ClientShared;
use super::clients::ClientRegistry;
use crate::db::Key;
use client_state::{LocalTracking, BCAST, NOLOOP};
use message::{deliver, Invalidated};
use parking_lot::RwLock;
use rand::Rng;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// What `tracking-table-max-keys 0` ("no limit" in Redis) bounds the table to here.
pub const TABLE_KEYS_CEILING: usize = 100_000_000;
/// Most table entries one enforcement of the limit evicts (before a command, each cron
/// tick): a lowered limit is reached over a few commands, as Redis spreads it too.
pub const EVICTIONS_PER_CALL: usize = 10_000;

/// One changed key of a request and who changed it (None: expiry, eviction, or several
/// clients), for BCAST's NOLOOP.
pub type Change = (Key, Option<u64>);

/// One prefix's listeners and the changed keys under it (with their writers).
type PrefixBatch<'a> = (prefixes::Listeners, Vec<(&'a [u8], Option<u64>)>);

#[derive(Default)]
pub struct Tracking {
    pub table: table::TrackingTable,
    prefixes: RwLock<prefixes::PrefixTable>,
    /// Distinct BCAST prefixes, readable without the lock.
    prefix_count: AtomicUsize,
    /// Clients with tracking on (INFO `tracking_clients`).
    clients: AtomicUsize,
}

impl Tracking {
    /// Whether changes must be reported: a client tracks, or the table still names keys
    /// (entries of clients that stopped are cleaned as their keys change, as in Redis).
    /// Two relaxed loads: nothing else is paid while nobody uses tracking.
    pub fn active(&self) -> bool {
        self.clients.load(Relaxed) > 0 || self.table.keys() > 0
    }

    /// Whether some client listens in BCAST mode.
    pub fn broadcasting(&self) -> bool {
        self.prefix_count.load(Relaxed) > 0
    }

    pub fn clients(&self) -> usize {
        self.clients.load(Relaxed)
    }

    pub fn prefix_count(&self) -> usize {
        self.prefix_count.load(Relaxed)
    }

    /// Turns tracking on (or changes its options) for a client. The caller has checked
    /// the options' combination and the prefixes (`prefixes::check_new`).
    pub fn enable(
        &self,
        shared: &ClientShared,
        local: &mut LocalTracking,
        options: u8,
        redirect: u64,
        new_prefixes: &[&[u8]],
    ) {
        if !shared.tracking.is_on() {
            self.clients.fetch_add(1, Relaxed);
        }
        shared.tracking.set(options, redirect);
        if options & BCAST != 0 {
            let mut table = self.prefixes.write();
            let empty: &[&[u8]] = &[b""];
            let added = if new_prefixes.is_empty() {
                empty
            } else {
                new_prefixes
            };
            for p in added {
                // BCAST again without PREFIX adds the empty prefix again: once, as Redis.
                if !local.prefixes.iter().any(|have| &have[..] == *p) {
                    table.add(p, shared.id);
                    local.prefixes.push((*p).into());
                }
            }
            self.prefix_count.store(table.count(), Relaxed);
        }
    }

    /// Turns tracking off for a client (CLIENT TRACKING off, RESET, disconnection).
    pub fn disable(&self, shared: &ClientShared, local: &mut LocalTracking) {
        if !local.prefixes.is_empty() {
            let mut table = self.prefixes.write();
            for p in local.prefixes.drain(..) {
                table.remove(&p, shared.id);
            }
            self.prefix_count.store(table.count(), Relaxed);
        }
        local.caching = false;
        if shared.tracking.is_on() {
            shared.tracking.clear();
            self.clients.fetch_sub(1, Relaxed);
        }
    }

    /// Remembers that `client` read `keys`.
    pub fn remember<'k>(&self, client: u64, keys: impl IntoIterator<Item = &'k [u8]>) {
        for key in keys {
            self.table.remember(key, client);
        }
    }

    /// A key changed: the default-mode clients that read it are invalidated (not `writer`
    /// if it asked for NOLOOP) and the key forgotten.
    pub fn invalidate(&self, clients: &ClientRegistry, key: &[u8], writer: Option<u64>) {
        let Some(readers) = self.table.take(key) else {
            return;
        };
        self.send_to_readers(clients, key, &readers, writer);
    }

    fn send_to_readers(
        &self,
        clients: &ClientRegistry,
        key: &[u8],
        readers: &[u64],
        writer: Option<u64>,
    ) {
        for &id in readers {
            let Some(target) = clients.get(id) else {
                continue;
            };
            let flags = target.tracking.flags();
            // A client that switched to BCAST is not told of keys it read before.
            if !target.tracking.is_on() || flags & BCAST != 0 {
                continue;
            }
            if flags & NOLOOP != 0 && writer == Some(id) {
                continue;
            }
            deliver(clients, &target, Invalidated::Keys(&[key]));
        }
    }

    /// The keys one request changed, for BCAST clients: one message per prefix and client,
    /// listing that prefix's keys (without the client's own changes under NOLOOP).
    pub fn broadcast(&self, clients: &ClientRegistry, changes: &[Change]) {
        if changes.is_empty() || !self.broadcasting() {
            return;
        }
        // Each key once; changed by one client only if every change was that client's.
        let mut changed: BTreeMap<&[u8], Option<u64>> = BTreeMap::new();
        for (key, writer) in changes {
            changed
                .entry(key)
                .and_modify(|w| {
                    if *w != *writer {
                        *w = None
                    }
                })
                .or_insert(*writer);
        }
        let mut by_prefix: BTreeMap<Key, PrefixBatch<'_>> = BTreeMap::new();
        {
            let table = self.prefixes.read();
            for (&key, &writer) in &changed {
                table.each_match(key, |prefix, listeners| {
                    by_prefix
                        .entry(prefix.clone())
                        .or_insert_with(|| (listeners.clone(), Vec::new()))
                        .1
                        .push((key, writer));
                });
            }
        }
        for (listeners, keys) in by_prefix.values() {
            for &id in listeners {
                let Some(target) = clients.get(id) else {
                    continue;
                };
                let flags = target.tracking.flags();
                if !target.tracking.is_on() || flags & BCAST == 0 {
                    continue;
                }
                let noloop = flags & NOLOOP != 0;
                let named: Vec<&[u8]> = keys
                    .iter()
                    .filter(|(_, writer)| !(noloop && *writer == Some(id)))
                    .map(|(k, _)| *k)
                    .collect();
                if !named.is_empty() {
                    deliver(clients, &target, Invalidated::Keys(&named));
                }
            }
        }
    }

    /// Keys removed outside any command (active expiry, eviction): both modes.
    pub fn removed_outside_commands(&self, clients: &ClientRegistry, keys: &[Key]) {
        for key in keys {
            self.invalidate(clients, key, None);
        }
        if self.broadcasting() {
            let changes: Vec<Change> = keys.iter().map(|k| (k.clone(), None)).collect();
            self.broadcast(clients, &changes);
        }
    }

    /// FLUSHALL / FLUSHDB / a full sync: every tracking client (BCAST ones too) is told
    /// that everything changed, and the table is emptied.
    pub fn flushed(&self, clients: &ClientRegistry) {
        if !self.active() {
            return;
        }
        for client in clients.all() {
            if client.tracking.is_on() && !client.is_killed() {
                deliver(clients, &client, Invalidated::Everything);
            }
        }
        self.table.clear();
    }

    /// Brings the table within `max_keys` (0: [`TABLE_KEYS_CEILING`]), evicting random keys
    /// and invalidating their readers, at most [`EVICTIONS_PER_CALL`] at a time.
    pub fn enforce_limit(&self, clients: &ClientRegistry, max_keys: u64) {
        let max = match max_keys {
            0 => TABLE_KEYS_CEILING,
            n => (n as usize).min(TABLE_KEYS_CEILING),
        };
        if self.table.keys() <= max {
            return;
        }
        // Which key's readers are told first does not matter (Redis picks at random too), so
        // this table draws from the thread's source rather than take one from above.
        let mut rng = rand::thread_rng();
        let mut pick = |n: usize| rng.gen_range(0..n);
        for _ in 0..EVICTIONS_PER_CALL {
            if self.table.keys() <= max {
                break;
            }
            let Some((key, readers)) = self.table.evict_one(&mut pick) else {
                break;
            };
            self.send_to_readers(clients, &key, &readers, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::client_state::{ON, OPTIN};
    use super::*;
    use std::sync::Arc;

    fn client(reg: &ClientRegistry, id: u64) -> Arc<ClientShared> {
        let addr = "127.0.0.1:1".parse().unwrap();
        let c = Arc::new(ClientShared::new(id, addr, addr));
        c.protocol.store(3, Relaxed);
        reg.add(c.clone());
        c
    }

    fn taken(c: &ClientShared) -> String {
        let mut q = c.pushes.lock();
        let s = String::from_utf8_lossy(&q).into_owned();
        q.clear();
        s
    }

    #[test]
    fn a_read_key_is_invalidated_once_and_noloop_skips_the_writer() {
        let reg = ClientRegistry::default();
        let t = Tracking::default();
        let (a, b) = (client(&reg, 1), client(&reg, 2));
        let (mut la, mut lb) = (LocalTracking::default(), LocalTracking::default());
        t.enable(&a, &mut la, 0, 0, &[]);
        t.enable(&b, &mut lb, NOLOOP, 0, &[]);
        assert_eq!(t.clients(), 2);
        t.remember(1, [&b"k"[..]]);
        t.remember(2, [&b"k"[..]]);
        t.invalidate(&reg, b"k", Some(2));
        assert_eq!(taken(&a), ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n");
        assert_eq!(taken(&b), "", "NOLOOP: its own change");
        t.invalidate(&reg, b"k", Some(1));
        assert_eq!(taken(&a), "", "forgotten until read again");
        t.disable(&a, &mut la);
        t.disable(&b, &mut lb);
        assert_eq!((t.clients(), a.tracking.flags()), (0, 0));
    }

    #[test]
    fn bcast_sends_one_message_per_prefix_with_its_keys() {
        let reg = ClientRegistry::default();
        let t = Tracking::default();
        let a = client(&reg, 1);
        let mut la = LocalTracking::default();
        t.enable(&a, &mut la, BCAST | NOLOOP, 0, &[b"a:", b"b:"]);
        assert_eq!(t.prefix_count(), 2);
        let ch = |k: &str, w: Option<u64>| -> Change { (k.as_bytes().into(), w) };
        t.broadcast(
            &reg,
            &[
                ch("a:1", Some(2)),
                ch("a:2", Some(2)),
                ch("b:1", Some(1)),
                ch("c:1", Some(2)),
                ch("a:1", Some(2)),
            ],
        );
        assert_eq!(
            taken(&a),
            ">2\r\n$10\r\ninvalidate\r\n*2\r\n$3\r\na:1\r\n$3\r\na:2\r\n",
            "b:1 was its own change (NOLOOP), c:1 is under no prefix"
        );
        t.enable(&a, &mut la, BCAST, 0, &[]);
        t.enable(&a, &mut la, BCAST, 0, &[]);
        assert_eq!(la.prefixes.len(), 3, "the empty prefix once");
        assert_eq!(t.prefix_count(), 3);
        t.disable(&a, &mut la);
        assert_eq!(t.prefix_count(), 0);
        assert!(la.prefixes.is_empty());
    }

    #[test]
    fn a_flush_tells_every_tracking_client_and_empties_the_table() {
        let reg = ClientRegistry::default();
        let t = Tracking::default();
        let (a, b, c) = (client(&reg, 1), client(&reg, 2), client(&reg, 3));
        let mut l = LocalTracking::default();
        t.enable(&a, &mut l, OPTIN, 0, &[]);
        t.enable(&b, &mut LocalTracking::default(), BCAST, 0, &[]);
        assert_eq!(a.tracking.flags(), ON | OPTIN);
        t.remember(1, [&b"x"[..], &b"y"[..]]);
        t.flushed(&reg);
        assert_eq!(taken(&a), ">2\r\n$10\r\ninvalidate\r\n_\r\n");
        assert_eq!(taken(&b), ">2\r\n$10\r\ninvalidate\r\n_\r\n");
        assert_eq!(taken(&c), "", "not tracking");
        assert_eq!(t.table.keys(), 0);
    }

    #[test]
    fn the_limit_evicts_keys_and_invalidates_their_readers() {
        let reg = ClientRegistry::default();
        let t = Tracking::default();
        let a = client(&reg, 1);
        t.enable(&a, &mut LocalTracking::default(), 0, 0, &[]);
        let keys: Vec<String> = (0..250).map(|i| format!("key{i}")).collect();
        t.remember(1, keys.iter().map(|k| k.as_bytes()));
        t.enforce_limit(&reg, 1);
        assert_eq!(t.table.keys(), 1);
        let pushed = taken(&a);
        assert_eq!(pushed.matches("invalidate").count(), 249);
    }
}
