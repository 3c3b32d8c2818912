//! The packed form of a small sorted set (Redis's listpack encoding; our layout): member and
//! score pairs in one [`Packed`], in rank order. A whole-number score (ranks, counts, Unix
//! times: most scores) is stored as its shortest two's-complement bytes, 0 to 7 of them, any
//! other as its 8 IEEE bytes; the item's length says which. A pair then costs the member plus
//! 2 to 10 bytes, against the indexed form's ~80 bytes of table slot, tree node and boxed
//! member. Every operation walks the pairs, which the packing thresholds keep few (128 by
//! default, at most `PACKED_ENTRIES_MAX`).

use super::order_before;
use crate::db::packed::{Items, Packed};

/// Bytes of a score stored as a float; shorter items are whole numbers.
const FLOAT_BYTES: usize = 8;

/// Largest magnitude stored as a whole number: every integer up to it is exact in an f64
/// (2^53), and it fits the 7 bytes a whole number may take.
const WHOLE_MAX: f64 = 9_007_199_254_740_992.0;

#[derive(Clone, Debug, Default)]
pub struct PackedZSet {
    /// Member, score, member, score... ordered by (score, member).
    items: Packed,
}

/// `score`'s stored bytes (in `buf`, which it returns a prefix of).
fn encode_score(score: f64, buf: &mut [u8; FLOAT_BYTES]) -> &[u8] {
    if score.fract() == 0.0
        && score.abs() <= WHOLE_MAX
        && !(score == 0.0 && score.is_sign_negative())
    {
        let whole = score as i64;
        *buf = whole.to_le_bytes();
        // Shortest prefix that sign-extends back to `whole`.
        let len = (0..FLOAT_BYTES)
            .find(|&len| sign_extend(&buf[..len]) == whole)
            .expect("a whole score within 2^53 fits 7 bytes");
        &buf[..len]
    } else {
        *buf = score.to_le_bytes();
        &buf[..]
    }
}

fn sign_extend(bytes: &[u8]) -> i64 {
    let Some(&last) = bytes.last() else {
        return 0;
    };
    let mut raw = if last & 0x80 != 0 { [0xff; 8] } else { [0; 8] };
    raw[..bytes.len()].copy_from_slice(bytes);
    i64::from_le_bytes(raw)
}

fn decode_score(bytes: &[u8]) -> f64 {
    match <[u8; FLOAT_BYTES]>::try_from(bytes) {
        Ok(raw) => f64::from_le_bytes(raw),
        Err(_) => sign_extend(bytes) as f64,
    }
}

/// The pairs of a [`PackedZSet`] in rank order.
#[derive(Clone, Debug)]
pub struct Pairs<'a> {
    items: Items<'a>,
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        let member = self.items.next()?;
        let score = self.items.next().expect("every member has a score");
        Some((member, decode_score(score)))
    }
}

impl PackedZSet {
    /// The pairs given in rank order (distinct members, scores numbers): one allocation and
    /// one pass, where inserting each would walk the set per member.
    pub fn from_sorted<'a>(pairs: impl Iterator<Item = (&'a [u8], f64)> + Clone) -> PackedZSet {
        let mut buf = [0; FLOAT_BYTES];
        let bytes = pairs
            .clone()
            .map(|(m, s)| {
                Packed::item_bytes(m.len()) + Packed::item_bytes(encode_score(s, &mut buf).len())
            })
            .sum();
        let mut items = Packed::with_capacity(bytes);
        for (member, score) in pairs {
            debug_assert!(!score.is_nan());
            items.push(member);
            items.push(encode_score(score, &mut buf));
        }
        PackedZSet { items }
    }

    pub fn len(&self) -> usize {
        self.items.len() / 2
    }

    /// Heap bytes held (MEMORY USAGE).
    pub fn heap_bytes(&self) -> usize {
        self.items.heap_bytes()
    }

    /// Every pair in rank order.
    pub fn pairs(&self) -> Pairs<'_> {
        Pairs {
            items: self.items.iter(),
        }
    }

    /// `member`'s rank and score.
    pub fn find(&self, member: &[u8]) -> Option<(usize, f64)> {
        self.pairs()
            .enumerate()
            .find(|(_, (m, _))| *m == member)
            .map(|(rank, (_, score))| (rank, score))
    }

    /// Adds `member` (new: the caller checked that it fits) or moves it to `score`; returns
    /// the previous score. `score` is a number, `-0` already made `0`.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        debug_assert!(!score.is_nan());
        let old = self.find(member);
        if let Some((rank, was)) = old {
            if was == score {
                return Some(was);
            }
            self.items.remove(2 * rank, 2);
        }
        let rank = self.partition_point(|s, m| order_before(s, m, score, member));
        let mut buf = [0; FLOAT_BYTES];
        self.items
            .insert(2 * rank, &[member, encode_score(score, &mut buf)]);
        old.map(|(_, was)| was)
    }

    /// Removes `member`; returns its score if it was present.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (rank, score) = self.find(member)?;
        self.items.remove(2 * rank, 2);
        Some(score)
    }

    /// Removes and returns the pair at `rank`.
    pub fn remove_at(&mut self, rank: usize) -> Option<(Box<[u8]>, f64)> {
        let (member, score) = self.get_by_rank(rank)?;
        let taken = (member.into(), score);
        self.items.remove(2 * rank, 2);
        Some(taken)
    }

    pub fn get_by_rank(&self, rank: usize) -> Option<(&[u8], f64)> {
        self.pairs().nth(rank)
    }

    /// How many leading pairs satisfy `before` (which holds for a prefix of the order).
    pub fn partition_point(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        self.pairs().take_while(|(m, s)| before(*s, m)).count()
    }

    /// Removes the pairs at ranks `start..start + count`; returns how many.
    pub fn remove_range(&mut self, start: usize, count: usize) -> usize {
        let removed = count.min(self.len().saturating_sub(start));
        self.items.remove(2 * start, 2 * removed);
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_round_trip_in_their_shortest_form() {
        let cases: [(f64, usize); 15] = [
            (0.0, 0),
            (1.0, 1),
            (-1.0, 1),
            (127.0, 1),
            (128.0, 2),
            (-128.0, 1),
            (-129.0, 2),
            (1_733_400_000.0, 4),
            (1_733_400_000_000.0, 6),
            (WHOLE_MAX, 7),
            (-WHOLE_MAX, 7),
            (WHOLE_MAX * 2.0, 8),
            (1.5, 8),
            (f64::INFINITY, 8),
            (f64::NEG_INFINITY, 8),
        ];
        for (score, len) in cases {
            let mut buf = [0; FLOAT_BYTES];
            let bytes = encode_score(score, &mut buf);
            assert_eq!(bytes.len(), len, "{score}");
            assert_eq!(decode_score(bytes), score, "{score}");
        }
        // -0 keeps its sign if one ever reaches here (the set stores it as 0 first).
        let mut buf = [0; FLOAT_BYTES];
        assert!(decode_score(encode_score(-0.0, &mut buf)).is_sign_negative());
    }
}
