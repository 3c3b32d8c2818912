//! Registered memory on a libfabric domain, honouring the domain's `mr_mode`:
//! - FI_MR_VIRT_ADDR: peers address the region by its virtual address (placed at a random
//!   one), else by offset from 0 with a random 64-bit key whose high half is the advertised
//!   address (see `mr_key.rs`). [`RemoteRegion::addr`] + offset is right either way.
//! - FI_MR_PROV_KEY: the provider picks the key (read back with `fi_mr_key`), else we request
//!   a random one.
//! - FI_MR_LOCAL: local buffers must be named by their descriptor (`fi_mr_desc`) in every
//!   operation; we always pass it, which is harmless when not required.
//! - FI_MR_ALLOCATED: we only register memory we allocated (mapped, zeroed).
//!
//! Rights are exactly what [`Access`] asks ([`fi_access`]): a remotely writable region is not
//! remotely readable, and only [`Access::SEND`] regions carry FI_SEND (which `ofi_rxm` turns
//! into FI_REMOTE_READ for its rendezvous reads).
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::access::Access;
use crate::error::BusError;
use crate::provider::{Region, RemoteRegion};

use super::domain::{close_fid, Domain};
use super::placement::Placement;
use super::sys;

/// Largest single registration: 1 GiB bounds what one call can pin (rings and stream buffers
/// are megabytes), and keeps `addr + offset` inside the low half of a split key.
pub const REGION_MAX: usize = 1 << 30;
/// Registrations whose requested key was taken (`-FI_ENOKEY`) are retried with a fresh key
/// this often (with 64 random bits a second try is already a curiosity).
const KEY_TRIES: usize = 8;

struct RegionInner {
    domain: Arc<Domain>,
    // Field order is drop order, but Drop closes the MR explicitly before `mem` goes.
    mem: Placement,
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
        // SAFETY: the MR is closed here, before `mem` (a field) unmaps the memory it covers;
        // no operation names the region any more (outstanding work holds a clone, so this
        // runs after its completion).
        unsafe {
            close_fid(self.mr as *mut sys::Fid);
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

/// The libfabric rights for `access`, and nothing more. Every region may be the source of a
/// WRITE (a local right); SEND only when asked, since rxm makes a SEND source remotely
/// readable.
pub fn fi_access(access: Access) -> u64 {
    let mut flags = sys::FI_WRITE;
    if access.contains(Access::SEND) {
        flags |= sys::FI_SEND;
    }
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
        let addressing = domain.addressing();
        let mem = Placement::new(len, addressing.places_randomly())?;
        let mut tries = 0;
        let (mr, key) = loop {
            let requested_key = addressing.draw_key();
            match reg_mr(domain, mem.base(), len, access, requested_key) {
                Err(rc) if rc == -sys::FI_ENOKEY && tries + 1 < KEY_TRIES => tries += 1,
                Err(rc) => return Err(domain.error("fi_mr_reg", rc)),
                Ok(mr) => {
                    // SAFETY: mr is a live fid_mr; key is a plain field (fi_mr_key).
                    let key = unsafe { (*mr).key };
                    break (mr, key);
                }
            }
        };
        // SAFETY: mr is a live fid_mr; mem_desc is a plain field (fi_mr_desc).
        let desc = unsafe { (*mr).mem_desc };
        let remote = addressing.advert(key, mem.base() as u64, len as u64);
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
                // SAFETY: offset <= len of the mapping after the base.
                Ok(unsafe { self.0.mem.base().add(offset) })
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
        // SAFETY: p is 8-byte aligned (the base is 8-byte aligned) and inside the allocation,
        // which lives as long as &self; all access to region words from Rust is atomic or by
        // raw copy, never through references to plain integers.
        Ok(unsafe { AtomicU64::from_ptr(p as *mut u64) })
    }
}

/// `fi_mr_reg` of `len` bytes at `mem`; the negative libfabric code on failure.
fn reg_mr(
    domain: &Arc<Domain>,
    mem: *mut u8,
    len: usize,
    access: Access,
    requested_key: u64,
) -> Result<*mut sys::FidMr, i32> {
    let mut mr = ptr::null_mut();
    // SAFETY: mem is len bytes owned by the caller's Placement until the MR is closed
    // (RegionInner::drop); the domain is live and its mr ops table has `reg`.
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
    if rc == 0 {
        Ok(mr)
    } else {
        Err(rc)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: rights are exact: a write target is not readable, nothing but a SEND source gets
    /// FI_SEND (which rxm widens to FI_REMOTE_READ), local-only regions get no remote bit.
    #[test]
    fn fi_access_grants_exactly_what_is_asked() {
        let remote = sys::FI_REMOTE_READ | sys::FI_REMOTE_WRITE;
        assert_eq!(fi_access(Access::NONE), sys::FI_WRITE);
        assert_eq!(fi_access(Access::SEND), sys::FI_WRITE | sys::FI_SEND);
        assert_eq!(
            fi_access(Access::LOCAL_WRITE),
            sys::FI_WRITE | sys::FI_RECV | sys::FI_READ
        );
        let rx = fi_access(Access::LOCAL_WRITE | Access::REMOTE_WRITE);
        assert_eq!(rx & remote, sys::FI_REMOTE_WRITE);
        assert_eq!(rx & sys::FI_SEND, 0);
        assert_eq!(fi_access(Access::REMOTE_READ) & remote, sys::FI_REMOTE_READ);
    }
}
