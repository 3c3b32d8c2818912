//! Trimming (XTRIM, XADD's MAXLEN/MINID), as Redis's `streamTrim`: whole nodes go first;
//! an exact trim then marks entries of the first remaining node deleted; an approximate
//! one (`~`) stops at the first node it cannot remove whole. `limit` (0: none) caps the
//! entries removed, counted by whole nodes.

use super::{Stream, StreamId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimStrategy {
    MaxLen(u64),
    MinId(StreamId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trim {
    pub strategy: TrimStrategy,
    pub approx: bool,
    /// Most entries removed; 0 for no limit.
    pub limit: u64,
}

impl Stream {
    /// Trims; returns the number of entries removed.
    pub fn trim(&mut self, t: Trim) -> u64 {
        let mut deleted = 0u64;
        loop {
            if let TrimStrategy::MaxLen(max) = t.strategy {
                if self.length <= max {
                    break;
                }
            }
            let Some(mut first) = self.nodes.first_entry() else {
                break;
            };
            let entries = first.get().live;
            if t.limit != 0 && deleted + entries > t.limit {
                break;
            }
            let remove_node = match t.strategy {
                TrimStrategy::MaxLen(max) => self.length - entries >= max,
                TrimStrategy::MinId(min) => first.get().last_id() < min,
            };
            if remove_node {
                first.remove();
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if t.approx {
                break;
            }
            let node = first.get_mut();
            let mut removed_here = 0;
            for i in 0..node.items.len() {
                let stop = match t.strategy {
                    TrimStrategy::MaxLen(max) => self.length - removed_here <= max,
                    TrimStrategy::MinId(min) => node.items[i].id >= min,
                };
                if stop {
                    break;
                }
                if node.delete_at(i) {
                    removed_here += 1;
                }
            }
            // A MINID trim can empty a node whose last entry, already deleted, is at or
            // above the minimum: it goes, as a node emptied by XDEL does.
            if node.live == 0 {
                first.remove();
            }
            self.length -= removed_here;
            deleted += removed_here;
            break;
        }
        if deleted > 0 {
            self.refresh_first_id();
        } else if self.length == 0 {
            self.first_id = StreamId::ZERO;
        }
        deleted
    }
}
