//! What the node's command path needs to know about the migrations it is the source of:
//! which slots stream their writes to a migration link (set under the slot's shard lock
//! once the slot's keys were copied into it), which slots have their writes paused, and the
//! clients parked on a paused slot, and each migration's [`LinkQueue`] (appended by the
//! writer that holds the slot's shard, so a slot's writes follow its copy in order).
//!
//! State only: the driver (`server::slot_migration`) does the I/O.

use super::ledger::MigrationId;
use super::link_queue::LinkQueue;
use super::ranges::SlotRanges;
use crate::cluster::shared::LeaseWaiter;
use parking_lot::{Mutex, RwLock};
use proto::slot::SLOT_COUNT;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

pub struct MigrationGate {
    /// Per slot: the migration its writes stream to (0: none).
    streaming: Box<[AtomicU64]>,
    /// Per slot: writes are paused (the batch's final catch-up).
    paused: Box<[AtomicBool]>,
    /// Slots streaming now: the write path's one check while no migration runs.
    streaming_count: AtomicUsize,
    /// Slots paused now: the dispatcher's one check while no pause holds.
    paused_count: AtomicUsize,
    links: RwLock<HashMap<MigrationId, Arc<LinkQueue>>>,
    /// Clients parked on a paused slot.
    waiters: Mutex<Vec<Arc<dyn LeaseWaiter>>>,
}

impl Default for MigrationGate {
    fn default() -> Self {
        MigrationGate {
            streaming: (0..SLOT_COUNT).map(|_| AtomicU64::new(0)).collect(),
            paused: (0..SLOT_COUNT).map(|_| AtomicBool::new(false)).collect(),
            streaming_count: AtomicUsize::new(0),
            paused_count: AtomicUsize::new(0),
            links: RwLock::new(HashMap::new()),
            waiters: Mutex::new(Vec::new()),
        }
    }
}

impl MigrationGate {
    /// Whether any slot streams its writes to a link (one relaxed load).
    #[inline]
    pub fn streaming(&self) -> bool {
        self.streaming_count.load(Relaxed) != 0
    }

    /// `queue` takes the writes of `id`'s streaming slots from now on.
    pub fn install_link(&self, id: MigrationId, queue: Arc<LinkQueue>) {
        if let Some(old) = self.links.write().insert(id, queue) {
            old.close();
        }
    }

    /// Stops every slot of `id` streaming and drops its queue.
    pub fn close_link(&self, id: MigrationId) {
        for slot in 0..SLOT_COUNT as u16 {
            self.stop_streaming(slot, id);
        }
        if let Some(q) = self.links.write().remove(&id) {
            q.close();
        }
    }

    /// From now on the slot's writes go to `id`'s link. Call with the slot's shard held,
    /// right after its keys were appended to that link.
    pub fn stream_slot(&self, slot: u16, id: MigrationId) {
        let previous = self.streaming[slot as usize].swap(id.0, Relaxed);
        if previous == 0 {
            self.streaming_count.fetch_add(1, Relaxed);
        }
    }

    fn stop_streaming(&self, slot: u16, id: MigrationId) {
        if self.streaming[slot as usize]
            .compare_exchange(id.0, 0, Relaxed, Relaxed)
            .is_ok()
        {
            self.streaming_count.fetch_sub(1, Relaxed);
        }
    }

    /// The link `slot`'s writes go to, if it streams.
    pub fn link_of(&self, slot: u16) -> Option<Arc<LinkQueue>> {
        let id = self.streaming[slot as usize].load(Relaxed);
        if id == 0 {
            return None;
        }
        self.links.read().get(&MigrationId(id)).cloned()
    }

    /// A write that cannot be followed slot by slot (FLUSHALL): every link breaks.
    pub fn break_all(&self, why: &str) {
        for q in self.links.read().values() {
            q.break_with(why);
        }
    }

    pub fn pause(&self, slots: &SlotRanges) {
        for slot in slots.slots() {
            if !self.paused[slot as usize].swap(true, Relaxed) {
                self.paused_count.fetch_add(1, Relaxed);
            }
        }
    }

    /// Lets writes to `slots` through again and wakes the parked clients (they run their
    /// command again: served here, or MOVED if the slots are the target's now).
    pub fn resume(&self, slots: &SlotRanges) {
        for slot in slots.slots() {
            if self.paused[slot as usize].swap(false, Relaxed) {
                self.paused_count.fetch_sub(1, Relaxed);
            }
        }
        let waiters = std::mem::take(&mut *self.waiters.lock());
        for client in waiters {
            client.wake();
        }
    }

    /// Whether any slot's writes are paused (one relaxed load).
    #[inline]
    pub fn any_paused(&self) -> bool {
        self.paused_count.load(Relaxed) != 0
    }

    #[inline]
    pub fn paused(&self, slot: u16) -> bool {
        self.paused[slot as usize].load(Relaxed)
    }

    /// Parks `client` until the slots resume; woken at once if `slot` resumed meanwhile.
    pub fn wake_when_resumed(&self, slot: u16, client: Arc<dyn LeaseWaiter>) {
        {
            let mut waiters = self.waiters.lock();
            waiters.retain(|c| c.still_waiting() && !Arc::ptr_eq(c, &client));
            waiters.push(client.clone());
        }
        if !self.paused(slot) {
            let waiters = std::mem::take(&mut *self.waiters.lock());
            for c in waiters {
                c.wake();
            }
        }
    }
}
