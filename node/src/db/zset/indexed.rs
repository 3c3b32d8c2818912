//! The indexed form of a sorted set (Redis's skiplist encoding; our layout): members ordered
//! by (score, member bytes), with O(1) member lookup and O(log n) insert, remove, rank and
//! select.
//!
//! Layout: one `IndexMap<member, Node>`. The map owns each member's bytes exactly once and
//! answers member -> score in O(1). Each entry's [`Node`] also holds the links of an AVL tree
//! ordered by (score, member) plus the size of its left subtree (an order-statistic tree, see
//! `zset/tree.rs`), so ZRANK and ZRANGE by rank cost O(log n) as Redis's skiplist spans make
//! them. Links are entry indexes (`u32`): the map's dense entry vector is the tree's arena, a
//! node is 32 bytes, and no `unsafe` or reference counting is needed.
//!
//! Removal uses `swap_remove`: the last entry moves into the hole and its tree neighbours are
//! re-pointed at its new index, O(1). Entry indexes are therefore dense `0..len`, which gives
//! O(1) random members (ZRANDMEMBER) and a ZSCAN cursor that is stable (see [`Indexed::scan`]).

use super::ZSetError;
use crate::db::value::Hasher;
use indexmap::map::raw_entry_v1::{RawEntryApiV1, RawEntryMut};
use indexmap::IndexMap;

/// "No node": the link value of an absent child or parent.
pub(super) const NIL: u32 = u32::MAX;

/// Most members a sorted set may hold: links are u32 and `u32::MAX` is [`NIL`]. Unreachable in
/// practice (it would take hundreds of gigabytes), but checked so that no input can overflow.
pub const MAX_LEN: usize = (u32::MAX - 1) as usize;

/// A member's score and its place in the order-statistic tree.
#[derive(Debug, Clone, Copy)]
pub(super) struct Node {
    pub(super) score: f64,
    pub(super) left: u32,
    pub(super) right: u32,
    pub(super) parent: u32,
    /// Nodes in the left subtree: enough for rank and select, and unlike a subtree size it
    /// never needs a sibling read to maintain.
    pub(super) left_size: u32,
    /// AVL height of the subtree rooted here (a leaf is 1); at most ~46 for `MAX_LEN` nodes.
    pub(super) height: u8,
}

impl Node {
    pub(super) fn detached(score: f64) -> Node {
        Node {
            score,
            left: NIL,
            right: NIL,
            parent: NIL,
            left_size: 0,
            height: 1,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Indexed {
    pub(super) map: IndexMap<Box<[u8]>, Node, Hasher>,
    /// The tree's root node, [`NIL`] when empty.
    pub(super) root: u32,
}

impl Default for Indexed {
    fn default() -> Self {
        Indexed {
            map: IndexMap::default(),
            root: NIL,
        }
    }
}

impl Indexed {
    pub fn new() -> Indexed {
        Indexed::default()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes of the member table's slots, members' own bytes aside (MEMORY USAGE): each
    /// holds the member's hash, its boxed slice and its tree node.
    pub fn table_bytes(&self) -> usize {
        let slot = 8 + std::mem::size_of::<Box<[u8]>>() + std::mem::size_of::<Node>();
        self.map.capacity() * slot
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.map.get(member).map(|n| n.score)
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.map.contains_key(member)
    }

    /// Adds `member` with `score`, or moves it to `score` if present. Returns the previous
    /// score. An equal score (`-0` and `0` included) leaves the member untouched, as in Redis.
    /// A score of `-0` is stored as `0`, as Redis's compact encoding (every sorted set of up
    /// to 128 members) stores it.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Result<Option<f64>, ZSetError> {
        if score.is_nan() {
            return Err(ZSetError::NotANumber);
        }
        let score = if score == 0.0 { 0.0 } else { score };
        let full = self.map.len() >= MAX_LEN;
        // One hash and one probe whether the member is new or not.
        let hash = self.map.hasher().hash_one(member);
        let i = match self
            .map
            .raw_entry_mut_v1()
            .from_key_hashed_nocheck(hash, member)
        {
            RawEntryMut::Occupied(entry) => {
                let i = entry.index() as u32;
                let old = entry.get().score;
                if old != score {
                    self.rescore(i, score);
                }
                return Ok(Some(old));
            }
            RawEntryMut::Vacant(_) if full => return Err(ZSetError::Full),
            RawEntryMut::Vacant(entry) => {
                let i = entry.index() as u32;
                entry.insert_hashed_nocheck(hash, member.into(), Node::detached(score));
                i
            }
        };
        self.link(i);
        Ok(None)
    }

    /// Removes `member`; returns its score if it was present.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let i = self.map.get_index_of(member)?;
        Some(self.remove_at(i as u32).1)
    }

    /// Removes and returns the lowest-ranked member.
    pub fn pop_first(&mut self) -> Option<(Box<[u8]>, f64)> {
        let i = self.first_node()?;
        Some(self.remove_at(i))
    }

    /// Removes and returns the highest-ranked member.
    pub fn pop_last(&mut self) -> Option<(Box<[u8]>, f64)> {
        let i = self.last_node()?;
        Some(self.remove_at(i))
    }

    /// 0-based position of `member` in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let i = self.map.get_index_of(member)?;
        Some(self.rank_of(i as u32))
    }

    /// The member at ascending position `rank`.
    pub fn get_by_rank(&self, rank: usize) -> Option<(&[u8], f64)> {
        let i = self.select(rank)?;
        Some(self.entry(i))
    }

    /// How many leading members (in ascending order) satisfy `before`, which must hold for a
    /// prefix of the order and fail after it (like `slice::partition_point`). O(log n).
    pub fn partition_point(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        self.partition(before)
    }

    /// Up to `count` members from ascending position `start`, walking up (`rev` false) or
    /// down (`rev` true) the order. O(log n) to find the start, O(1) amortised per member.
    pub fn range(&self, start: usize, count: usize, rev: bool) -> Range<'_> {
        let cur = if count == 0 { None } else { self.select(start) };
        Range {
            set: self,
            cur: cur.unwrap_or(NIL),
            left: count,
            rev,
        }
    }

    /// Every member in ascending order.
    pub fn iter(&self) -> Range<'_> {
        self.range(0, self.len(), false)
    }

    /// Every member in storage order (cheaper than [`Indexed::iter`] when order is irrelevant).
    pub fn iter_unordered(&self) -> Unordered<'_> {
        Unordered(self.map.iter())
    }

    /// The member stored at `index` (`0..len`, storage order: for random picks).
    pub fn get_index(&self, index: usize) -> Option<(&[u8], f64)> {
        self.map.get_index(index).map(|(m, n)| (&**m, n.score))
    }

    /// Removes the members at ascending positions `start..start + count`; returns how many.
    /// O(count log n).
    pub fn remove_range(&mut self, start: usize, count: usize) -> usize {
        let mut removed = 0;
        // Bounded by `count` and by the set's length.
        while removed < count {
            match self.select(start) {
                Some(i) => {
                    self.remove_at(i);
                    removed += 1;
                }
                None => break,
            }
        }
        removed
    }

    /// One step of a ZSCAN: visits up to `count` members and returns the cursor to continue
    /// from, 0 when the scan is complete.
    ///
    /// Members are visited by descending storage index; the cursor `k` means "indexes below
    /// `k` remain". This is stable under change: an insert appends at the top (already passed,
    /// and Redis does not promise new members), and a removal moves the last entry into the
    /// hole: if the last entry was already visited it may be visited again (allowed), and if it
    /// was not, its new index is below `k` as well, so it is still ahead. Every member present
    /// for the whole scan is therefore returned at least once.
    pub fn scan<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        mut visit: impl FnMut(&'a [u8], f64),
    ) -> u64 {
        let len = self.len();
        let mut k = if cursor == 0 {
            len
        } else {
            usize::try_from(cursor).unwrap_or(usize::MAX).min(len)
        };
        let mut visited = 0;
        while k > 0 && visited < count {
            k -= 1;
            let (m, n) = self.map.get_index(k).expect("k < len");
            visit(m, n.score);
            visited += 1;
        }
        k as u64
    }

    pub(super) fn entry(&self, i: u32) -> (&[u8], f64) {
        let (m, n) = self.map.get_index(i as usize).expect("node index in range");
        (m, n.score)
    }

    /// Unlinks node `i` from the tree and removes its map entry.
    fn remove_at(&mut self, i: u32) -> (Box<[u8]>, f64) {
        self.unlink(i);
        let last = (self.map.len() - 1) as u32;
        let (member, node) = self
            .map
            .swap_remove_index(i as usize)
            .expect("node index in range");
        if i != last {
            self.relocated(last, i);
        }
        (member, node.score)
    }

    /// Gives node `i` a new score, moving it in the tree only if its place changes.
    fn rescore(&mut self, i: u32, score: f64) {
        let prev = self.prev(i);
        let next = self.next(i);
        let member = self.entry(i).0;
        let after_prev = prev.is_none_or(|p| {
            let (pm, ps) = self.entry(p);
            self.key_less(ps, pm, score, member)
        });
        let before_next = next.is_none_or(|n| {
            let (nm, ns) = self.entry(n);
            self.key_less(score, member, ns, nm)
        });
        if after_prev && before_next {
            self.node_mut(i).score = score;
        } else {
            self.unlink(i);
            self.node_mut(i).score = score;
            self.link(i);
        }
    }
}

/// Members of an [`Indexed`] in rank order, from [`Indexed::range`] or [`Indexed::iter`].
pub struct Range<'a> {
    set: &'a Indexed,
    cur: u32,
    left: usize,
    rev: bool,
}

impl<'a> Iterator for Range<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 || self.cur == NIL {
            return None;
        }
        let item = self.set.entry(self.cur);
        self.left -= 1;
        let step = if self.rev {
            self.set.prev(self.cur)
        } else {
            self.set.next(self.cur)
        };
        self.cur = step.unwrap_or(NIL);
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.cur == NIL {
            (0, Some(0))
        } else {
            (1.min(self.left), Some(self.left))
        }
    }
}

/// Members of an [`Indexed`] in storage order.
pub struct Unordered<'a>(indexmap::map::Iter<'a, Box<[u8]>, Node>);

impl<'a> Iterator for Unordered<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(m, n)| (&**m, n.score))
    }
}
