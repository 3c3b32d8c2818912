//! Slot ranges as a migration names them: checked, sorted, merged, and cut into batches.

use crate::cluster::slots::SLOT_MAX;
use proto::slot::SLOT_COUNT;

/// Why a set of slot ranges cannot be migrated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("no slots named")]
    Empty,
    #[error("slot range {0}-{1} is reversed")]
    Reversed(u16, u16),
    #[error("slot {0} is not within 0-{SLOT_MAX}")]
    OutOfRange(u16),
    #[error("more than {max} ranges named ({count})")]
    TooMany { count: usize, max: usize },
}

/// Most ranges a request may name (one per slot at worst).
pub const REQUEST_RANGES_MAX: usize = SLOT_COUNT;

/// Inclusive slot ranges, sorted, non-overlapping and not adjacent (merged).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotRanges(Vec<(u16, u16)>);

impl SlotRanges {
    /// Checks and normalizes what a caller named (overlaps and repeats merge).
    pub fn new(ranges: &[(u16, u16)]) -> Result<Self, RangeError> {
        if ranges.is_empty() {
            return Err(RangeError::Empty);
        }
        if ranges.len() > REQUEST_RANGES_MAX {
            return Err(RangeError::TooMany {
                count: ranges.len(),
                max: REQUEST_RANGES_MAX,
            });
        }
        let mut sorted = Vec::with_capacity(ranges.len());
        for &(start, end) in ranges {
            if start > end {
                return Err(RangeError::Reversed(start, end));
            }
            if end > SLOT_MAX {
                return Err(RangeError::OutOfRange(end));
            }
            sorted.push((start, end));
        }
        sorted.sort_unstable();
        let mut merged: Vec<(u16, u16)> = Vec::with_capacity(sorted.len());
        for (start, end) in sorted {
            match merged.last_mut() {
                Some(last) if u32::from(start) <= u32::from(last.1) + 1 => {
                    last.1 = last.1.max(end);
                }
                _ => merged.push((start, end)),
            }
        }
        Ok(SlotRanges(merged))
    }

    pub fn ranges(&self) -> &[(u16, u16)] {
        &self.0
    }

    pub fn slot_count(&self) -> usize {
        self.0.iter().map(|&(s, e)| usize::from(e - s) + 1).sum()
    }

    pub fn slots(&self) -> impl Iterator<Item = u16> + '_ {
        self.0.iter().flat_map(|&(s, e)| s..=e)
    }

    pub fn contains(&self, slot: u16) -> bool {
        // Sorted and disjoint: the last range starting at or before `slot` is the only one.
        let i = self.0.partition_point(|&(s, _)| s <= slot);
        i > 0 && self.0[i - 1].1 >= slot
    }

    /// Cuts the ranges into batches of at most `slots_per_batch` slots each, in slot order:
    /// each batch is migrated (copied, paused, committed) on its own.
    pub fn batches(&self, slots_per_batch: usize) -> Vec<SlotRanges> {
        assert!(slots_per_batch > 0, "a batch holds at least one slot");
        let mut batches = Vec::new();
        let mut current: Vec<(u16, u16)> = Vec::new();
        let mut room = slots_per_batch;
        for &(mut start, end) in &self.0 {
            loop {
                let left = usize::from(end - start) + 1;
                let take = left.min(room);
                // take >= 1 and <= left, so this stays within start..=end.
                let last = start + (take - 1) as u16;
                current.push((start, last));
                room -= take;
                if room == 0 {
                    batches.push(SlotRanges(std::mem::take(&mut current)));
                    room = slots_per_batch;
                }
                if last == end {
                    break;
                }
                start = last + 1;
            }
        }
        if !current.is_empty() {
            batches.push(SlotRanges(current));
        }
        batches
    }
}

impl std::fmt::Display for SlotRanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, &(s, e)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match s == e {
                true => write!(f, "{s}")?,
                false => write!(f, "{s}-{e}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ranges_are_checked_sorted_and_merged() {
        assert_eq!(SlotRanges::new(&[]), Err(RangeError::Empty));
        assert_eq!(SlotRanges::new(&[(5, 4)]), Err(RangeError::Reversed(5, 4)));
        assert_eq!(
            SlotRanges::new(&[(0, 16384)]),
            Err(RangeError::OutOfRange(16384))
        );
        let r = SlotRanges::new(&[(10, 20), (0, 4), (5, 9), (15, 30), (40, 40)]).unwrap();
        assert_eq!(r.ranges(), &[(0, 30), (40, 40)]);
        assert_eq!(r.slot_count(), 32);
        assert_eq!(r.to_string(), "0-30,40");
        assert!(r.contains(0) && r.contains(30) && r.contains(40));
        assert!(!r.contains(31) && !r.contains(41));
    }

    proptest! {
        #[test]
        fn batches_cover_every_slot_once_in_order_and_within_the_limit(
            ranges in proptest::collection::vec((0u16..=SLOT_MAX, 0u16..200), 1..20),
            per_batch in 1usize..300,
        ) {
            let ranges: Vec<(u16, u16)> = ranges
                .into_iter()
                .map(|(s, len)| (s, s.saturating_add(len).min(SLOT_MAX)))
                .collect();
            let r = SlotRanges::new(&ranges).unwrap();
            let batches = r.batches(per_batch);
            let flat: Vec<u16> = batches.iter().flat_map(|b| b.slots().collect::<Vec<_>>()).collect();
            let all: Vec<u16> = r.slots().collect();
            prop_assert_eq!(flat, all);
            for (i, b) in batches.iter().enumerate() {
                prop_assert!(b.slot_count() <= per_batch);
                prop_assert!(b.slot_count() > 0);
                if i + 1 < batches.len() {
                    prop_assert_eq!(b.slot_count(), per_batch, "only the last batch is short");
                }
            }
        }
    }
}
