//! One migration link's outbound stream: the snapshot of each slot, then its writes, with
//! the target's replies settling what it has applied.
//!
//! Two producers with two policies. The slot copy is the source's own pace: it waits
//! ([`LinkQueue::wait_for_room`]) while the unsent bytes are above the high-water mark, so
//! copying alone never fills the queue. Client writes cannot wait (they hold their shard):
//! past the hard bound the queue breaks and the migration rolls back, so a target slower
//! than the clients' writes costs the migration, never the source's memory.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Most appends awaiting the target's replies (each holds a few commands at most).
pub const LINK_MARKS_MAX: usize = 4 << 20;

/// The share of the hard bound the copy fills before it waits: the rest is the room left
/// to client writes while the target catches up.
const HIGH_WATER_DIVISOR: usize = 4;

/// The queue's bounds in bytes of unsent stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueBounds {
    /// Past it an append breaks the queue (the migration fails).
    pub hard: usize,
    /// Above it the copy waits for the sender to drain the queue.
    pub high_water: usize,
}

impl QueueBounds {
    pub fn with_hard(hard: usize) -> Self {
        let hard = hard.max(1);
        QueueBounds {
            hard,
            high_water: (hard / HIGH_WATER_DIVISOR).max(1),
        }
    }
}

/// Why [`LinkQueue::wait_for_room`] returned without room.
#[derive(Debug, PartialEq, Eq)]
pub enum NoRoom {
    /// The queue broke or closed: the copy can stop.
    Ended,
    /// The sender drained nothing for the whole wait (the target stopped reading).
    Stalled,
}

pub struct LinkQueue {
    bounds: QueueBounds,
    state: Mutex<QueueState>,
    /// The sender waits here for bytes.
    ready: Condvar,
    /// The copy waits here for the sender to take bytes (or the queue to end).
    drained: Condvar,
}

#[derive(Default)]
struct QueueState {
    pending: Vec<u8>,
    /// Bytes ever appended (the stream's offset after the last append).
    appended: u64,
    /// Per append not yet answered by the target: its end offset and how many commands
    /// (replies) it holds. The target's replies settle them in order.
    marks: VecDeque<(u64, u32)>,
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
    pub fn new(bounds: QueueBounds, offset: u64) -> Self {
        LinkQueue {
            bounds,
            state: Mutex::new(QueueState {
                appended: offset,
                answered: offset,
                ..QueueState::default()
            }),
            ready: Condvar::new(),
            drained: Condvar::new(),
        }
    }

    pub fn bounds(&self) -> QueueBounds {
        self.bounds
    }

    /// Appends `bytes` holding `commands` whole commands; past the hard bound (or
    /// [`LINK_MARKS_MAX`] unanswered appends) the queue breaks instead.
    pub fn append(&self, bytes: &[u8], commands: u32) {
        let mut s = self.state.lock();
        if s.broken.is_some() {
            return;
        }
        if s.closed {
            // Bytes for a link that is gone never reach the target: a migration still
            // relying on this queue must fail rather than count them delivered.
            s.broken = Some("a write came after the link closed".into());
            return;
        }
        let hard = self.bounds.hard;
        if s.pending.len() + bytes.len() > hard || s.marks.len() >= LINK_MARKS_MAX {
            s.broken = Some(format!(
                "the stream to the target backed up past {hard} bytes"
            ));
            s.pending = Vec::new();
            drop(s);
            self.drained.notify_all();
        } else {
            s.pending.extend_from_slice(bytes);
            s.appended += bytes.len() as u64;
            let end = s.appended;
            s.marks.push_back((end, commands));
            drop(s);
        }
        self.ready.notify_one();
    }

    /// Waits until `bytes` more fit under the high-water mark (or nothing is unsent, so a
    /// chunk larger than the mark still goes alone). Woken by the sender taking bytes, not
    /// by polling. A wait longer than `max_wait` without the sender draining anything is
    /// [`NoRoom::Stalled`]; while it drains, the wait goes on.
    pub fn wait_for_room(&self, bytes: usize, max_wait: Duration) -> Result<(), NoRoom> {
        let mut s = self.state.lock();
        let mut deadline = Instant::now() + max_wait;
        loop {
            if s.broken.is_some() || s.closed {
                return Err(NoRoom::Ended);
            }
            let pending = s.pending.len();
            if pending == 0 || pending + bytes <= self.bounds.high_water {
                return Ok(());
            }
            if self.drained.wait_until(&mut s, deadline).timed_out() {
                if s.pending.len() < pending {
                    deadline = Instant::now() + max_wait;
                    continue;
                }
                return Err(NoRoom::Stalled);
            }
            if s.pending.len() < pending {
                deadline = Instant::now() + max_wait;
            }
        }
    }

    pub fn break_with(&self, why: &str) {
        let mut s = self.state.lock();
        s.broken.get_or_insert_with(|| why.to_string());
        drop(s);
        self.ready.notify_one();
        self.drained.notify_all();
    }

    /// The stream's offset after everything appended so far.
    pub fn appended(&self) -> u64 {
        self.state.lock().appended
    }

    /// Bytes appended and not yet taken by the sender.
    pub fn unsent(&self) -> usize {
        self.state.lock().pending.len()
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

    /// Ends the queue: the sender's and the copy's waits return.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.ready.notify_one();
        self.drained.notify_all();
    }

    /// Takes what is pending, waiting up to `wait` for something; None once closed.
    pub fn take(&self, wait: Duration) -> Option<Vec<u8>> {
        let mut s = self.state.lock();
        if s.pending.is_empty() && !s.closed {
            self.ready.wait_for(&mut s, wait);
        }
        if s.closed {
            return None;
        }
        let taken = std::mem::take(&mut s.pending);
        drop(s);
        if !taken.is_empty() {
            self.drained.notify_all();
        }
        Some(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn small() -> LinkQueue {
        LinkQueue::new(QueueBounds::with_hard(1000), 0)
    }

    #[test]
    fn client_writes_past_the_hard_bound_break_the_queue() {
        let q = small();
        q.append(&[0; 600], 1);
        assert!(q.broken().is_none());
        q.append(&[0; 600], 1);
        let why = q.broken().expect("broken past 1000 bytes");
        assert!(why.contains("backed up past 1000 bytes"), "{why}");
    }

    #[test]
    fn the_copy_waits_above_the_high_water_mark_until_the_sender_takes() {
        let q = Arc::new(small());
        assert_eq!(q.bounds().high_water, 250);
        q.append(&[0; 200], 1);
        // 200 + 100 > 250: no room until the sender takes.
        assert_eq!(
            q.wait_for_room(100, Duration::from_millis(20)),
            Err(NoRoom::Stalled)
        );
        let sender = {
            let q = q.clone();
            std::thread::spawn(move || q.take(Duration::from_secs(5)))
        };
        assert_eq!(q.wait_for_room(100, Duration::from_secs(5)), Ok(()));
        assert_eq!(sender.join().unwrap().map(|b| b.len()), Some(200));
        assert_eq!(q.unsent(), 0);
    }

    #[test]
    fn a_chunk_larger_than_the_mark_goes_alone_into_an_empty_queue() {
        let q = small();
        assert_eq!(q.wait_for_room(900, Duration::from_millis(1)), Ok(()));
        q.append(&[0; 900], 1);
        assert!(q.broken().is_none());
    }

    #[test]
    fn a_closed_or_broken_queue_ends_the_wait() {
        let q = Arc::new(small());
        q.append(&[0; 250], 1);
        let waiter = {
            let q = q.clone();
            std::thread::spawn(move || q.wait_for_room(10, Duration::from_secs(30)))
        };
        q.break_with("cut");
        assert_eq!(waiter.join().unwrap(), Err(NoRoom::Ended));
        let q = small();
        q.close();
        assert_eq!(
            q.wait_for_room(10, Duration::from_secs(30)),
            Err(NoRoom::Ended)
        );
    }
}
