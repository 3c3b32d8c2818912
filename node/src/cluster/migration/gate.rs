//! What the node's command path needs to know about the migrations it is the source of:
//! which slots stream their writes to a migration link (set under the slot's shard lock
//! once the slot's keys were copied into it), which slots have their writes paused, and the
//! clients parked on a paused slot. The links' outbound bytes queue here too, appended by
//! the writer that holds the slot's shard, so a slot's writes follow its copy in order.
//!
//! State only: the driver (`server::slot_migration`) does the I/O.

use super::ledger::MigrationId;
use super::ranges::SlotRanges;
use crate::cluster::shared::LeaseWaiter;
use parking_lot::{Condvar, Mutex, RwLock};
use proto::slot::SLOT_COUNT;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// Most bytes a link's queue holds unsent: a target that reads slower than the source
/// writes fails its migration (which rolls back) instead of growing the source's memory.
pub const LINK_QUEUE_BYTES_MAX: usize = 256 << 20;

/// Most appends awaiting the target's replies (each holds a few commands at most).
pub const LINK_MARKS_MAX: usize = 4 << 20;

/// One migration link's outbound stream: the snapshot of each slot, then its writes.
#[derive(Default)]
pub struct LinkQueue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    pending: Vec<u8>,
    /// Bytes ever appended (the stream's offset after the last append).
    appended: u64,
    /// Per append not yet answered by the target: its end offset and how many commands
    /// (replies) it holds. The target's replies settle them in order.
    marks: std::collections::VecDeque<(u64, u32)>,
    /// Replies counted toward the oldest mark.
    replies_toward_mark: u64,
    /// The offset the target has answered every command through.
    answered: u64,
    /// Set when the queue overflowed or the stream cannot be followed (a FLUSHALL): the
    /// migration must fail.
    broken: Option<String>,
    closed: bool,
}

impl LinkQueue {
    /// A queue whose stream continues at `offset` (a migration's next batch).
    pub fn starting_at(offset: u64) -> Self {
        let queue = LinkQueue::default();
        {
            let mut s = queue.state.lock();
            s.appended = offset;
            s.answered = offset;
        }
        queue
    }

    /// Appends `bytes` holding `commands` whole commands; over [`LINK_QUEUE_BYTES_MAX`]
    /// (or [`LINK_MARKS_MAX`] unanswered appends) the queue breaks instead.
    pub fn append(&self, bytes: &[u8], commands: u32) {
        let mut s = self.state.lock();
        if s.broken.is_some() || s.closed {
            return;
        }
        if s.pending.len() + bytes.len() > LINK_QUEUE_BYTES_MAX || s.marks.len() >= LINK_MARKS_MAX {
            s.broken = Some(format!(
                "the stream to the target backed up past {LINK_QUEUE_BYTES_MAX} bytes"
            ));
            s.pending = Vec::new();
        } else {
            s.pending.extend_from_slice(bytes);
            s.appended += bytes.len() as u64;
            let end = s.appended;
            s.marks.push_back((end, commands));
        }
        drop(s);
        self.ready.notify_one();
    }

    pub fn break_with(&self, why: &str) {
        let mut s = self.state.lock();
        s.broken.get_or_insert_with(|| why.to_string());
        drop(s);
        self.ready.notify_one();
    }

    /// The stream's offset after everything appended so far.
    pub fn appended(&self) -> u64 {
        self.state.lock().appended
    }

    /// The target answered `replies` more commands: returns the offset it has answered
    /// everything through.
    pub fn answered(&self, replies: u64) -> u64 {
        let mut s = self.state.lock();
        s.replies_toward_mark += replies;
        while let Some(&(end, commands)) = s.marks.front() {
            if s.replies_toward_mark < commands as u64 {
                break;
            }
            s.replies_toward_mark -= commands as u64;
            s.answered = end;
            s.marks.pop_front();
        }
        s.answered
    }

    pub fn broken(&self) -> Option<String> {
        self.state.lock().broken.clone()
    }

    /// Ends the queue: the sender's wait returns.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.ready.notify_one();
    }

    /// Takes what is pending, waiting up to `wait` for something; None once closed.
    pub fn take(&self, wait: std::time::Duration) -> Option<Vec<u8>> {
        let mut s = self.state.lock();
        if s.pending.is_empty() && !s.closed {
            self.ready.wait_for(&mut s, wait);
        }
        if s.closed {
            return None;
        }
        Some(std::mem::take(&mut s.pending))
    }
}

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
