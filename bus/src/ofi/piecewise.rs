//! WRITEs moved in inject-sized pieces (ofi:shm), so that no operation waits on its peer.
//!
//! Why: shm 1.17 finishes an operation larger than its inject size (4 KiB) only once the
//! receiving peer has answered it (CMA copy or SAR buffers drained). The sender keeps one
//! response queue per endpoint, for all its peers, and `smr_progress_resp` handles it in order
//! and stops at the first entry not answered yet. A peer that dies with such an operation to it
//! unanswered (SAR buffers filled, status SAR_READY for ever) holds every later one of the
//! endpoint, to every peer, behind it: on a hub shared by many clients, one killed mid-stream
//! stalled the others (seen in the node's region: response queue head at SAR_READY, a new
//! client's WRITE behind it, `fabric::a_client_killed_mid_stream_over_ofi_shm_...`). The
//! receiving side has the same trap: a SAR into the node's region takes SAR buffers, a command
//! slot and a SAR count that only the sender gives back, which a dead sender never does.
//!
//! Operations of at most the inject size are finished when posted: the data is copied into
//! the peer's inject buffers and the peer's command queue, handled in order, keeps it ahead of
//! what follows. So on shm a WRITE larger than the inject size goes as `fi_inject_write` pieces,
//! in order, as many as the peer's command queue takes now and the rest on later polls
//! (`RdmCore`). Until its last piece has gone nothing else to that peer is posted (`Full`), so
//! its IMM note and later operations stay behind its data; its completion is made up then, as
//! for injected SENDs. The cost: one more copy (through the peer's inject buffers), and at most
//! the peer's command queue (64 entries of 4 KiB) in flight to it.
//!
//! A probe that must learn whether each of its WRITEs was accepted (the rogue of the attacker
//! tests: a wrong key is never answered, an injected piece "completes" either way) turns this
//! off for the endpoints it opens with [`answer_writes`]; a hub shared by many peers must not.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use super::endpoint::Endpoint;
use super::region::OfiRegion;
use super::sys::{self, FiAddr};

/// Set by [`answer_writes`].
static ANSWERED_WRITES: AtomicBool = AtomicBool::new(false);

/// Endpoints opened from now on in this process post WRITEs and SENDs as single operations
/// that complete only once the peer answered them (shm: delivery complete), not in pieces:
/// for probes that must tell an accepted WRITE from a refused one. Never for a node.
pub fn answer_writes() {
    ANSWERED_WRITES.store(true, Relaxed);
}

/// Whether [`answer_writes`] was called.
pub fn writes_answered() -> bool {
    ANSWERED_WRITES.load(Relaxed)
}

/// A WRITE being injected piece by piece.
pub struct PiecewiseWrite {
    pub wr_id: u64,
    pub owner: u64,
    /// The source, kept alive until the last piece has been copied.
    region: OfiRegion,
    offset: usize,
    len: usize,
    /// Bytes injected so far.
    sent: usize,
    addr: u64,
    key: u64,
}

/// Where a piecewise WRITE stands after an attempt.
pub enum Progress {
    /// Every piece has gone.
    Done,
    /// The provider said "try again" (the peer's command queue is full).
    Waiting,
    /// The provider refused a piece (its return code).
    Failed(isize),
}

impl PiecewiseWrite {
    /// `len` bytes of `region` at `offset` to remote `addr`/`key`; nothing posted yet.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        wr_id: u64,
        owner: u64,
        region: &OfiRegion,
        offset: usize,
        len: usize,
        addr: u64,
        key: u64,
    ) -> PiecewiseWrite {
        PiecewiseWrite {
            wr_id,
            owner,
            region: region.clone(),
            offset,
            len,
            sent: 0,
            addr,
            key,
        }
    }

    /// Injects pieces of at most `piece` bytes to `to`, in order, until all have gone or the
    /// provider says "try again".
    pub fn advance(&mut self, ep: &mut Endpoint, piece: usize, to: FiAddr) -> Progress {
        while self.sent < self.len {
            let n = piece.min(self.len - self.sent);
            let Ok(ptr) = self.region.ptr_at(self.offset + self.sent, n) else {
                return Progress::Failed(-(sys::FI_EINVAL as isize));
            };
            // SAFETY: `ptr_at` checked the range; the region is kept alive by `self`, and
            // fi_inject_write copies the bytes before returning.
            let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, n) };
            let rc = ep.inject_write(bytes, to, self.addr + self.sent as u64, self.key);
            if rc == -(sys::FI_EAGAIN as isize) {
                return Progress::Waiting;
            }
            if rc != 0 {
                return Progress::Failed(rc);
            }
            self.sent += n;
        }
        Progress::Done
    }
}
