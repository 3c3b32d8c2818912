//! Delivery: what happens when an operation reaches its target. Remote access checks, receive-
//! not-ready retries, error transitions and flushes follow verbs RC semantics.

use std::sync::Arc;

use crate::access::Access;
use crate::provider::{Completion, Op, RemoteSlice, WorkError};

use super::network::{Network, Unordered, DATAGRAM_INBOX_MAX};
use super::qp::{completion, Flight, FlightKind, QpState};
use super::region::RegionInner;
use super::HostId;

impl Network {
    /// Moves a queue pair to error: everything queued on it completes with `Flushed`.
    pub(crate) fn qp_error(&mut self, id: u64) {
        let Some(qp) = self.qps.get_mut(&id) else {
            return;
        };
        if qp.state == QpState::Error && qp.ordered.is_empty() && qp.recvs.is_empty() {
            return;
        }
        qp.state = QpState::Error;
        let mut flushed: Vec<Flight> = qp.ordered.drain(..).collect();
        let recvs: Vec<u64> = qp.recvs.drain(..).map(|(wr, _)| wr).collect();
        let keys: Vec<(u64, u64)> = self
            .unordered
            .iter()
            .filter(|(_, u)| matches!(u, Unordered::Write { from_qp, .. } if *from_qp == id))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            if let Some(Unordered::Write { flight, .. }) = self.unordered.remove(&k) {
                flushed.push(flight);
            }
        }
        flushed.sort_by_key(|f| f.seq);
        let Some(qp) = self.qps.get_mut(&id) else {
            return;
        };
        for f in flushed {
            let op = f.kind.op();
            qp.sq_complete(f.seq, completion(f.wr_id, op, Err(WorkError::Flushed)));
        }
        for wr in recvs {
            qp.push_cq(completion(wr, Op::Recv, Err(WorkError::Flushed)));
        }
    }

    /// Completes `flight` on the sender with `err` and moves the sender to error.
    fn fail(&mut self, qp: u64, flight: &Flight, err: WorkError) {
        if flight.silent {
            return;
        }
        if err == WorkError::RetryExceeded {
            self.stats.retry_exceeded += 1;
        }
        if let Some(q) = self.qps.get_mut(&qp) {
            q.sq_complete(
                flight.seq,
                completion(flight.wr_id, flight.kind.op(), Err(err)),
            );
        }
        self.qp_error(qp);
    }

    fn succeed(&mut self, qp: u64, flight: &Flight) {
        if flight.silent {
            return;
        }
        if let Some(q) = self.qps.get_mut(&qp) {
            q.sq_complete(
                flight.seq,
                completion(flight.wr_id, flight.kind.op(), Ok(())),
            );
        }
    }

    /// The peer queue pair, if traffic from `qp` reaches it.
    fn reachable_peer(&self, qp: u64) -> Option<(u64, HostId)> {
        let q = self.qps.get(&qp)?;
        let p = self.qps.get(&q.peer)?;
        (p.state == QpState::Ready && self.connected(q.host, p.host)).then_some((q.peer, p.host))
    }

    /// The region and byte offset a remote slice names on `host`, if the target queue pair
    /// `at_qp` may reach it and access is allowed.
    fn resolve(
        &self,
        host: HostId,
        at_qp: u64,
        slice: &RemoteSlice,
        need: Access,
    ) -> Option<(Arc<RegionInner>, usize)> {
        let rkey = u32::try_from(slice.region.rkey).ok()?;
        let entry = self.regions.get(&rkey)?;
        if entry.host != host {
            return None;
        }
        let region = entry.region.upgrade()?;
        if !region.access.contains(need) || region.owner_qp.is_some_and(|q| q != at_qp) {
            return None;
        }
        let start = slice.region.addr.checked_add(slice.offset)?;
        let end = start.checked_add(slice.len)?;
        let region_end = region.base + region.len as u64;
        if start < region.base || end > region_end {
            return None;
        }
        let offset = (start - region.base) as usize;
        Some((region, offset))
    }

    pub(crate) fn deliver_ordered(&mut self, qp: u64) {
        let Some(flight) = self.qps.get_mut(&qp).and_then(|q| q.ordered.pop_front()) else {
            return;
        };
        self.trace([1, qp, flight.seq, flight.kind.len() as u64]);
        self.deliver_reliable(qp, flight);
    }

    pub(crate) fn deliver_unordered(&mut self, key: (u64, u64)) {
        match self.unordered.remove(&key) {
            Some(Unordered::Write { from_qp, flight }) => {
                self.trace([2, from_qp, flight.seq, flight.kind.len() as u64]);
                self.deliver_reliable(from_qp, flight);
            }
            Some(Unordered::Datagram { from, to, data }) => {
                self.trace([3, from, to, data.len() as u64]);
                self.deliver_datagram(from, to, data);
            }
            None => {}
        }
    }

    fn deliver_reliable(&mut self, qp: u64, flight: Flight) {
        let Some((peer, peer_host)) = self.reachable_peer(qp) else {
            self.fail(qp, &flight, WorkError::RetryExceeded);
            return;
        };
        // One-sided access first: the responder checks the rkey before it needs a receive.
        let target = match &flight.kind {
            FlightKind::Write { dst, .. } => {
                self.resolve(peer_host, peer, dst, Access::REMOTE_WRITE)
            }
            FlightKind::Read { src, .. } => self.resolve(peer_host, peer, src, Access::REMOTE_READ),
            FlightKind::Send(_) => None,
        };
        if !matches!(flight.kind, FlightKind::Send(_)) && target.is_none() {
            self.remote_access_error(qp, peer, flight);
            return;
        }
        if flight.kind.consumes_recv() && self.qps.get(&peer).is_none_or(|p| p.recvs.is_empty()) {
            self.receiver_not_ready(qp, flight);
            return;
        }
        match &flight.kind {
            FlightKind::Send(data) => self.land_send(qp, peer, &flight, data),
            FlightKind::Write { data, imm, .. } => {
                if let Some((region, offset)) = &target {
                    region.bytes.lock()[*offset..*offset + data.len()].copy_from_slice(data);
                }
                if let Some(imm) = *imm {
                    self.consume_recv(peer, Op::RecvWriteImm, data.len() as u32, Some(imm));
                }
                self.succeed(qp, &flight);
            }
            FlightKind::Read { dst, src } => {
                if let Some((region, offset)) = &target {
                    let len = src.len as usize;
                    let bytes = region.bytes.lock()[*offset..*offset + len].to_vec();
                    // Bounds and rights of `dst` were checked at post time.
                    let _ = crate::provider::Region::write(&dst.region, dst.offset, &bytes);
                }
                self.succeed(qp, &flight);
            }
        }
    }

    fn remote_access_error(&mut self, qp: u64, peer: u64, flight: Flight) {
        if flight.silent {
            return;
        }
        self.stats.remote_access_errors += 1;
        tracing::debug!(qp, peer, "sim: remote access error");
        self.fail(qp, &flight, WorkError::RemoteAccess);
        // The responder's queue pair goes to error too (a class C error on RC).
        self.qp_error(peer);
    }

    /// No receive was posted: the sender retries after `rnr_delay` (blocking everything behind
    /// it, as RC does), and gives up with `RetryExceeded` after `rnr_retry_limit` tries.
    fn receiver_not_ready(&mut self, qp: u64, mut flight: Flight) {
        if flight.rnr_retries >= self.faults.rnr_retry_limit {
            tracing::debug!(qp, "sim: RNR retries exhausted");
            self.fail(qp, &flight, WorkError::RetryExceeded);
            return;
        }
        self.stats.rnr_retries += 1;
        flight.rnr_retries += 1;
        flight.at = self
            .now
            .saturating_add(self.faults.rnr_delay.as_nanos() as u64);
        if let Some(q) = self.qps.get_mut(&qp) {
            q.last_ordered_at = q.last_ordered_at.max(flight.at);
            q.ordered.push_front(flight);
        }
    }

    fn land_send(&mut self, qp: u64, peer: u64, flight: &Flight, data: &[u8]) {
        let Some((wr, slice)) = self.qps.get_mut(&peer).and_then(|p| p.take_recv()) else {
            return;
        };
        if data.len() > slice.len {
            // The receive buffer is too small: a local length error on the receiver and an
            // invalid request on the sender; both queue pairs go to error.
            if let Some(p) = self.qps.get_mut(&peer) {
                p.push_cq(completion(
                    wr,
                    Op::Recv,
                    Err(WorkError::Other("local length error".into())),
                ));
            }
            self.fail(
                qp,
                flight,
                WorkError::Other("remote invalid request".into()),
            );
            self.qp_error(peer);
            return;
        }
        let _ = crate::provider::Region::write(&slice.region, slice.offset, data);
        if let Some(p) = self.qps.get_mut(&peer) {
            p.push_cq(Completion {
                wr_id: wr,
                op: Op::Recv,
                status: Ok(()),
                byte_len: data.len() as u32,
                imm: None,
                covers: 0,
            });
        }
        self.succeed(qp, flight);
    }

    fn consume_recv(&mut self, peer: u64, op: Op, byte_len: u32, imm: Option<u32>) {
        if let Some(p) = self.qps.get_mut(&peer) {
            if let Some((wr, _)) = p.take_recv() {
                p.push_cq(Completion {
                    wr_id: wr,
                    op,
                    status: Ok(()),
                    byte_len,
                    imm,
                    covers: 0,
                });
            }
        }
    }

    fn deliver_datagram(&mut self, from: u64, to: u64, data: Vec<u8>) {
        let from_host = self.datagrams.get(&from).map(|d| d.host);
        let Some(slot) = self.datagrams.get(&to) else {
            self.stats.datagrams_dropped += 1;
            return;
        };
        let reachable = match from_host {
            Some(h) => self.connected(h, slot.host),
            // The sender's endpoint closed or its host crashed after sending: the datagram was
            // already on the wire, so only the receiving side matters.
            None => self.alive(slot.host),
        };
        let Some(slot) = self.datagrams.get_mut(&to) else {
            return;
        };
        if !reachable || slot.inbox.len() >= DATAGRAM_INBOX_MAX {
            self.stats.datagrams_dropped += 1;
            return;
        }
        slot.inbox.push_back((from, data));
        self.stats.datagrams_delivered += 1;
    }
}
