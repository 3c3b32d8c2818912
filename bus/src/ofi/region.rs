//! Registered memory on a libfabric domain, honouring the domain's `mr_mode`:
//! - FI_MR_VIRT_ADDR: peers address the region by its virtual address, else by offset from 0.
//!   [`RemoteRegion::addr`] is the base either way, so `addr + offset` is always right.
//! - FI_MR_PROV_KEY: the provider picks the key (read back with `fi_mr_key`), else we request a
//!   domain-unique one.
//! - FI_MR_LOCAL: local buffers must be named by their descriptor (`fi_mr_desc`) in every
//!   operation; we always pass it, which is harmless when not required.
//! - FI_MR_ALLOCATED: we only register memory we allocated (page-aligned, zeroed).
#![allow(unsafe_code)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::access::Access;
use crate::error::BusError;
use crate::provider::{Region, RemoteRegion};

use super::domain::{close_fid, Domain};
use super::sys;

/// Largest single registration: 1 GiB bounds what one call can pin (rings and stream buffers
/// are megabytes).
pub const REGION_MAX: usize = 1 << 30;
/// Registrations are page aligned so the provider can pin whole pages.
const REGION_ALIGN: usize = 4096;

struct RegionInner {
    domain: Arc<Domain>,
    mem: *mut u8,
    len: usize,
    access: Access,
    mr: *mut sys::FidMr,
    desc: *mut c_void,
    remote: RemoteRegion,
}

// SAFETY: the memory is owned by this value and only touched through raw copies and atomics;
// the MR belongs to a FI_THREAD_SAFE domain.
unsafe impl Send for RegionInner {}
// SAFETY: as above.
unsafe impl Sync for RegionInner {}

impl Drop for RegionInner {
    fn drop(&mut self) {
        // SAFETY: the MR is closed before the memory it covers is freed; no operation names the
        // region any more (outstanding work holds a clone, so this runs after its completion).
        unsafe {
            close_fid(self.mr as *mut sys::Fid);
            dealloc(
                self.mem,
                Layout::from_size_align_unchecked(self.len, REGION_ALIGN),
            );
        }
    }
}

/// A registered region (cheap to clone).
#[derive(Clone)]
pub struct OfiRegion(Arc<RegionInner>);

impl std::fmt::Debug for OfiRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfiRegion")
            .field("len", &self.0.len)
            .field("access", &self.0.access)
            .finish()
    }
}

fn fi_access(access: Access) -> u64 {
    // Every region may be the source of a SEND or WRITE.
    let mut flags = sys::FI_SEND | sys::FI_WRITE;
    if access.contains(Access::LOCAL_WRITE) {
        flags |= sys::FI_RECV | sys::FI_READ;
    }
    if access.contains(Access::REMOTE_WRITE) {
        flags |= sys::FI_REMOTE_WRITE;
    }
    if access.contains(Access::REMOTE_READ) {
        flags |= sys::FI_REMOTE_READ;
    }
    flags
}

impl OfiRegion {
    pub fn register(domain: &Arc<Domain>, len: usize, access: Access) -> Result<Self, BusError> {
        if len == 0 || len > REGION_MAX {
            return Err(BusError::Invalid {
                what: "region length",
                reason: format!("{len} is outside 1..={REGION_MAX}"),
            });
        }
        let layout = Layout::from_size_align(len, REGION_ALIGN).map_err(|e| BusError::Invalid {
            what: "region length",
            reason: e.to_string(),
        })?;
        // SAFETY: layout has non-zero size.
        let mem = unsafe { alloc_zeroed(layout) };
        if mem.is_null() {
            return Err(BusError::Full {
                what: "memory for a region",
            });
        }
        let requested_key = if domain.caps.prov_key() {
            0
        } else {
            domain.next_key()
        };
        let mut mr = ptr::null_mut();
        // SAFETY: mem is len bytes we own until the MR is closed (RegionInner::drop); the domain
        // is live and its mr ops table has `reg`.
        let rc = unsafe {
            match (*(*domain.raw).mr).reg {
                Some(reg) => reg(
                    &mut (*domain.raw).fid,
                    mem as *const c_void,
                    len,
                    fi_access(access),
                    0,
                    requested_key,
                    0,
                    &mut mr,
                    ptr::null_mut(),
                ),
                None => -sys::FI_EINVAL,
            }
        };
        if rc != 0 {
            // SAFETY: registration failed; mem is ours alone.
            unsafe { dealloc(mem, layout) };
            domain.check("fi_mr_reg", rc)?;
        }
        // SAFETY: mr is a live fid_mr; key and mem_desc are plain fields (fi_mr_key/fi_mr_desc).
        let (key, desc) = unsafe { ((*mr).key, (*mr).mem_desc) };
        let remote = RemoteRegion {
            addr: if domain.caps.virt_addr() {
                mem as u64
            } else {
                0
            },
            len: len as u64,
            rkey: key,
        };
        Ok(OfiRegion(Arc::new(RegionInner {
            domain: domain.clone(),
            mem,
            len,
            access,
            mr,
            desc,
            remote,
        })))
    }

    /// Checks `offset + len` against the region and returns the address of that byte range.
    pub fn ptr_at(&self, offset: usize, len: usize) -> Result<*mut u8, BusError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.0.len => {
                // SAFETY: offset <= len of the allocation.
                Ok(unsafe { self.0.mem.add(offset) })
            }
            _ => Err(BusError::OutOfBounds {
                offset: offset as u64,
                len: len as u64,
                region_len: self.0.len as u64,
            }),
        }
    }

    /// The descriptor to pass with local buffers (FI_MR_LOCAL).
    pub fn desc(&self) -> *mut c_void {
        self.0.desc
    }

    /// Whether the region was registered on `domain` (a region of another provider object
    /// cannot be used on this one's endpoints).
    pub fn belongs_to(&self, domain: &Arc<Domain>) -> bool {
        Arc::ptr_eq(&self.0.domain, domain)
    }

    fn atomic_at(&self, offset: usize) -> Result<&AtomicU64, BusError> {
        if !offset.is_multiple_of(8) {
            return Err(BusError::Invalid {
                what: "u64 offset",
                reason: format!("{offset} is not 8-byte aligned"),
            });
        }
        let p = self.ptr_at(offset, 8)?;
        // SAFETY: p is 8-byte aligned (the base is page aligned) and inside the allocation,
        // which lives as long as &self; all access to region words from Rust is atomic or by
        // raw copy, never through references to plain integers.
        Ok(unsafe { AtomicU64::from_ptr(p as *mut u64) })
    }
}

impl Region for OfiRegion {
    fn len(&self) -> usize {
        self.0.len
    }

    fn access(&self) -> Access {
        self.0.access
    }

    fn remote(&self) -> Result<RemoteRegion, BusError> {
        if !self.0.access.is_remote() {
            return Err(BusError::Invalid {
                what: "region",
                reason: "it has no remote access, so no remote key".into(),
            });
        }
        Ok(self.0.remote)
    }

    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), BusError> {
        let src = self.ptr_at(offset, dst.len())?;
        // SAFETY: src..src+len is inside the allocation (checked); dst is a distinct Rust
        // buffer. A peer may write the region concurrently: the copy then sees some mix of old
        // and new bytes, which is why the primitives validate records by their own headers.
        unsafe { ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn write(&self, offset: usize, src: &[u8]) -> Result<(), BusError> {
        let dst = self.ptr_at(offset, src.len())?;
        // SAFETY: dst..dst+len is inside the allocation (checked); src is a distinct buffer.
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
        Ok(())
    }

    fn load_u64(&self, offset: usize) -> Result<u64, BusError> {
        Ok(u64::from_le(
            self.atomic_at(offset)?.load(Ordering::Acquire),
        ))
    }

    fn store_u64(&self, offset: usize, value: u64) -> Result<(), BusError> {
        self.atomic_at(offset)?
            .store(value.to_le(), Ordering::Release);
        Ok(())
    }
}
