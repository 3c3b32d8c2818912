//! A listener's shared receive pool for Stream connections (`Listener::serve_streams` with a
//! depth): one SRQ and one buffer of small slots that every accepted connection takes its
//! incoming messages from, instead of a receive queue and a command region per connection.
//!
//! Why: a receive queue is device memory whatever is posted on it (rxe: a power of two of
//! 64-byte slots), and a node holds hundreds of mostly idle clients; a pool sized by traffic
//! serves them all. Each message's bytes (a 32-byte control message, or nothing for a WRITE
//! WITH IMM's notice) are copied out of its slot when its connection polls the completion,
//! and the slot is posted again at once, so a slot is held only between arrival and poll.
//! A connection's own receives become bookkeeping (`pooled_recvs.rs`).
//!
//! The connections share the device's protection domain (rxe checks an SRQ receive's buffer
//! against the QP's PD), so their remotely reachable regions are reached through QP-bound
//! memory windows (`window.rs`), not through the PD.
//!
//! Bounds: the pool's depth (`rdma-srq-depth`), and every connection's CQ holds its sends plus
//! the whole pool (`qp.rs` `check_srq_fits`: a CQ that overflowed would lose a receive the
//! device took from the pool). A peer's messages beyond its Stream's posted receives wait
//! (copied out) up to its receive depth, then `BusError::Protocol` closes it; a pool drained
//! by a burst answers senders with RNR NAKs, retried (slower, never lost).
//!
//! Known gap: a connection closed by this side while its peer is still sending drains its CQ
//! once after moving its QP to the error state; a receive the device completes after that
//! drain (rxe's responder racing the close) is not returned to the pool, which is then one
//! receive shallower for good. `INFO fabric` `fabric_shared_receives_posted` shows the pool's
//! level. The clean fix is waiting for the QP's LAST_WQE_REACHED event before destroying it.
//! And rxe (not the specification) lets any QP invalidate another QP's window by its key with
//! SEND WITH INVALIDATE: on soft-RoCE a peer that guesses a victim's key (index and 8 bits)
//! can cut the victim off, though never read or write its memory.

use std::collections::VecDeque;
use std::sync::Arc;

use super::device::Device;
use super::pooled_recvs::{completion_of, Arrival, Matched, PooledRecvs, Posted, POOL_SLOT_LEN};
use super::region::{self, VerbsRegion};
use super::srq::{self, SrqShared, VerbsSrq};
use super::window::Window;
use crate::access::Access;
use crate::error::Result;
use crate::provider::{Completion, LocalSlice, Op, Region, WorkError};
use rdma_mummy_sys::ibv_wc;

/// One listener's pool.
pub(crate) struct ReceivePool {
    srq: VerbsSrq,
    slots: VerbsRegion,
}

impl std::fmt::Debug for ReceivePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceivePool")
            .field("srq", &self.srq)
            .finish()
    }
}

impl ReceivePool {
    /// Creates the SRQ and its slots and posts every slot. Fails (so the listener keeps
    /// per-connection queues) on a device without SRQs or type 2 memory windows.
    pub(crate) fn new(dev: &Arc<Device>, depth: u32) -> Result<Arc<ReceivePool>> {
        // The connections' regions need windows: find out now, not at the first client.
        drop(Window::alloc(&dev.pd)?);
        let srq = srq::create(dev, depth)?;
        let slots = region::register(dev, depth as usize * POOL_SLOT_LEN, Access::LOCAL_WRITE)?;
        let pool = ReceivePool { srq, slots };
        for slot in 0..u64::from(depth) {
            pool.post(slot)?;
        }
        tracing::debug!(depth, "verbs receive pool created");
        Ok(Arc::new(pool))
    }

    pub(crate) fn srq(&self) -> &Arc<SrqShared> {
        &self.srq.0
    }

    fn post(&self, slot: u64) -> Result<()> {
        let dst = LocalSlice {
            region: self.slots.clone(),
            offset: slot as usize * POOL_SLOT_LEN,
            len: POOL_SLOT_LEN,
        };
        self.srq.post_recv(slot, dst)
    }

    /// A pool receive's completion (read from some connection's CQ): the message's bytes are
    /// copied out and its slot is posted again. `None` for a completion naming no posted slot.
    pub(crate) fn arrival(&self, wc: &ibv_wc) -> Option<Arrival> {
        let c = self.srq.0.complete(wc)?;
        let mut bytes = [0u8; POOL_SLOT_LEN];
        if c.op == Op::Recv && c.status.is_ok() {
            let len = (c.byte_len as usize).min(POOL_SLOT_LEN);
            let offset = c.wr_id as usize * POOL_SLOT_LEN;
            if let Err(e) = self.slots.read(offset, &mut bytes[..len]) {
                tracing::warn!(error = %e, "verbs receive pool: reading a slot");
            }
        }
        if let Err(e) = self.post(c.wr_id) {
            // The pool is one receive shallower until the listener ends; senders meet RNR
            // NAKs sooner, nothing is lost.
            tracing::warn!(error = %e, slot = c.wr_id, "verbs receive pool: reposting a slot");
        }
        Some(Arrival {
            op: c.op,
            status: c.status,
            byte_len: c.byte_len,
            imm: c.imm,
            bytes,
        })
    }

    /// Receives posted in the pool now.
    pub(crate) fn posted(&self) -> usize {
        self.srq.outstanding()
    }
}

/// A connection's side of a pool: its receives (`pooled_recvs.rs`) and the completions of
/// receives matched when they were posted, reported at its next poll.
pub(crate) struct PoolLink {
    pool: Arc<ReceivePool>,
    recvs: PooledRecvs<(VerbsRegion, usize)>,
    ready: VecDeque<Completion>,
}

impl PoolLink {
    /// `recv_wr`: the connection's receive depth (its peer's credit).
    pub(crate) fn new(pool: Arc<ReceivePool>, recv_wr: u32) -> Self {
        PoolLink {
            pool,
            recvs: PooledRecvs::new(recv_wr as usize),
            ready: VecDeque::new(),
        }
    }

    /// Posts one of the connection's receives (checked by the caller against its PD).
    pub(crate) fn post(&mut self, wr_id: u64, dst: LocalSlice<VerbsRegion>) -> Result<()> {
        let posted = Posted {
            wr_id,
            len: dst.len,
            dst: (dst.region, dst.offset),
        };
        if let Some(matched) = self.recvs.post(posted)? {
            self.ready.push_back(deliver(matched));
        }
        Ok(())
    }

    /// Whether completions matched at post time wait for the next poll.
    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Moves up to `max` completions matched at post time to `out`.
    pub(crate) fn take_ready(&mut self, out: &mut Vec<Completion>, max: usize) -> usize {
        let n = self.ready.len().min(max);
        out.extend(self.ready.drain(..n));
        n
    }

    /// A pool receive completed on this connection's CQ: its completion, if a receive was
    /// posted for it (else it waits for one).
    pub(crate) fn arrive(&mut self, wc: &ibv_wc) -> Result<Option<Completion>> {
        let Some(arrival) = self.pool.arrival(wc) else {
            return Ok(None);
        };
        Ok(self.recvs.arrive(arrival)?.map(deliver))
    }

    /// Once the connection is in error: its oldest posted receive, flushed.
    pub(crate) fn flush_one(&mut self) -> Option<Completion> {
        self.recvs.flush_one()
    }

    /// On the connection's drop: gives a completed pool receive's slot back to the pool.
    pub(crate) fn release(&self, wc: &ibv_wc) {
        let _ = self.pool.arrival(wc);
    }
}

/// Copies a matched message into its receive; the receive's completion.
fn deliver((posted, arrival): Matched<(VerbsRegion, usize)>) -> Completion {
    let (mut completion, len) = completion_of(&posted, &arrival);
    if len > 0 {
        let (region, offset) = &posted.dst;
        if let Err(e) = region.write(*offset, &arrival.bytes[..len]) {
            completion.status = Err(WorkError::Other(format!("copying a pooled receive: {e}")));
            completion.byte_len = 0;
        }
    }
    completion
}
