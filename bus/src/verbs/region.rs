//! Registered memory: zeroed memory plus its memory region, registered with
//! `ibv_reg_mr_iova2` under a random I/O virtual address.
//!
//! What a peer needs to reach a region is its protection domain (a QP of another PD gets a
//! remote access error whatever key it names: each connection has a PD of its own, see
//! `qp.rs`), its rkey and its address. The address peers are told is a random I/O virtual
//! address (`iova`), not where the memory is, so it says nothing about this process's address
//! space or any other region: 52 random bits above the page offset, and the region starts at
//! a random 8-byte-aligned offset in its first page (9 bits; the iova keeps that offset, as
//! mlx5 requires). rxe adds 8 random bits to each rkey; mlx5 a counter byte.
#![allow(unsafe_code)]

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use rand::rngs::OsRng;
use rand::{Rng, RngCore};
use rdma_mummy_sys::{ibv_access_flags, ibv_dereg_mr, ibv_mr, ibv_reg_mr_iova2};
use sideway::ibverbs::protection_domain::ProtectionDomain;

use super::device::Device;
use super::lib_error;
use super::window::{window_access, BindTarget, Window};
use crate::access::Access;
use crate::error::{BusError, Result};
use crate::provider::{Region, RemoteRegion};

/// The largest region we register: 64 GiB is past any node's memory budget, so a bigger request
/// is a config mistake; the bound also keeps every offset arithmetic within u64 comfortably.
pub const REGION_LEN_MAX: usize = 1 << 36;
/// Alignment and rounding of region memory: pages, so no two regions share a page (registration
/// pins whole pages) and the device's DMA never straddles someone else's allocation.
const PAGE: usize = 4096;
/// The region's start inside its first page is a multiple of this (u64 words stay aligned).
const IN_PAGE_ALIGN: usize = 8;

/// An owned, zeroed, page-aligned allocation.
struct Memory {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: `Memory` is a plain heap allocation owned by this value; the pointer is never handed
// out as a reference, and all access goes through copies (or atomics) bounded by the length.
unsafe impl Send for Memory {}
// SAFETY: as above; concurrent copies race only like the device's own DMA does, which is the
// documented contract of registered memory (see provider.rs: no references into it).
unsafe impl Sync for Memory {}

impl Drop for Memory {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_zeroed(self.layout)` and is freed exactly once, here.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// A registered memory region (`ibv_mr`) and the memory under it, deregistered then freed on
/// drop; if the device refuses to deregister it (a window still bound, say), the memory is
/// leaked rather than freed under a live registration the device could still write.
struct Mr(NonNull<ibv_mr>, Option<Memory>);

// SAFETY: an ibv_mr may be used and deregistered from any thread; the pointer is owned here.
unsafe impl Send for Mr {}
// SAFETY: only its plain key fields are read through `&self`.
unsafe impl Sync for Mr {}

impl Mr {
    fn lkey(&self) -> u32 {
        // SAFETY: the MR is live while `self` is; lkey is set at registration.
        unsafe { self.0.as_ref().lkey }
    }
    fn rkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { self.0.as_ref().rkey }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: the MR is live and deregistered exactly once; no work request names it any
        // more (outstanding work holds a clone of the region, so this runs after completion).
        let rc = unsafe { ibv_dereg_mr(self.0.as_ptr()) };
        if rc != 0 {
            tracing::warn!(errno = rc, "ibv_dereg_mr failed; its memory is leaked");
            std::mem::forget(self.1.take());
        }
    }
}

struct Inner {
    // Field order is drop order: deallocate the window before the MR under it (an MR with a
    // bound window cannot be deregistered), the MR (and after it the memory it owns) before
    // the PD it belongs to.
    /// The QP-bound window peers reach the region through, on a connection that shares its
    /// PD (`window.rs`); `None` where the MR's own key is the remote key, or once its
    /// connection closed it ([`WindowRef::close`]).
    window: Mutex<Option<Window>>,
    /// The window's key (kept when the window is closed: a peer naming it is refused).
    window_rkey: Option<u32>,
    mr: Mr,
    /// The region's first byte (inside the MR's memory, in its first page).
    base: NonNull<u8>,
    /// What peers are told instead of `base`.
    iova: u64,
    len: usize,
    access: Access,
    pd: Arc<ProtectionDomain>,
}

// SAFETY: `base` points into `mem`, owned by this value (see Memory).
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

/// A region registered with the `verbs` provider. Clones share the memory.
#[derive(Clone)]
pub struct VerbsRegion(Arc<Inner>);

impl std::fmt::Debug for VerbsRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsRegion")
            .field("len", &self.0.len)
            .field("access", &self.0.access)
            .field("lkey", &self.0.mr.lkey())
            .finish()
    }
}

fn access_flags(access: Access) -> u32 {
    let mut flags = 0;
    // Verbs refuses REMOTE_WRITE without LOCAL_WRITE (EINVAL): a remotely writable region is
    // locally writable by the device too.
    if access.contains(Access::LOCAL_WRITE) || access.contains(Access::REMOTE_WRITE) {
        flags |= ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0;
    }
    if access.contains(Access::REMOTE_WRITE) {
        flags |= ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
    }
    if access.contains(Access::REMOTE_READ) {
        flags |= ibv_access_flags::IBV_ACCESS_REMOTE_READ.0;
    }
    flags
}

/// A random I/O virtual address for `len` bytes at `base`: random above the page offset,
/// `base`'s offset in its page below it, and room for `len` bytes before u64 wraps.
fn random_iova(base: u64, len: u64) -> u64 {
    loop {
        let iova = (OsRng.next_u64() & !(PAGE as u64 - 1)) | (base & (PAGE as u64 - 1));
        if iova.checked_add(len).is_some() && iova != 0 {
            return iova;
        }
    }
}

/// Registers `len` zeroed bytes in the device's PD (datagram endpoints, shared receive
/// queues and their connections).
pub(crate) fn register(dev: &Device, len: usize, access: Access) -> Result<VerbsRegion> {
    register_in(&dev.pd, len, access)
}

/// Registers `len` zeroed bytes in `pd` (a connection's own).
pub(crate) fn register_in(
    pd: &Arc<ProtectionDomain>,
    len: usize,
    access: Access,
) -> Result<VerbsRegion> {
    register_with(pd, len, access, access_flags(access), None)
}

/// Registers `len` zeroed bytes in a PD shared by several connections (the device's, for
/// connections on a receive pool): with remote access, the MR itself gets local rights and
/// the right to bind windows only, and peers get the key of a type 2 window that must be bound
/// to the connection's QP ([`VerbsRegion::bind_target`]) before the key is handed out.
pub(crate) fn register_windowed(
    pd: &Arc<ProtectionDomain>,
    len: usize,
    access: Access,
) -> Result<VerbsRegion> {
    if !access.is_remote() {
        return register_in(pd, len, access);
    }
    let window = Window::alloc(pd)?;
    let flags = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 | ibv_access_flags::IBV_ACCESS_MW_BIND.0;
    register_with(pd, len, access, flags, Some(window))
}

fn register_with(
    pd: &Arc<ProtectionDomain>,
    len: usize,
    access: Access,
    mr_flags: u32,
    window: Option<Window>,
) -> Result<VerbsRegion> {
    if len == 0 || len > REGION_LEN_MAX {
        return Err(BusError::Invalid {
            what: "region length",
            reason: format!("{len} is outside 1..={REGION_LEN_MAX}"),
        });
    }
    let offset = OsRng.gen_range(0..PAGE / IN_PAGE_ALIGN) * IN_PAGE_ALIGN;
    let layout =
        Layout::from_size_align((offset + len).div_ceil(PAGE) * PAGE, PAGE).map_err(|e| {
            BusError::Invalid {
                what: "region length",
                reason: e.to_string(),
            }
        })?;
    // SAFETY: the layout has a non-zero size (len >= 1 rounded up to a page).
    let raw = unsafe { std::alloc::alloc_zeroed(layout) };
    let ptr = NonNull::new(raw).ok_or(BusError::Provider {
        provider: super::PROVIDER,
        call: "alloc",
        reason: format!("out of memory for a {len}-byte region"),
    })?;
    let mem = Memory { ptr, layout };
    // SAFETY: offset < PAGE <= the allocation's size.
    let base = unsafe { NonNull::new_unchecked(ptr.as_ptr().add(offset)) };
    let iova = random_iova(base.as_ptr() as u64, len as u64);
    // SAFETY: `base..base+len` lies inside `mem`, which the MR owns and frees only after it is
    // deregistered; the PD is live (held by `pd`).
    let mr =
        unsafe { ibv_reg_mr_iova2(pd.pd().as_ptr(), base.as_ptr().cast(), len, iova, mr_flags) };
    let mr = NonNull::new(mr)
        .map(|raw| Mr(raw, Some(mem)))
        .ok_or_else(|| lib_error("ibv_reg_mr_iova2", &std::io::Error::last_os_error()))?;
    Ok(VerbsRegion(Arc::new(Inner {
        window_rkey: window.as_ref().map(Window::rkey),
        window: Mutex::new(window),
        mr,
        base,
        iova,
        len,
        access,
        pd: Arc::clone(pd),
    })))
}

impl VerbsRegion {
    pub(crate) fn lkey(&self) -> u32 {
        self.0.mr.lkey()
    }

    /// The address of byte `offset` in this process (what inline data is copied from).
    pub(crate) fn addr_of(&self, offset: usize) -> u64 {
        self.0.base.as_ptr() as u64 + offset as u64
    }

    /// The address of byte `offset` in the MR's I/O virtual address space: what a
    /// scatter/gather entry names for the device (the MR was registered at `iova`).
    pub(crate) fn io_addr_of(&self, offset: usize) -> u64 {
        self.0.iova + offset as u64
    }

    /// What binding this region's window names, if it is reached through one.
    pub(crate) fn bind_target(&self) -> Option<BindTarget> {
        let window = self.0.window.lock();
        let window = window.as_ref()?;
        Some(BindTarget {
            window: window.raw(),
            rkey: window.rkey(),
            mr: self.0.mr.0,
            addr: self.0.iova,
            len: self.0.len as u64,
            access: window_access(
                self.0.access.contains(Access::REMOTE_WRITE),
                self.0.access.contains(Access::REMOTE_READ),
            ),
        })
    }

    /// A handle its connection keeps to close the region's window before the QP it is bound
    /// to is destroyed, whoever still holds the region.
    pub(crate) fn window_ref(&self) -> WindowRef {
        WindowRef(Arc::downgrade(&self.0))
    }

    /// Whether the region belongs to this protection domain (work requests may name it).
    pub(crate) fn in_pd(&self, pd: &Arc<ProtectionDomain>) -> bool {
        Arc::ptr_eq(&self.0.pd, pd)
    }

    /// Checks that `offset..offset+len` lies inside the region.
    pub(crate) fn check(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.0.len => Ok(()),
            _ => Err(BusError::OutOfBounds {
                offset: offset as u64,
                len: len as u64,
                region_len: self.0.len as u64,
            }),
        }
    }

    fn atomic_word(&self, offset: usize) -> Result<&AtomicU64> {
        self.check(offset, 8)?;
        if !offset.is_multiple_of(8) {
            return Err(BusError::Invalid {
                what: "u64 offset",
                reason: format!("{offset} is not 8-byte aligned"),
            });
        }
        // SAFETY: in bounds and 8-byte aligned (the base is 8-byte aligned); the word lives as
        // long as `self`; every access to it from this process is atomic, and peers write it by
        // DMA.
        Ok(unsafe { AtomicU64::from_ptr(self.0.base.as_ptr().add(offset).cast::<u64>()) })
    }
}

impl Region for VerbsRegion {
    fn len(&self) -> usize {
        self.0.len
    }

    fn access(&self) -> Access {
        self.0.access
    }

    fn remote(&self) -> Result<RemoteRegion> {
        if !self.0.access.is_remote() {
            return Err(BusError::Invalid {
                what: "region",
                reason: "registered without remote access, so it has no rkey for peers".to_owned(),
            });
        }
        let rkey = self.0.window_rkey.unwrap_or_else(|| self.0.mr.rkey());
        Ok(RemoteRegion {
            addr: self.0.iova,
            len: self.0.len as u64,
            rkey: u64::from(rkey),
        })
    }

    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check(offset, dst.len())?;
        // SAFETY: the source range is inside the allocation (checked) and `dst` is a distinct
        // Rust buffer, so the ranges cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.0.base.as_ptr().add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        }
        Ok(())
    }

    fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.check(offset, src.len())?;
        // SAFETY: the destination range is inside the allocation (checked); `src` is a Rust slice
        // that cannot point into registered memory (no references into it are handed out).
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.0.base.as_ptr().add(offset), src.len())
        }
        Ok(())
    }

    fn load_u64(&self, offset: usize) -> Result<u64> {
        Ok(self.atomic_word(offset)?.load(Ordering::Acquire))
    }

    fn store_u64(&self, offset: usize, value: u64) -> Result<()> {
        self.atomic_word(offset)?.store(value, Ordering::Release);
        Ok(())
    }
}

/// A connection's handle on one of its windowed regions (see [`VerbsRegion::window_ref`]).
pub(crate) struct WindowRef(Weak<Inner>);

impl WindowRef {
    /// Whether the region is gone (its window went with it).
    pub(crate) fn is_gone(&self) -> bool {
        self.0.strong_count() == 0
    }

    /// Deallocates the region's window now: its key reaches nothing any more.
    ///
    /// Why: a bound type 2 window holds its QP (rxe takes a reference at bind), so a QP
    /// destroyed before its windows waits for them (`ibv_destroy_qp` stalled a node's poller
    /// for seconds in the verbs lane); the connection closes them first.
    pub(crate) fn close(&self) {
        if let Some(inner) = self.0.upgrade() {
            drop(inner.window.lock().take());
        }
    }
}
