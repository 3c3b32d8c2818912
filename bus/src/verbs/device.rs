//! Opening the RDMA device: the provider value, its protection domain and port facts.

use std::net::{Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::{DeviceContext, PortState};
use sideway::ibverbs::protection_domain::ProtectionDomain;

use super::conn::ConnectFor;
use super::{error_chain, lib_error, PROVIDER};
use crate::access::Access;
use crate::config::EndpointConfig;
use crate::error::{BusError, Result};
use crate::provider::Provider;

/// Default GID index: 1 is the IPv4-mapped RoCE v2 GID of a port with an IPv4 address (what the
/// soft-RoCE guest of the verbs lane has); index 0 is the link-local RoCE v1 GID.
pub const GID_INDEX_DEFAULT: u32 = 1;
/// Default port number (ports count from 1 in verbs).
pub const PORT_DEFAULT: u8 = 1;

/// Which device, port and GID to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerbsOptions {
    /// Device name (`rxe0`, `mlx5_0`); `None` takes the first device.
    pub device: Option<String>,
    pub port: u8,
    pub gid_index: u32,
}

impl Default for VerbsOptions {
    fn default() -> Self {
        VerbsOptions {
            device: None,
            port: PORT_DEFAULT,
            gid_index: GID_INDEX_DEFAULT,
        }
    }
}

/// The opened device, shared by every region and endpoint of a provider. Connections and
/// datagram endpoints are created in this device's protection domain, so any region of the
/// provider can be named by any of its work requests.
pub(crate) struct Device {
    // Drop order: the PD before the context it was allocated from (sideway's PD also holds an
    // Arc of the context, so this is belt and braces).
    pub(crate) pd: Arc<ProtectionDomain>,
    pub(crate) ctx: Arc<DeviceContext>,
    pub(crate) name: String,
    pub(crate) port: u8,
    pub(crate) gid_index: u32,
    pub(crate) gid: [u8; 16],
    pub(crate) lid: u16,
    /// The port's active path MTU in bytes (the largest UD payload + nothing else).
    pub(crate) mtu: usize,
}

/// The `verbs` fabric provider.
#[derive(Clone)]
pub struct VerbsProvider {
    pub(crate) dev: Arc<Device>,
}

impl std::fmt::Debug for VerbsProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsProvider")
            .field("device", &self.dev.name)
            .field("port", &self.dev.port)
            .field("gid_index", &self.dev.gid_index)
            .field("gid", &Ipv6Addr::from(self.dev.gid))
            .finish()
    }
}

fn unavailable(reason: String) -> BusError {
    BusError::Unavailable {
        provider: PROVIDER,
        reason,
    }
}

impl VerbsProvider {
    /// Opens the device. On a host without rdma-core or without an RDMA device this is
    /// [`BusError::Unavailable`] with the reason, never a panic.
    pub fn open(options: &VerbsOptions) -> Result<Self> {
        let list = DeviceList::new().map_err(|e| {
            unavailable(format!(
                "cannot list RDMA devices ({}); rdma-core (libibverbs) and an RDMA device \
                 are needed",
                error_chain(&e)
            ))
        })?;
        let names: Vec<String> = list.iter().map(|d| d.name()).collect();
        let device = match &options.device {
            Some(want) => list.iter().find(|d| &d.name() == want).ok_or_else(|| {
                unavailable(format!("no RDMA device {want:?} (present: {names:?})"))
            })?,
            None => list
                .iter()
                .next()
                .ok_or_else(|| unavailable("no RDMA device present".to_owned()))?,
        };
        let name = device.name();
        let ctx = device
            .open()
            .map_err(|e| unavailable(format!("cannot open {name}: {}", error_chain(&e))))?;
        let port_attr = ctx
            .query_port(options.port)
            .map_err(|e| lib_error("ibv_query_port", &e))?;
        if port_attr.port_state() != PortState::Active {
            return Err(unavailable(format!(
                "{name} port {} is not active ({:?})",
                options.port,
                port_attr.port_state()
            )));
        }
        let gid = Ipv6Addr::from(
            ctx.query_gid(options.port, options.gid_index)
                .map_err(|e| lib_error("ibv_query_gid", &e))?,
        )
        .octets();
        if gid == [0; 16] {
            return Err(unavailable(format!(
                "{name} port {} has no GID at index {} (give the port an IP address, or pick \
                 another gid index)",
                options.port, options.gid_index
            )));
        }
        let pd = ctx.alloc_pd().map_err(|e| lib_error("ibv_alloc_pd", &e))?;
        // IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5.
        let mtu = 128usize << (port_attr.active_mtu() as u32);
        let port = options.port;
        let shown_gid = Ipv6Addr::from(gid);
        tracing::info!(device = %name, port, gid = %shown_gid, mtu, "verbs provider open");
        Ok(VerbsProvider {
            dev: Arc::new(Device {
                pd,
                ctx,
                name,
                port: options.port,
                gid_index: options.gid_index,
                gid,
                lid: port_attr.lid(),
                mtu,
            }),
        })
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        &self.dev.name
    }

    /// The GID used for addressing (at the configured index).
    pub fn gid(&self) -> [u8; 16] {
        self.dev.gid
    }

    /// Creates a shared receive queue holding up to `depth` posted receives
    /// ([`SRQ_DEPTH_MIN`](super::SRQ_DEPTH_MIN)..=[`SRQ_DEPTH_MAX`](super::SRQ_DEPTH_MAX)).
    pub fn create_srq(&self, depth: u32) -> Result<super::VerbsSrq> {
        super::srq::create(&self.dev, depth)
    }

    /// Like [`Provider::connect`], but the connection takes its receives from `srq`: its own
    /// `post_recv` is refused, and `poll` reports the SRQ receives that its peer's messages
    /// consumed, with the ids they were posted under. `config.cq_size` must hold
    /// `config.send_wr` plus the SRQ's depth (every SRQ receive may complete here).
    pub fn connect_with_srq(
        &self,
        to: SocketAddr,
        config: &EndpointConfig,
        timeout: Duration,
        srq: &super::VerbsSrq,
    ) -> Result<super::VerbsConnection> {
        super::conn::connect(
            &self.dev,
            to,
            config,
            timeout,
            Some(&srq.0),
            ConnectFor::Any,
        )
    }

    /// Like [`Provider::listen`], but every accepted connection takes its receives from `srq`
    /// (as for [`connect_with_srq`](Self::connect_with_srq)).
    pub fn listen_with_srq(
        &self,
        bind: SocketAddr,
        config: &EndpointConfig,
        srq: &super::VerbsSrq,
    ) -> Result<super::VerbsListener> {
        super::listener::listen(&self.dev, bind, config, Some(&srq.0))
    }
}

impl Provider for VerbsProvider {
    type Region = super::VerbsRegion;
    type Conn = super::VerbsConnection;
    type Listener = super::VerbsListener;
    type Datagram = super::VerbsDatagram;

    fn name(&self) -> &str {
        PROVIDER
    }

    fn register(&self, len: usize, access: Access) -> Result<Self::Region> {
        super::region::register(&self.dev, len, access)
    }

    fn listen(&self, bind: SocketAddr, config: &EndpointConfig) -> Result<Self::Listener> {
        super::listener::listen(&self.dev, bind, config, None)
    }

    fn connect(
        &self,
        to: SocketAddr,
        config: &EndpointConfig,
        timeout: Duration,
    ) -> Result<Self::Conn> {
        super::conn::connect(&self.dev, to, config, timeout, None, ConnectFor::Any)
    }

    fn connect_for_stream(
        &self,
        to: SocketAddr,
        config: &EndpointConfig,
        timeout: Duration,
    ) -> Result<Self::Conn> {
        super::conn::connect(&self.dev, to, config, timeout, None, ConnectFor::Stream)
    }

    fn datagram(&self, config: &EndpointConfig) -> Result<Self::Datagram> {
        super::datagram::open(&self.dev, config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_is_a_clean_result_with_or_without_rdma() {
        // Goal: on hosts without RDMA (these build machines) opening the provider is a typed
        // Unavailable that says why, never a panic; on an RDMA host it opens a usable GID.
        match VerbsProvider::open(&VerbsOptions::default()) {
            Ok(p) => {
                assert_eq!(p.name(), "verbs");
                assert_ne!(p.gid(), [0; 16]);
            }
            Err(BusError::Unavailable { provider, reason }) => {
                assert_eq!(provider, "verbs");
                assert!(reason.contains("RDMA"), "reason does not say why: {reason}");
            }
            Err(other) => panic!("expected Unavailable, got {other:?}"),
        }
    }

    #[test]
    fn a_missing_named_device_is_unavailable() {
        // Goal: naming a device that is not there fails cleanly on every host.
        let err = VerbsProvider::open(&VerbsOptions {
            device: Some("no-such-rdma-device".to_owned()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            matches!(err, BusError::Unavailable { .. }),
            "expected Unavailable, got {err:?}"
        );
    }
}
