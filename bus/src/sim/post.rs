//! Posting work and reaping completions: the checks verbs makes at post time (queue depth,
//! local bounds and rights), then the operation is scheduled with a drawn delay.

use crate::access::Access;
use crate::addr::EndpointAddr;
use crate::error::{BusError, Result};
use crate::provider::{Completion, DatagramMeta, LocalSlice, Op, Region, RemoteSlice, WorkError};
use rand::Rng;

use super::network::{DatagramSlot, Network, Unordered};
use super::qp::{completion, Flight, FlightKind, Qp, QpState};
use super::region::SimRegion;
use super::HostId;

/// Largest datagram payload of the sim: the common 4 KiB path MTU of InfiniBand and RoCE.
pub const SIM_DATAGRAM_MTU: usize = 4096;

fn check_local(qp_id: u64, qp: &Qp, slice: &LocalSlice<SimRegion>, need: Access) -> Result<()> {
    if slice.region.inner.host != qp.host {
        return Err(BusError::Invalid {
            what: "local slice",
            reason: "region is registered on another host".into(),
        });
    }
    if slice.region.inner.owner_qp.is_some_and(|q| q != qp_id) {
        return Err(BusError::Invalid {
            what: "local slice",
            reason: "region is registered for another connection".into(),
        });
    }
    if !slice.region.access().contains(need) {
        return Err(BusError::Invalid {
            what: "local slice",
            reason: format!("region lacks {need:?}"),
        });
    }
    let region_len = slice.region.len();
    if slice
        .offset
        .checked_add(slice.len)
        .is_none_or(|end| end > region_len)
    {
        return Err(BusError::OutOfBounds {
            offset: slice.offset as u64,
            len: slice.len as u64,
            region_len: region_len as u64,
        });
    }
    Ok(())
}

fn closed() -> BusError {
    BusError::Closed("sim connection is gone (closed, or its host crashed)".into())
}

/// Splits the tail `[split..)` off a plain WRITE into a second fragment arriving at
/// `other_at`. Whichever fragment lands first is silent; the later one completes the request.
fn tear_off(flight: &mut Flight, split: usize, other_at: u64, other_seq: u64) -> Flight {
    let FlightKind::Write { dst, data, .. } = &mut flight.kind else {
        unreachable!("only plain writes are torn");
    };
    let tail = data.split_off(split);
    dst.len = split as u64;
    let tail_dst = RemoteSlice {
        region: dst.region,
        offset: dst.offset + split as u64,
        len: tail.len() as u64,
    };
    let mut fragment = Flight {
        at: other_at,
        seq: other_seq,
        wr_id: flight.wr_id,
        kind: FlightKind::Write {
            dst: tail_dst,
            data: tail,
            imm: None,
        },
        rnr_retries: 0,
        silent: true,
    };
    if fragment.at >= flight.at {
        // The tail lands last (strictly, so the completion never precedes the head): it takes
        // the request's sequence number, hence its send-queue slot and completion.
        fragment.at = fragment.at.max(flight.at + 1);
        std::mem::swap(&mut fragment.seq, &mut flight.seq);
        std::mem::swap(&mut fragment.silent, &mut flight.silent);
    }
    fragment
}

impl Network {
    /// With probability `duplicate_writes`, a silent whole copy of a plain WRITE whose `at` is
    /// the extra delay after the original (the caller adds the original's arrival). Draws
    /// nothing when the fault is off, so seeded histories without it stay as they were.
    fn draw_duplicate(&mut self, data: &[u8], dst: &RemoteSlice) -> Option<Flight> {
        let p = self.faults.duplicate_writes;
        if p <= 0.0 || !self.rng.gen_bool(p) {
            return None;
        }
        let extra = self
            .rng
            .gen_range(0..=self.faults.duplicate_delay_max.as_nanos() as u64);
        Some(Flight {
            at: extra,
            seq: self.next_seq(),
            wr_id: 0,
            kind: FlightKind::Write {
                dst: *dst,
                data: data.to_vec(),
                imm: None,
            },
            rnr_retries: 0,
            silent: true,
        })
    }

    fn live_qp(&mut self, id: u64) -> Result<&mut Qp> {
        let host = self.qps.get(&id).map(|q| q.host).ok_or_else(closed)?;
        self.check_alive(host)?;
        self.qps.get_mut(&id).ok_or_else(closed)
    }

    /// Posts a send-side work request: SEND, WRITE (WITH IMM) or READ.
    pub(crate) fn post_flight(
        &mut self,
        id: u64,
        wr_id: u64,
        kind: FlightKind,
        local: &LocalSlice<SimRegion>,
    ) -> Result<()> {
        let need = match kind {
            FlightKind::Read { .. } => Access::LOCAL_WRITE,
            FlightKind::Send(_) => Access::SEND,
            FlightKind::Write { .. } => Access::NONE,
        };
        let seq = self.next_seq();
        let at = self.draw_delay();
        let reorder = self.faults.reorder_writes;
        let unordered = reorder && matches!(kind, FlightKind::Write { imm: None, .. });
        // A torn write: (split point, the other fragment's arrival, its sequence number).
        let tear = match &kind {
            FlightKind::Write { data, dst, .. } if unordered && self.faults.tear_writes => {
                // Split only at an aligned 8-byte boundary of the target: placement of one
                // aligned word is atomic (the contract of `Region::load_u64`, and what NICs do).
                let start = dst.region.addr.wrapping_add(dst.offset);
                let first = (8 - (start % 8) as usize) % 8;
                let first = if first == 0 { 8 } else { first };
                (first < data.len()).then(|| {
                    let words = (data.len() - first - 1) / 8;
                    let split = first + 8 * self.rng.gen_range(0..=words);
                    (split, self.draw_delay(), self.next_seq())
                })
            }
            _ => None,
        };
        let duplicate = match &kind {
            FlightKind::Write { data, dst, .. } if unordered => self.draw_duplicate(data, dst),
            _ => None,
        };
        let qp = self.live_qp(id)?;
        check_local(id, qp, local, need)?;
        if qp.sq_outstanding() >= qp.config.send_wr as usize {
            return Err(BusError::Full { what: "send queue" });
        }
        qp.sq_reserve(seq);
        let op = kind.op();
        if qp.state == QpState::Error {
            qp.sq_complete(seq, completion(wr_id, op, Err(WorkError::Flushed)));
            return Ok(());
        }
        let mut flight = Flight {
            at,
            seq,
            wr_id,
            kind,
            rnr_retries: 0,
            silent: false,
        };
        if unordered {
            if let Some(mut copy) = duplicate {
                // Lands after the original's first byte at the earliest: a retransmission.
                copy.wr_id = wr_id;
                copy.at = copy.at.saturating_add(at);
                self.stats.writes_duplicated += 1;
                self.unordered.insert(
                    (copy.at, copy.seq),
                    Unordered::Write {
                        from_qp: id,
                        flight: copy,
                    },
                );
            }
            if let Some((split, other_at, other_seq)) = tear {
                let fragment = tear_off(&mut flight, split, other_at, other_seq);
                self.unordered.insert(
                    (fragment.at, fragment.seq),
                    Unordered::Write {
                        from_qp: id,
                        flight: fragment,
                    },
                );
            }
            self.unordered.insert(
                (flight.at, flight.seq),
                Unordered::Write {
                    from_qp: id,
                    flight,
                },
            );
        } else {
            flight.at = at.max(qp.last_ordered_at);
            qp.last_ordered_at = flight.at;
            qp.ordered.push_back(flight);
        }
        Ok(())
    }

    pub(crate) fn post_recv(
        &mut self,
        id: u64,
        wr_id: u64,
        dst: LocalSlice<SimRegion>,
    ) -> Result<()> {
        let qp = self.live_qp(id)?;
        check_local(id, qp, &dst, Access::LOCAL_WRITE)?;
        if qp.recvs.len() >= qp.config.recv_wr as usize {
            return Err(BusError::Full {
                what: "receive queue",
            });
        }
        if qp.state == QpState::Error {
            qp.push_cq(completion(wr_id, Op::Recv, Err(WorkError::Flushed)));
        } else {
            qp.recvs.push_back((wr_id, dst));
        }
        Ok(())
    }

    pub(crate) fn poll_cq(
        &mut self,
        id: u64,
        out: &mut Vec<Completion>,
        max: usize,
    ) -> Result<usize> {
        let qp = self.live_qp(id)?;
        if qp.cq_overrun {
            return Err(BusError::Provider {
                provider: "sim",
                call: "poll_cq",
                reason: "completion queue overrun".into(),
            });
        }
        let n = max.min(qp.cq.len());
        out.extend(qp.cq.drain(..n));
        Ok(n)
    }

    /// Whether a waiter on this queue pair should wake: completions, or nothing more to wait for.
    pub(crate) fn qp_ready(&self, id: u64) -> bool {
        match self.qps.get(&id) {
            Some(qp) => !qp.cq.is_empty() || qp.cq_overrun || !self.alive(qp.host),
            None => true,
        }
    }

    pub(crate) fn open_datagram(&mut self, host: HostId) -> Result<u64> {
        self.check_alive(host)?;
        let id = self.next_endpoint_id();
        self.datagrams.insert(
            id,
            DatagramSlot {
                host,
                inbox: Default::default(),
            },
        );
        Ok(id)
    }

    pub(crate) fn send_datagram(
        &mut self,
        from: u64,
        to: &EndpointAddr,
        data: &[u8],
    ) -> Result<()> {
        let host = self
            .datagrams
            .get(&from)
            .map(|d| d.host)
            .ok_or_else(closed)?;
        self.check_alive(host)?;
        let EndpointAddr::Sim { id: to } = *to else {
            return Err(BusError::Invalid {
                what: "datagram destination",
                reason: format!("{to} is not a sim address"),
            });
        };
        if data.len() > SIM_DATAGRAM_MTU {
            return Err(BusError::Invalid {
                what: "datagram length",
                reason: format!("{} exceeds the MTU {SIM_DATAGRAM_MTU}", data.len()),
            });
        }
        self.stats.datagrams_sent += 1;
        let loss = self.faults.datagram_loss;
        let dup = self.faults.datagram_dup;
        if rand::Rng::gen_bool(&mut self.rng, loss) {
            self.stats.datagrams_lost += 1;
            return Ok(());
        }
        let copies = if rand::Rng::gen_bool(&mut self.rng, dup) {
            self.stats.datagrams_duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = self.draw_delay();
            let seq = self.next_seq();
            self.unordered.insert(
                (at, seq),
                Unordered::Datagram {
                    from,
                    to,
                    data: data.to_vec(),
                },
            );
        }
        Ok(())
    }

    pub(crate) fn recv_datagram(
        &mut self,
        id: u64,
        buf: &mut [u8],
    ) -> Result<Option<DatagramMeta>> {
        let host = self.datagrams.get(&id).map(|d| d.host).ok_or_else(closed)?;
        self.check_alive(host)?;
        let Some((from, data)) = self
            .datagrams
            .get_mut(&id)
            .and_then(|d| d.inbox.pop_front())
        else {
            return Ok(None);
        };
        if data.len() > buf.len() {
            return Err(BusError::OutOfBounds {
                offset: 0,
                len: data.len() as u64,
                region_len: buf.len() as u64,
            });
        }
        buf[..data.len()].copy_from_slice(&data);
        Ok(Some(DatagramMeta {
            from: EndpointAddr::Sim { id: from },
            len: data.len(),
        }))
    }

    pub(crate) fn datagram_ready(&self, id: u64) -> bool {
        self.datagrams.get(&id).is_none_or(|d| !d.inbox.is_empty())
    }
}
