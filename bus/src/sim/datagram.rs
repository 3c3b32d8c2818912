//! Simulated datagram endpoints (UD / RDM): lossy, duplicating and reordering as configured.

use std::time::Duration;

use crate::addr::EndpointAddr;
use crate::error::Result;
use crate::provider::{DatagramEndpoint, DatagramMeta};

use super::fabric::SimFabric;
use super::post::SIM_DATAGRAM_MTU;

#[derive(Debug)]
pub struct SimDatagram {
    fabric: SimFabric,
    id: u64,
    local: EndpointAddr,
}

impl SimDatagram {
    pub(crate) fn new(fabric: SimFabric, id: u64, local: EndpointAddr) -> Self {
        SimDatagram { fabric, id, local }
    }
}

impl DatagramEndpoint for SimDatagram {
    fn mtu(&self) -> usize {
        SIM_DATAGRAM_MTU
    }

    fn local(&self) -> &EndpointAddr {
        &self.local
    }

    fn send_to(&mut self, to: &EndpointAddr, payload: &[u8]) -> Result<()> {
        let id = self.id;
        self.fabric
            .shared
            .with(|n| n.send_datagram(id, to, payload))
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<DatagramMeta>> {
        let id = self.id;
        self.fabric.shared.with(|n| n.recv_datagram(id, buf))
    }

    fn wait(&mut self, timeout: Duration) -> Result<()> {
        let id = self.id;
        self.fabric
            .shared
            .wait_until(timeout, |n| n.datagram_ready(id));
        Ok(())
    }
}

impl Drop for SimDatagram {
    fn drop(&mut self) {
        let id = self.id;
        self.fabric.shared.with(|n| {
            n.datagrams.remove(&id);
        });
    }
}
