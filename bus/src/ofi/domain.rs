//! One fabric + domain per provider object. Every region and endpoint of the provider lives in
//! it and holds an `Arc` to it, so the domain is closed only after all of them. libfabric
//! checks remote keys per domain: what keeps a peer out of regions that are not its own is
//! their keys and addresses (`mr_key.rs`).
#![allow(unsafe_code)]

use std::ffi::c_int;
use std::ptr;
use std::sync::Arc;

use crate::error::BusError;

use super::info::{getinfo, InfoList, Lookup};
use super::kind::OfiKind;
use super::library::Library;
use super::mr_key::Addressing;
use super::sys;

/// Remote CQ data must carry a verbs immediate (32 bits).
const CQ_DATA_MIN: usize = 4;

/// What the domain granted, read once from its `fi_info`.
#[derive(Clone, Copy, Debug)]
pub struct DomainCaps {
    pub mr_mode: c_int,
    /// Largest `fi_inject` payload (0 = none).
    pub inject_size: usize,
    pub max_msg_size: usize,
    /// Whether remote CQ data consumes a posted receive (FI_RX_CQ_DATA mode).
    pub rx_cq_data: bool,
    /// The message ordering the provider answered for the transmit side (`FI_ORDER_*`).
    pub tx_msg_order: u64,
}

impl DomainCaps {
    pub fn virt_addr(&self) -> bool {
        self.mr_mode & sys::FI_MR_VIRT_ADDR != 0
    }
    pub fn prov_key(&self) -> bool {
        self.mr_mode & sys::FI_MR_PROV_KEY != 0
    }
    pub fn local_desc(&self) -> bool {
        self.mr_mode & sys::FI_MR_LOCAL != 0
    }
}

/// What message ordering endpoints ask libfabric for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OfiOrdering {
    /// Whatever `fi_getinfo` answered (the hints ask for none; the answer lists what the
    /// provider orders anyway, and `fi_endpoint` gets that).
    #[default]
    AsAnswered,
    /// `FI_ORDER_NONE` for messages and completions on both sides: nothing the provider
    /// orders may be relied on. The ring needs no ordering (see `ring::layout`); other users
    /// of the endpoints (the fabric client protocol) are not checked for it, so this is a
    /// test and configuration option, not the default.
    None,
}

pub struct Domain {
    pub lib: Arc<Library>,
    pub kind: OfiKind,
    /// What endpoints ask for (see `open::open_core`).
    pub ordering: OfiOrdering,
    /// The entry the domain was opened from; endpoints are created from copies of it.
    pub info: InfoList,
    pub caps: DomainCaps,
    fabric: *mut sys::FidFabric,
    pub(crate) raw: *mut sys::FidDomain,
}

// SAFETY: the domain was opened with FI_THREAD_SAFE (asked in the hints; see `open`), so its
// objects may be used from any thread; the raw pointers are owned by this value.
unsafe impl Send for Domain {}
// SAFETY: as above, FI_THREAD_SAFE.
unsafe impl Sync for Domain {}

impl std::fmt::Debug for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Domain")
            .field("kind", &self.kind)
            .field("name", &self.info.domain_name())
            .field("caps", &self.caps)
            .finish()
    }
}

/// Maps a negative libfabric return code to `BusError::Provider`.
pub fn check(lib: &Library, kind: OfiKind, call: &'static str, rc: c_int) -> Result<(), BusError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(BusError::Provider {
            provider: kind.name(),
            call,
            reason: lib.strerror(rc),
        })
    }
}

impl DomainCaps {
    /// How peers name this domain's regions.
    pub fn addressing(&self) -> Addressing {
        Addressing::from_mr_mode(self.virt_addr(), self.prov_key())
    }
}

impl Domain {
    /// `fi_trywait` on one CQ: whether a thread may now block on its wait descriptor
    /// (`false`: completions are waiting or the provider has progress to make: read the CQ
    /// and try again).
    pub(crate) fn try_wait(&self, cq: *mut sys::FidCq) -> Result<bool, BusError> {
        let mut fids = [cq as *mut sys::Fid];
        // SAFETY: the fabric is live for as long as this domain, and `cq` is a CQ of this
        // domain that the caller keeps open across the call; the array outlives the call.
        let rc = unsafe {
            let ops = &*(*self.fabric).ops;
            ops.trywait.map_or(-sys::FI_EINVAL, |f| {
                f(self.fabric, fids.as_mut_ptr(), fids.len() as c_int)
            })
        };
        match rc {
            0 => Ok(true),
            rc if rc == -sys::FI_EAGAIN => Ok(false),
            rc => self.check("fi_trywait", rc).map(|_| false),
        }
    }

    pub fn open(
        lib: Arc<Library>,
        kind: OfiKind,
        ordering: OfiOrdering,
    ) -> Result<Arc<Domain>, BusError> {
        if kind == OfiKind::Shm {
            // Before this process's first shm endpoint (see `shm_sweep`).
            super::shm_sweep::sweep_once();
        }
        let list = getinfo(&lib, kind, Lookup::Any)?;
        let info = list.dup_first()?;
        drop(list);
        let dom_attr = info.domain_attr();
        if dom_attr.cq_data_size < CQ_DATA_MIN {
            return Err(BusError::Unavailable {
                provider: kind.name(),
                reason: format!(
                    "remote CQ data of {} bytes; WRITE WITH IMM needs {CQ_DATA_MIN}",
                    dom_attr.cq_data_size
                ),
            });
        }
        if dom_attr.threading != sys::FI_THREAD_SAFE {
            return Err(BusError::Unavailable {
                provider: kind.name(),
                reason: "the domain is not FI_THREAD_SAFE".into(),
            });
        }
        let caps = DomainCaps {
            mr_mode: dom_attr.mr_mode,
            inject_size: info.tx_attr().inject_size,
            max_msg_size: info.ep_attr().max_msg_size,
            rx_cq_data: info.first().mode & sys::FI_RX_CQ_DATA != 0,
            tx_msg_order: info.tx_attr().msg_order,
        };
        let mut fabric = ptr::null_mut();
        // SAFETY: fabric_attr comes from fi_getinfo; fabric receives a new object on success.
        let rc = unsafe { (lib.fabric)(info.first().fabric_attr, &mut fabric, ptr::null_mut()) };
        check(&lib, kind, "fi_fabric", rc)?;
        let mut raw = ptr::null_mut();
        // SAFETY: fabric is a live fid_fabric; its ops table has `domain` (mandatory op).
        let rc = unsafe {
            let ops = &*(*fabric).ops;
            match ops.domain {
                Some(f) => f(fabric, info.as_ptr(), &mut raw, ptr::null_mut()),
                None => -sys::FI_EINVAL,
            }
        };
        if rc != 0 {
            // SAFETY: fabric is live and closed once here.
            unsafe { close_fid(fabric as *mut sys::Fid) };
            check(&lib, kind, "fi_domain", rc)?;
        }
        tracing::debug!(provider = kind.name(), domain = %info.domain_name(), ?caps, "ofi domain open");
        Ok(Arc::new(Domain {
            lib,
            kind,
            ordering,
            info,
            caps,
            fabric,
            raw,
        }))
    }

    pub fn addressing(&self) -> Addressing {
        self.caps.addressing()
    }

    pub fn check(&self, call: &'static str, rc: c_int) -> Result<(), BusError> {
        check(&self.lib, self.kind, call, rc)
    }

    /// The error for a non-zero libfabric return code.
    pub fn error(&self, call: &'static str, rc: c_int) -> BusError {
        BusError::Provider {
            provider: self.kind.name(),
            call,
            reason: self.lib.strerror(rc),
        }
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        // SAFETY: every region and endpoint holds an Arc<Domain>, so none is left; each object
        // is closed once, domain before fabric.
        unsafe {
            close_fid(self.raw as *mut sys::Fid);
            close_fid(self.fabric as *mut sys::Fid);
        }
    }
}

/// `fi_close`: calls the object's close op.
///
/// # Safety
/// `fid` must be a live libfabric object, not used afterwards.
pub unsafe fn close_fid(fid: *mut sys::Fid) -> c_int {
    if fid.is_null() {
        return 0;
    }
    // SAFETY: forwarded: fid is live; every fid has an ops table with `close`.
    unsafe {
        match (*(*fid).ops).close {
            Some(close) => {
                let rc = close(fid);
                if rc != 0 {
                    tracing::warn!(rc, "fi_close failed");
                }
                rc
            }
            None => -sys::FI_EINVAL,
        }
    }
}
