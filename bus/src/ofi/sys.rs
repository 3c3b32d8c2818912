//! Raw declarations of the libfabric 1.17 ABI this provider uses (`rdma/fabric.h`, `fi_domain.h`,
//! `fi_endpoint.h`, `fi_cm.h`, `fi_rma.h`, `fi_eq.h`, `fi_errno.h`), written by hand from the
//! headers so the build needs neither the headers nor the library (it is opened at run time, see
//! `library.rs`).
//!
//! Most of the libfabric API (`fi_domain`, `fi_endpoint`, `fi_write`, `fi_cq_read`, `fi_mr_reg`...)
//! is `static inline` in the headers: it calls through the ops tables stored in each object
//! (`fid_*`). Those tables and objects are declared here with the exact 1.17 layout; fields we
//! never call are kept as opaque pointers so offsets stay right. `layout_tests` at the bottom pins
//! every size and offset to the values `layout_probe.c` printed against the installed headers.

use std::ffi::{c_char, c_int, c_void};

/// `FI_VERSION(1, 17)`: the API version we ask for.
pub const FI_VERSION_1_17: u32 = (1 << 16) | 17;

pub type FiAddr = u64;
/// `FI_ADDR_UNSPEC`: receive from anyone.
pub const FI_ADDR_UNSPEC: FiAddr = u64::MAX;
/// `FI_ADDR_NOTAVAIL`: the source of a completion is not known (not in our address vector).
pub const FI_ADDR_NOTAVAIL: FiAddr = u64::MAX;

// Capability and operation flags (fabric.h).
pub const FI_MSG: u64 = 1 << 1;
pub const FI_RMA: u64 = 1 << 2;
pub const FI_READ: u64 = 1 << 8;
pub const FI_WRITE: u64 = 1 << 9;
pub const FI_RECV: u64 = 1 << 10;
pub const FI_SEND: u64 = 1 << 11;
pub const FI_TRANSMIT: u64 = FI_SEND;
pub const FI_REMOTE_READ: u64 = 1 << 12;
pub const FI_REMOTE_WRITE: u64 = 1 << 13;
pub const FI_REMOTE_CQ_DATA: u64 = 1 << 17;
pub const FI_SOURCE: u64 = 1 << 57;
/// `msg_order`/`comp_order`: no ordering asked for.
pub const FI_ORDER_NONE: u64 = 0;
/// `msg_order`: a send is not handled before an earlier write to the same peer.
pub const FI_ORDER_SAW: u64 = 1 << 7;
/// Completion only once the data is placed at the target (and errors there are reported).
pub const FI_DELIVERY_COMPLETE: u64 = 1 << 28;
/// Mode bits: the application hands each operation a `fi_context`/`fi_context2` the provider
/// may use until completion.
pub const FI_CONTEXT: u64 = 1 << 59;
pub const FI_CONTEXT2: u64 = 1 << 52;
/// Mode bit: remote CQ data consumes a posted receive.
pub const FI_RX_CQ_DATA: u64 = 1 << 56;

// Memory registration modes (`mr_mode` bits).
pub const FI_MR_LOCAL: c_int = 1 << 2;
pub const FI_MR_VIRT_ADDR: c_int = 1 << 4;
pub const FI_MR_ALLOCATED: c_int = 1 << 5;
pub const FI_MR_PROV_KEY: c_int = 1 << 6;

// Enums (C `enum` is `int`-sized on the targets libfabric supports).
pub const FI_EP_RDM: c_int = 3;
pub const FI_AV_TABLE: c_int = 2;
pub const FI_CQ_FORMAT_DATA: c_int = 3;
pub const FI_WAIT_NONE: c_int = 0;
/// `FI_WAIT_FD`: the CQ's wait object is a descriptor (`fi_control(FI_GETWAIT)` gives it).
pub const FI_WAIT_FD: c_int = 3;
pub const FI_THREAD_SAFE: c_int = 1;
pub const FI_SOCKADDR_IN: u32 = 2;
pub const FI_ADDR_STR: u32 = 9;
/// `fi_control` command that gives a CQ's wait object (an `int` descriptor for FI_WAIT_FD).
pub const FI_GETWAIT: c_int = 5;
/// `fi_control` command that enables an endpoint (`fi_enable`).
pub const FI_ENABLE: c_int = 6;

// Error numbers (fi_errno.h: the errno values, plus libfabric's own from 256).
pub const FI_EIO: c_int = 5;
pub const FI_EAGAIN: c_int = 11;
pub const FI_EACCES: c_int = 13;
pub const FI_EINVAL: c_int = 22;
pub const FI_ECONNRESET: c_int = 104;
pub const FI_ENOTCONN: c_int = 107;
pub const FI_ETIMEDOUT: c_int = 110;
pub const FI_ECONNREFUSED: c_int = 111;
pub const FI_EHOSTUNREACH: c_int = 113;
pub const FI_EREMOTEIO: c_int = 121;
pub const FI_ECANCELED: c_int = 125;
/// A requested memory-registration key is already in use in the domain.
pub const FI_ENOKEY: c_int = 126;
pub const FI_EKEYREJECTED: c_int = 129;
pub const FI_EAVAIL: c_int = 259;

/// `struct fi_context2`: eight pointers of provider scratch space per operation.
pub type FiContext2 = [*mut c_void; 8];

type Opaque = *const c_void;

#[repr(C)]
pub struct FiTxAttr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub inject_size: usize,
    pub size: usize,
    pub iov_limit: usize,
    pub rma_iov_limit: usize,
    pub tclass: u32,
}

#[repr(C)]
pub struct FiRxAttr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub total_buffered_recv: usize,
    pub size: usize,
    pub iov_limit: usize,
}

#[repr(C)]
pub struct FiEpAttr {
    pub type_: c_int,
    pub protocol: u32,
    pub protocol_version: u32,
    pub max_msg_size: usize,
    pub msg_prefix_size: usize,
    pub max_order_raw_size: usize,
    pub max_order_war_size: usize,
    pub max_order_waw_size: usize,
    pub mem_tag_format: u64,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub auth_key_size: usize,
    pub auth_key: *mut u8,
}

#[repr(C)]
pub struct FiDomainAttr {
    pub domain: *mut FidDomain,
    pub name: *mut c_char,
    pub threading: c_int,
    pub control_progress: c_int,
    pub data_progress: c_int,
    pub resource_mgmt: c_int,
    pub av_type: c_int,
    pub mr_mode: c_int,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
    pub cntr_cnt: usize,
    pub mr_iov_limit: usize,
    pub caps: u64,
    pub mode: u64,
    pub auth_key: *mut u8,
    pub auth_key_size: usize,
    pub max_err_data: usize,
    pub mr_cnt: usize,
    pub tclass: u32,
}

#[repr(C)]
pub struct FiFabricAttr {
    pub fabric: *mut FidFabric,
    pub name: *mut c_char,
    pub prov_name: *mut c_char,
    pub prov_version: u32,
    pub api_version: u32,
}

#[repr(C)]
pub struct FiInfo {
    pub next: *mut FiInfo,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: *mut Fid,
    pub tx_attr: *mut FiTxAttr,
    pub rx_attr: *mut FiRxAttr,
    pub ep_attr: *mut FiEpAttr,
    pub domain_attr: *mut FiDomainAttr,
    pub fabric_attr: *mut FiFabricAttr,
    pub nic: Opaque,
}

#[repr(C)]
pub struct FiOps {
    pub size: usize,
    pub close: Option<unsafe extern "C" fn(fid: *mut Fid) -> c_int>,
    pub bind: Option<unsafe extern "C" fn(fid: *mut Fid, bfid: *mut Fid, flags: u64) -> c_int>,
    pub control:
        Option<unsafe extern "C" fn(fid: *mut Fid, command: c_int, arg: *mut c_void) -> c_int>,
    pub ops_open: Opaque,
    pub tostr: Opaque,
    pub ops_set: Opaque,
}

/// `struct fid`: the header of every libfabric object.
#[repr(C)]
pub struct Fid {
    pub fclass: usize,
    pub context: *mut c_void,
    pub ops: *mut FiOps,
}

#[repr(C)]
pub struct FiOpsFabric {
    pub size: usize,
    pub domain: Option<
        unsafe extern "C" fn(
            fabric: *mut FidFabric,
            info: *mut FiInfo,
            dom: *mut *mut FidDomain,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub passive_ep: Opaque,
    pub eq_open: Opaque,
    pub wait_open: Opaque,
    pub trywait: Option<
        unsafe extern "C" fn(fabric: *mut FidFabric, fids: *mut *mut Fid, count: c_int) -> c_int,
    >,
    pub domain2: Opaque,
}

#[repr(C)]
pub struct FidFabric {
    pub fid: Fid,
    pub ops: *mut FiOpsFabric,
    pub api_version: u32,
}

#[repr(C)]
pub struct FiOpsDomain {
    pub size: usize,
    pub av_open: Option<
        unsafe extern "C" fn(
            domain: *mut FidDomain,
            attr: *mut FiAvAttr,
            av: *mut *mut FidAv,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub cq_open: Option<
        unsafe extern "C" fn(
            domain: *mut FidDomain,
            attr: *mut FiCqAttr,
            cq: *mut *mut FidCq,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub endpoint: Option<
        unsafe extern "C" fn(
            domain: *mut FidDomain,
            info: *mut FiInfo,
            ep: *mut *mut FidEp,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub scalable_ep: Opaque,
    pub cntr_open: Opaque,
    pub poll_open: Opaque,
    pub stx_ctx: Opaque,
    pub srx_ctx: Opaque,
    pub query_atomic: Opaque,
    pub query_collective: Opaque,
    pub endpoint2: Opaque,
}

#[repr(C)]
pub struct FiOpsMr {
    pub size: usize,
    #[allow(clippy::type_complexity)]
    pub reg: Option<
        unsafe extern "C" fn(
            fid: *mut Fid,
            buf: *const c_void,
            len: usize,
            access: u64,
            offset: u64,
            requested_key: u64,
            flags: u64,
            mr: *mut *mut FidMr,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub regv: Opaque,
    pub regattr: Opaque,
}

#[repr(C)]
pub struct FidDomain {
    pub fid: Fid,
    pub ops: *mut FiOpsDomain,
    pub mr: *mut FiOpsMr,
}

#[repr(C)]
pub struct FidMr {
    pub fid: Fid,
    pub mem_desc: *mut c_void,
    pub key: u64,
}

#[repr(C)]
pub struct FiAvAttr {
    pub type_: c_int,
    pub rx_ctx_bits: c_int,
    pub count: usize,
    pub ep_per_node: usize,
    pub name: *const c_char,
    pub map_addr: *mut c_void,
    pub flags: u64,
}

#[repr(C)]
pub struct FiOpsAv {
    pub size: usize,
    pub insert: Option<
        unsafe extern "C" fn(
            av: *mut FidAv,
            addr: *const c_void,
            count: usize,
            fi_addr: *mut FiAddr,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub insertsvc: Opaque,
    pub insertsym: Opaque,
    pub remove: Option<
        unsafe extern "C" fn(
            av: *mut FidAv,
            fi_addr: *mut FiAddr,
            count: usize,
            flags: u64,
        ) -> c_int,
    >,
    pub lookup: Opaque,
    pub straddr: Opaque,
    pub av_set: Opaque,
}

#[repr(C)]
pub struct FidAv {
    pub fid: Fid,
    pub ops: *mut FiOpsAv,
}

#[repr(C)]
pub struct FiCqAttr {
    pub size: usize,
    pub flags: u64,
    pub format: c_int,
    pub wait_obj: c_int,
    pub signaling_vector: c_int,
    pub wait_cond: c_int,
    pub wait_set: *mut c_void,
}

/// `struct fi_cq_data_entry` (`FI_CQ_FORMAT_DATA`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FiCqDataEntry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
}

#[repr(C)]
pub struct FiCqErrEntry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
    pub olen: usize,
    pub err: c_int,
    pub prov_errno: c_int,
    pub err_data: *mut c_void,
    pub err_data_size: usize,
}

#[repr(C)]
pub struct FiOpsCq {
    pub size: usize,
    pub read: Option<unsafe extern "C" fn(cq: *mut FidCq, buf: *mut c_void, count: usize) -> isize>,
    pub readfrom: Option<
        unsafe extern "C" fn(
            cq: *mut FidCq,
            buf: *mut c_void,
            count: usize,
            src_addr: *mut FiAddr,
        ) -> isize,
    >,
    pub readerr:
        Option<unsafe extern "C" fn(cq: *mut FidCq, buf: *mut FiCqErrEntry, flags: u64) -> isize>,
    pub sread: Opaque,
    pub sreadfrom: Opaque,
    pub signal: Opaque,
    pub strerror: Option<
        unsafe extern "C" fn(
            cq: *mut FidCq,
            prov_errno: c_int,
            err_data: *const c_void,
            buf: *mut c_char,
            len: usize,
        ) -> *const c_char,
    >,
}

#[repr(C)]
pub struct FidCq {
    pub fid: Fid,
    pub ops: *mut FiOpsCq,
}

#[repr(C)]
pub struct FiOpsEp {
    pub size: usize,
    pub cancel: Opaque,
    pub getopt: Opaque,
    pub setopt: Opaque,
    pub tx_ctx: Opaque,
    pub rx_ctx: Opaque,
    pub rx_size_left: Opaque,
    pub tx_size_left: Opaque,
}

#[repr(C)]
pub struct FiOpsCm {
    pub size: usize,
    pub setname:
        Option<unsafe extern "C" fn(fid: *mut Fid, addr: *mut c_void, len: usize) -> c_int>,
    pub getname:
        Option<unsafe extern "C" fn(fid: *mut Fid, addr: *mut c_void, len: *mut usize) -> c_int>,
    pub getpeer: Opaque,
    pub connect: Opaque,
    pub listen: Opaque,
    pub accept: Opaque,
    pub reject: Opaque,
    pub shutdown: Opaque,
    pub join: Opaque,
}

#[repr(C)]
pub struct FiOpsMsg {
    pub size: usize,
    pub recv: Option<
        unsafe extern "C" fn(
            ep: *mut FidEp,
            buf: *mut c_void,
            len: usize,
            desc: *mut c_void,
            src_addr: FiAddr,
            context: *mut c_void,
        ) -> isize,
    >,
    pub recvv: Opaque,
    pub recvmsg: Opaque,
    pub send: Option<
        unsafe extern "C" fn(
            ep: *mut FidEp,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            dest_addr: FiAddr,
            context: *mut c_void,
        ) -> isize,
    >,
    pub sendv: Opaque,
    pub sendmsg: Opaque,
    pub inject: Option<
        unsafe extern "C" fn(
            ep: *mut FidEp,
            buf: *const c_void,
            len: usize,
            dest_addr: FiAddr,
        ) -> isize,
    >,
    pub senddata: Opaque,
    pub injectdata: Option<
        unsafe extern "C" fn(
            ep: *mut FidEp,
            buf: *const c_void,
            len: usize,
            data: u64,
            dest_addr: FiAddr,
        ) -> isize,
    >,
}

/// `fi_read`/`fi_write`: (ep, buf, len, desc, peer, remote addr, key, context).
pub type RmaFn = unsafe extern "C" fn(
    ep: *mut FidEp,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    peer: FiAddr,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize;

/// `fi_inject_write`: (ep, buf, len, peer, remote addr, key); no context, no completion.
pub type InjectWriteFn = unsafe extern "C" fn(
    ep: *mut FidEp,
    buf: *const c_void,
    len: usize,
    peer: FiAddr,
    addr: u64,
    key: u64,
) -> isize;

/// `fi_writedata`: (ep, buf, len, desc, data, peer, remote addr, key, context).
pub type WriteDataFn = unsafe extern "C" fn(
    ep: *mut FidEp,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    peer: FiAddr,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize;

#[repr(C)]
pub struct FiOpsRma {
    pub size: usize,
    pub read: Option<RmaFn>,
    pub readv: Opaque,
    pub readmsg: Opaque,
    /// Declared with a mutable buffer to share `RmaFn`; the C prototype takes `const void *`,
    /// which has the same ABI.
    pub write: Option<RmaFn>,
    pub writev: Opaque,
    pub writemsg: Opaque,
    pub inject: Option<InjectWriteFn>,
    pub writedata: Option<WriteDataFn>,
    pub injectdata: Opaque,
}

#[repr(C)]
pub struct FidEp {
    pub fid: Fid,
    pub ops: *mut FiOpsEp,
    pub cm: *mut FiOpsCm,
    pub msg: *mut FiOpsMsg,
    pub rma: *mut FiOpsRma,
    pub tagged: Opaque,
    pub atomic: Opaque,
    pub collective: Opaque,
}

// The exported functions, opened at run time.
pub type FiGetinfoFn = unsafe extern "C" fn(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const FiInfo,
    info: *mut *mut FiInfo,
) -> c_int;
pub type FiFreeinfoFn = unsafe extern "C" fn(info: *mut FiInfo);
pub type FiDupinfoFn = unsafe extern "C" fn(info: *const FiInfo) -> *mut FiInfo;
pub type FiFabricFn = unsafe extern "C" fn(
    attr: *mut FiFabricAttr,
    fabric: *mut *mut FidFabric,
    context: *mut c_void,
) -> c_int;
pub type FiStrerrorFn = unsafe extern "C" fn(errnum: c_int) -> *const c_char;
pub type FiVersionFn = unsafe extern "C" fn() -> u32;

#[cfg(test)]
mod layout_tests {
    //! Goal: every struct above has the size and field offsets of libfabric 1.17 on x86_64, as
    //! printed by `layout_probe.c` compiled with gcc against Debian's libfabric-dev 1.17.0.
    //! A mismatch here means a call through an ops table would jump to the wrong function.
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn info_and_attrs_match_the_c_headers() {
        assert_eq!(size_of::<FiInfo>(), 120);
        assert_eq!(offset_of!(FiInfo, caps), 8);
        assert_eq!(offset_of!(FiInfo, mode), 16);
        assert_eq!(offset_of!(FiInfo, addr_format), 24);
        assert_eq!(offset_of!(FiInfo, src_addrlen), 32);
        assert_eq!(offset_of!(FiInfo, dest_addrlen), 40);
        assert_eq!(offset_of!(FiInfo, src_addr), 48);
        assert_eq!(offset_of!(FiInfo, dest_addr), 56);
        assert_eq!(offset_of!(FiInfo, handle), 64);
        assert_eq!(offset_of!(FiInfo, tx_attr), 72);
        assert_eq!(offset_of!(FiInfo, rx_attr), 80);
        assert_eq!(offset_of!(FiInfo, ep_attr), 88);
        assert_eq!(offset_of!(FiInfo, domain_attr), 96);
        assert_eq!(offset_of!(FiInfo, fabric_attr), 104);
        assert_eq!(offset_of!(FiInfo, nic), 112);

        assert_eq!(size_of::<FiTxAttr>(), 80);
        assert_eq!(offset_of!(FiTxAttr, inject_size), 40);
        assert_eq!(offset_of!(FiTxAttr, size), 48);
        assert_eq!(offset_of!(FiTxAttr, rma_iov_limit), 64);
        assert_eq!(offset_of!(FiTxAttr, tclass), 72);

        assert_eq!(size_of::<FiRxAttr>(), 64);
        assert_eq!(offset_of!(FiRxAttr, total_buffered_recv), 40);
        assert_eq!(offset_of!(FiRxAttr, size), 48);
        assert_eq!(offset_of!(FiRxAttr, iov_limit), 56);

        assert_eq!(size_of::<FiEpAttr>(), 96);
        assert_eq!(offset_of!(FiEpAttr, type_), 0);
        assert_eq!(offset_of!(FiEpAttr, max_msg_size), 16);
        assert_eq!(offset_of!(FiEpAttr, mem_tag_format), 56);
        assert_eq!(offset_of!(FiEpAttr, auth_key), 88);

        assert_eq!(size_of::<FiDomainAttr>(), 192);
        assert_eq!(offset_of!(FiDomainAttr, name), 8);
        assert_eq!(offset_of!(FiDomainAttr, threading), 16);
        assert_eq!(offset_of!(FiDomainAttr, data_progress), 24);
        assert_eq!(offset_of!(FiDomainAttr, av_type), 32);
        assert_eq!(offset_of!(FiDomainAttr, mr_mode), 36);
        assert_eq!(offset_of!(FiDomainAttr, mr_key_size), 40);
        assert_eq!(offset_of!(FiDomainAttr, cq_data_size), 48);
        assert_eq!(offset_of!(FiDomainAttr, mr_iov_limit), 128);
        assert_eq!(offset_of!(FiDomainAttr, caps), 136);
        assert_eq!(offset_of!(FiDomainAttr, auth_key), 152);
        assert_eq!(offset_of!(FiDomainAttr, max_err_data), 168);
        assert_eq!(offset_of!(FiDomainAttr, mr_cnt), 176);
        assert_eq!(offset_of!(FiDomainAttr, tclass), 184);

        assert_eq!(size_of::<FiFabricAttr>(), 32);
        assert_eq!(offset_of!(FiFabricAttr, name), 8);
        assert_eq!(offset_of!(FiFabricAttr, prov_name), 16);
        assert_eq!(offset_of!(FiFabricAttr, prov_version), 24);
        assert_eq!(offset_of!(FiFabricAttr, api_version), 28);
    }

    #[test]
    fn objects_and_ops_tables_match_the_c_headers() {
        assert_eq!(size_of::<FiOps>(), 56);
        assert_eq!(offset_of!(FiOps, close), 8);
        assert_eq!(offset_of!(FiOps, bind), 16);
        assert_eq!(offset_of!(FiOps, control), 24);
        assert_eq!(offset_of!(FiOps, ops_set), 48);
        assert_eq!(size_of::<Fid>(), 24);
        assert_eq!(offset_of!(Fid, context), 8);
        assert_eq!(offset_of!(Fid, ops), 16);

        assert_eq!(size_of::<FiOpsFabric>(), 56);
        assert_eq!(offset_of!(FiOpsFabric, domain), 8);
        assert_eq!(offset_of!(FiOpsFabric, trywait), 40);
        assert_eq!(offset_of!(FiOpsFabric, domain2), 48);
        assert_eq!(size_of::<FidFabric>(), 40);
        assert_eq!(offset_of!(FidFabric, ops), 24);
        assert_eq!(offset_of!(FidFabric, api_version), 32);

        assert_eq!(size_of::<FiOpsDomain>(), 96);
        assert_eq!(offset_of!(FiOpsDomain, av_open), 8);
        assert_eq!(offset_of!(FiOpsDomain, cq_open), 16);
        assert_eq!(offset_of!(FiOpsDomain, endpoint), 24);
        assert_eq!(offset_of!(FiOpsDomain, endpoint2), 88);
        assert_eq!(size_of::<FiOpsMr>(), 32);
        assert_eq!(offset_of!(FiOpsMr, reg), 8);
        assert_eq!(offset_of!(FiOpsMr, regattr), 24);
        assert_eq!(size_of::<FidDomain>(), 40);
        assert_eq!(offset_of!(FidDomain, ops), 24);
        assert_eq!(offset_of!(FidDomain, mr), 32);
        assert_eq!(size_of::<FidMr>(), 40);
        assert_eq!(offset_of!(FidMr, mem_desc), 24);
        assert_eq!(offset_of!(FidMr, key), 32);

        assert_eq!(size_of::<FiAvAttr>(), 48);
        assert_eq!(offset_of!(FiAvAttr, count), 8);
        assert_eq!(offset_of!(FiAvAttr, name), 24);
        assert_eq!(offset_of!(FiAvAttr, flags), 40);
        assert_eq!(size_of::<FiOpsAv>(), 64);
        assert_eq!(offset_of!(FiOpsAv, insert), 8);
        assert_eq!(offset_of!(FiOpsAv, remove), 32);
        assert_eq!(offset_of!(FiOpsAv, lookup), 40);
        assert_eq!(offset_of!(FiOpsAv, av_set), 56);
        assert_eq!(size_of::<FidAv>(), 32);
        assert_eq!(offset_of!(FidAv, ops), 24);

        assert_eq!(size_of::<FiCqAttr>(), 40);
        assert_eq!(offset_of!(FiCqAttr, flags), 8);
        assert_eq!(offset_of!(FiCqAttr, format), 16);
        assert_eq!(offset_of!(FiCqAttr, wait_obj), 20);
        assert_eq!(offset_of!(FiCqAttr, signaling_vector), 24);
        assert_eq!(offset_of!(FiCqAttr, wait_cond), 28);
        assert_eq!(offset_of!(FiCqAttr, wait_set), 32);
        assert_eq!(size_of::<FiCqDataEntry>(), 40);
        assert_eq!(offset_of!(FiCqDataEntry, flags), 8);
        assert_eq!(offset_of!(FiCqDataEntry, len), 16);
        assert_eq!(offset_of!(FiCqDataEntry, buf), 24);
        assert_eq!(offset_of!(FiCqDataEntry, data), 32);
        assert_eq!(size_of::<FiCqErrEntry>(), 80);
        assert_eq!(offset_of!(FiCqErrEntry, tag), 40);
        assert_eq!(offset_of!(FiCqErrEntry, olen), 48);
        assert_eq!(offset_of!(FiCqErrEntry, err), 56);
        assert_eq!(offset_of!(FiCqErrEntry, prov_errno), 60);
        assert_eq!(offset_of!(FiCqErrEntry, err_data), 64);
        assert_eq!(offset_of!(FiCqErrEntry, err_data_size), 72);
        assert_eq!(size_of::<FiOpsCq>(), 64);
        assert_eq!(offset_of!(FiOpsCq, read), 8);
        assert_eq!(offset_of!(FiOpsCq, readerr), 24);
        assert_eq!(offset_of!(FiOpsCq, sread), 32);
        assert_eq!(offset_of!(FiOpsCq, strerror), 56);
        assert_eq!(size_of::<FidCq>(), 32);
        assert_eq!(offset_of!(FidCq, ops), 24);

        assert_eq!(size_of::<FiOpsEp>(), 64);
        assert_eq!(offset_of!(FiOpsEp, cancel), 8);
        assert_eq!(offset_of!(FiOpsEp, tx_size_left), 56);
        assert_eq!(size_of::<FiOpsCm>(), 80);
        assert_eq!(offset_of!(FiOpsCm, setname), 8);
        assert_eq!(offset_of!(FiOpsCm, getname), 16);
        assert_eq!(offset_of!(FiOpsCm, join), 72);
        assert_eq!(size_of::<FiOpsMsg>(), 80);
        assert_eq!(offset_of!(FiOpsMsg, recv), 8);
        assert_eq!(offset_of!(FiOpsMsg, send), 32);
        assert_eq!(offset_of!(FiOpsMsg, inject), 56);
        assert_eq!(offset_of!(FiOpsMsg, senddata), 64);
        assert_eq!(offset_of!(FiOpsMsg, injectdata), 72);
        assert_eq!(size_of::<FiOpsRma>(), 80);
        assert_eq!(offset_of!(FiOpsRma, read), 8);
        assert_eq!(offset_of!(FiOpsRma, write), 32);
        assert_eq!(offset_of!(FiOpsRma, inject), 56);
        assert_eq!(offset_of!(FiOpsRma, writedata), 64);
        assert_eq!(offset_of!(FiOpsRma, injectdata), 72);
        assert_eq!(size_of::<FidEp>(), 80);
        assert_eq!(offset_of!(FidEp, ops), 24);
        assert_eq!(offset_of!(FidEp, cm), 32);
        assert_eq!(offset_of!(FidEp, msg), 40);
        assert_eq!(offset_of!(FidEp, rma), 48);
        assert_eq!(offset_of!(FidEp, collective), 72);
    }

    #[test]
    fn version_and_error_numbers_match_the_c_headers() {
        assert_eq!(FI_VERSION_1_17, 65553);
        assert_eq!((FI_SOCKADDR_IN, FI_ADDR_STR), (2, 9));
        assert_eq!(
            [
                FI_EAVAIL,
                FI_ECANCELED,
                FI_EACCES,
                FI_EKEYREJECTED,
                FI_EAGAIN,
                FI_ENOKEY
            ],
            [259, 125, 13, 129, 11, 126]
        );
    }
}
