//! The registry of connected clients (CLIENT LIST/KILL/INFO, INFO clients, maxclients).

use super::client::ClientShared;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

pub struct ClientRegistry {
    next_id: AtomicU64,
    clients: Mutex<BTreeMap<u64, Arc<ClientShared>>>,
}

impl Default for ClientRegistry {
    fn default() -> Self {
        ClientRegistry {
            next_id: AtomicU64::new(1),
            clients: Mutex::new(BTreeMap::new()),
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
