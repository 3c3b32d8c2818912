//! Shared receive queues (own FFI: sideway 0.4 has no SRQ): one pool of posted receives that
//! several RC connections take their incoming SENDs (and WRITE WITH IMM notices) from, so a
//! server with many mostly idle peers posts a pool sized by its traffic, not by its peer count.
//!
//! A receive is posted to the [`VerbsSrq`]; its completion arrives on the CQ of whichever
//! attached connection the message came in on, and that connection's `poll` reports it with
//! the id given here. The SRQ outlives every QP attached to it: each attached QP holds a share
//! of it and destroys itself first.
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::Arc;

use parking_lot::Mutex;
use rdma_mummy_sys::{
    ibv_create_srq, ibv_destroy_srq, ibv_post_srq_recv, ibv_recv_wr, ibv_srq, ibv_srq_attr,
    ibv_srq_init_attr, ibv_wc,
};

use super::device::Device;
use super::region::VerbsRegion;
use super::srq_slots::SrqSlots;
use super::wr::Sge;
use crate::config::WR_MAX;
use crate::error::{BusError, Result};
use crate::provider::{Completion, LocalSlice};

/// Deepest SRQ we create: the same bound as a QP's receive queue (one SRQ replaces several of
/// them, and every attached connection's CQ must have room for all of its completions).
pub const SRQ_DEPTH_MAX: u32 = WR_MAX;
/// Shallowest SRQ: one receive (a pool smaller than a QP's minimum is the point of sharing).
pub const SRQ_DEPTH_MIN: u32 = 1;

/// The SRQ itself and its table of posted receives, shared by the [`VerbsSrq`] handle and every
/// QP attached to it.
pub(crate) struct SrqShared {
    srq: NonNull<ibv_srq>,
    depth: u32,
    /// Dropped after the SRQ is destroyed (see `Drop`), so the device never writes into a
    /// region that was freed.
    slots: Mutex<SrqSlots>,
    /// The PD (and through it the device context) the SRQ was created in.
    dev: Arc<Device>,
}

// SAFETY: an ibv_srq may be used from any thread (libibverbs serialises posts internally); our
// bookkeeping is behind a mutex; the pointer is only freed in Drop.
unsafe impl Send for SrqShared {}
// SAFETY: as above.
unsafe impl Sync for SrqShared {}

impl Drop for SrqShared {
    fn drop(&mut self) {
        // Every QP attached to us held an Arc of this value and destroyed itself first.
        // SAFETY: the SRQ is live and no QP uses it any more; it is destroyed exactly once.
        let rc = unsafe { ibv_destroy_srq(self.srq.as_ptr()) };
        if rc != 0 {
            tracing::warn!(errno = rc, "ibv_destroy_srq failed");
        }
    }
}

impl SrqShared {
    /// The raw handle, for creating QPs attached to it (they hold an Arc of `self`).
    pub(crate) fn raw(&self) -> *mut ibv_srq {
        self.srq.as_ptr()
    }

    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }

    pub(crate) fn belongs_to(&self, dev: &Arc<Device>) -> bool {
        Arc::ptr_eq(&self.dev, dev)
    }

    /// Maps an SRQ receive's completion (read from an attached connection's CQ) to the
    /// caller's id, releasing its slot.
    pub(crate) fn complete(&self, wc: &ibv_wc) -> Option<Completion> {
        self.slots.lock().complete(wc)
    }
}

/// A shared receive queue of the `verbs` provider. Create with
/// [`VerbsProvider::create_srq`](super::VerbsProvider::create_srq), attach connections with
/// `connect_with_srq` / `listen_with_srq`, post receives here.
#[derive(Clone)]
pub struct VerbsSrq(pub(crate) Arc<SrqShared>);

impl std::fmt::Debug for VerbsSrq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsSrq")
            .field("depth", &self.0.depth)
            .field("outstanding", &self.outstanding())
            .finish()
    }
}

pub(crate) fn create(dev: &Arc<Device>, depth: u32) -> Result<VerbsSrq> {
    if !(SRQ_DEPTH_MIN..=SRQ_DEPTH_MAX).contains(&depth) {
        return Err(BusError::Invalid {
            what: "srq depth",
            reason: format!("{depth} is outside {SRQ_DEPTH_MIN}..={SRQ_DEPTH_MAX}"),
        });
    }
    let mut init = ibv_srq_init_attr {
        srq_context: std::ptr::null_mut(),
        attr: ibv_srq_attr {
            max_wr: depth,
            max_sge: 1,
            srq_limit: 0,
        },
    };
    // SAFETY: the PD is live (held by `dev`, which the result holds); `init` is a valid local.
    let raw = unsafe { ibv_create_srq(dev.pd.pd().as_ptr(), &mut init) };
    let srq = NonNull::new(raw).ok_or_else(|| BusError::Provider {
        provider: super::PROVIDER,
        call: "ibv_create_srq",
        reason: std::io::Error::last_os_error().to_string(),
    })?;
    let shared = SrqShared {
        srq,
        depth,
        slots: Mutex::new(SrqSlots::new(depth)),
        dev: Arc::clone(dev),
    };
    // ibv_post_srq_recv calls through the context's op table; a driver without the op would
    // leave a null there. Refuse such a device here rather than fail on the first post.
    // SAFETY: a live SRQ's context pointer is the device context, valid while the SRQ is.
    let has_post = unsafe { (*(*shared.raw()).context).ops.post_srq_recv.is_some() };
    if !has_post {
        return Err(BusError::Unavailable {
            provider: super::PROVIDER,
            reason: format!("device {} cannot post to a shared receive queue", dev.name),
        });
    }
    tracing::debug!(depth, "verbs SRQ created");
    Ok(VerbsSrq(Arc::new(shared)))
}

impl VerbsSrq {
    /// Posts one receive to the shared pool. `BusError::Full` once `depth` receives are
    /// outstanding; the region is held until the receive completes (on some attached
    /// connection's `poll`, reported with `wr_id`).
    pub fn post_recv(&self, wr_id: u64, dst: LocalSlice<VerbsRegion>) -> Result<()> {
        if !dst.region.in_pd(&self.0.dev.pd) {
            return Err(BusError::Invalid {
                what: "region",
                reason: "registered with another provider instance".to_owned(),
            });
        }
        dst.region.check(dst.offset, dst.len)?;
        let len = u32::try_from(dst.len).map_err(|_| BusError::Invalid {
            what: "work request length",
            reason: format!("{} exceeds 4 GiB", dst.len),
        })?;
        let sge = Sge {
            addr: dst.region.io_addr_of(dst.offset),
            ptr: dst.region.addr_of(dst.offset),
            len,
            lkey: dst.region.lkey(),
        };
        // Hold the lock across the post: a completion cannot name this slot before it exists.
        let mut slots = self.0.slots.lock();
        let internal = slots.insert(wr_id, dst.region)?;
        // SAFETY: the SRQ is live (we hold it); the SGE names memory registered in its PD
        // (checked above) that `slots` keeps alive until the completion or the SRQ's end.
        let posted = unsafe { post_srq_recv(self.0.raw(), internal, sge) };
        if posted.is_err() {
            let _ = slots.take(internal);
        }
        posted
    }

    /// Receives posted and not yet completed (at most [`depth`](Self::depth)).
    pub fn outstanding(&self) -> usize {
        self.0.slots.lock().outstanding()
    }

    /// How many receives may be outstanding at once.
    pub fn depth(&self) -> u32 {
        self.0.depth
    }
}

/// Posts one receive to an SRQ.
///
/// # Safety
/// `srq` must be live (with a `post_srq_recv` op, checked at creation); `sge` registered in its
/// PD and alive until the completion.
unsafe fn post_srq_recv(srq: *mut ibv_srq, internal_id: u64, sge: Sge) -> Result<()> {
    super::wr::with_recv_wr(internal_id, sge, |wr| {
        let mut bad: *mut ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: per this function's contract; the WR and SGE outlive the call (copied by it).
        let rc = unsafe { ibv_post_srq_recv(srq, wr, &mut bad) };
        if rc != 0 {
            return Err(super::wr::post_error("ibv_post_srq_recv", rc));
        }
        Ok(())
    })
}
