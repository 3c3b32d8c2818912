//! Starting the fabric listener from the config: open the provider `fabric-provider` names
//! and listen on every `rdma-bind` address at `rdma-port`.

use super::listener::{self, FabricListener};
use crate::config::bind_addr;
use crate::server::Server;
use bus::select::{with_provider, WithProvider};
use bus::{BusError, Provider};
use std::net::SocketAddr;
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
    let specs = server.config.read().fabric_bind().to_vec();
    let mut addrs = Vec::new();
    for spec in &specs {
        let bind =
            bind_addr::parse(spec).ok_or_else(|| FabricStartError::BadAddress(spec.clone()))?;
        // An optional (`-`) IPv6 entry is left to the TCP listener: the fabric providers
        // listen on IPv4 addresses.
        if bind.optional && bind.ip.is_ipv6() {
            continue;
        }
        addrs.push(SocketAddr::new(bind.ip, fabric.port));
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
