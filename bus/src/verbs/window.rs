//! Memory windows (type 2, own FFI: sideway 0.4 has none): a remote key that only one QP may
//! use.
//!
//! Why: a connection that takes its receives from a shared pool (`receive_pool.rs`) lives in
//! the device's protection domain with every other such connection, so the PD no longer keeps
//! one client's QP out of another client's regions. Such a connection's remotely reachable
//! regions are registered for local access and memory-window binding only (their MR's own
//! rkey grants no remote right) and reached through a type 2 window bound to the
//! connection's QP: the device refuses the window's key on any other QP (IBA o10-37.2.33;
//! rxe's `rxe_lookup_mw`), whatever address the other QP names. So a leaked or guessed key
//! reads and writes nothing, as under a PD of its own. (rxe lets another QP invalidate the
//! window by key, a denial of service only: see `receive_pool.rs`.)
//!
//! A window is bound by a BIND_MW work request on its QP's send queue. It is posted before any
//! later request of the connection (the advert that tells the peer the key comes after it on
//! the same queue, and a queue executes in order), and it is invalidated by deallocation when
//! its region is dropped.
#![allow(unsafe_code)]

use std::ptr::NonNull;

use rdma_mummy_sys::{
    bind_mw_t, bind_mw_tso_union_t, ibv_access_flags, ibv_alloc_mw, ibv_dealloc_mw, ibv_mr, ibv_mw,
    ibv_mw_bind_info, ibv_mw_type, ibv_post_send, ibv_qp, ibv_send_flags, ibv_send_wr,
    ibv_wr_opcode,
};
use sideway::ibverbs::protection_domain::ProtectionDomain;

use super::lib_error;
use crate::error::Result;

/// A type 2 memory window, deallocated (so invalidated) on drop.
pub(crate) struct Window {
    mw: NonNull<ibv_mw>,
    /// The key it is bound with: the allocation's key with its low byte advanced, as the
    /// bind asks (`ibv_inc_rkey`).
    rkey: u32,
}

// SAFETY: an ibv_mw may be used and deallocated from any thread; the pointer is owned here and
// freed only in Drop.
unsafe impl Send for Window {}
// SAFETY: `&self` only reads the plain key chosen at allocation.
unsafe impl Sync for Window {}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: the window is live and deallocated exactly once. Its region is dropped only
        // after every work request naming it completed; its connection closes it earlier
        // (`WindowRef::close`) only once its QP is in the error state, so a bind still queued
        // is flushed, never executed (providers copy the handle when the bind is posted).
        let rc = unsafe { ibv_dealloc_mw(self.mw.as_ptr()) };
        if rc != 0 {
            tracing::warn!(errno = rc, "ibv_dealloc_mw failed");
        }
    }
}

impl Window {
    /// Allocates a type 2 window in `pd`, not yet bound (its key reaches nothing).
    pub(crate) fn alloc(pd: &ProtectionDomain) -> Result<Window> {
        // SAFETY: the PD is live; ibv_alloc_mw answers EOPNOTSUPP on a device without windows.
        let raw = unsafe { ibv_alloc_mw(pd.pd().as_ptr(), ibv_mw_type::IBV_MW_TYPE_2) };
        let mw = NonNull::new(raw)
            .ok_or_else(|| lib_error("ibv_alloc_mw", &std::io::Error::last_os_error()))?;
        // SAFETY: a live window's rkey is set at allocation.
        let allocated = unsafe { mw.as_ref().rkey };
        // The low byte advanced (ibv_inc_rkey's rule, without its overflow on u32::MAX).
        let rkey = (allocated & !0xff) | (allocated.wrapping_add(1) & 0xff);
        Ok(Window { mw, rkey })
    }

    /// The key the peer is given (valid once the bind has executed, on the bound QP only).
    pub(crate) fn rkey(&self) -> u32 {
        self.rkey
    }

    pub(crate) fn raw(&self) -> NonNull<ibv_mw> {
        self.mw
    }
}

/// The memory-window rights for a region's `Access`.
pub(crate) fn window_access(remote_write: bool, remote_read: bool) -> u32 {
    let mut flags = 0;
    if remote_write {
        flags |= ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
    }
    if remote_read {
        flags |= ibv_access_flags::IBV_ACCESS_REMOTE_READ.0;
    }
    flags
}

/// What one bind names: the window, the MR under it and the range it opens.
pub(crate) struct BindTarget {
    pub(crate) window: NonNull<ibv_mw>,
    pub(crate) rkey: u32,
    pub(crate) mr: NonNull<ibv_mr>,
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) access: u32,
}

/// Posts a signaled BIND_MW on `qp`'s send queue.
///
/// # Safety
/// `qp` must be live; the window and MR in `target` live in its PD and stay alive until the
/// completion (the caller holds their region in its table of outstanding requests).
pub(crate) unsafe fn post_bind(
    qp: *mut ibv_qp,
    internal_id: u64,
    target: &BindTarget,
) -> Result<()> {
    // SAFETY: ibv_send_wr is plain data; zero is a valid "unused" value for every field not set.
    let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = internal_id;
    wr.next = std::ptr::null_mut();
    wr.sg_list = std::ptr::null_mut();
    wr.num_sge = 0;
    wr.opcode = ibv_wr_opcode::IBV_WR_BIND_MW;
    wr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0;
    wr.bind_mw_tso_union = bind_mw_tso_union_t {
        bind_mw: bind_mw_t {
            mw: target.window.as_ptr(),
            rkey: target.rkey,
            bind_info: ibv_mw_bind_info {
                mr: target.mr.as_ptr(),
                addr: target.addr,
                length: target.len,
                mw_access_flags: target.access,
            },
        },
    };
    let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
    // SAFETY: per this function's contract; the WR lives on this frame for the call.
    let rc = unsafe { ibv_post_send(qp, &mut wr, &mut bad) };
    if rc != 0 {
        return Err(super::wr::post_error("ibv_post_send(BIND_MW)", rc));
    }
    Ok(())
}
