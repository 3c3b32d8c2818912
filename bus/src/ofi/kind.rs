//! The libfabric providers we drive, and what differs between them.

use std::net::SocketAddr;

use crate::error::BusError;

use super::sys;

/// One libfabric provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OfiKind {
    /// `tcp;ofi_rxm`: RDM over TCP sockets; any Linux host. Manual progress.
    Tcp,
    /// `shm`: RDM over shared memory between processes of one host. Manual progress.
    Shm,
    /// `efa`: AWS Elastic Fabric Adapter (SRD). Written from fi_efa(7) and fi_getinfo(3); it
    /// cannot be tested without EFA hardware. What the code relies on for EFA: RDM endpoints;
    /// `mr_mode` with FI_MR_LOCAL, FI_MR_PROV_KEY, FI_MR_VIRT_ADDR and FI_MR_ALLOCATED (all
    /// honoured in `region.rs`); remote CQ data (4 bytes); RMA writes that land *unordered*;
    /// RDMA read/write only on hardware that has them (`fi_getinfo` fails otherwise, and this
    /// provider reports `Unavailable`). Addresses are EFA's raw GID+QPN+QKey bytes. EFA
    /// endpoints have no IP address, so listeners and connectors meet over a TCP socket at
    /// the bind address ([`Rendezvous::TcpSocket`], exercised here on tcp and shm).
    Efa,
}

impl OfiKind {
    /// The name as in `fabric-provider`.
    pub fn name(self) -> &'static str {
        match self {
            OfiKind::Tcp => "ofi:tcp",
            OfiKind::Shm => "ofi:shm",
            OfiKind::Efa => "ofi:efa",
        }
    }

    /// The provider name in `EndpointAddr::Ofi`.
    pub fn addr_tag(self) -> &'static str {
        match self {
            OfiKind::Tcp => "tcp",
            OfiKind::Shm => "shm",
            OfiKind::Efa => "efa",
        }
    }

    /// The provider string `fi_getinfo` is asked for.
    pub fn libfabric_name(self) -> &'static str {
        match self {
            OfiKind::Tcp => "tcp;ofi_rxm",
            OfiKind::Shm => "shm",
            OfiKind::Efa => "efa",
        }
    }

    /// Parses a `fabric-provider` value.
    pub fn from_name(name: &str) -> Option<OfiKind> {
        [OfiKind::Tcp, OfiKind::Shm, OfiKind::Efa]
            .into_iter()
            .find(|k| k.name() == name)
    }

    /// The address format to ask for, when the provider needs one pinned. tcp: IPv4. One
    /// domain serves every endpoint (regions must be usable on all of them) and a domain's
    /// address vectors hold one format, so the family is fixed; IPv4 is what clusters here use.
    /// IPv6 bind/connect addresses are refused with `Invalid` (see `check_socket_addr`).
    pub fn addr_format(self) -> Option<u32> {
        match self {
            OfiKind::Shm => Some(sys::FI_ADDR_STR),
            OfiKind::Tcp => Some(sys::FI_SOCKADDR_IN),
            OfiKind::Efa => None,
        }
    }

    /// Refuses a listen/connect address the provider's endpoints cannot use.
    pub fn check_socket_addr(self, addr: SocketAddr) -> Result<(), BusError> {
        // The tcp domain's endpoints are IPv4 (`addr_format`): a listener or connector on an
        // IPv6 address, even one meeting over a TCP socket, could not carry the fabric.
        if self == OfiKind::Tcp && addr.is_ipv6() {
            return Err(BusError::Invalid {
                what: "ofi:tcp address",
                reason: format!("{addr}: ofi:tcp endpoints are IPv4 only"),
            });
        }
        Ok(())
    }

    /// The most address vector entries the provider accepts, if it has a limit (shm 1.17
    /// refuses `fi_av_open` beyond its 256 peers with FI_ENOSYS).
    pub fn av_count_max(self) -> Option<usize> {
        match self {
            OfiKind::Shm => Some(256),
            OfiKind::Tcp | OfiKind::Efa => None,
        }
    }

    /// Whether operations should complete only once delivered (FI_DELIVERY_COMPLETE), so a
    /// completion means the target accepted them, as a verbs RC completion does.
    /// - tcp: yes. With the default "transmit complete", tcp;ofi_rxm 1.17 reports success for a
    ///   WRITE whose key the target rejects; with delivery complete the WRITE fails (the target
    ///   drops the transport connection, see `rdm::TCP_REJECTED_PROV_ERRNO`).
    /// - shm: yes, for memory protection. Observed with shm 1.17: without delivery complete a
    ///   small WRITE with a wrong key *lands* in the target's memory and completes
    ///   successfully. With delivery complete the target checks the key and rejects the WRITE
    ///   (`ofi_mr_map_verify: unknown key`) but sends no answer, so the WRITE never completes
    ///   (its send slot stays taken until the connection is dropped). So on `ofi:shm` a
    ///   wrong-key operation shows up as a stall, never as `RemoteAccess`; callers' deadlines
    ///   (keepalives, ack words) are what notice it. Our own shm endpoints no longer post such
    ///   operations (`piecewise.rs`: every WRITE and SEND is injected, done when posted, and
    ///   a wrong-key WRITE completes without landing); the flag still covers anything else.
    /// - efa: not needed; the device completes an RDMA write after the remote ack.
    pub fn wants_delivery_complete(self) -> bool {
        matches!(self, OfiKind::Tcp | OfiKind::Shm)
    }

    /// How listeners and connectors of this provider meet: over our own TCP socket at the
    /// bind address for every provider, whose handshakes are bounded in number and time
    /// (`listener.rs`). A listening RDM endpoint (`Fabric`) would leave its TCP port to
    /// libfabric, which waits for a connecting peer's request without any deadline.
    pub fn default_rendezvous(self) -> Rendezvous {
        Rendezvous::TcpSocket
    }
}

/// How a connector finds a listener and the two learn each other's endpoint names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rendezvous {
    /// The listener is itself an RDM endpoint at the bind address (tcp: that IP and port via
    /// `fi_getinfo(node, service)`; shm: a name derived from it); HELLO and ACCEPT travel over
    /// the fabric.
    Fabric,
    /// The listener is a TCP socket at the bind address; HELLO and ACCEPT travel over it
    /// (`rendezvous_socket.rs`), then the fabric takes over. The default for every
    /// provider (EFA has no IP addressing for anything else).
    TcpSocket,
}

/// The shm endpoint name a listener at `addr` takes, and a connector derives: shm has no IP
/// addresses, so the socket address is folded into a name (`bus_127.0.0.1_7000`). The name
/// has no `fi_shm://` prefix on purpose: shm 1.17 uses an unprefixed source address as the
/// endpoint name verbatim, while a prefixed one gets `:<uid>:<endpoint index>` appended, which a
/// connector cannot predict. The name is a file under /dev/shm, so it carries no '/' (IPv6 ':'
/// become '.').
pub fn shm_name_for(addr: SocketAddr) -> Vec<u8> {
    let ip = addr.ip().to_string().replace(':', ".");
    let mut name = format!("bus_{ip}_{}", addr.port()).into_bytes();
    name.push(0);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_shm_names_are_file_safe() {
        for k in [OfiKind::Tcp, OfiKind::Shm, OfiKind::Efa] {
            assert_eq!(OfiKind::from_name(k.name()), Some(k));
        }
        assert_eq!(OfiKind::from_name("verbs"), None);
        let n = shm_name_for("[::1]:7000".parse().unwrap());
        assert_eq!(n, b"bus_..1_7000\0".to_vec());
        let n = shm_name_for("127.0.0.1:7000".parse().unwrap());
        assert_eq!(n, b"bus_127.0.0.1_7000\0".to_vec());
    }
}
