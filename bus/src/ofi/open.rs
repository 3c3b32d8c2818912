//! Opening endpoints: where each one is bound, and how a listener's address is found.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::EndpointConfig;
use crate::error::BusError;

use super::domain::{Domain, OfiOrdering};
use super::endpoint::Endpoint;
use super::handshake::HANDSHAKE_MAX;
use super::info::{getinfo, InfoList, Lookup};
use super::kind::{shm_name_for, OfiKind};
use super::rdm::{CoreSizes, RdmCore, BOUNCE_MAX};
use super::sys;

/// Largest SEND on a connection. SENDs land in bounce buffers of this size (see `rdm.rs`); the
/// fabric's SENDs are control messages (32-byte Valkey-over-RDMA records), bulk data goes by
/// WRITE. A longer SEND is refused at post time with `Invalid`.
pub const OFI_SEND_MAX: usize = 4096;
/// Address vector entries of a connection's endpoint: the peer (and, on the connector, the
/// listener during the handshake).
const CONN_AV_COUNT: usize = 4;

/// Where to bind a new endpoint.
#[derive(Clone, Copy, Debug)]
pub enum Bind {
    /// Wherever the provider likes (an ephemeral address).
    Any,
    /// At this socket address (tcp: that IP and port; shm: the name derived from it).
    At(SocketAddr),
}

fn endpoint_info(domain: &Arc<Domain>, bind: Bind) -> Result<InfoList, BusError> {
    match (domain.kind, bind) {
        (_, Bind::Any) => domain.info.dup_first(),
        (OfiKind::Shm, Bind::At(addr)) => {
            let name = shm_name_for(addr);
            getinfo(&domain.lib, domain.kind, Lookup::SourceRaw(&name))
        }
        (OfiKind::Tcp | OfiKind::Efa, Bind::At(addr)) => {
            let node = addr.ip().to_string();
            let service = addr.port().to_string();
            getinfo(
                &domain.lib,
                domain.kind,
                Lookup::Source {
                    node: &node,
                    service: &service,
                },
            )
        }
    }
}

/// Opens an RDM endpoint with its bookkeeping.
pub fn open_core(domain: &Arc<Domain>, bind: Bind, sizes: CoreSizes) -> Result<RdmCore, BusError> {
    let mut info = endpoint_info(domain, bind)?;
    if domain.kind.wants_delivery_complete() {
        info.set_tx_op_flags(sys::FI_DELIVERY_COMPLETE);
    }
    if domain.ordering == OfiOrdering::None {
        info.clear_ordering();
    }
    // Queue depths from the config: the provider sizes its internal buffer pools by them.
    info.set_queue_sizes(sizes.tx_slots, sizes.bounce_count);
    let ep = Endpoint::open(domain, &info, sizes.cq_size, sizes.av_count)?;
    RdmCore::new(ep, sizes)
}

/// Sizes of a connection's endpoint.
pub fn connection_sizes(config: &EndpointConfig) -> CoreSizes {
    CoreSizes {
        tx_slots: config.send_wr as usize,
        bounce_count: (config.recv_wr as usize).min(BOUNCE_MAX),
        bounce_bytes: OFI_SEND_MAX,
        staging_bytes: HANDSHAKE_MAX,
        cq_size: config.cq_size as usize,
        av_count: CONN_AV_COUNT,
    }
}

/// The raw address of the listener at `to`, as the provider names it.
pub fn listener_address(domain: &Arc<Domain>, to: SocketAddr) -> Result<Vec<u8>, BusError> {
    match domain.kind {
        OfiKind::Shm => Ok(shm_name_for(to)),
        OfiKind::Tcp | OfiKind::Efa => {
            let node = to.ip().to_string();
            let service = to.port().to_string();
            let list = getinfo(
                &domain.lib,
                domain.kind,
                Lookup::Dest {
                    node: &node,
                    service: &service,
                },
            )?;
            list.dest_addr().ok_or_else(|| BusError::Provider {
                provider: domain.kind.name(),
                call: "fi_getinfo",
                reason: format!("no destination address for {to}"),
            })
        }
    }
}

/// The port in a raw tcp address (`sockaddr_in`/`sockaddr_in6`: family, then the port in
/// network order).
pub fn sockaddr_port(raw: &[u8]) -> Option<u16> {
    (raw.len() >= 4).then(|| u16::from_be_bytes([raw[2], raw[3]]))
}
