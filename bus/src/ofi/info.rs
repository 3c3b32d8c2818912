//! `fi_info` lists: the hints we ask `fi_getinfo` with, and the owned answers.
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::Arc;

use crate::error::BusError;

use super::kind::OfiKind;
use super::library::Library;
use super::sys;

/// The capabilities every endpoint asks for: messages both ways and one-sided reads and writes
/// both ways. Remote CQ data (WRITE WITH IMM) is not a capability bit in 1.17 but a domain
/// attribute, checked by `cq_data_size` after the answer. `FI_SOURCE`: receive completions
/// name their sender (`fi_cq_readfrom`), which is how a hub endpoint shared by many peers
/// (`hub.rs`) hands each arrival to its connection.
pub const CAPS: u64 = sys::FI_SOURCE
    | sys::FI_MSG
    | sys::FI_RMA
    | sys::FI_SEND
    | sys::FI_RECV
    | sys::FI_READ
    | sys::FI_WRITE
    | sys::FI_REMOTE_READ
    | sys::FI_REMOTE_WRITE;

/// Modes we can honour: per-operation contexts (each operation gets a `fi_context2` in our slot
/// table) and remote CQ data consuming a receive (our receives are bounce buffers, see `rdm.rs`).
const MODES: u64 = sys::FI_CONTEXT | sys::FI_CONTEXT2 | sys::FI_RX_CQ_DATA;

/// Memory registration modes we can honour (see `region.rs`): local descriptors, virtual or
/// offset addressing, registration of allocated memory only, provider-chosen keys.
const MR_MODES: c_int =
    sys::FI_MR_LOCAL | sys::FI_MR_VIRT_ADDR | sys::FI_MR_ALLOCATED | sys::FI_MR_PROV_KEY;

/// An owned `fi_info` list from `fi_getinfo` or `fi_dupinfo`, freed on drop.
pub struct InfoList {
    lib: Arc<Library>,
    head: *mut sys::FiInfo,
}

// SAFETY: the list is plain heap data owned by this value; libfabric keeps no reference to it.
unsafe impl Send for InfoList {}
// SAFETY: only read through &self.
unsafe impl Sync for InfoList {}

impl Drop for InfoList {
    fn drop(&mut self) {
        if !self.head.is_null() {
            // SAFETY: head came from fi_getinfo/fi_dupinfo of this library and is freed once.
            unsafe { (self.lib.freeinfo)(self.head) };
        }
    }
}

impl InfoList {
    /// The first entry (libfabric orders them best first).
    pub fn first(&self) -> &sys::FiInfo {
        // SAFETY: a list is never constructed empty (see `getinfo`).
        unsafe { &*self.head }
    }

    pub fn as_ptr(&self) -> *mut sys::FiInfo {
        self.head
    }

    /// A copy of the first entry alone, to keep after the list is freed.
    pub fn dup_first(&self) -> Result<InfoList, BusError> {
        // SAFETY: head is a valid fi_info; fi_dupinfo copies one entry (not the chain).
        let head = unsafe { (self.lib.dupinfo)(self.head) };
        if head.is_null() {
            return Err(BusError::Provider {
                provider: "ofi",
                call: "fi_dupinfo",
                reason: "out of memory".into(),
            });
        }
        Ok(InfoList {
            lib: self.lib.clone(),
            head,
        })
    }

    /// Sets the default operation flags of the first entry's transmit side (read by
    /// `fi_endpoint`).
    pub fn set_tx_op_flags(&mut self, flags: u64) {
        // SAFETY: tx_attr is always allocated by fi_getinfo/fi_dupinfo; we own the list.
        unsafe { (*self.first().tx_attr).op_flags |= flags };
    }

    /// Asks for no message or completion ordering on either side of the first entry (read by
    /// `fi_endpoint`): `FI_ORDER_NONE` (0) where the provider answered what it can order.
    pub fn clear_ordering(&mut self) {
        // SAFETY: tx_attr and rx_attr are always allocated by fi_getinfo/fi_dupinfo; we own the
        // list.
        unsafe {
            let tx_attr = &mut *self.first().tx_attr;
            tx_attr.msg_order = sys::FI_ORDER_NONE;
            tx_attr.comp_order = sys::FI_ORDER_NONE;
            let rx_attr = &mut *self.first().rx_attr;
            rx_attr.msg_order = sys::FI_ORDER_NONE;
            rx_attr.comp_order = sys::FI_ORDER_NONE;
        }
    }

    /// Sets the transmit and receive queue depths of the first entry (read by `fi_endpoint`),
    /// never above what the provider offered.
    pub fn set_queue_sizes(&mut self, tx: usize, rx: usize) {
        // SAFETY: tx_attr and rx_attr are always allocated by fi_getinfo/fi_dupinfo; we own the
        // list.
        unsafe {
            let tx_attr = &mut *self.first().tx_attr;
            tx_attr.size = tx_attr.size.min(tx.max(1));
            let rx_attr = &mut *self.first().rx_attr;
            rx_attr.size = rx_attr.size.min(rx.max(1));
        }
    }

    /// The raw source address bytes of the first entry, if any.
    pub fn src_addr(&self) -> Option<Vec<u8>> {
        let info = self.first();
        if info.src_addr.is_null() || info.src_addrlen == 0 {
            return None;
        }
        // SAFETY: libfabric guarantees src_addr points at src_addrlen bytes.
        Some(
            unsafe { std::slice::from_raw_parts(info.src_addr as *const u8, info.src_addrlen) }
                .to_vec(),
        )
    }

    /// The raw destination address bytes of the first entry, if any.
    pub fn dest_addr(&self) -> Option<Vec<u8>> {
        let info = self.first();
        if info.dest_addr.is_null() || info.dest_addrlen == 0 {
            return None;
        }
        // SAFETY: libfabric guarantees dest_addr points at dest_addrlen bytes.
        Some(
            unsafe { std::slice::from_raw_parts(info.dest_addr as *const u8, info.dest_addrlen) }
                .to_vec(),
        )
    }

    /// The domain attributes of the first entry.
    pub fn domain_attr(&self) -> &sys::FiDomainAttr {
        // SAFETY: fi_getinfo always fills domain_attr.
        unsafe { &*self.first().domain_attr }
    }

    pub fn tx_attr(&self) -> &sys::FiTxAttr {
        // SAFETY: fi_getinfo always fills tx_attr.
        unsafe { &*self.first().tx_attr }
    }

    pub fn ep_attr(&self) -> &sys::FiEpAttr {
        // SAFETY: fi_getinfo always fills ep_attr.
        unsafe { &*self.first().ep_attr }
    }

    /// The domain's name (`lo`, `eth0`, `shm`, `rdmap0s6-rdm`...).
    pub fn domain_name(&self) -> String {
        let name = self.domain_attr().name;
        if name.is_null() {
            return String::new();
        }
        // SAFETY: a NUL-terminated string owned by the list.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    }
}

/// Where the endpoint should be bound or what it should resolve.
pub enum Lookup<'a> {
    /// Any local address (an ephemeral endpoint).
    Any,
    /// `fi_getinfo(node, service, FI_SOURCE)`: bind to this host address and port.
    Source { node: &'a str, service: &'a str },
    /// `fi_getinfo(node, service, 0)`: resolve a peer's address into `dest_addr`.
    Dest { node: &'a str, service: &'a str },
    /// Bind to these raw source-address bytes (shm names), passed as the hint's `src_addr`.
    SourceRaw(&'a [u8]),
}

/// Calls `fi_getinfo` for `kind` with our hints.
pub fn getinfo(
    lib: &Arc<Library>,
    kind: OfiKind,
    lookup: Lookup<'_>,
) -> Result<InfoList, BusError> {
    // SAFETY: fi_dupinfo(NULL) is fi_allocinfo: a zeroed fi_info with every attr allocated.
    let hints = unsafe { (lib.dupinfo)(ptr::null()) };
    if hints.is_null() {
        return Err(BusError::Provider {
            provider: "ofi",
            call: "fi_allocinfo",
            reason: "out of memory".into(),
        });
    }
    let prov_name = CString::new(kind.libfabric_name()).expect("provider names have no NUL");
    let mut raw_src: Vec<u8> = Vec::new();
    // SAFETY: hints and its attrs were just allocated by libfabric and are ours to fill.
    // prov_name and src_addr borrow Rust memory that outlives the fi_getinfo call; they are
    // reset to NULL before fi_freeinfo so libfabric never frees Rust memory.
    let result = unsafe {
        let h = &mut *hints;
        h.caps = CAPS;
        h.mode = MODES;
        (*h.ep_attr).type_ = sys::FI_EP_RDM;
        let dom = &mut *h.domain_attr;
        dom.mr_mode = MR_MODES;
        dom.threading = sys::FI_THREAD_SAFE;
        (*h.fabric_attr).prov_name = prov_name.as_ptr() as *mut _;
        if let Some(format) = kind.addr_format() {
            h.addr_format = format;
        }
        let mut node_c = None;
        let mut service_c = None;
        let mut flags = 0;
        match lookup {
            Lookup::Any => {}
            Lookup::Source { node, service } | Lookup::Dest { node, service } => {
                node_c = Some(cstring(node)?);
                service_c = Some(cstring(service)?);
                if matches!(lookup, Lookup::Source { .. }) {
                    flags = sys::FI_SOURCE;
                }
            }
            Lookup::SourceRaw(bytes) => {
                raw_src = bytes.to_vec();
                h.src_addr = raw_src.as_mut_ptr() as *mut c_void;
                h.src_addrlen = raw_src.len();
            }
        }
        let mut out = ptr::null_mut();
        let rc = (lib.getinfo)(
            sys::FI_VERSION_1_17,
            node_c.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
            service_c.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
            flags,
            hints,
            &mut out,
        );
        (*h.fabric_attr).prov_name = ptr::null_mut();
        h.src_addr = ptr::null_mut();
        h.src_addrlen = 0;
        (rc, out)
    };
    // SAFETY: hints no longer borrows Rust memory (reset above).
    unsafe { (lib.freeinfo)(hints) };
    drop(raw_src);
    let (rc, out) = result;
    if rc != 0 || out.is_null() {
        return Err(BusError::Unavailable {
            provider: kind.name(),
            reason: format!(
                "fi_getinfo for {} (RDM, MSG+RMA) found nothing: {}",
                kind.libfabric_name(),
                lib.strerror(rc)
            ),
        });
    }
    Ok(InfoList {
        lib: lib.clone(),
        head: out,
    })
}

fn cstring(s: &str) -> Result<CString, BusError> {
    CString::new(s).map_err(|_| BusError::Invalid {
        what: "ofi node/service",
        reason: format!("{s:?} contains NUL"),
    })
}
