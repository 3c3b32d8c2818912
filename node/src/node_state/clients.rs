//! The registry of connected clients (CLIENT LIST/KILL/INFO, INFO clients, maxclients).

use super::client::ClientShared;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

pub struct ClientRegistry {
    next_id: AtomicU64,
    clients: Mutex<BTreeMap<u64, Arc<ClientShared>>>,
    /// Connections accepted but not yet clients: TLS handshakes in progress.
    pending: AtomicUsize,
}

impl Default for ClientRegistry {
    fn default() -> Self {
        ClientRegistry {
            next_id: AtomicU64::new(1),
            clients: Mutex::new(BTreeMap::new()),
            pending: AtomicUsize::new(0),
        }
    }
}

impl ClientRegistry {
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed)
    }

    pub fn add(&self, client: Arc<ClientShared>) {
        self.clients.lock().insert(client.id, client);
    }

    pub fn remove(&self, id: u64) {
        self.clients.lock().remove(&id);
    }

    pub fn count(&self) -> usize {
        self.clients.lock().len()
    }

    /// Clients plus connections on their way to becoming one: what `maxclients` bounds, so
    /// that handshakes in flight cannot hold more sockets than the limit allows.
    pub fn count_with_pending(&self) -> usize {
        self.count() + self.pending.load(Relaxed)
    }

    /// Counts a connection as pending until the returned guard drops.
    pub fn pending_admission(&self) -> PendingAdmission<'_> {
        self.pending.fetch_add(1, Relaxed);
        PendingAdmission { registry: self }
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientShared>> {
        self.clients.lock().get(&id).cloned()
    }

    /// A snapshot of all clients, in id order.
    pub fn all(&self) -> Vec<Arc<ClientShared>> {
        self.clients.lock().values().cloned().collect()
    }

    pub fn blocked_count(&self) -> usize {
        self.clients
            .lock()
            .values()
            .filter(|c| c.blocked.load(Relaxed))
            .count()
    }
}

/// A connection counted against `maxclients` while it is admitted (see
/// [`ClientRegistry::pending_admission`]).
pub struct PendingAdmission<'a> {
    registry: &'a ClientRegistry,
}

impl Drop for PendingAdmission<'_> {
    fn drop(&mut self) {
        self.registry.pending.fetch_sub(1, Relaxed);
    }
}
