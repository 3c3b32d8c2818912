//! The bookkeeping around one RDM endpoint, shared by connections, listeners and datagram
//! endpoints:
//!
//! - **Operation slots.** Every posted operation owns a slot in a fixed table; the slot's
//!   `fi_context2` is the operation context libfabric hands back, so a completion maps to its
//!   slot by address (checked, never trusted blindly). The slot keeps a clone of every region
//!   the operation names until its completion, as the contract requires. The table is sized by
//!   `send_wr`, so a full table is `BusError::Full` (back-pressure), never growth.
//! - **Bounce receives.** Incoming SENDs land in our own registered bounce buffers, not in the
//!   caller's receive buffers. libfabric providers differ on whether remote CQ data (WRITE WITH
//!   IMM) consumes a posted receive (FI_RX_CQ_DATA mode: verbs-like) or not (tcp, shm, efa);
//!   with bounce buffers both look the same to the layer above, which can then give exact verbs
//!   semantics: each SEND or WRITE WITH IMM consumes the oldest posted receive, in order. The
//!   cost is one copy per SEND, which carries only small control messages here.
//! - **Staging.** Internal messages (handshakes, datagrams) are copied into registered staging
//!   buffers, or sent with `fi_inject` when small enough.
#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::ffi::c_void;
use std::mem::size_of;
use std::ptr;
use std::sync::Arc;

use crate::access::Access;
use crate::error::BusError;
use crate::provider::{Op, Region, WorkError};

use super::domain::Domain;
use super::endpoint::{CqRead, Endpoint};
use super::kind::OfiKind;
use super::region::OfiRegion;
use super::sys::{self, FiAddr, FiContext2};

/// Completion entries read per `fi_cq_read` call.
const POLL_BATCH: usize = 32;
/// Upper bound on bounce receives per endpoint: providers buffer messages that arrive while all
/// are in use (RDM "unexpected messages"), so more would only pin memory.
pub const BOUNCE_MAX: usize = 64;
/// Staging buffers per endpoint for internal sends that cannot be injected.
pub const STAGING_MAX: usize = 32;

/// A finished operation or an arrival, as the layer above sees it.
#[derive(Debug)]
pub enum Event {
    /// An operation we posted finished.
    TxDone {
        wr_id: u64,
        op: Op,
        internal: bool,
        status: Result<(), WorkError>,
    },
    /// A SEND arrived in bounce buffer `bounce` (`len` bytes). The buffer stays ours until
    /// `release_bounce`.
    Received { bounce: u32, len: usize },
    /// A peer's WRITE WITH IMM landed.
    RemoteWriteImm { imm: u32, len: usize },
    /// A receive failed (for example a message longer than the bounce buffer).
    RecvFailed { error: WorkError },
}

/// What an occupied slot is doing.
enum SlotState {
    Free,
    Tx {
        wr_id: u64,
        op: Op,
        internal: bool,
        /// Regions named by the operation, kept alive until its completion.
        _keep: Option<OfiRegion>,
        staging: Option<u32>,
    },
    Bounce(u32),
}

/// What a transmit operation carries into its slot.
struct TxWork {
    wr_id: u64,
    op: Op,
    internal: bool,
    keep: Option<OfiRegion>,
    staging: Option<u32>,
}

impl TxWork {
    /// A caller's operation on `region`.
    fn user(wr_id: u64, op: Op, region: &OfiRegion) -> TxWork {
        TxWork {
            wr_id,
            op,
            internal: false,
            keep: Some(region.clone()),
            staging: None,
        }
    }
}

/// The operation contexts handed to libfabric (one `fi_context2` per slot). The provider may
/// write them at any libfabric call while an operation is outstanding, so Rust never reads,
/// writes or borrows them: the memory is a raw allocation, and only its addresses are used.
/// Freed after the endpoint is closed (field order in `RdmCore`).
struct Contexts {
    base: *mut FiContext2,
    len: usize,
}

impl Contexts {
    fn new(len: usize) -> Contexts {
        let boxed: Box<[FiContext2]> = vec![[ptr::null_mut(); 8]; len].into_boxed_slice();
        Contexts {
            base: Box::into_raw(boxed) as *mut FiContext2,
            len,
        }
    }

    /// The context pointer for slot `index` (< len).
    fn ptr(&self, index: usize) -> *mut c_void {
        debug_assert!(index < self.len);
        self.base.wrapping_add(index) as *mut c_void
    }

    /// The slot a context pointer from a completion belongs to, if any.
    fn index_of(&self, ctx: *mut c_void) -> Option<usize> {
        let offset = (ctx as usize).checked_sub(self.base as usize)?;
        let index = offset / size_of::<FiContext2>();
        (offset % size_of::<FiContext2>() == 0 && index < self.len).then_some(index)
    }
}

impl Drop for Contexts {
    fn drop(&mut self) {
        // SAFETY: base/len came from Box::into_raw of a boxed slice of this length; the endpoint
        // that could use them is closed (it is dropped before this).
        unsafe {
            drop(Box::from_raw(ptr::slice_from_raw_parts_mut(
                self.base, self.len,
            )))
        };
    }
}

/// Sizes of one core.
#[derive(Clone, Copy, Debug)]
pub struct CoreSizes {
    pub tx_slots: usize,
    pub bounce_count: usize,
    pub bounce_bytes: usize,
    pub staging_bytes: usize,
    pub cq_size: usize,
    pub av_count: usize,
}

pub struct RdmCore {
    /// Declared first so it is dropped first: closing the endpoint ends every operation before
    /// the slots and buffers they point at are freed.
    pub ep: Endpoint,
    contexts: Contexts,
    /// What each slot is doing (same indices as `contexts`).
    states: Vec<SlotState>,
    free_tx: Vec<u32>,
    tx_slots: usize,
    bounce: OfiRegion,
    bounce_bytes: usize,
    staging: OfiRegion,
    staging_bytes: usize,
    free_staging: Vec<u32>,
    ready: VecDeque<Event>,
    /// Where completions are read to, kept between polls: a fresh array per poll was a
    /// memset of POLL_BATCH entries on every turn of a busy-polling loop.
    cq_batch: Vec<sys::FiCqDataEntry>,
}

const EMPTY_ENTRY: sys::FiCqDataEntry = sys::FiCqDataEntry {
    op_context: ptr::null_mut(),
    flags: 0,
    len: 0,
    buf: ptr::null_mut(),
    data: 0,
};

// SAFETY: the contexts' memory is owned by this value and touched only by the provider during
// calls made through `&mut self`; the regions are Send + Sync.
unsafe impl Send for RdmCore {}

impl RdmCore {
    pub fn new(ep: Endpoint, sizes: CoreSizes) -> Result<RdmCore, BusError> {
        let domain = ep.domain.clone();
        let total = sizes.tx_slots + sizes.bounce_count;
        let contexts = Contexts::new(total);
        let states = (0..total).map(|_| SlotState::Free).collect();
        let bounce = OfiRegion::register(
            &domain,
            sizes.bounce_count * sizes.bounce_bytes,
            Access::LOCAL_WRITE,
        )?;
        // Staging holds only what this endpoint sends (handshakes, datagrams), so being a SEND
        // source (remotely readable by its random key on tcp;ofi_rxm) exposes nothing the
        // peers do not receive anyway.
        let staging =
            OfiRegion::register(&domain, STAGING_MAX * sizes.staging_bytes, Access::SEND)?;
        let mut core = RdmCore {
            ep,
            contexts,
            states,
            free_tx: (0..sizes.tx_slots as u32).rev().collect(),
            tx_slots: sizes.tx_slots,
            bounce,
            bounce_bytes: sizes.bounce_bytes,
            staging,
            staging_bytes: sizes.staging_bytes,
            free_staging: (0..STAGING_MAX as u32).rev().collect(),
            ready: VecDeque::new(),
            cq_batch: vec![EMPTY_ENTRY; POLL_BATCH],
        };
        for b in 0..sizes.bounce_count as u32 {
            core.post_bounce(b)?;
        }
        Ok(core)
    }

    pub fn domain(&self) -> &Arc<Domain> {
        &self.ep.domain
    }

    pub fn bounce_bytes(&self) -> usize {
        self.bounce_bytes
    }

    fn slot_ctx(&self, index: usize) -> *mut c_void {
        self.contexts.ptr(index)
    }

    /// Maps a context pointer from a completion back to its slot index.
    fn slot_of(&self, ctx: *mut c_void) -> Option<usize> {
        self.contexts.index_of(ctx)
    }

    fn post_bounce(&mut self, b: u32) -> Result<(), BusError> {
        let index = self.tx_slots + b as usize;
        let buf = self
            .bounce
            .ptr_at(b as usize * self.bounce_bytes, self.bounce_bytes)?;
        let desc = self.bounce.desc();
        let ctx = self.slot_ctx(index);
        self.states[index] = SlotState::Bounce(b);
        // SAFETY: the buffer is inside `self.bounce` and the context inside `self.contexts`, both
        // owned by self and dropped after the endpoint (field order); the buffer is not handed
        // to Rust code until its completion is read (`Received`).
        let rc = unsafe { self.ep.recv(buf, self.bounce_bytes, desc, ctx) };
        if rc != 0 {
            self.states[index] = SlotState::Free;
            return Err(self.provider_error("fi_recv", rc));
        }
        Ok(())
    }

    /// Copies the first `len` bytes of bounce buffer `b` into `dst`.
    pub fn bounce_read(&self, b: u32, dst: &mut [u8]) -> Result<(), BusError> {
        self.bounce.read(b as usize * self.bounce_bytes, dst)
    }

    /// Copies `len` bytes of bounce buffer `b` into `region` at `offset`.
    pub fn bounce_copy_to(
        &self,
        b: u32,
        len: usize,
        region: &OfiRegion,
        offset: usize,
    ) -> Result<(), BusError> {
        let dst = region.ptr_at(offset, len)?;
        let src = self.bounce.ptr_at(b as usize * self.bounce_bytes, len)?;
        // SAFETY: both ranges are bounds-checked; the bounce buffer is ours (completed, not
        // reposted) and distinct from the caller's region.
        unsafe { ptr::copy_nonoverlapping(src, dst, len) };
        Ok(())
    }

    /// Gives bounce buffer `b` back to libfabric.
    pub fn release_bounce(&mut self, b: u32) -> Result<(), BusError> {
        self.post_bounce(b)
    }

    fn provider_error(&self, call: &'static str, rc: isize) -> BusError {
        if rc == -(sys::FI_EAGAIN as isize) {
            return BusError::Full {
                what: "ofi transmit queue",
            };
        }
        BusError::Provider {
            provider: self.domain().kind.name(),
            call,
            reason: self.domain().lib.strerror(rc as i32),
        }
    }

    fn take_tx_slot(&mut self) -> Result<usize, BusError> {
        self.free_tx
            .pop()
            .map(|i| i as usize)
            .ok_or(BusError::Full {
                what: "ofi send work requests (rdma-send-wr)",
            })
    }

    /// Posts one operation: `call` receives the slot's context pointer and does the libfabric
    /// call. On failure the slot is returned.
    fn post_tx(
        &mut self,
        work: TxWork,
        call_name: &'static str,
        call: impl FnOnce(&mut Endpoint, *mut c_void) -> isize,
    ) -> Result<(), BusError> {
        let index = self.take_tx_slot()?;
        let ctx = self.slot_ctx(index);
        self.states[index] = SlotState::Tx {
            wr_id: work.wr_id,
            op: work.op,
            internal: work.internal,
            _keep: work.keep,
            staging: work.staging,
        };
        let rc = call(&mut self.ep, ctx);
        if rc != 0 {
            self.states[index] = SlotState::Free;
            self.free_tx.push(index as u32);
            return Err(self.provider_error(call_name, rc));
        }
        Ok(())
    }

    fn check_region(&self, region: &OfiRegion) -> Result<(), BusError> {
        if region.belongs_to(self.domain()) {
            Ok(())
        } else {
            Err(BusError::Invalid {
                what: "region",
                reason: "registered with another ofi provider object".into(),
            })
        }
    }

    /// SEND of `len` bytes of `region` at `offset` to `to`.
    pub fn send_region(
        &mut self,
        wr_id: u64,
        region: &OfiRegion,
        offset: usize,
        len: usize,
        to: FiAddr,
        inline_max: usize,
    ) -> Result<(), BusError> {
        self.check_region(region)?;
        let buf = region.ptr_at(offset, len)?;
        // Injected sends hold no slot, but their made-up completions wait in `ready`: count
        // them against the send queue so a caller that never polls meets `Full`, not growth.
        if len <= inline_max
            && len <= self.domain().caps.inject_size
            && self.ready.len() < self.free_tx.len()
        {
            // SAFETY: bounds-checked above; fi_inject copies the bytes before returning.
            let bytes = unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
            let rc = self.ep.inject(bytes, to);
            if rc != 0 {
                return Err(self.provider_error("fi_inject", rc));
            }
            // fi_inject has no completion; verbs inline sends do, so make one.
            self.ready.push_back(Event::TxDone {
                wr_id,
                op: Op::Send,
                internal: false,
                status: Ok(()),
            });
            return Ok(());
        }
        let desc = region.desc();
        self.post_tx(
            TxWork::user(wr_id, Op::Send, region),
            "fi_send",
            // SAFETY: the region is kept alive by the slot until completion; ctx is the slot's.
            |ep, ctx| unsafe { ep.send(buf, len, desc, to, ctx) },
        )
    }

    /// SEND of internal bytes (handshake, datagram) to `to`, through inject or staging.
    pub fn send_bytes(&mut self, wr_id: u64, bytes: &[u8], to: FiAddr) -> Result<(), BusError> {
        if bytes.len() > self.staging_bytes {
            return Err(BusError::Invalid {
                what: "ofi message",
                reason: format!("{} bytes > {}", bytes.len(), self.staging_bytes),
            });
        }
        if bytes.len() <= self.domain().caps.inject_size {
            let rc = self.ep.inject(bytes, to);
            if rc == 0 {
                return Ok(());
            }
            if rc != -(sys::FI_EAGAIN as isize) {
                return Err(self.provider_error("fi_inject", rc));
            }
        }
        let s = self.free_staging.pop().ok_or(BusError::Full {
            what: "ofi staging buffers",
        })?;
        let offset = s as usize * self.staging_bytes;
        let staging = self.staging.clone();
        if let Err(e) = staging.write(offset, bytes) {
            self.free_staging.push(s);
            return Err(e);
        }
        let buf = staging.ptr_at(offset, bytes.len())?;
        let desc = staging.desc();
        let len = bytes.len();
        let work = TxWork {
            wr_id,
            op: Op::Send,
            internal: true,
            keep: None,
            staging: Some(s),
        };
        let result = self.post_tx(
            work,
            "fi_send",
            // SAFETY: the staging buffer stays reserved (not in free_staging) until the slot's
            // completion; the staging region lives as long as self.
            |ep, ctx| unsafe { ep.send(buf, len, desc, to, ctx) },
        );
        if result.is_err() {
            self.free_staging.push(s);
        }
        result
    }

    /// `send_bytes`, retrying while the provider says "try again" (tcp;ofi_rxm does until its
    /// connection to a new peer is up, which needs progress: hence the polls, whose events go
    /// to `events`), until `deadline`.
    pub fn send_bytes_until(
        &mut self,
        bytes: &[u8],
        to: FiAddr,
        deadline: std::time::Instant,
        events: &mut VecDeque<Event>,
    ) -> Result<(), BusError> {
        loop {
            match self.send_bytes(0, bytes, to) {
                Err(BusError::Full { .. }) if std::time::Instant::now() < deadline => {
                    self.poll(events, POLL_BATCH)?;
                    std::thread::yield_now();
                }
                other => return other,
            }
        }
    }

    /// RDMA WRITE (WITH IMM when `imm` is set) of local bytes to remote `addr`/`key`.
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &mut self,
        wr_id: u64,
        region: &OfiRegion,
        offset: usize,
        len: usize,
        to: FiAddr,
        addr: u64,
        key: u64,
        imm: Option<u32>,
    ) -> Result<(), BusError> {
        self.check_region(region)?;
        let buf = region.ptr_at(offset, len)?;
        let desc = region.desc();
        self.post_tx(
            TxWork::user(wr_id, Op::Write, region),
            if imm.is_some() {
                "fi_writedata"
            } else {
                "fi_write"
            },
            // SAFETY: the region is kept alive by the slot until completion; ctx is the slot's.
            |ep, ctx| unsafe { ep.write(buf, len, desc, imm.map(u64::from), to, addr, key, ctx) },
        )
    }

    /// RDMA READ of remote `addr`/`key` into local bytes.
    #[allow(clippy::too_many_arguments)]
    pub fn read(
        &mut self,
        wr_id: u64,
        region: &OfiRegion,
        offset: usize,
        len: usize,
        from: FiAddr,
        addr: u64,
        key: u64,
    ) -> Result<(), BusError> {
        self.check_region(region)?;
        let buf = region.ptr_at(offset, len)?;
        let desc = region.desc();
        self.post_tx(
            TxWork::user(wr_id, Op::Read, region),
            "fi_read",
            // SAFETY: the region is kept alive by the slot until completion; ctx is the slot's.
            |ep, ctx| unsafe { ep.read(buf, len, desc, from, addr, key, ctx) },
        )
    }

    /// Drives progress and returns up to `max` events (always calls `fi_cq_read`, because tcp
    /// and shm only progress inside libfabric calls).
    pub fn poll(&mut self, out: &mut VecDeque<Event>, max: usize) -> Result<usize, BusError> {
        let mut n = 0;
        while n < max {
            match self.ready.pop_front() {
                Some(e) => {
                    out.push_back(e);
                    n += 1;
                }
                None => break,
            }
        }
        let want = (max - n).clamp(1, POLL_BATCH);
        // Taken out for the loop (on_completion needs `&mut self`) and always put back.
        let mut batch = std::mem::take(&mut self.cq_batch);
        let read = self.ep.cq_read(&mut batch[..want]);
        let mut failure = None;
        if let Ok(CqRead::Entries(k)) = &read {
            // Every entry read is handled even if one fails (they are gone from the CQ);
            // the first failure is reported after.
            for entry in &batch[..*k] {
                match self.on_completion(entry) {
                    Ok(Some(e)) => {
                        out.push_back(e);
                        n += 1;
                    }
                    Ok(None) => {}
                    Err(e) => failure = failure.or(Some(e)),
                }
            }
        }
        self.cq_batch = batch;
        match read? {
            CqRead::Entries(_) => {
                if let Some(e) = failure {
                    return Err(e);
                }
            }
            CqRead::ErrorAvailable => {
                if let Some(e) = self.on_error()? {
                    out.push_back(e);
                    n += 1;
                }
            }
        }
        Ok(n)
    }

    fn on_completion(&mut self, entry: &sys::FiCqDataEntry) -> Result<Option<Event>, BusError> {
        let remote_data = entry.flags & sys::FI_REMOTE_CQ_DATA != 0;
        let slot = self.slot_of(entry.op_context);
        match slot.map(|i| (i, &self.states[i])) {
            Some((i, SlotState::Tx { .. })) => Ok(Some(self.finish_tx(i, Ok(())))),
            Some((_, SlotState::Bounce(b))) => {
                let b = *b;
                if remote_data {
                    // FI_RX_CQ_DATA providers: the IMM consumed one of our bounce receives.
                    self.post_bounce(b)?;
                    Ok(Some(Event::RemoteWriteImm {
                        imm: entry.data as u32,
                        len: entry.len,
                    }))
                } else {
                    Ok(Some(Event::Received {
                        bounce: b,
                        len: entry.len.min(self.bounce_bytes),
                    }))
                }
            }
            _ if remote_data => Ok(Some(Event::RemoteWriteImm {
                imm: entry.data as u32,
                len: entry.len,
            })),
            _ => {
                tracing::warn!(flags = entry.flags, "ofi completion for no known operation");
                Ok(None)
            }
        }
    }

    fn finish_tx(&mut self, index: usize, status: Result<(), WorkError>) -> Event {
        let state = std::mem::replace(&mut self.states[index], SlotState::Free);
        self.free_tx.push(index as u32);
        match state {
            SlotState::Tx {
                wr_id,
                op,
                internal,
                staging,
                ..
            } => {
                if let Some(s) = staging {
                    self.free_staging.push(s);
                }
                Event::TxDone {
                    wr_id,
                    op,
                    internal,
                    status,
                }
            }
            // Only called for Tx slots.
            SlotState::Free | SlotState::Bounce(_) => Event::RecvFailed {
                error: WorkError::Other("internal: slot state".into()),
            },
        }
    }

    fn on_error(&mut self) -> Result<Option<Event>, BusError> {
        let Some((entry, text)) = self.ep.cq_readerr() else {
            return Ok(None);
        };
        let slot = self.slot_of(entry.op_context);
        match slot.map(|i| (i, &self.states[i])) {
            Some((i, SlotState::Tx { op, .. })) => {
                tracing::debug!(err = entry.err, prov_errno = entry.prov_errno, %text, "ofi operation failed");
                let error = work_error(self.domain().kind, entry.err, entry.prov_errno, *op, text);
                Ok(Some(self.finish_tx(i, Err(error))))
            }
            Some((_, SlotState::Bounce(b))) => {
                let b = *b;
                let error = work_error(
                    self.domain().kind,
                    entry.err,
                    entry.prov_errno,
                    Op::Recv,
                    text,
                );
                if error != WorkError::Flushed {
                    self.post_bounce(b)?;
                }
                Ok(Some(Event::RecvFailed { error }))
            }
            _ => {
                tracing::warn!(err = entry.err, %text, "ofi error completion for no known operation");
                Ok(None)
            }
        }
    }
}

/// The provider errno tcp;ofi_rxm 1.17 reports on the initiator when the target rejected a
/// one-sided operation (unknown key or range): the target drops the transport connection
/// (`tcpx_op_write: invalid rma iov received`), which flushes the operation with FI_ECANCELED
/// and this `prov_errno`. A peer that dies gives ENOTCONN (107) instead. Observed, not
/// documented by libfabric: checked by `bus/tests/ofi_two_process.rs`.
const TCP_REJECTED_PROV_ERRNO: i32 = 2;

/// Maps a libfabric error number of a failed operation to the verbs-like class callers act on.
pub fn work_error(kind: OfiKind, err: i32, prov_errno: i32, op: Op, text: String) -> WorkError {
    let err = err.saturating_abs();
    let one_sided = matches!(op, Op::Write | Op::Read);
    match err {
        sys::FI_ECANCELED
            if kind == OfiKind::Tcp && one_sided && prov_errno == TCP_REJECTED_PROV_ERRNO =>
        {
            WorkError::RemoteAccess
        }
        sys::FI_ECANCELED => WorkError::Flushed,
        sys::FI_EACCES | sys::FI_EKEYREJECTED => WorkError::RemoteAccess,
        // A bad key or range on a one-sided operation comes back as EINVAL or a remote I/O
        // error from some providers.
        sys::FI_EINVAL | sys::FI_EREMOTEIO | sys::FI_EIO if one_sided => WorkError::RemoteAccess,
        sys::FI_ETIMEDOUT
        | sys::FI_EHOSTUNREACH
        | sys::FI_ECONNREFUSED
        | sys::FI_ECONNRESET
        | sys::FI_ENOTCONN => WorkError::RetryExceeded,
        _ => WorkError::Other(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_numbers_map_to_work_errors() {
        let t = || "x".to_string();
        let shm = OfiKind::Shm;
        assert_eq!(work_error(shm, -125, 0, Op::Send, t()), WorkError::Flushed);
        assert_eq!(
            work_error(shm, -13, 0, Op::Write, t()),
            WorkError::RemoteAccess
        );
        assert_eq!(
            work_error(shm, 22, 0, Op::Read, t()),
            WorkError::RemoteAccess
        );
        assert_eq!(
            work_error(shm, 22, 0, Op::Send, t()),
            WorkError::Other("x".into())
        );
        assert_eq!(
            work_error(shm, -111, 0, Op::Send, t()),
            WorkError::RetryExceeded
        );
        assert_eq!(
            work_error(shm, -265, 0, Op::Recv, t()),
            WorkError::Other("x".into())
        );
        // tcp: a rejected key flushes with prov_errno ENOENT, a dead peer with ENOTCONN.
        let tcp = OfiKind::Tcp;
        assert_eq!(
            work_error(tcp, 125, 2, Op::Write, t()),
            WorkError::RemoteAccess
        );
        assert_eq!(
            work_error(tcp, 125, 107, Op::Write, t()),
            WorkError::Flushed
        );
        assert_eq!(work_error(tcp, 125, 2, Op::Send, t()), WorkError::Flushed);
    }
}
