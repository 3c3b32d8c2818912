//! One RDM endpoint with its own completion queue and address vector: the unit every
//! connection, listener and datagram endpoint is built from. Thin typed calls through the ops
//! tables; the bookkeeping (contexts, buffers kept alive) is in `rdm.rs`.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::os::fd::RawFd;
use std::ptr;
use std::sync::Arc;

use crate::error::BusError;

use super::domain::{close_fid, Domain};
use super::info::InfoList;
use super::sys::{self, FiAddr};

/// Largest address `fi_getname` may return here (bounded like `OFI_ADDR_MAX`).
const NAME_MAX: usize = crate::addr::OFI_ADDR_MAX;

pub struct Endpoint {
    pub domain: Arc<Domain>,
    ep: *mut sys::FidEp,
    cq: *mut sys::FidCq,
    av: *mut sys::FidAv,
    /// Our `fi_getname` bytes.
    pub name: Vec<u8>,
    /// The CQ's wait descriptor, where the provider gave the CQ one (see [`Endpoint::open`]).
    wait_fd: Option<RawFd>,
}

// SAFETY: objects of a FI_THREAD_SAFE domain; the pointers are owned by this value.
unsafe impl Send for Endpoint {}

/// Whether a thread may block on the endpoint's CQ (see [`Endpoint::arm_wait`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqWait {
    /// The CQ has no wait descriptor (shm; a provider that refused one).
    NoDescriptor,
    /// Completions are waiting, or progress is due: read the CQ first.
    Ready,
    /// Nothing is waiting: the descriptor becomes readable when something arrives.
    Armed(RawFd),
}

/// What `cq_read` found.
pub enum CqRead {
    /// This many entries were filled (0: nothing ready).
    Entries(usize),
    /// An error entry is waiting: read it with `cq_readerr`.
    ErrorAvailable,
}

impl Endpoint {
    /// Opens an endpoint from `info` (which may carry a source address) in `domain`.
    ///
    /// On tcp the CQ asks for a wait descriptor (FI_WAIT_FD), so that an idle poller can block
    /// on it: tcp;ofi_rxm then adds its connections' sockets and connection events to the
    /// descriptor's epoll set (it must be bound before `fi_enable`, as here). It costs
    /// nothing per operation: the provider signals it at most once until a `fi_trywait`.
    /// shm has no such descriptor (its CQ takes FI_WAIT_NONE or YIELD only), nor does a
    /// provider that refuses one: their CQs open without, and their pollers sleep.
    pub fn open(
        domain: &Arc<Domain>,
        info: &InfoList,
        cq_size: usize,
        av_count: usize,
    ) -> Result<Endpoint, BusError> {
        let mut me = Endpoint {
            domain: domain.clone(),
            ep: ptr::null_mut(),
            cq: ptr::null_mut(),
            av: ptr::null_mut(),
            name: Vec::new(),
            wait_fd: None,
        };
        let ask_wait_fd = domain.kind == super::kind::OfiKind::Tcp;
        // SAFETY: the domain is live and its ops table has av_open, cq_open and endpoint; each
        // out-pointer receives a new object owned by `me` (closed in Drop even if a later step
        // fails).
        unsafe {
            let ops = &*(*domain.raw).ops;
            let open_cq = |wait_obj: c_int, cq: &mut *mut sys::FidCq| {
                let mut cq_attr = sys::FiCqAttr {
                    size: cq_size,
                    flags: 0,
                    format: sys::FI_CQ_FORMAT_DATA,
                    wait_obj,
                    signaling_vector: 0,
                    wait_cond: 0,
                    wait_set: ptr::null_mut(),
                };
                ops.cq_open.map_or(-sys::FI_EINVAL, |f| {
                    f(domain.raw, &mut cq_attr, cq, ptr::null_mut())
                })
            };
            let with_fd = ask_wait_fd && {
                let rc = open_cq(sys::FI_WAIT_FD, &mut me.cq);
                if rc != 0 {
                    tracing::debug!(
                        reason = %domain.lib.strerror(rc),
                        "ofi CQ without a wait descriptor: idle pollers will sleep"
                    );
                    me.cq = ptr::null_mut();
                }
                rc == 0
            };
            let rc = if with_fd {
                0
            } else {
                open_cq(sys::FI_WAIT_NONE, &mut me.cq)
            };
            domain.check("fi_cq_open", rc)?;
            let mut av_attr = sys::FiAvAttr {
                type_: sys::FI_AV_TABLE,
                rx_ctx_bits: 0,
                count: av_count,
                ep_per_node: 0,
                name: ptr::null(),
                map_addr: ptr::null_mut(),
                flags: 0,
            };
            let rc = ops.av_open.map_or(-sys::FI_EINVAL, |f| {
                f(domain.raw, &mut av_attr, &mut me.av, ptr::null_mut())
            });
            domain.check("fi_av_open", rc)?;
            let rc = ops.endpoint.map_or(-sys::FI_EINVAL, |f| {
                f(domain.raw, info.as_ptr(), &mut me.ep, ptr::null_mut())
            });
            domain.check("fi_endpoint", rc)?;
            let ep_fid = &mut (*me.ep).fid as *mut sys::Fid;
            let fid_ops = &*(*ep_fid).ops;
            let bind = fid_ops.bind.ok_or_else(|| missing("fi_ep_bind"))?;
            domain.check(
                "fi_ep_bind(cq)",
                bind(
                    ep_fid,
                    me.cq as *mut sys::Fid,
                    sys::FI_TRANSMIT | sys::FI_RECV,
                ),
            )?;
            domain.check("fi_ep_bind(av)", bind(ep_fid, me.av as *mut sys::Fid, 0))?;
            let control = fid_ops.control.ok_or_else(|| missing("fi_enable"))?;
            domain.check(
                "fi_enable",
                control(ep_fid, sys::FI_ENABLE, ptr::null_mut()),
            )?;
            if with_fd {
                me.wait_fd = me.cq_wait_fd();
            }
            let getname = (*(*me.ep).cm)
                .getname
                .ok_or_else(|| missing("fi_getname"))?;
            let mut buf = [0u8; NAME_MAX];
            let mut len = buf.len();
            domain.check(
                "fi_getname",
                getname(ep_fid, buf.as_mut_ptr() as *mut c_void, &mut len),
            )?;
            me.name = buf[..len.min(NAME_MAX)].to_vec();
        }
        Ok(me)
    }

    /// The CQ's wait descriptor (`fi_control(FI_GETWAIT)`), if it has one.
    fn cq_wait_fd(&self) -> Option<RawFd> {
        let mut fd: c_int = -1;
        // SAFETY: cq is live; for a CQ opened with FI_WAIT_FD, FI_GETWAIT writes one int
        // into `fd`, and a CQ without a wait object returns an error without writing.
        let rc = unsafe {
            let cq_fid = &mut (*self.cq).fid as *mut sys::Fid;
            let ops = &*(*cq_fid).ops;
            ops.control.map_or(-sys::FI_EINVAL, |f| {
                f(cq_fid, sys::FI_GETWAIT, (&mut fd as *mut c_int).cast())
            })
        };
        (rc == 0 && fd >= 0).then_some(fd)
    }

    /// The CQ's wait descriptor, if it has one.
    pub fn wait_fd(&self) -> Option<RawFd> {
        self.wait_fd
    }

    /// Prepares to block on the CQ's wait descriptor (`fi_trywait`): `Armed` means nothing
    /// is waiting and the descriptor will become readable when something arrives (a socket
    /// with data, a connection event); `Ready` means read the CQ first.
    pub fn arm_wait(&mut self) -> Result<CqWait, BusError> {
        let Some(fd) = self.wait_fd else {
            return Ok(CqWait::NoDescriptor);
        };
        Ok(if self.domain.try_wait(self.cq)? {
            CqWait::Armed(fd)
        } else {
            CqWait::Ready
        })
    }

    /// Adds a peer's raw address to the AV.
    pub fn av_insert(&mut self, raw: &[u8]) -> Result<FiAddr, BusError> {
        let mut fi_addr: FiAddr = sys::FI_ADDR_UNSPEC;
        // SAFETY: av is live; raw is one address of the provider's format (a wrong one makes
        // the provider return 0 inserted, handled below); fi_addr receives one value.
        let n = unsafe {
            (*(*self.av).ops).insert.map_or(-sys::FI_EINVAL, |f| {
                f(
                    self.av,
                    raw.as_ptr() as *const c_void,
                    1,
                    &mut fi_addr,
                    0,
                    ptr::null_mut(),
                )
            })
        };
        if n == 1 && fi_addr != sys::FI_ADDR_UNSPEC {
            Ok(fi_addr)
        } else {
            Err(BusError::Invalid {
                what: "ofi peer address",
                reason: format!(
                    "fi_av_insert refused it: {}",
                    if n < 0 {
                        self.domain.lib.strerror(n)
                    } else {
                        "not an address of this provider".into()
                    }
                ),
            })
        }
    }

    pub fn av_remove(&mut self, mut fi_addr: FiAddr) {
        // SAFETY: av is live; fi_addr came from av_insert on it.
        let rc = unsafe {
            (*(*self.av).ops)
                .remove
                .map_or(-sys::FI_EINVAL, |f| f(self.av, &mut fi_addr, 1, 0))
        };
        if rc != 0 {
            tracing::debug!(rc, "fi_av_remove failed");
        }
    }

    /// `fi_recv`.
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid and unaliased by Rust references, and `ctx` must stay
    /// valid, until this operation's completion is read from the CQ.
    pub unsafe fn recv(
        &mut self,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        ctx: *mut c_void,
    ) -> isize {
        // SAFETY: forwarded to the caller; ep is live.
        unsafe {
            (*(*self.ep).msg)
                .recv
                .map_or(-sys::FI_EINVAL as isize, |f| {
                    f(
                        self.ep,
                        buf as *mut c_void,
                        len,
                        desc,
                        sys::FI_ADDR_UNSPEC,
                        ctx,
                    )
                })
        }
    }

    /// `fi_send`.
    ///
    /// # Safety
    /// As `recv`, for the source buffer and `ctx`.
    pub unsafe fn send(
        &mut self,
        buf: *const u8,
        len: usize,
        desc: *mut c_void,
        to: FiAddr,
        ctx: *mut c_void,
    ) -> isize {
        // SAFETY: forwarded to the caller; ep is live.
        unsafe {
            (*(*self.ep).msg)
                .send
                .map_or(-sys::FI_EINVAL as isize, |f| {
                    f(self.ep, buf as *const c_void, len, desc, to, ctx)
                })
        }
    }

    /// `fi_inject`: the buffer is copied before return and no completion is generated.
    pub fn inject(&mut self, buf: &[u8], to: FiAddr) -> isize {
        // SAFETY: ep is live; buf is only read during the call.
        unsafe {
            (*(*self.ep).msg)
                .inject
                .map_or(-sys::FI_EINVAL as isize, |f| {
                    f(self.ep, buf.as_ptr() as *const c_void, buf.len(), to)
                })
        }
    }

    /// `fi_injectdata`: `buf` is copied before return; the peer's receive completes with
    /// `data` as remote CQ data. No completion here.
    pub fn inject_data(&mut self, buf: &[u8], data: u64, to: FiAddr) -> isize {
        // SAFETY: ep is live; buf is only read during the call.
        unsafe {
            (*(*self.ep).msg)
                .injectdata
                .map_or(-sys::FI_EINVAL as isize, |f| {
                    f(self.ep, buf.as_ptr() as *const c_void, buf.len(), data, to)
                })
        }
    }

    /// `fi_inject_write`: `buf` is copied before return and no completion is generated.
    pub fn inject_write(&mut self, buf: &[u8], to: FiAddr, addr: u64, key: u64) -> isize {
        // SAFETY: ep is live; buf is only read during the call.
        unsafe {
            (*(*self.ep).rma)
                .inject
                .map_or(-sys::FI_EINVAL as isize, |f| {
                    f(
                        self.ep,
                        buf.as_ptr() as *const c_void,
                        buf.len(),
                        to,
                        addr,
                        key,
                    )
                })
        }
    }

    /// `fi_write`, or `fi_writedata` when `data` is set.
    ///
    /// # Safety
    /// As `send`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn write(
        &mut self,
        buf: *const u8,
        len: usize,
        desc: *mut c_void,
        data: Option<u64>,
        to: FiAddr,
        addr: u64,
        key: u64,
        ctx: *mut c_void,
    ) -> isize {
        // SAFETY: forwarded to the caller; ep is live.
        unsafe {
            let rma = &*(*self.ep).rma;
            match data {
                Some(data) => rma.writedata.map_or(-sys::FI_EINVAL as isize, |f| {
                    f(
                        self.ep,
                        buf as *const c_void,
                        len,
                        desc,
                        data,
                        to,
                        addr,
                        key,
                        ctx,
                    )
                }),
                None => rma.write.map_or(-sys::FI_EINVAL as isize, |f| {
                    f(self.ep, buf as *mut c_void, len, desc, to, addr, key, ctx)
                }),
            }
        }
    }

    /// `fi_read`.
    ///
    /// # Safety
    /// As `recv`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn read(
        &mut self,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        from: FiAddr,
        addr: u64,
        key: u64,
        ctx: *mut c_void,
    ) -> isize {
        // SAFETY: forwarded to the caller; ep is live.
        unsafe {
            (*(*self.ep).rma)
                .read
                .map_or(-sys::FI_EINVAL as isize, |f| {
                    f(self.ep, buf as *mut c_void, len, desc, from, addr, key, ctx)
                })
        }
    }

    /// `fi_cq_readfrom` into `entries`, with each entry's source address in `sources` (same
    /// length; `FI_ADDR_NOTAVAIL` where the provider does not know it). This is also what
    /// drives progress on tcp and shm.
    pub fn cq_read(
        &mut self,
        entries: &mut [sys::FiCqDataEntry],
        sources: &mut [FiAddr],
    ) -> Result<CqRead, BusError> {
        let count = entries.len().min(sources.len());
        if count == 0 {
            return Ok(CqRead::Entries(0));
        }
        sources[..count].fill(sys::FI_ADDR_NOTAVAIL);
        // SAFETY: cq is live and was opened with FI_CQ_FORMAT_DATA, so each entry written is a
        // fi_cq_data_entry; at most `count` entries and `count` sources are written.
        let n = unsafe {
            let ops = &*(*self.cq).ops;
            match (ops.readfrom, ops.read) {
                (Some(f), _) => f(
                    self.cq,
                    entries.as_mut_ptr() as *mut c_void,
                    count,
                    sources.as_mut_ptr(),
                ),
                (None, Some(f)) => f(self.cq, entries.as_mut_ptr() as *mut c_void, count),
                (None, None) => -sys::FI_EINVAL as isize,
            }
        };
        if n >= 0 {
            Ok(CqRead::Entries((n as usize).min(count)))
        } else if n == -(sys::FI_EAGAIN as isize) {
            Ok(CqRead::Entries(0))
        } else if n == -(sys::FI_EAVAIL as isize) {
            Ok(CqRead::ErrorAvailable)
        } else {
            Err(BusError::Provider {
                provider: self.domain.kind.name(),
                call: "fi_cq_readfrom",
                reason: self.domain.lib.strerror(n as i32),
            })
        }
    }

    /// `fi_cq_readerr`: the waiting error entry and the provider's text for it.
    pub fn cq_readerr(&mut self) -> Option<(sys::FiCqErrEntry, String)> {
        // SAFETY: an all-zero fi_cq_err_entry is valid (null pointers, zero sizes), which also
        // tells the provider we supply no err_data buffer.
        let mut entry: sys::FiCqErrEntry = unsafe { std::mem::zeroed() };
        // SAFETY: cq is live; entry is a valid out-buffer.
        let n = unsafe {
            (*(*self.cq).ops)
                .readerr
                .map_or(-sys::FI_EINVAL as isize, |f| f(self.cq, &mut entry, 0))
        };
        if n != 1 {
            return None;
        }
        let mut text = self.domain.lib.strerror(entry.err);
        let mut buf = [0 as c_char; 256];
        // SAFETY: cq is live; err_data is valid until the next CQ read (now); the provider
        // writes at most buf.len() bytes into buf and returns a NUL-terminated string.
        unsafe {
            if let Some(f) = (*(*self.cq).ops).strerror {
                let p = f(
                    self.cq,
                    entry.prov_errno,
                    entry.err_data,
                    buf.as_mut_ptr(),
                    buf.len(),
                );
                if !p.is_null() {
                    let detail = CStr::from_ptr(p).to_string_lossy();
                    if !detail.is_empty() && detail != text {
                        text = format!("{text} ({detail})");
                    }
                }
            }
        }
        Some((entry, text))
    }
}

fn missing(call: &'static str) -> BusError {
    BusError::Provider {
        provider: "ofi",
        call,
        reason: "operation not supported by the provider".into(),
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: each object is live (or null, which close_fid skips) and closed once: the
        // endpoint before the CQ and AV bound to it.
        unsafe {
            close_fid(self.ep as *mut sys::Fid);
            close_fid(self.av as *mut sys::Fid);
            close_fid(self.cq as *mut sys::Fid);
        }
    }
}
