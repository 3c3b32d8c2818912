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

    /// (member, score) pairs in order of (score, member). Used by the snapshot writer.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], f64)> + '_ {
        self.ordered.iter().map(|(s, m)| (&**m, s.0))
    }

    /// Adds `member` or updates its score; true if it was new. Used by the snapshot reader.
    pub fn insert(&mut self, member: &[u8], score: f64) -> bool {
        debug_assert!(!score.is_nan(), "callers reject NaN scores");
        match self.scores.get_mut(member) {
            Some(old) => {
                let previous = std::mem::replace(old, score);
                let key: Box<[u8]> = member.into();
                self.ordered.remove(&(Score(previous), key.clone()));
                self.ordered.insert((Score(score), key));
                false
            }
            None => {
                self.scores.insert(member.into(), score);
                self.ordered.insert((Score(score), member.into()));
                true
            }
        }
    }
}
