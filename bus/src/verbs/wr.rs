//! Work requests: posting with the classic `ibv_post_send`/`ibv_post_recv` (through sideway's
//! loaded symbols) and the table of outstanding requests that maps completions back to the
//! caller's ids and keeps every named region alive until its completion (or the later one that
//! reports it: `covered`).
#![allow(unsafe_code)]

use std::ffi::CStr;

use rdma_mummy_sys::{
    ibv_ah, ibv_post_recv, ibv_post_send, ibv_qp, ibv_recv_wr, ibv_send_flags, ibv_send_wr,
    ibv_sge, ibv_wc, ibv_wc_opcode, ibv_wc_status, ibv_wc_status_str, ibv_wr_opcode,
    imm_data_invalidated_rkey_union_t, rdma_t, ud_t, wr_t,
};

use super::covered::SendOrder;
use super::region::VerbsRegion;
use crate::error::{BusError, Result};
use crate::provider::{Completion, Op, WorkError};

/// One outstanding work request.
struct Slot {
    wr_id: u64,
    op: Op,
    /// A send's place in post order (`SendOrder::posted`); 0 for receives and binds.
    seq: u64,
    /// A memory window's bind (`window.rs`): the connection's own, reported to no caller.
    bind: bool,
    /// Keeps the memory the device may still touch alive (provider.rs contract).
    _hold: VerbsRegion,
}

/// Outstanding requests of one QP, bounded by its send and receive depths: a post beyond them
/// is `BusError::Full` (the QP itself would refuse it with ENOMEM).
pub(crate) struct Outstanding {
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    sends: u32,
    recvs: u32,
    send_max: u32,
    recv_max: u32,
    /// The send requests in post order, for the completions that stand for unsignaled ones.
    send_order: SendOrder,
    /// Reused list of the unsignaled sends one completion releases (no allocation per poll).
    released: Vec<u64>,
}

impl Outstanding {
    pub(crate) fn new(send_max: u32, recv_max: u32) -> Self {
        let n = (send_max + recv_max) as usize;
        Outstanding {
            slots: (0..n).map(|_| None).collect(),
            free: (0..n).rev().collect(),
            sends: 0,
            recvs: 0,
            send_max,
            recv_max,
            send_order: SendOrder::default(),
            released: Vec::with_capacity(super::covered::COVERED_RUN_MAX as usize),
        }
    }

    /// Whether the send request just reserved (`insert`) asks for its own completion: see
    /// [`SendOrder::signal`].
    pub(crate) fn signal(&self, covered: bool) -> bool {
        self.send_order.signal(covered, self.sends, self.send_max)
    }

    /// Records a send request the QP accepted, in post order.
    pub(crate) fn posted_send(&mut self, internal: u64, signaled: bool) {
        let seq = self.send_order.posted(internal, signaled);
        if let Some(slot) = self
            .slots
            .get_mut(internal as usize)
            .and_then(Option::as_mut)
        {
            slot.seq = seq;
        }
    }

    /// Reserves a slot; returns the internal id that goes on the wire as `wr_id`.
    pub(crate) fn insert(&mut self, wr_id: u64, op: Op, hold: VerbsRegion) -> Result<u64> {
        let is_recv = op == Op::Recv;
        if is_recv && self.recvs >= self.recv_max {
            return Err(BusError::Full {
                what: "receive queue",
            });
        }
        if !is_recv && self.sends >= self.send_max {
            return Err(BusError::Full { what: "send queue" });
        }
        let index = self.free.pop().ok_or(BusError::Full {
            what: "work request table",
        })?;
        self.slots[index] = Some(Slot {
            wr_id,
            op,
            seq: 0,
            bind: false,
            _hold: hold,
        });
        if is_recv {
            self.recvs += 1;
        } else {
            self.sends += 1;
        }
        Ok(index as u64)
    }

    /// Reserves a send slot for a memory window's bind, holding its region until completion.
    /// Binds are always signaled and stay out of the post order (`SendOrder`): their
    /// completion releases no unsignaled send, which the next signaled one releases instead.
    pub(crate) fn insert_bind(&mut self, hold: VerbsRegion) -> Result<u64> {
        let internal = self.insert(0, Op::Write, hold)?;
        if let Some(slot) = self.slots[internal as usize].as_mut() {
            slot.bind = true;
        }
        Ok(internal)
    }

    /// Whether a completion's internal id names a bind.
    pub(crate) fn is_bind(&self, internal: u64) -> bool {
        self.slots
            .get(internal as usize)
            .and_then(Option::as_ref)
            .is_some_and(|slot| slot.bind)
    }

    /// Releases a bind's slot; its status.
    pub(crate) fn complete_bind(&mut self, wc: &ibv_wc) -> std::result::Result<(), WorkError> {
        let _ = self.take(wc.wr_id);
        status_of(wc)
    }

    /// Releases a slot whose post failed.
    pub(crate) fn cancel(&mut self, internal: u64) {
        let _ = self.take(internal);
    }

    fn take(&mut self, internal: u64) -> Option<Slot> {
        let index = usize::try_from(internal).ok()?;
        let slot = self.slots.get_mut(index)?.take()?;
        self.free.push(index);
        if slot.op == Op::Recv {
            self.recvs -= 1;
        } else {
            self.sends -= 1;
        }
        Some(slot)
    }

    /// Turns a work completion into the caller's [`Completion`], releasing its slot. `None` for a
    /// completion that names no outstanding request (never expected; logged).
    /// A send's completion also releases the unsignaled sends posted before it (see
    /// `covered`), counted in its `covers`.
    pub(crate) fn complete(&mut self, wc: &ibv_wc) -> Option<Completion> {
        let send_seq = self
            .slots
            .get(wc.wr_id as usize)
            .and_then(Option::as_ref)
            .filter(|slot| slot.op != Op::Recv)
            .map(|slot| slot.seq);
        let mut covers = 0;
        if let Some(seq) = send_seq {
            let mut released = std::mem::take(&mut self.released);
            covers = self.send_order.complete(seq, |id| released.push(id));
            for id in released.drain(..) {
                self.take(id);
            }
            self.released = released;
        }
        let Some(slot) = self.take(wc.wr_id) else {
            tracing::warn!(wr_id = wc.wr_id, "completion for an unknown work request");
            return None;
        };
        let mut completion = completion_of(wc, slot.wr_id, slot.op);
        completion.covers = covers;
        Some(completion)
    }
}

/// The caller's view of a work completion for a request posted as `posted` with id `wr_id`.
pub(crate) fn completion_of(wc: &ibv_wc, wr_id: u64, posted: Op) -> Completion {
    let status = status_of(wc);
    // The opcode is only defined for successful completions; on error report what we posted.
    let with_imm = status.is_ok() && wc.opcode == ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM;
    let op = if with_imm { Op::RecvWriteImm } else { posted };
    let received = matches!(op, Op::Recv | Op::RecvWriteImm) && status.is_ok();
    // Immediate data arrives in network byte order (`__be32`); callers get host order.
    // SAFETY: the union member is a plain u32 either way; it is only read for WITH_IMM.
    let imm =
        with_imm.then(|| u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data }));
    Completion {
        wr_id,
        op,
        status,
        byte_len: if received { wc.byte_len } else { 0 },
        imm,
        covers: 0,
    }
}

/// Maps a completion status to the classes callers act on.
pub(crate) fn status_of(wc: &ibv_wc) -> std::result::Result<(), WorkError> {
    match wc.status {
        ibv_wc_status::IBV_WC_SUCCESS => Ok(()),
        ibv_wc_status::IBV_WC_WR_FLUSH_ERR => Err(WorkError::Flushed),
        ibv_wc_status::IBV_WC_REM_ACCESS_ERR => Err(WorkError::RemoteAccess),
        ibv_wc_status::IBV_WC_RETRY_EXC_ERR | ibv_wc_status::IBV_WC_RNR_RETRY_EXC_ERR => {
            Err(WorkError::RetryExceeded)
        }
        other => Err(WorkError::Other(status_text(other, wc.vendor_err))),
    }
}

fn status_text(status: ibv_wc_status::Type, vendor_err: u32) -> String {
    // SAFETY: ibv_wc_status_str returns a static string (or NULL when libibverbs lacks it).
    let text = unsafe {
        let p = ibv_wc_status_str(status);
        if p.is_null() {
            None
        } else {
            Some(CStr::from_ptr(p).to_string_lossy().into_owned())
        }
    };
    format!(
        "{} (status {status}, vendor error {vendor_err:#x})",
        text.unwrap_or_else(|| "unknown status".to_owned())
    )
}

/// What a send-queue work request does.
pub(crate) enum SendKind {
    Send,
    Write {
        remote_addr: u64,
        rkey: u32,
        imm: Option<u32>,
    },
    Read {
        remote_addr: u64,
        rkey: u32,
    },
    /// A UD send to an address handle.
    Datagram {
        ah: *mut ibv_ah,
        qpn: u32,
        qkey: u32,
    },
}

/// The local buffer of a work request.
pub(crate) struct Sge {
    /// Its address in the MR's I/O virtual address space (what the device uses with the lkey).
    pub(crate) addr: u64,
    /// Its address in this process (what the library copies inline data from).
    pub(crate) ptr: u64,
    pub(crate) len: u32,
    pub(crate) lkey: u32,
}

pub(crate) fn post_error(call: &'static str, rc: i32) -> BusError {
    if rc == libc::ENOMEM {
        // The QP's queue is full even though our table had room (the device may round depths
        // differently): back-pressure, not a failure.
        return BusError::Full { what: "queue pair" };
    }
    BusError::Provider {
        provider: super::PROVIDER,
        call,
        reason: std::io::Error::from_raw_os_error(rc).to_string(),
    }
}

/// Posts one send-queue work request, `signaled` or not (see `covered`).
///
/// # Safety
/// `qp` must be a live QP; `sge` must name memory registered in the QP's PD that stays alive
/// until the completion (the caller holds it in [`Outstanding`]); for `Datagram`, `ah` must be a
/// live address handle of the same PD that outlives the completion.
pub(crate) unsafe fn post_send(
    qp: *mut ibv_qp,
    internal_id: u64,
    kind: SendKind,
    sge: Sge,
    inline: bool,
    signaled: bool,
) -> Result<()> {
    // Inline data is copied by the library from the process's memory; everything else is
    // read by the device through the MR, in its I/O virtual address space.
    let mut sg = ibv_sge {
        addr: if inline { sge.ptr } else { sge.addr },
        length: sge.len,
        lkey: sge.lkey,
    };
    let mut flags = 0;
    if signaled {
        flags |= ibv_send_flags::IBV_SEND_SIGNALED.0;
    }
    if inline {
        flags |= ibv_send_flags::IBV_SEND_INLINE.0;
    }
    let (opcode, imm, wr) = match kind {
        SendKind::Send => (
            ibv_wr_opcode::IBV_WR_SEND,
            0,
            wr_t {
                rdma: rdma_t {
                    remote_addr: 0,
                    rkey: 0,
                },
            },
        ),
        SendKind::Write {
            remote_addr,
            rkey,
            imm,
        } => (
            if imm.is_some() {
                ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM
            } else {
                ibv_wr_opcode::IBV_WR_RDMA_WRITE
            },
            // Immediate data travels in network byte order.
            imm.unwrap_or(0).to_be(),
            wr_t {
                rdma: rdma_t { remote_addr, rkey },
            },
        ),
        SendKind::Read { remote_addr, rkey } => (
            ibv_wr_opcode::IBV_WR_RDMA_READ,
            0,
            wr_t {
                rdma: rdma_t { remote_addr, rkey },
            },
        ),
        SendKind::Datagram { ah, qpn, qkey } => (
            ibv_wr_opcode::IBV_WR_SEND,
            0,
            wr_t {
                ud: ud_t {
                    ah,
                    remote_qpn: qpn,
                    remote_qkey: qkey,
                },
            },
        ),
    };
    // SAFETY: ibv_send_wr is plain data (integers, pointers, unions of those); zero is a valid
    // "unused" value for every field we do not set.
    let mut wr_struct: ibv_send_wr = unsafe { std::mem::zeroed() };
    wr_struct.wr_id = internal_id;
    wr_struct.next = std::ptr::null_mut();
    wr_struct.sg_list = &mut sg;
    wr_struct.num_sge = if sge.len == 0 { 0 } else { 1 };
    wr_struct.opcode = opcode;
    wr_struct.send_flags = flags;
    wr_struct.imm_data_invalidated_rkey_union = imm_data_invalidated_rkey_union_t { imm_data: imm };
    wr_struct.wr = wr;
    let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
    // SAFETY: per this function's contract; the WR and SGE live on this stack frame for the
    // duration of the call (libibverbs copies them; inline data is copied too).
    let rc = unsafe { ibv_post_send(qp, &mut wr_struct, &mut bad) };
    if rc != 0 {
        return Err(post_error("ibv_post_send", rc));
    }
    Ok(())
}

/// Posts one receive.
///
/// # Safety
/// As for [`post_send`]: live QP; `sge` registered in its PD and alive until the completion.
pub(crate) unsafe fn post_recv(qp: *mut ibv_qp, internal_id: u64, sge: Sge) -> Result<()> {
    with_recv_wr(internal_id, sge, |wr| {
        let mut bad: *mut ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: per this function's contract; the WR and SGE outlive the call.
        let rc = unsafe { ibv_post_recv(qp, wr, &mut bad) };
        if rc != 0 {
            return Err(post_error("ibv_post_recv", rc));
        }
        Ok(())
    })
}

/// Builds the one-SGE receive work request both receive paths post (a QP's own queue and an
/// SRQ) and hands it to `post`; the WR and its SGE live on this stack frame for the call.
pub(crate) fn with_recv_wr<R>(
    internal_id: u64,
    sge: Sge,
    post: impl FnOnce(&mut ibv_recv_wr) -> R,
) -> R {
    let mut sg = ibv_sge {
        addr: sge.addr,
        length: sge.len,
        lkey: sge.lkey,
    };
    let mut wr = ibv_recv_wr {
        wr_id: internal_id,
        next: std::ptr::null_mut(),
        sg_list: &mut sg,
        num_sge: 1,
    };
    post(&mut wr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wc(status: ibv_wc_status::Type) -> ibv_wc {
        // SAFETY: ibv_wc is plain data; all-zero is a valid value.
        let mut wc: ibv_wc = unsafe { std::mem::zeroed() };
        wc.status = status;
        wc
    }

    #[test]
    fn write_with_imm_completion_is_in_host_order() {
        // Goal: a received WRITE WITH IMM is reported as RecvWriteImm with the immediate in host
        // order (the device hands it over in network order), its byte count, the receive's id.
        let mut w = wc(ibv_wc_status::IBV_WC_SUCCESS);
        w.opcode = ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM;
        w.byte_len = 300;
        w.imm_data_invalidated_rkey_union = imm_data_invalidated_rkey_union_t {
            imm_data: u32::from_ne_bytes([0x11, 0x22, 0x33, 0x44]),
        };
        let c = completion_of(&w, 7, Op::Recv);
        assert_eq!(c.op, Op::RecvWriteImm);
        assert_eq!(c.imm, Some(0x1122_3344));
        assert_eq!((c.wr_id, c.byte_len), (7, 300));
        // A failed receive keeps the posted op and reports no bytes or imm.
        let mut f = w;
        f.status = ibv_wc_status::IBV_WC_WR_FLUSH_ERR;
        let c = completion_of(&f, 7, Op::Recv);
        assert_eq!(
            (c.op, c.byte_len, c.imm, c.status),
            (Op::Recv, 0, None, Err(WorkError::Flushed))
        );
        // Send-side completions carry no byte count.
        let mut s = wc(ibv_wc_status::IBV_WC_SUCCESS);
        s.opcode = ibv_wc_opcode::IBV_WC_RDMA_WRITE;
        s.byte_len = 99;
        assert_eq!(completion_of(&s, 1, Op::Write).byte_len, 0);
    }

    #[test]
    fn statuses_map_to_the_classes_callers_act_on() {
        // Goal: the statuses the primitives branch on are recognised; the rest carry text.
        assert_eq!(status_of(&wc(ibv_wc_status::IBV_WC_SUCCESS)), Ok(()));
        assert_eq!(
            status_of(&wc(ibv_wc_status::IBV_WC_WR_FLUSH_ERR)),
            Err(WorkError::Flushed)
        );
        assert_eq!(
            status_of(&wc(ibv_wc_status::IBV_WC_REM_ACCESS_ERR)),
            Err(WorkError::RemoteAccess)
        );
        assert_eq!(
            status_of(&wc(ibv_wc_status::IBV_WC_RETRY_EXC_ERR)),
            Err(WorkError::RetryExceeded)
        );
        assert_eq!(
            status_of(&wc(ibv_wc_status::IBV_WC_RNR_RETRY_EXC_ERR)),
            Err(WorkError::RetryExceeded)
        );
        match status_of(&wc(ibv_wc_status::IBV_WC_LOC_PROT_ERR)) {
            Err(WorkError::Other(text)) => assert!(text.contains("status 4"), "{text}"),
            other => panic!("{other:?}"),
        }
    }
}
