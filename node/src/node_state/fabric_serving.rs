//! Where this node serves clients on the fabric once its listener is up: the provider as
//! resolved (`auto` has become `verbs` or `ofi:tcp`), the address and the port (the first
//! `rdma-bind` address: on verbs the RDMA device's, often not the client-facing one). A slot migration's source
//! asks its target for it (`CLUSTER SYNCSLOTS FABRIC`) to carry the batch's data there.

use std::sync::OnceLock;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FabricEndpoint {
    pub provider: String,
    /// Unspecified (0.0.0.0) when the listener takes every address.
    pub ip: std::net::IpAddr,
    pub port: u16,
}

/// Set once, by the start after the fabric listener came up; empty on a node without one.
#[derive(Default)]
pub struct FabricServing(OnceLock<FabricEndpoint>);

impl FabricServing {
    pub fn set(&self, endpoint: FabricEndpoint) {
        let _ = self.0.set(endpoint);
    }

    pub fn get(&self) -> Option<&FabricEndpoint> {
        self.0.get()
    }
}
