//! Keyed commands served per slot, counted for the admin API's slot statistics (ops/s by
//! slot, what a rebalance weighs). One relaxed add per served keyed command into a fixed
//! table of 16384 counters (128 KiB, allocated at start); readers take differences.

use proto::slot::SLOT_COUNT;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct SlotOps {
    served: Box<[AtomicU64]>,
}

impl Default for SlotOps {
    fn default() -> Self {
        SlotOps {
            served: (0..SLOT_COUNT).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl SlotOps {
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
        ops.count(0);
        ops.count(16383);
        ops.count(16383);
        ops.count(16384);
        assert_eq!((ops.served(0), ops.served(16383), ops.served(1)), (1, 2, 0));
        assert_eq!(ops.snapshot().iter().sum::<u64>(), 3);
    }
}
