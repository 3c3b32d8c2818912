//! The table of receives posted to a shared receive queue: bounded by the SRQ's depth, it maps a
//! completion (which may arrive on any attached connection's CQ) back to the caller's id and
//! keeps the posted region alive until then. Pure bookkeeping, no FFI, so it is unit-tested.

use rdma_mummy_sys::ibv_wc;

use super::region::VerbsRegion;
use super::wr::completion_of;
use crate::error::{BusError, Result};
use crate::provider::{Completion, Op};

/// Marks a work request id as an SRQ receive. A connection's own requests use small table
/// indices (below its send + receive depth), so the top bit tells the two apart when both kinds
/// of completion arrive on the same CQ.
pub(crate) const SRQ_ID_TAG: u64 = 1 << 63;

/// Whether a completion's internal id names an SRQ receive.
pub(crate) fn is_srq_id(internal: u64) -> bool {
    internal & SRQ_ID_TAG != 0
}

struct Slot<H> {
    wr_id: u64,
    /// Keeps the memory the device may still write alive (provider.rs contract).
    hold: H,
}

/// Posted, not yet completed receives of one SRQ. `H` is what keeps a posted buffer alive (a
/// [`VerbsRegion`]; generic so the accounting is testable without a device).
pub(crate) struct SrqSlots<H = VerbsRegion> {
    slots: Vec<Option<Slot<H>>>,
    free: Vec<usize>,
}

impl<H> SrqSlots<H> {
    pub(crate) fn new(depth: u32) -> Self {
        let n = depth as usize;
        SrqSlots {
            slots: (0..n).map(|_| None).collect(),
            free: (0..n).rev().collect(),
        }
    }

    /// Receives posted and not yet completed.
    pub(crate) fn outstanding(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Reserves a slot; returns the tagged internal id that goes on the wire as `wr_id`.
    pub(crate) fn insert(&mut self, wr_id: u64, hold: H) -> Result<u64> {
        let index = self.free.pop().ok_or(BusError::Full {
            what: "shared receive queue",
        })?;
        self.slots[index] = Some(Slot { wr_id, hold });
        Ok(index as u64 | SRQ_ID_TAG)
    }

    /// Releases a slot; `None` for an id that names no outstanding receive.
    pub(crate) fn take(&mut self, internal: u64) -> Option<(u64, H)> {
        if !is_srq_id(internal) {
            return None;
        }
        let index = usize::try_from(internal & !SRQ_ID_TAG).ok()?;
        let slot = self.slots.get_mut(index)?.take()?;
        self.free.push(index);
        Some((slot.wr_id, slot.hold))
    }

    /// Turns a work completion of an SRQ receive into the caller's [`Completion`], releasing its
    /// slot (and the hold on its region). `None` for a completion naming no outstanding receive.
    pub(crate) fn complete(&mut self, wc: &ibv_wc) -> Option<Completion> {
        let Some((wr_id, _hold)) = self.take(wc.wr_id) else {
            tracing::warn!(wr_id = wc.wr_id, "completion for an unknown SRQ receive");
            return None;
        };
        Some(completion_of(wc, wr_id, Op::Recv))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn slots_are_bounded_tagged_and_reused() {
        // Goal: the table admits exactly `depth` outstanding receives (then Full), hands out ids
        // with the SRQ tag that map back to the caller's ids, frees a slot on completion so the
        // pool is reused indefinitely, and releases the held region with the slot.
        let region = Arc::new(());
        let mut slots: SrqSlots<Arc<()>> = SrqSlots::new(4);
        let ids: Vec<u64> = (0..4)
            .map(|i| slots.insert(100 + i, Arc::clone(&region)).unwrap())
            .collect();
        assert!(ids.iter().all(|&id| is_srq_id(id)));
        assert_eq!(slots.outstanding(), 4);
        assert_eq!(Arc::strong_count(&region), 5);
        assert!(matches!(
            slots.insert(999, Arc::clone(&region)),
            Err(BusError::Full {
                what: "shared receive queue"
            })
        ));
        // Many rounds through a small pool: the count never exceeds the depth.
        let mut live = ids;
        for round in 0..1000u64 {
            let id = live.remove((round % 4) as usize);
            let (wr_id, _hold) = slots.take(id).expect("outstanding id");
            assert!((100..).contains(&wr_id));
            live.push(slots.insert(100 + round, Arc::clone(&region)).unwrap());
            assert!(slots.outstanding() <= 4);
        }
        for id in live {
            slots.take(id).unwrap();
        }
        assert_eq!(slots.outstanding(), 0);
        assert_eq!(
            Arc::strong_count(&region),
            1,
            "completed slots release their region"
        );
    }

    #[test]
    fn foreign_and_stale_ids_are_refused() {
        // Goal: a connection's own (untagged) ids, an id completed twice and an index past the
        // table are not SRQ receives: nothing is released and nothing panics.
        let mut slots: SrqSlots<()> = SrqSlots::new(2);
        let id = slots.insert(7, ()).unwrap();
        assert!(!is_srq_id(3));
        assert!(slots.take(3).is_none());
        assert_eq!(slots.take(id), Some((7, ())));
        assert!(slots.take(id).is_none(), "a second completion of one id");
        assert!(slots.take(SRQ_ID_TAG | 1_000_000).is_none());
        assert_eq!(slots.outstanding(), 0);
    }

    #[test]
    #[allow(unsafe_code)]
    fn srq_completions_report_the_posted_id_and_bytes() {
        // Goal: an SRQ receive's completion carries the id the caller posted to the SRQ (not the
        // internal one) and the received length.
        let mut slots: SrqSlots<()> = SrqSlots::new(2);
        let internal = slots.insert(42, ()).unwrap();
        // SAFETY: ibv_wc is plain data; all-zero is a valid value.
        let mut wc: ibv_wc = unsafe { std::mem::zeroed() };
        wc.wr_id = internal;
        wc.byte_len = 64;
        wc.opcode = rdma_mummy_sys::ibv_wc_opcode::IBV_WC_RECV;
        let c = slots.complete(&wc).unwrap();
        assert_eq!((c.wr_id, c.op, c.byte_len), (42, Op::Recv, 64));
        assert!(c.status.is_ok());
        assert!(slots.complete(&wc).is_none());
    }
}
