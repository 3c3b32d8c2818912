//! One simulated host's view of the network: the [`Provider`] implementation.

use std::net::SocketAddr;
use std::time::Duration;

use crate::access::Access;
use crate::addr::EndpointAddr;
use crate::config::EndpointConfig;
use crate::error::Result;
use crate::provider::Provider;

use super::connection::{SimConnection, SimListener};
use super::datagram::SimDatagram;
use super::fabric::SimFabric;
use super::region::SimRegion;
use super::HostId;

/// A host on a [`SimFabric`].
#[derive(Clone, Debug)]
pub struct SimProvider {
    pub(crate) fabric: SimFabric,
    pub(crate) host: HostId,
}

impl SimProvider {
    pub fn host(&self) -> HostId {
        self.host
    }

    pub fn fabric(&self) -> &SimFabric {
        &self.fabric
    }
}

impl Provider for SimProvider {
    type Region = SimRegion;
    type Conn = SimConnection;
    type Listener = SimListener;
    type Datagram = SimDatagram;

    fn name(&self) -> &str {
        "sim"
    }

    fn register(&self, len: usize, access: Access) -> Result<SimRegion> {
        self.fabric
            .shared
            .with(|n| n.register(self.host, len, access, None))
    }

    fn listen(&self, bind: SocketAddr, config: &EndpointConfig) -> Result<SimListener> {
        config.validate()?;
        let addr = self.fabric.shared.with(|n| n.listen(self.host, bind))?;
        Ok(SimListener::new(self.fabric.clone(), addr))
    }

    /// Connects at once (the handshake is not simulated). A partitioned or crashed listener
    /// host gives `Timeout(timeout)`; no listener gives `Closed` (rdma_cm's REJECTED).
    fn connect(
        &self,
        to: SocketAddr,
        config: &EndpointConfig,
        timeout: Duration,
    ) -> Result<SimConnection> {
        config.validate()?;
        let (client, server) = self
            .fabric
            .shared
            .with(|n| n.connect(self.host, to, config))
            .map_err(|e| match e {
                crate::error::BusError::Timeout(_) => crate::error::BusError::Timeout(timeout),
                other => other,
            })?;
        Ok(SimConnection::new(self.fabric.clone(), client, server))
    }

    fn datagram(&self, config: &EndpointConfig) -> Result<SimDatagram> {
        config.validate()?;
        let id = self.fabric.shared.with(|n| n.open_datagram(self.host))?;
        Ok(SimDatagram::new(
            self.fabric.clone(),
            id,
            EndpointAddr::Sim { id },
        ))
    }
}
