//! Registered memory: page-aligned zeroed memory plus its memory region (`ibv_reg_mr`).
#![allow(unsafe_code)]

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::AccessFlags;

use super::device::Device;
use super::lib_error;
use crate::access::Access;
use crate::error::{BusError, Result};
use crate::provider::{Region, RemoteRegion};

/// The largest region we register: 64 GiB is past any node's memory budget, so a bigger request
/// is a config mistake; the bound also keeps every offset arithmetic within u64 comfortably.
pub const REGION_LEN_MAX: usize = 1 << 36;
/// Alignment and rounding of region memory: pages, so no two regions share a page (registration
/// pins whole pages) and the device's DMA never straddles someone else's allocation.
const PAGE: usize = 4096;

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

struct Inner {
    // Field order is drop order: deregister the MR before the memory under it is freed.
    mr: Arc<MemoryRegion>,
    mem: Memory,
    len: usize,
    access: Access,
    pd: Arc<ProtectionDomain>,
}

/// A region registered with the `verbs` provider. Clones share the memory.
#[derive(Clone)]
pub struct VerbsRegion(Arc<Inner>);

impl std::fmt::Debug for VerbsRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsRegion")
            .field("addr", &self.0.mem.ptr)
            .field("len", &self.0.len)
            .field("access", &self.0.access)
            .field("lkey", &self.0.mr.lkey())
            .finish()
    }
}

fn access_flags(access: Access) -> AccessFlags {
    let mut flags = AccessFlags::none();
    // Verbs refuses REMOTE_WRITE without LOCAL_WRITE (EINVAL): a remotely writable region is
    // locally writable by the device too.
    if access.contains(Access::LOCAL_WRITE) || access.contains(Access::REMOTE_WRITE) {
        flags |= AccessFlags::LocalWrite;
    }
    if access.contains(Access::REMOTE_WRITE) {
        flags |= AccessFlags::RemoteWrite;
    }
    if access.contains(Access::REMOTE_READ) {
        flags |= AccessFlags::RemoteRead;
    }
    flags
}

pub(crate) fn register(dev: &Device, len: usize, access: Access) -> Result<VerbsRegion> {
    if len == 0 || len > REGION_LEN_MAX {
        return Err(BusError::Invalid {
            what: "region length",
            reason: format!("{len} is outside 1..={REGION_LEN_MAX}"),
        });
    }
    let layout = Layout::from_size_align(len.div_ceil(PAGE) * PAGE, PAGE).map_err(|e| {
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
    // SAFETY: `mem` is valid for `len` bytes and outlives the MR: both live in `Inner`, where the
    // MR is dropped (deregistered) first.
    let mr = unsafe {
        dev.pd
            .reg_mr(ptr.as_ptr() as usize, len, access_flags(access))
    }
    .map_err(|e| lib_error("ibv_reg_mr", &e))?;
    Ok(VerbsRegion(Arc::new(Inner {
        mr,
        mem,
        len,
        access,
        pd: Arc::clone(&dev.pd),
    })))
}

impl VerbsRegion {
    pub(crate) fn lkey(&self) -> u32 {
        self.0.mr.lkey()
    }

    /// The virtual address of `offset` (what a scatter/gather entry names).
    pub(crate) fn addr_of(&self, offset: usize) -> u64 {
        self.0.mem.ptr.as_ptr() as u64 + offset as u64
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
        // SAFETY: in bounds and 8-byte aligned (the base is page aligned); the word lives as long
        // as `self`; every access to it from this process is atomic, and peers write it by DMA.
        Ok(unsafe { AtomicU64::from_ptr(self.0.mem.ptr.as_ptr().add(offset).cast::<u64>()) })
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
        Ok(RemoteRegion {
            addr: self.addr_of(0),
            len: self.0.len as u64,
            rkey: u64::from(self.0.mr.rkey()),
        })
    }

    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check(offset, dst.len())?;
        // SAFETY: the source range is inside the allocation (checked) and `dst` is a distinct
        // Rust buffer, so the ranges cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.0.mem.ptr.as_ptr().add(offset),
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
            std::ptr::copy_nonoverlapping(
                src.as_ptr(),
                self.0.mem.ptr.as_ptr().add(offset),
                src.len(),
            )
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
