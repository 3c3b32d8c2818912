//! One simulated queue pair: its receive queue, completion queue, the send-queue sequencer that
//! releases send-side completions in post order (as verbs does for one send queue), and the
//! reliable operations it has in flight.

use std::collections::VecDeque;

use crate::config::EndpointConfig;
use crate::provider::{Completion, LocalSlice, Op, RemoteSlice, WorkError};

use super::region::SimRegion;
use super::HostId;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpState {
    Ready,
    /// Every queued and future work request completes with `Flushed` (verbs' IBV_QPS_ERR).
    Error,
}

/// What an operation carries while it is in flight. SEND and WRITE payloads are copied at post
/// time: the caller may not touch the source until the completion anyway, so this is faithful.
#[derive(Debug)]
pub(crate) enum FlightKind {
    Send(Vec<u8>),
    Write {
        dst: RemoteSlice,
        data: Vec<u8>,
        imm: Option<u32>,
    },
    Read {
        dst: LocalSlice<SimRegion>,
        src: RemoteSlice,
    },
}

impl FlightKind {
    pub(crate) fn op(&self) -> Op {
        match self {
            FlightKind::Send(_) => Op::Send,
            FlightKind::Write { .. } => Op::Write,
            FlightKind::Read { .. } => Op::Read,
        }
    }

    /// Whether the target must have a posted receive (SEND, WRITE WITH IMM).
    pub(crate) fn consumes_recv(&self) -> bool {
        matches!(
            self,
            FlightKind::Send(_) | FlightKind::Write { imm: Some(_), .. }
        )
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            FlightKind::Send(d) | FlightKind::Write { data: d, .. } => d.len(),
            FlightKind::Read { src, .. } => src.len as usize,
        }
    }
}

/// A send-side work request in flight.
#[derive(Debug)]
pub(crate) struct Flight {
    /// Virtual time (ns) at which it reaches the target.
    pub(crate) at: u64,
    /// Network-wide post order; also its slot in the sender's send-queue sequencer.
    pub(crate) seq: u64,
    pub(crate) wr_id: u64,
    pub(crate) kind: FlightKind,
    pub(crate) rnr_retries: u32,
    /// A leading fragment of a torn WRITE: it places bytes but completes nothing (the last
    /// fragment carries the completion and any error).
    pub(crate) silent: bool,
}

#[derive(Debug)]
struct SqSlot {
    seq: u64,
    done: Option<Completion>,
}

#[derive(Debug)]
pub(crate) struct Qp {
    pub(crate) host: HostId,
    pub(crate) peer: u64,
    pub(crate) state: QpState,
    pub(crate) config: EndpointConfig,
    pub(crate) recvs: VecDeque<(u64, LocalSlice<SimRegion>)>,
    pub(crate) cq: VecDeque<Completion>,
    /// Set when a completion found the CQ full: verbs raises a fatal async event then.
    pub(crate) cq_overrun: bool,
    sq: VecDeque<SqSlot>,
    /// Reliable, ordered operations in flight, `at` non-decreasing: only the head may land.
    pub(crate) ordered: VecDeque<Flight>,
    pub(crate) last_ordered_at: u64,
}

impl Qp {
    pub(crate) fn new(host: HostId, peer: u64, config: EndpointConfig) -> Self {
        Qp {
            host,
            peer,
            state: QpState::Ready,
            config,
            recvs: VecDeque::new(),
            cq: VecDeque::new(),
            cq_overrun: false,
            sq: VecDeque::new(),
            ordered: VecDeque::new(),
            last_ordered_at: 0,
        }
    }

    /// Outstanding send-side work requests (posted, completion not yet generated).
    pub(crate) fn sq_outstanding(&self) -> usize {
        self.sq.len()
    }

    pub(crate) fn push_cq(&mut self, c: Completion) {
        if self.cq.len() >= self.config.cq_size as usize {
            self.cq_overrun = true;
            self.state = QpState::Error;
        } else {
            self.cq.push_back(c);
        }
    }

    /// Takes a send-queue slot for a new work request; the caller checked `send_wr`.
    pub(crate) fn sq_reserve(&mut self, seq: u64) {
        self.sq.push_back(SqSlot { seq, done: None });
    }

    /// Records the outcome of the work request `seq` and releases every finished completion at
    /// the front of the send queue, so send-side completions surface in post order.
    pub(crate) fn sq_complete(&mut self, seq: u64, c: Completion) {
        if let Some(slot) = self.sq.iter_mut().find(|s| s.seq == seq) {
            slot.done = Some(c);
        }
        while self.sq.front().is_some_and(|s| s.done.is_some()) {
            if let Some(done) = self.sq.pop_front().and_then(|s| s.done) {
                self.push_cq(done);
            }
        }
    }

    pub(crate) fn take_recv(&mut self) -> Option<(u64, LocalSlice<SimRegion>)> {
        self.recvs.pop_front()
    }
}

pub(crate) fn completion(wr_id: u64, op: Op, status: Result<(), WorkError>) -> Completion {
    Completion {
        wr_id,
        op,
        status,
        byte_len: 0,
        imm: None,
        covers: 0,
    }
}
