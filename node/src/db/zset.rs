//! A sorted set value: members ordered by (score, member bytes). Packed while small (pairs in
//! one allocation, `zset/packed.rs`), indexed once a write adds a member past
//! `zset-max-listpack-entries` or one longer than `zset-max-listpack-value` (a hash table
//! plus an order-statistic tree, `zset/indexed.rs`), as Redis converts its listpack to a
//! skiplist; never packed again once indexed (Redis does not convert back either).
//!
//! Callers see one interface; which form answers is visible only to OBJECT ENCODING and
//! MEMORY USAGE.

mod indexed;
mod packed;
mod tree;

#[cfg(test)]
mod tests;

use super::packed::PackLimits;
use indexed::Indexed;
use packed::{PackedZSet, Pairs};

/// Why an insert was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ZSetError {
    #[error("score is not a number")]
    NotANumber,
    #[error("sorted set holds its maximum number of members")]
    Full,
}

/// Whether (score a, member a) orders before (score b, member b). Scores are never NaN; `-0`
/// and `0` compare equal, so their members decide, as in Redis.
pub(crate) fn order_before(a_score: f64, a: &[u8], b_score: f64, b: &[u8]) -> bool {
    match a_score.partial_cmp(&b_score) {
        Some(std::cmp::Ordering::Less) => true,
        Some(std::cmp::Ordering::Greater) => false,
        _ => a < b,
    }
}

#[derive(Debug, Clone)]
pub enum ZSet {
    Packed(PackedZSet),
    /// Boxed so that the enum stays small: most sorted sets are small.
    Indexed(Box<Indexed>),
}

const _: () = assert!(std::mem::size_of::<ZSet>() <= 40);

impl Default for ZSet {
    fn default() -> Self {
        ZSet::Packed(PackedZSet::default())
    }
}

impl ZSet {
    pub fn new() -> ZSet {
        ZSet::default()
    }

    pub fn len(&self) -> usize {
        match self {
            ZSet::Packed(p) => p.len(),
            ZSet::Indexed(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the value is in its packed form (OBJECT ENCODING `listpack`).
    pub fn is_packed(&self) -> bool {
        matches!(self, ZSet::Packed(_))
    }

    /// Heap bytes of the structure (MEMORY USAGE): the packed form's whole allocation,
    /// members included, or the indexed form's box and table, members' own bytes aside.
    pub fn structure_bytes(&self) -> usize {
        match self {
            ZSet::Packed(p) => p.heap_bytes(),
            ZSet::Indexed(t) => std::mem::size_of::<Indexed>() + t.table_bytes(),
        }
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            ZSet::Packed(p) => p.find(member).map(|(_, score)| score),
            ZSet::Indexed(t) => t.score(member),
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.score(member).is_some()
    }

    /// Adds `member` with `score`, or moves it to `score` if present. Returns the previous
    /// score. An equal score (`-0` and `0` included) leaves the member untouched, as in Redis.
    /// A score of `-0` is stored as `0`, as Redis's listpack stores it. A packed set that a
    /// new member would take past `limits` becomes indexed first (an existing member moves
    /// in place, as in Redis).
    pub fn insert(
        &mut self,
        member: &[u8],
        score: f64,
        limits: PackLimits,
    ) -> Result<Option<f64>, ZSetError> {
        if score.is_nan() {
            return Err(ZSetError::NotANumber);
        }
        let score = if score == 0.0 { 0.0 } else { score };
        match self {
            ZSet::Packed(p) => {
                let fits = p.len() < limits.entries && limits.fits(member);
                if fits || p.find(member).is_some() {
                    return Ok(p.insert(member, score));
                }
                self.make_indexed();
                self.insert(member, score, limits)
            }
            ZSet::Indexed(t) => t.insert(member, score),
        }
    }

    /// A sorted set of `pairs` (in any order), packed when they fit `limits`, as a stored
    /// result is in Redis: one sort and one pass instead of an insert per member (each of
    /// which walks a packed set). A member may repeat only with the same score (GEOSEARCH
    /// can meet a member twice in coinciding boxes): the copies are kept once. Callers pass
    /// members from a map or from one sorted set.
    pub fn from_distinct_pairs(
        mut pairs: Vec<(Box<[u8]>, f64)>,
        limits: PackLimits,
    ) -> Result<ZSet, ZSetError> {
        if pairs.iter().any(|(_, score)| score.is_nan()) {
            return Err(ZSetError::NotANumber);
        }
        for pair in &mut pairs {
            // -0 is stored as 0, as `insert` stores it.
            if pair.1 == 0.0 {
                pair.1 = 0.0;
            }
        }
        pairs.sort_unstable_by(|a, b| {
            if order_before(a.1, &a.0, b.1, &b.0) {
                std::cmp::Ordering::Less
            } else if order_before(b.1, &b.0, a.1, &a.0) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
        // Copies of a member with its score are now side by side.
        pairs.dedup_by(|a, b| a.0 == b.0);
        if pairs.len() <= limits.entries && pairs.iter().all(|(m, _)| limits.fits(m)) {
            let packed = PackedZSet::from_sorted(pairs.iter().map(|(m, s)| (&**m, *s)));
            return Ok(ZSet::Packed(packed));
        }
        let mut indexed = Indexed::new();
        for (member, score) in &pairs {
            indexed.insert(member, *score)?;
        }
        Ok(ZSet::Indexed(Box::new(indexed)))
    }

    /// Rebuilds a packed set in the indexed form.
    fn make_indexed(&mut self) {
        let ZSet::Packed(p) = self else {
            return;
        };
        let mut indexed = Indexed::new();
        for (member, score) in p.pairs() {
            indexed
                .insert(member, score)
                .expect("a packed set's pairs fit the indexed form");
        }
        *self = ZSet::Indexed(Box::new(indexed));
    }

    /// Removes `member`; returns its score if it was present.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match self {
            ZSet::Packed(p) => p.remove(member),
            ZSet::Indexed(t) => t.remove(member),
        }
    }

    /// Removes and returns the lowest-ranked member.
    pub fn pop_first(&mut self) -> Option<(Box<[u8]>, f64)> {
        match self {
            ZSet::Packed(p) => p.remove_at(0),
            ZSet::Indexed(t) => t.pop_first(),
        }
    }

    /// Removes and returns the highest-ranked member.
    pub fn pop_last(&mut self) -> Option<(Box<[u8]>, f64)> {
        match self {
            ZSet::Packed(p) => p.remove_at(p.len().checked_sub(1)?),
            ZSet::Indexed(t) => t.pop_last(),
        }
    }

    /// 0-based position of `member` in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match self {
            ZSet::Packed(p) => p.find(member).map(|(rank, _)| rank),
            ZSet::Indexed(t) => t.rank(member),
        }
    }

    /// The member at ascending position `rank`.
    pub fn get_by_rank(&self, rank: usize) -> Option<(&[u8], f64)> {
        match self {
            ZSet::Packed(p) => p.get_by_rank(rank),
            ZSet::Indexed(t) => t.get_by_rank(rank),
        }
    }

    /// How many leading members (in ascending order) satisfy `before`, which must hold for a
    /// prefix of the order and fail after it (like `slice::partition_point`).
    pub fn partition_point(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        match self {
            ZSet::Packed(p) => p.partition_point(before),
            ZSet::Indexed(t) => t.partition_point(before),
        }
    }

    /// Up to `count` members from ascending position `start`, walking up (`rev` false) or
    /// down (`rev` true) the order.
    pub fn range(&self, start: usize, count: usize, rev: bool) -> Range<'_> {
        match self {
            ZSet::Indexed(t) => Range::Indexed(t.range(start, count, rev)),
            ZSet::Packed(p) if !rev => Range::Packed(p.pairs().skip(start).take(count)),
            ZSet::Packed(p) => {
                // Pairs only walk forward: take the window, then hand it out backwards.
                if start >= p.len() || count == 0 {
                    return Range::PackedDown(Vec::new().into_iter().rev());
                }
                let low = (start + 1).saturating_sub(count);
                let window: Vec<_> = p.pairs().skip(low).take(start + 1 - low).collect();
                Range::PackedDown(window.into_iter().rev())
            }
        }
    }

    /// Every member in ascending order.
    pub fn iter(&self) -> Range<'_> {
        self.range(0, self.len(), false)
    }

    /// Every member in storage order (cheaper than [`ZSet::iter`] when order is irrelevant).
    pub fn iter_unordered(&self) -> Unordered<'_> {
        match self {
            ZSet::Packed(p) => Unordered::Packed(p.pairs()),
            ZSet::Indexed(t) => Unordered::Indexed(t.iter_unordered()),
        }
    }

    /// The member stored at `index` (`0..len`, storage order: for random picks).
    pub fn get_index(&self, index: usize) -> Option<(&[u8], f64)> {
        match self {
            ZSet::Packed(p) => p.get_by_rank(index),
            ZSet::Indexed(t) => t.get_index(index),
        }
    }

    /// Removes the members at ascending positions `start..start + count`; returns how many.
    pub fn remove_range(&mut self, start: usize, count: usize) -> usize {
        match self {
            ZSet::Packed(p) => p.remove_range(start, count),
            ZSet::Indexed(t) => t.remove_range(start, count),
        }
    }

    /// One step of a ZSCAN: visits up to `count` members and returns the cursor to continue
    /// from, 0 when the scan is complete. A packed set is visited whole in one step, as Redis
    /// answers a listpack (see [`Indexed::scan`] for the indexed form's cursor).
    pub fn scan<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        mut visit: impl FnMut(&'a [u8], f64),
    ) -> u64 {
        match self {
            ZSet::Packed(p) => {
                p.pairs().for_each(|(m, s)| visit(m, s));
                0
            }
            ZSet::Indexed(t) => t.scan(cursor, count, visit),
        }
    }
}

/// Members of a [`ZSet`] in rank order, from [`ZSet::range`] or [`ZSet::iter`].
pub enum Range<'a> {
    Indexed(indexed::Range<'a>),
    Packed(std::iter::Take<std::iter::Skip<Pairs<'a>>>),
    PackedDown(std::iter::Rev<std::vec::IntoIter<(&'a [u8], f64)>>),
}

impl<'a> Iterator for Range<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Range::Indexed(r) => r.next(),
            Range::Packed(r) => r.next(),
            Range::PackedDown(r) => r.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Range::Indexed(r) => r.size_hint(),
            Range::Packed(r) => r.size_hint(),
            Range::PackedDown(r) => r.size_hint(),
        }
    }
}

/// Members of a [`ZSet`] in storage order, from [`ZSet::iter_unordered`].
pub enum Unordered<'a> {
    Packed(Pairs<'a>),
    Indexed(indexed::Unordered<'a>),
}

impl<'a> Iterator for Unordered<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Unordered::Packed(p) => p.next(),
            Unordered::Indexed(i) => i.next(),
        }
    }
}
