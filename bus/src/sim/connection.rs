//! Simulated connections and listeners: thin handles that post into the shared network.

use std::net::SocketAddr;
use std::time::Duration;

use crate::access::Access;
use crate::addr::EndpointAddr;
use crate::error::{BusError, Result};
use crate::provider::{Completion, Connection, Listener, LocalSlice, RemoteSlice};

use super::fabric::SimFabric;
use super::qp::FlightKind;
use super::region::SimRegion;

/// One end of a simulated reliable connection (an RC queue pair with its own CQ).
#[derive(Debug)]
pub struct SimConnection {
    fabric: SimFabric,
    qp: u64,
    local: EndpointAddr,
    peer: EndpointAddr,
}

impl SimConnection {
    pub(crate) fn new(fabric: SimFabric, qp: u64, peer: u64) -> Self {
        SimConnection {
            fabric,
            qp,
            local: EndpointAddr::Sim { id: qp },
            peer: EndpointAddr::Sim { id: peer },
        }
    }

    fn post(&mut self, wr_id: u64, kind: FlightKind, local: LocalSlice<SimRegion>) -> Result<()> {
        let qp = self.qp;
        self.fabric
            .shared
            .with(|n| n.post_flight(qp, wr_id, kind, &local))
    }
}

fn same_len(local: usize, remote: u64) -> Result<()> {
    if local as u64 == remote {
        Ok(())
    } else {
        Err(BusError::Invalid {
            what: "work request",
            reason: format!("local length {local} differs from remote length {remote}"),
        })
    }
}

/// Copies a local slice's bytes (after bounds checks, so a bad slice is an error, not a panic).
fn copy_out(src: &LocalSlice<SimRegion>) -> Result<Vec<u8>> {
    let mut data = vec![0u8; src.len];
    crate::provider::Region::read(&src.region, src.offset, &mut data)?;
    Ok(data)
}

impl Connection for SimConnection {
    type Region = SimRegion;

    /// Reachable only through this connection's peer: a third connection to this host that
    /// names it, even with the exact address and key, gets `RemoteAccess`.
    fn register(&self, len: usize, access: Access) -> Result<SimRegion> {
        let qp = self.qp;
        self.fabric
            .shared
            .with(|n| n.register_for_qp(qp, len, access))
    }

    fn post_send(&mut self, wr_id: u64, src: LocalSlice<SimRegion>) -> Result<()> {
        let data = copy_out(&src)?;
        self.post(wr_id, FlightKind::Send(data), src)
    }

    fn post_recv(&mut self, wr_id: u64, dst: LocalSlice<SimRegion>) -> Result<()> {
        let qp = self.qp;
        self.fabric.shared.with(|n| n.post_recv(qp, wr_id, dst))
    }

    fn post_write(
        &mut self,
        wr_id: u64,
        src: LocalSlice<SimRegion>,
        dst: RemoteSlice,
        imm: Option<u32>,
    ) -> Result<()> {
        same_len(src.len, dst.len)?;
        let data = copy_out(&src)?;
        self.post(wr_id, FlightKind::Write { dst, data, imm }, src)
    }

    fn post_read(
        &mut self,
        wr_id: u64,
        dst: LocalSlice<SimRegion>,
        src: RemoteSlice,
    ) -> Result<()> {
        same_len(dst.len, src.len)?;
        let kind = FlightKind::Read {
            dst: dst.clone(),
            src,
        };
        self.post(wr_id, kind, dst)
    }

    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<usize> {
        let qp = self.qp;
        self.fabric.shared.with(|n| n.poll_cq(qp, out, max))
    }

    fn wait(&mut self, timeout: Duration) -> Result<()> {
        let qp = self.qp;
        self.fabric.shared.wait_until(timeout, |n| n.qp_ready(qp));
        Ok(())
    }

    fn peer(&self) -> &EndpointAddr {
        &self.peer
    }

    fn local(&self) -> &EndpointAddr {
        &self.local
    }
}

impl Drop for SimConnection {
    fn drop(&mut self) {
        let qp = self.qp;
        self.fabric.shared.with(|n| n.close_qp(qp));
    }
}

/// A listener registered at a socket address of the simulated network.
#[derive(Debug)]
pub struct SimListener {
    fabric: SimFabric,
    addr: SocketAddr,
}

impl SimListener {
    pub(crate) fn new(fabric: SimFabric, addr: SocketAddr) -> Self {
        SimListener { fabric, addr }
    }
}

impl Listener for SimListener {
    type Conn = SimConnection;

    fn accept(&mut self, timeout: Duration) -> Result<Option<SimConnection>> {
        let addr = self.addr;
        let pending = |n: &super::network::Network| {
            n.listeners.get(&addr).is_none_or(|l| !l.pending.is_empty())
        };
        self.fabric.shared.wait_until(timeout, pending);
        let accepted = self.fabric.shared.with(|n| {
            let slot = n.listeners.get_mut(&addr).ok_or_else(|| {
                BusError::Closed(format!("sim listener {addr} is gone (host crashed)"))
            })?;
            let Some(qp) = slot.pending.pop_front() else {
                return Ok(None);
            };
            let peer = n.qps.get(&qp).map(|q| q.peer);
            Ok(peer.map(|peer| (qp, peer)))
        })?;
        Ok(accepted.map(|(qp, peer)| SimConnection::new(self.fabric.clone(), qp, peer)))
    }

    fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for SimListener {
    fn drop(&mut self) {
        let addr = self.addr;
        self.fabric.shared.with(|n| n.close_listener(addr));
    }
}
