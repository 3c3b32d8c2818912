//! Keyed commands served per slot, counted for the admin API's slot statistics (ops/s by
//! slot, what a rebalance weighs). One relaxed add per served keyed command into a fixed
//! table of 16384 counters (128 KiB, allocated at start); readers take differences.
//! Counting is off until the admin API's sampler turns it on: without a reader, the slot's
//! CRC16 and a shared atomic add per command would be pure cost on the hot path.

use proto::slot::SLOT_COUNT;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub struct SlotOps {
    served: Box<[AtomicU64]>,
    counting: AtomicBool,
}

impl Default for SlotOps {
    fn default() -> Self {
        SlotOps {
            served: (0..SLOT_COUNT).map(|_| AtomicU64::new(0)).collect(),
            counting: AtomicBool::new(false),
        }
    }
}

impl SlotOps {
    /// From now on served commands are counted (the admin API's sampler calls it).
    pub fn start_counting(&self) {
        self.counting.store(true, Ordering::Relaxed);
    }

    /// Whether anyone reads the counts; callers skip finding the slot when not.
    #[inline]
    pub fn counting(&self) -> bool {
        self.counting.load(Ordering::Relaxed)
    }

    /// One command served for `slot`.
    #[inline]
    pub fn count(&self, slot: u16) {
        if let Some(c) = self.served.get(slot as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Commands served for `slot` since the start.
    pub fn served(&self, slot: u16) -> u64 {
        self.served
            .get(slot as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Every slot's count, indexed by slot.
    pub fn snapshot(&self) -> Vec<u64> {
        self.served
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_slot_and_ignores_out_of_range() {
        let ops = SlotOps::default();
        assert!(!ops.counting());
        ops.start_counting();
        ops.count(0);
        ops.count(16383);
        ops.count(16383);
        ops.count(16384);
        assert_eq!((ops.served(0), ops.served(16383), ops.served(1)), (1, 2, 0));
        assert_eq!(ops.snapshot().iter().sum::<u64>(), 3);
    }
}
