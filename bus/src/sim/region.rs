//! Registered memory of the simulated fabric: a heap buffer behind a mutex. The mutex gives the
//! acquire/release ordering that `load_u64`/`store_u64` promise (a peer's simulated WRITE takes
//! the same lock), and safe code cannot hand out a reference into memory a peer may change.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::access::Access;
use crate::error::{BusError, Result};
use crate::provider::{Region, RemoteRegion};

use super::HostId;

/// One simulated memory registration.
#[derive(Debug)]
pub(crate) struct RegionInner {
    pub(crate) host: HostId,
    /// The simulated virtual address of byte 0, unique on the network: peers address
    /// `base + offset`, as verbs addresses a region by its VA.
    pub(crate) base: u64,
    /// 32 bits, as verbs rkeys are (the Stream wire carries 32).
    pub(crate) rkey: u32,
    pub(crate) access: Access,
    /// The connection (queue pair) it was registered for: only that connection's peer may
    /// reach it. `None`: registered on the host (`Provider::register`), reachable from any
    /// connection to it, as one verbs protection domain per device would allow.
    pub(crate) owner_qp: Option<u64>,
    pub(crate) len: usize,
    pub(crate) bytes: Mutex<Box<[u8]>>,
}

/// A handle to simulated registered memory. Clones share the memory.
#[derive(Clone, Debug)]
pub struct SimRegion {
    pub(crate) inner: Arc<RegionInner>,
}

impl SimRegion {
    fn check(&self, offset: usize, len: usize) -> Result<()> {
        let region_len = self.len();
        match offset.checked_add(len) {
            Some(end) if end <= region_len => Ok(()),
            _ => Err(BusError::OutOfBounds {
                offset: offset as u64,
                len: len as u64,
                region_len: region_len as u64,
            }),
        }
    }

    fn check_word(&self, offset: usize) -> Result<()> {
        if !offset.is_multiple_of(8) {
            return Err(BusError::Invalid {
                what: "u64 offset",
                reason: format!("{offset} is not 8-byte aligned"),
            });
        }
        self.check(offset, 8)
    }
}

impl Region for SimRegion {
    fn len(&self) -> usize {
        self.inner.len
    }

    fn access(&self) -> Access {
        self.inner.access
    }

    fn remote(&self) -> Result<RemoteRegion> {
        if !self.inner.access.is_remote() {
            return Err(BusError::Invalid {
                what: "region",
                reason: "registered without remote access".into(),
            });
        }
        Ok(RemoteRegion {
            addr: self.inner.base,
            len: self.len() as u64,
            rkey: u64::from(self.inner.rkey),
        })
    }

    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check(offset, dst.len())?;
        dst.copy_from_slice(&self.inner.bytes.lock()[offset..offset + dst.len()]);
        Ok(())
    }

    fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.check(offset, src.len())?;
        self.inner.bytes.lock()[offset..offset + src.len()].copy_from_slice(src);
        Ok(())
    }

    fn load_u64(&self, offset: usize) -> Result<u64> {
        self.check_word(offset)?;
        let mut word = [0u8; 8];
        word.copy_from_slice(&self.inner.bytes.lock()[offset..offset + 8]);
        Ok(u64::from_le_bytes(word))
    }

    fn store_u64(&self, offset: usize, value: u64) -> Result<()> {
        self.check_word(offset)?;
        self.inner.bytes.lock()[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }
}
