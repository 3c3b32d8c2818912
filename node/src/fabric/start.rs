//! Starting the fabric listener from the config: open the provider `fabric-provider` names
//! and listen on every `rdma-bind` address at `rdma-port`.

use super::listener::{self, FabricListener};
use crate::server::Server;
use bus::select::{with_provider, WithProvider};
use bus::{BusError, Provider};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Errors a node reports at start when its fabric listener cannot come up.
#[derive(Debug, thiserror::Error)]
pub enum FabricStartError {
    #[error("bad rdma-bind address '{0}'")]
    BadAddress(String),
    #[error("fabric listener on {addr} ({provider}): {error}")]
    Listen {
        addr: SocketAddr,
        provider: String,
        error: BusError,
    },
    #[error("fabric-provider {provider}: {error}")]
    Provider { provider: String, error: BusError },
}

/// Starts the listeners if `rdma-port` is set; none otherwise.
pub fn start_configured(server: &Arc<Server>) -> Result<Vec<FabricListener>, FabricStartError> {
    let fabric = server.config.read().fabric.clone();
    if fabric.port == 0 {
        return Ok(Vec::new());
    }
    let mut addrs = Vec::new();
    for spec in &fabric.bind {
        let ip: IpAddr = match spec.as_str() {
            "*" => Ipv4Addr::UNSPECIFIED.into(),
            "::*" => Ipv6Addr::UNSPECIFIED.into(),
            "localhost" => Ipv4Addr::LOCALHOST.into(),
            other => other
                .parse()
                .map_err(|_| FabricStartError::BadAddress(spec.clone()))?,
        };
        addrs.push(SocketAddr::new(ip, fabric.port));
    }
    let name = fabric.provider.name();
    let job = ListenJob {
        server: server.clone(),
        addrs,
    };
    with_provider(name, job).map_err(|error| FabricStartError::Provider {
        provider: name.to_string(),
        error,
    })?
}

struct ListenJob {
    server: Arc<Server>,
    addrs: Vec<SocketAddr>,
}

impl WithProvider for ListenJob {
    type Output = Result<Vec<FabricListener>, FabricStartError>;

    fn run<P: Provider>(self, provider: P) -> Self::Output {
        let mut listeners = Vec::new();
        for addr in self.addrs {
            let l =
                listener::start(self.server.clone(), provider.clone(), addr).map_err(|error| {
                    FabricStartError::Listen {
                        addr,
                        provider: provider.name().to_string(),
                        error,
                    }
                })?;
            tracing::info!(addr = %l.local, provider = %l.provider, "ready to accept connections (fabric)");
            listeners.push(l);
        }
        Ok(listeners)
    }
}
