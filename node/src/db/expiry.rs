//! Keys with a time to live, per shard, ordered by expiry time.
//!
//! A min-heap of (expires_at, key) with lazy deletion: when a key's TTL changes or the key is
//! deleted, its old heap record stays and is discarded when it surfaces (the entry's real
//! `expires_at` no longer matches). The heap is rebuilt from the tables when stale records
//! outnumber live ones, which bounds it to `2 * live + STALE_SLACK` records.

use super::entry::UnixMillis;
use super::value::Key;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Stale records tolerated beyond the live count before a rebuild; small sets never rebuild.
pub const STALE_SLACK: usize = 1024;

#[derive(Default)]
pub struct ExpiryQueue {
    heap: BinaryHeap<Reverse<(UnixMillis, Key)>>,
    live: usize,
}

impl ExpiryQueue {
    /// Number of keys that currently have a TTL.
    pub fn live(&self) -> usize {
        self.live
    }

    pub fn record_count(&self) -> usize {
        self.heap.len()
    }

    /// A key gained a TTL (`had_ttl`: it already had one, so the live count stays).
    pub fn add(&mut self, key: &[u8], at: UnixMillis, had_ttl: bool) {
        debug_assert!(at != 0);
        if !had_ttl {
            self.live += 1;
        }
        self.heap.push(Reverse((at, key.into())));
    }

    /// A key lost its TTL (PERSIST, delete, overwrite without KEEPTTL).
    pub fn remove(&mut self) {
        debug_assert!(self.live > 0);
        self.live = self.live.saturating_sub(1);
    }

    /// The earliest record, if it is due at `now` (possibly stale: the caller checks).
    pub fn pop_due(&mut self, now: UnixMillis) -> Option<(UnixMillis, Key)> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => self.heap.pop().map(|Reverse(r)| r),
            _ => None,
        }
    }

    /// The earliest record without removing it (volatile-ttl eviction).
    pub fn peek(&self) -> Option<&(UnixMillis, Key)> {
        self.heap.peek().map(|Reverse(r)| r)
    }

    /// A record at a position chosen by the caller (volatile-random sampling); may be stale.
    pub fn sample(&self, index: usize) -> Option<&(UnixMillis, Key)> {
        let slice = self.heap.as_slice();
        if slice.is_empty() {
            None
        } else {
            Some(&slice[index % slice.len()].0)
        }
    }

    /// Every record, in no order (may be stale): the fallback when sampling found no live
    /// one. At most `2 * live + STALE_SLACK` of them.
    pub fn records(&self) -> impl Iterator<Item = &(UnixMillis, Key)> {
        self.heap.iter().map(|Reverse(r)| r)
    }

    pub fn needs_rebuild(&self) -> bool {
        self.heap.len() > 2 * self.live + STALE_SLACK
    }

    /// Replaces all records by exactly the live ones.
    pub fn rebuild(&mut self, live: impl Iterator<Item = (UnixMillis, Key)>) {
        self.heap = live.map(Reverse).collect();
        self.live = self.heap.len();
    }

    pub fn clear(&mut self) {
        self.heap = BinaryHeap::new();
        self.live = 0;
    }
}
