//! A pooled connection's receives (see `receive_pool.rs`): the receives its Stream posts are
//! kept here, not on the device, and each message that arrives through the shared pool is
//! matched to the oldest of them, as a receive queue of its own would have matched it (an RC
//! QP delivers in order). Pure bookkeeping, no FFI, so it is unit-tested.
//!
//! A message that arrives before its receive was posted waits here (its bytes copied out, so
//! the pool's buffer goes back to the pool at once): on a queue of its own it would have met
//! an RNR NAK and been retried. Both lists are bounded by the connection's receive depth; a
//! peer with more messages in flight than that breaks the protocol (`BusError::Protocol`).

use std::collections::VecDeque;

use crate::error::{BusError, Result};
use crate::provider::{Completion, Op, WorkError};

/// Bytes of one pooled receive: a Stream's control message (`stream::control`). A longer
/// SEND fails on the device with a length error and breaks only its own connection.
pub(crate) const POOL_SLOT_LEN: usize = 32;

/// A message that came in through the pool, with its bytes (for a SEND).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Arrival {
    pub(crate) op: Op,
    pub(crate) status: std::result::Result<(), WorkError>,
    pub(crate) byte_len: u32,
    pub(crate) imm: Option<u32>,
    pub(crate) bytes: [u8; POOL_SLOT_LEN],
}

/// A receive the connection's user posted: its id and where the message's bytes go.
pub(crate) struct Posted<D> {
    pub(crate) wr_id: u64,
    pub(crate) dst: D,
    pub(crate) len: usize,
}

/// A posted receive and the message it takes.
pub(crate) type Matched<D> = (Posted<D>, Arrival);

/// The posted receives and early messages of one pooled connection.
pub(crate) struct PooledRecvs<D> {
    posted: VecDeque<Posted<D>>,
    arrived: VecDeque<Arrival>,
    max: usize,
}

impl<D> PooledRecvs<D> {
    /// At most `max` (the connection's receive depth) of each.
    pub(crate) fn new(max: usize) -> Self {
        assert!(max > 0, "a pooled connection needs a receive depth");
        PooledRecvs {
            posted: VecDeque::new(),
            arrived: VecDeque::new(),
            max,
        }
    }

    /// Posts a receive; the message waiting for it, if any, is matched at once.
    pub(crate) fn post(&mut self, posted: Posted<D>) -> Result<Option<Matched<D>>> {
        if let Some(arrival) = self.arrived.pop_front() {
            debug_assert!(
                self.posted.is_empty(),
                "messages wait only with no receive posted"
            );
            return Ok(Some((posted, arrival)));
        }
        if self.posted.len() >= self.max {
            return Err(BusError::Full {
                what: "receive queue",
            });
        }
        self.posted.push_back(posted);
        Ok(None)
    }

    /// A message came in: matched to the oldest posted receive, or kept until one is posted.
    pub(crate) fn arrive(&mut self, arrival: Arrival) -> Result<Option<Matched<D>>> {
        if let Some(posted) = self.posted.pop_front() {
            return Ok(Some((posted, arrival)));
        }
        if self.arrived.len() >= self.max {
            return Err(BusError::Protocol(format!(
                "the peer has more than {} messages in flight, more than its receives",
                self.max
            )));
        }
        self.arrived.push_back(arrival);
        Ok(None)
    }

    /// Receives posted and not yet matched.
    #[cfg(test)]
    fn posted(&self) -> usize {
        self.posted.len()
    }

    /// Messages waiting for a receive.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.arrived.len()
    }

    /// Once the connection is in error: the oldest posted receive, reported flushed (a queue
    /// of its own would flush every posted receive).
    pub(crate) fn flush_one(&mut self) -> Option<Completion> {
        let posted = self.posted.pop_front()?;
        Some(Completion {
            wr_id: posted.wr_id,
            op: Op::Recv,
            status: Err(WorkError::Flushed),
            byte_len: 0,
            imm: None,
            covers: 0,
        })
    }
}

/// The completion a matched receive reports, and the bytes to copy into it (none for a WRITE
/// WITH IMM's notice or a failed message). A SEND longer than the posted receive is reported
/// as the device reports it: failed, with no bytes.
pub(crate) fn completion_of<D>(posted: &Posted<D>, arrival: &Arrival) -> (Completion, usize) {
    let mut completion = Completion {
        wr_id: posted.wr_id,
        op: arrival.op,
        status: arrival.status.clone(),
        byte_len: arrival.byte_len,
        imm: arrival.imm,
        covers: 0,
    };
    if arrival.op != Op::Recv || arrival.status.is_err() {
        return (completion, 0);
    }
    let len = arrival.byte_len as usize;
    if len > posted.len || len > POOL_SLOT_LEN {
        completion.status = Err(WorkError::Other(format!(
            "local length error: a {len}-byte message for a {}-byte receive",
            posted.len
        )));
        completion.byte_len = 0;
        return (completion, 0);
    }
    (completion, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(byte: u8, len: u32) -> Arrival {
        Arrival {
            op: Op::Recv,
            status: Ok(()),
            byte_len: len,
            imm: None,
            bytes: [byte; POOL_SLOT_LEN],
        }
    }

    fn posted(wr_id: u64) -> Posted<()> {
        Posted {
            wr_id,
            dst: (),
            len: POOL_SLOT_LEN,
        }
    }

    #[test]
    fn messages_take_posted_receives_in_order_and_early_ones_wait() {
        // Goal: as on a receive queue of its own, the n-th message takes the n-th posted
        // receive; a message with no receive posted waits and takes the next one posted.
        let mut r = PooledRecvs::new(4);
        assert!(r.post(posted(10)).unwrap().is_none());
        assert!(r.post(posted(11)).unwrap().is_none());
        let (p, a) = r.arrive(send(1, 32)).unwrap().unwrap();
        assert_eq!((p.wr_id, a.bytes[0]), (10, 1));
        let (p, a) = r.arrive(send(2, 32)).unwrap().unwrap();
        assert_eq!((p.wr_id, a.bytes[0]), (11, 2));
        assert!(r.arrive(send(3, 32)).unwrap().is_none());
        assert!(r.arrive(send(4, 32)).unwrap().is_none());
        assert_eq!((r.posted(), r.waiting()), (0, 2));
        let (p, a) = r.post(posted(12)).unwrap().unwrap();
        assert_eq!((p.wr_id, a.bytes[0]), (12, 3));
        let (p, a) = r.post(posted(13)).unwrap().unwrap();
        assert_eq!((p.wr_id, a.bytes[0]), (13, 4));
        assert_eq!((r.posted(), r.waiting()), (0, 0));
    }

    #[test]
    fn both_lists_are_bounded_by_the_receive_depth() {
        // Goal: a user cannot post past the depth (Full, as the device would refuse), and a
        // peer cannot park more messages than the depth (Protocol: it broke the credit).
        let mut r = PooledRecvs::new(2);
        r.post(posted(1)).unwrap();
        r.post(posted(2)).unwrap();
        assert!(matches!(r.post(posted(3)), Err(BusError::Full { .. })));
        let mut r: PooledRecvs<()> = PooledRecvs::new(2);
        r.arrive(send(0, 1)).unwrap();
        r.arrive(send(0, 1)).unwrap();
        assert!(matches!(r.arrive(send(0, 1)), Err(BusError::Protocol(_))));
        assert_eq!(r.waiting(), 2);
    }

    #[test]
    fn completions_carry_the_message_or_its_failure() {
        // Goal: a SEND reports its length and asks for its bytes to be copied; a WRITE WITH
        // IMM's notice reports its count and imm with nothing to copy; a SEND longer than the
        // posted receive fails with no bytes; a failed arrival stays failed.
        let p = posted(7);
        let (c, copy) = completion_of(&p, &send(9, 20));
        assert_eq!((c.wr_id, c.op, c.byte_len, copy), (7, Op::Recv, 20, 20));
        assert_eq!(c.status, Ok(()));
        let notice = Arrival {
            op: Op::RecvWriteImm,
            status: Ok(()),
            byte_len: 4000,
            imm: Some(4000),
            bytes: [0; POOL_SLOT_LEN],
        };
        let (c, copy) = completion_of(&p, &notice);
        assert_eq!(
            (c.op, c.byte_len, c.imm, copy),
            (Op::RecvWriteImm, 4000, Some(4000), 0)
        );
        let short = Posted {
            wr_id: 8,
            dst: (),
            len: 16,
        };
        let (c, copy) = completion_of(&short, &send(1, 32));
        assert!(matches!(c.status, Err(WorkError::Other(_))), "{c:?}");
        assert_eq!((c.byte_len, copy), (0, 0));
        let mut failed = send(1, 32);
        failed.status = Err(WorkError::Flushed);
        let (c, copy) = completion_of(&p, &failed);
        assert_eq!((c.status, copy), (Err(WorkError::Flushed), 0));
    }

    #[test]
    fn an_errored_connection_flushes_its_posted_receives() {
        // Goal: each posted receive is reported once as flushed, oldest first, then none.
        let mut r = PooledRecvs::new(3);
        r.post(posted(5)).unwrap();
        r.post(posted(6)).unwrap();
        let ids: Vec<u64> = std::iter::from_fn(|| r.flush_one())
            .map(|c| c.wr_id)
            .collect();
        assert_eq!(ids, [5, 6]);
        assert!(r.flush_one().is_none());
    }
}
