//! Sorted set: members ordered by (score, member), with a member -> score index.
//!
//! Placeholder shape; the sorted-set family fills in the operations.

use std::collections::{BTreeSet, HashMap};

/// A score that orders totally (scores are never NaN: commands reject NaN before insert).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Score(pub f64);

impl Eq for Score {}
impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .partial_cmp(&other.0)
            .unwrap_or(std::cmp::Ordering::Equal)
    }
}

#[derive(Debug, Clone, Default)]
pub struct ZSet {
    pub scores: HashMap<Box<[u8]>, f64, super::value::Hasher>,
    pub ordered: BTreeSet<(Score, Box<[u8]>)>,
}

impl ZSet {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub fn max_member_len(&self) -> usize {
        self.scores.keys().map(|m| m.len()).max().unwrap_or(0)
    }
}
