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

use std::collections::{HashMap, VecDeque};
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
use super::note_gate::NoteGate;
use super::piecewise::{PiecewiseWrite, Progress};
use super::region::OfiRegion;
use super::sys::{self, FiAddr, FiContext2};

/// Completion entries read per `fi_cq_read` call.
const POLL_BATCH: usize = 32;
/// Upper bound on bounce receives per endpoint: providers buffer messages that arrive while all
/// are in use (RDM "unexpected messages"), so more would only pin memory.
pub const BOUNCE_MAX: usize = 64;
/// Staging buffers per endpoint for internal sends that cannot be injected.
pub const STAGING_MAX: usize = 32;

/// Bytes of an IMM note's payload: the length of the WRITE it announces (little endian).
pub const IMM_NOTE_LEN: usize = 4;

/// A finished operation or an arrival, as the layer above sees it. `owner` is the tag the
/// operation was posted with (a hub's connection id; 0 for internal sends); `from` is the
/// address-vector entry of an arrival's sender (`FI_ADDR_NOTAVAIL` for an address we never
/// inserted or one the provider does not report).
#[derive(Debug)]
pub enum Event {
    /// An operation we posted finished.
    TxDone {
        wr_id: u64,
        op: Op,
        internal: bool,
        status: Result<(), WorkError>,
        owner: u64,
    },
    /// A SEND arrived in bounce buffer `bounce` (`len` bytes). The buffer stays ours until
    /// `release_bounce`. `note` is set when the SEND carried remote CQ data: it is then the
    /// IMM note of a WRITE WITH IMM (see [`RdmCore::write`]), its payload the WRITE's length.
    Received {
        bounce: u32,
        len: usize,
        from: FiAddr,
        note: Option<u32>,
    },
    /// A receive failed (for example a message longer than the bounce buffer).
    RecvFailed { error: WorkError, from: FiAddr },
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
        owner: u64,
        /// A WRITE whose IMM note to this peer is held until it completes (`NoteGate`).
        holds_note_to: Option<FiAddr>,
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
    owner: u64,
}

impl TxWork {
    /// A caller's operation on `region`, for `owner`.
    fn user(wr_id: u64, op: Op, region: &OfiRegion, owner: u64) -> TxWork {
        TxWork {
            wr_id,
            op,
            internal: false,
            keep: Some(region.clone()),
            staging: None,
            owner,
        }
    }
}

/// An IMM note that found the transmit queue full, sent before anything newer to its peer.
struct PendingNote {
    imm: u32,
    len: u32,
    /// Held until its WRITE's delivery completion (`NoteGate`); nothing to the peer passes it.
    held: bool,
}

/// IMM notes waiting for room in the transmit queue, per peer: a peer whose path is backed
/// up holds back only its own notes (and its own later operations), not other peers'.
/// At most one note per peer waits: a post to a peer with a waiting note meets `Full`.
#[derive(Default)]
struct Notes {
    waiting: HashMap<FiAddr, VecDeque<PendingNote>>,
    /// Peers with waiting notes in the order they are tried (round robin, so a peer whose
    /// sends keep failing with "try again" does not keep the others waiting).
    order: VecDeque<FiAddr>,
    /// Notes the provider refused outright, by peer: that peer's WRITE WITH IMM will never
    /// be announced, so its connection must fail (the hub takes these, `take_note_failures`).
    failed: Vec<(FiAddr, BusError)>,
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
    /// IMM notes waiting for room in the transmit queue or for their WRITE, per peer.
    notes: Notes,
    /// Which WRITEs hold their note until delivered.
    note_gate: NoteGate,
    /// Notes held for their WRITE so far (observability, tests).
    notes_held: u64,
    /// shm: every WRITE goes as `fi_inject_write` pieces of this size and every SEND is
    /// injected, so no operation waits on an answer from its peer (`piecewise.rs`).
    write_piece: Option<usize>,
    /// WRITEs still going out in pieces, at most one per peer (a later post to it meets
    /// `Full`).
    piecewise: HashMap<FiAddr, PiecewiseWrite>,
    /// Where completions are read to, kept between polls: a fresh array per poll was a
    /// memset of POLL_BATCH entries on every turn of a busy-polling loop.
    cq_batch: Vec<sys::FiCqDataEntry>,
    cq_sources: Vec<FiAddr>,
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
            notes: Notes::default(),
            note_gate: NoteGate::for_endpoint(
                domain.kind,
                domain.ordering,
                domain.caps.tx_msg_order,
                domain.caps.inject_size,
            ),
            notes_held: 0,
            write_piece: (domain.kind == OfiKind::Shm
                && domain.caps.inject_size > 0
                && !super::piecewise::writes_answered())
            .then_some(domain.caps.inject_size),
            piecewise: HashMap::new(),
            cq_batch: vec![EMPTY_ENTRY; POLL_BATCH],
            cq_sources: vec![sys::FI_ADDR_NOTAVAIL; POLL_BATCH],
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
    ) -> Result<usize, BusError> {
        let index = self.take_tx_slot()?;
        let ctx = self.slot_ctx(index);
        self.states[index] = SlotState::Tx {
            wr_id: work.wr_id,
            op: work.op,
            internal: work.internal,
            _keep: work.keep,
            staging: work.staging,
            owner: work.owner,
            holds_note_to: None,
        };
        let rc = call(&mut self.ep, ctx);
        if rc != 0 {
            self.states[index] = SlotState::Free;
            self.free_tx.push(index as u32);
            return Err(self.provider_error(call_name, rc));
        }
        Ok(index)
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

    /// SEND of `len` bytes of `region` at `offset` to `to`, for `owner`.
    #[allow(clippy::too_many_arguments)]
    pub fn send_region(
        &mut self,
        owner: u64,
        wr_id: u64,
        region: &OfiRegion,
        offset: usize,
        len: usize,
        to: FiAddr,
        inline_max: usize,
    ) -> Result<(), BusError> {
        self.check_region(region)?;
        self.notes_sent(to)?;
        let buf = region.ptr_at(offset, len)?;
        // Injected sends hold no slot, but their made-up completions wait in `ready`: count
        // them against the send queue so a caller that never polls meets `Full`, not growth.
        // shm: always (see `write_piece`); a full queue is `Full`, never a fi_send.
        let inject_anyway = self.write_piece.is_some() && len <= self.domain().caps.inject_size;
        if inject_anyway && self.ready.len() >= self.free_tx.len() {
            return Err(BusError::Full {
                what: "ofi send work requests (rdma-send-wr)",
            });
        }
        if (inject_anyway || len <= inline_max)
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
                owner,
            });
            return Ok(());
        }
        let desc = region.desc();
        self.post_tx(
            TxWork::user(wr_id, Op::Send, region, owner),
            "fi_send",
            // SAFETY: the region is kept alive by the slot until completion; ctx is the slot's.
            |ep, ctx| unsafe { ep.send(buf, len, desc, to, ctx) },
        )
        .map(|_| ())
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
            // shm: a fi_send would wait on the peer's answer (`write_piece`); "try again".
            if rc != -(sys::FI_EAGAIN as isize) || self.write_piece.is_some() {
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
            owner: 0,
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
        result.map(|_| ())
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

    /// RDMA WRITE of local bytes to remote `addr`/`key`; with `imm`, followed by an IMM note:
    /// a SEND of the length with `imm` as remote CQ data, which the peer's receive path hands
    /// to the connection as the WRITE WITH IMM's arrival. Why not `fi_writedata`:
    /// tcp;ofi_rxm 1.17 reports a remote write's CQ data without its source
    /// (`rxm_handle_remote_write` uses `rxm_cq_write`, not `rxm_cq_write_src`), so an endpoint
    /// shared by many peers could not tell whose it is; a SEND's completion names its sender.
    /// The note goes after the WRITE on a path that keeps sends after writes, or else waits
    /// for the WRITE's delivery completion (`NoteGate`), so the data has landed when it
    /// arrives. Until it has gone, operations to the same peer meet `Full`.
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &mut self,
        owner: u64,
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
        self.notes_sent(to)?;
        let buf = region.ptr_at(offset, len)?;
        if let Some(piece) = self.write_piece {
            // Its completion will wait in `ready`: bounded as injected SENDs are.
            if self.ready.len() >= self.free_tx.len() {
                return Err(BusError::Full {
                    what: "ofi send work requests (rdma-send-wr)",
                });
            }
            let write = PiecewiseWrite::new(wr_id, owner, region, offset, len, addr, key);
            self.piecewise.insert(to, write);
            if let Some(imm) = imm {
                // Its pieces are handled by the peer in order, ahead of the note.
                self.queue_note(to, imm, len, false);
            }
            self.advance_piecewise(to, piece);
            return Ok(());
        }
        let desc = region.desc();
        let index = self.post_tx(
            TxWork::user(wr_id, Op::Write, region, owner),
            "fi_write",
            // SAFETY: the region is kept alive by the slot until completion; ctx is the slot's.
            |ep, ctx| unsafe { ep.write(buf, len, desc, None, to, addr, key, ctx) },
        )?;
        if let Some(imm) = imm {
            let held = self.note_gate.holds(len);
            if held {
                self.notes_held += 1;
                if let SlotState::Tx { holds_note_to, .. } = &mut self.states[index] {
                    *holds_note_to = Some(to);
                }
            }
            self.queue_note(to, imm, len, held);
        }
        Ok(())
    }

    /// Queues the IMM note of a WRITE of `len` bytes to `to` and sends what may go.
    fn queue_note(&mut self, to: FiAddr, imm: u32, len: usize, held: bool) {
        let note = PendingNote {
            imm,
            len: len.min(u32::MAX as usize) as u32,
            held,
        };
        let queue = self.notes.waiting.entry(to).or_default();
        if queue.is_empty() {
            self.notes.order.push_back(to);
        }
        queue.push_back(note);
        self.flush_notes_to(to);
    }

    /// Injects what the peer takes of the piecewise WRITE to `to`; whether none is left.
    /// Finished, its completion is made up (and its note may go); refused, it completes with
    /// the error and its note is dropped with its connection failed (the note would announce
    /// bytes that never landed).
    fn advance_piecewise(&mut self, to: FiAddr, piece: usize) -> bool {
        let Some(mut write) = self.piecewise.remove(&to) else {
            return true;
        };
        let status = match write.advance(&mut self.ep, piece, to) {
            Progress::Waiting => {
                self.piecewise.insert(to, write);
                return false;
            }
            Progress::Done => Ok(()),
            Progress::Failed(rc) => {
                let error = self.provider_error("fi_inject_write", rc);
                let text = error.to_string();
                if self.notes.waiting.remove(&to).is_some() {
                    self.notes.order.retain(|p| *p != to);
                    self.notes.failed.push((to, error));
                }
                let err = rc.saturating_abs().min(i32::MAX as isize) as i32;
                Err(work_error(self.domain().kind, err, 0, Op::Write, text))
            }
        };
        self.ready.push_back(Event::TxDone {
            wr_id: write.wr_id,
            op: Op::Write,
            internal: false,
            status,
            owner: write.owner,
        });
        self.flush_notes_to(to);
        true
    }

    /// One attempt for every peer with a piecewise WRITE going out.
    fn advance_all_piecewise(&mut self) {
        let Some(piece) = self.write_piece else {
            return;
        };
        let peers: Vec<FiAddr> = self.piecewise.keys().copied().collect();
        for peer in peers {
            self.advance_piecewise(peer, piece);
        }
    }

    /// Forgets what is still queued for `peer` before its address-vector entry is removed
    /// (and may be reused for another peer): its waiting IMM notes and made-up completions
    /// of `owner`. Its operations in flight finish later with `owner` and are dropped by
    /// whoever routes them.
    pub fn forget_peer(&mut self, peer: FiAddr, owner: u64) {
        self.piecewise.remove(&peer);
        self.notes.waiting.remove(&peer);
        self.notes.order.retain(|p| *p != peer);
        self.notes.failed.retain(|(p, _)| *p != peer);
        self.ready
            .retain(|e| !matches!(e, Event::TxDone { owner: o, .. } if *o == owner));
    }

    /// Transmit slots free.
    pub fn tx_free(&self) -> usize {
        self.free_tx.len()
    }

    /// Transmit slots in use (operations posted and not yet completed).
    pub fn tx_in_flight(&self) -> usize {
        self.tx_slots - self.free_tx.len()
    }

    /// Operations in flight posted for an owner that `keep` rejects (internal sends, owner 0,
    /// are not counted).
    pub fn tx_in_flight_of(&self, mut keep: impl FnMut(u64) -> bool) -> usize {
        self.states
            .iter()
            .filter(|s| matches!(s, SlotState::Tx { internal: false, owner, .. } if keep(*owner)))
            .count()
    }

    /// `Full` while an IMM note to `to` still waits: nothing to that peer may overtake it (it
    /// must arrive after its WRITE and before anything posted later). Other peers' notes do
    /// not matter.
    fn notes_sent(&mut self, to: FiAddr) -> Result<(), BusError> {
        if let Some(piece) = self.write_piece {
            if !self.advance_piecewise(to, piece) {
                return Err(BusError::Full {
                    what: "ofi transmit queue (a WRITE to this peer still goes out in pieces)",
                });
            }
        }
        if !self.flush_notes_to(to) {
            return Err(BusError::Full {
                what: "ofi transmit queue (an IMM note to this peer waits)",
            });
        }
        Ok(())
    }

    /// Sends `to`'s waiting notes in order until the provider says "try again"; whether none
    /// is left. A note the provider refuses is recorded against its peer (`notes.failed`).
    fn flush_notes_to(&mut self, to: FiAddr) -> bool {
        // Notes go after their WRITE's last piece.
        if self.piecewise.contains_key(&to) {
            return false;
        }
        let Some(queue) = self.notes.waiting.get_mut(&to) else {
            return true;
        };
        let mut refused = None;
        while let Some(note) = queue.front() {
            if note.held {
                return false;
            }
            let rc = self
                .ep
                .inject_data(&note.len.to_le_bytes(), u64::from(note.imm), to);
            if rc == -(sys::FI_EAGAIN as isize) {
                return false;
            }
            queue.pop_front();
            if rc != 0 {
                // What follows the lost note would be misread by the peer: drop it too.
                refused = Some(rc);
                break;
            }
        }
        self.notes.waiting.remove(&to);
        self.notes.order.retain(|p| *p != to);
        if let Some(rc) = refused {
            let error = self.provider_error("fi_injectdata", rc);
            self.notes.failed.push((to, error));
        }
        true
    }

    /// The WRITE holding `peer`'s front note finished: delivered, the note goes (now, or
    /// when the transmit queue has room); failed, the note and what waits behind it are
    /// dropped (they would announce bytes that never landed) and the peer's connection fails.
    fn release_held_note(&mut self, peer: FiAddr, status: &Result<(), WorkError>) {
        let Some(queue) = self.notes.waiting.get_mut(&peer) else {
            // Forgotten with its peer (`forget_peer`).
            return;
        };
        debug_assert!(queue.front().is_some_and(|n| n.held));
        match status {
            Ok(()) => {
                if let Some(note) = queue.front_mut() {
                    note.held = false;
                }
                self.flush_notes_to(peer);
            }
            Err(error) => {
                self.notes.waiting.remove(&peer);
                self.notes.order.retain(|p| *p != peer);
                let error = BusError::Provider {
                    provider: self.domain().kind.name(),
                    call: "fi_write",
                    reason: format!("the WRITE an IMM note announces failed: {error:?}"),
                };
                self.notes.failed.push((peer, error));
            }
        }
    }

    /// One attempt for every peer with waiting notes, in round-robin order.
    fn flush_notes(&mut self) {
        for _ in 0..self.notes.order.len() {
            let Some(peer) = self.notes.order.pop_front() else {
                break;
            };
            if !self.flush_notes_to(peer) {
                self.notes.order.push_back(peer);
            }
        }
    }

    /// Notes the provider refused since the last call, with the peer each was for.
    pub fn take_note_failures(&mut self) -> Vec<(FiAddr, BusError)> {
        std::mem::take(&mut self.notes.failed)
    }

    /// IMM notes that waited for their WRITE's delivery completion (`NoteGate`), so far.
    pub fn notes_held(&self) -> u64 {
        self.notes_held
    }

    /// Peers with IMM notes waiting.
    pub fn peers_with_waiting_notes(&self) -> usize {
        self.notes.order.len()
    }

    /// RDMA READ of remote `addr`/`key` into local bytes.
    #[allow(clippy::too_many_arguments)]
    pub fn read(
        &mut self,
        owner: u64,
        wr_id: u64,
        region: &OfiRegion,
        offset: usize,
        len: usize,
        from: FiAddr,
        addr: u64,
        key: u64,
    ) -> Result<(), BusError> {
        self.check_region(region)?;
        self.notes_sent(from)?;
        let buf = region.ptr_at(offset, len)?;
        let desc = region.desc();
        self.post_tx(
            TxWork::user(wr_id, Op::Read, region, owner),
            "fi_read",
            // SAFETY: the region is kept alive by the slot until completion; ctx is the slot's.
            |ep, ctx| unsafe { ep.read(buf, len, desc, from, addr, key, ctx) },
        )
        .map(|_| ())
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
        self.advance_all_piecewise();
        self.flush_notes();
        // Taken out for the loop (on_completion needs `&mut self`) and always put back.
        let mut batch = std::mem::take(&mut self.cq_batch);
        let mut sources = std::mem::take(&mut self.cq_sources);
        let read = self.ep.cq_read(&mut batch[..want], &mut sources[..want]);
        let mut failure = None;
        if let Ok(CqRead::Entries(k)) = &read {
            // Every entry read is handled even if one fails (they are gone from the CQ);
            // the first failure is reported after.
            for (entry, from) in batch[..*k].iter().zip(&sources[..*k]) {
                match self.on_completion(entry, *from) {
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
        self.cq_sources = sources;
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

    fn on_completion(
        &mut self,
        entry: &sys::FiCqDataEntry,
        from: FiAddr,
    ) -> Result<Option<Event>, BusError> {
        let remote_data = entry.flags & sys::FI_REMOTE_CQ_DATA != 0;
        // A peer's fi_writedata: our peers never send one (IMMs travel as notes, see `write`),
        // and tcp;ofi_rxm does not say whose it is (its source slot is left stale), so it is
        // dropped; on FI_RX_CQ_DATA providers it consumed a bounce receive, given back here.
        if remote_data && entry.flags & sys::FI_REMOTE_WRITE != 0 {
            if let Some(i) = self.slot_of(entry.op_context) {
                if let SlotState::Bounce(b) = self.states[i] {
                    self.post_bounce(b)?;
                }
            }
            tracing::debug!("ofi remote write with CQ data dropped (not from our protocol)");
            return Ok(None);
        }
        let slot = self.slot_of(entry.op_context);
        match slot.map(|i| (i, &self.states[i])) {
            Some((i, SlotState::Tx { .. })) => Ok(Some(self.finish_tx(i, Ok(())))),
            Some((_, SlotState::Bounce(b))) => Ok(Some(Event::Received {
                bounce: *b,
                len: entry.len.min(self.bounce_bytes),
                from,
                note: remote_data.then_some(entry.data as u32),
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
                owner,
                holds_note_to,
                ..
            } => {
                if let Some(s) = staging {
                    self.free_staging.push(s);
                }
                if let Some(peer) = holds_note_to {
                    self.release_held_note(peer, &status);
                }
                Event::TxDone {
                    wr_id,
                    op,
                    internal,
                    status,
                    owner,
                }
            }
            // Only called for Tx slots.
            SlotState::Free | SlotState::Bounce(_) => Event::RecvFailed {
                error: WorkError::Other("internal: slot state".into()),
                from: sys::FI_ADDR_NOTAVAIL,
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
                // The error entry names no source: the receive's sender is unknown.
                Ok(Some(Event::RecvFailed {
                    error,
                    from: sys::FI_ADDR_NOTAVAIL,
                }))
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
