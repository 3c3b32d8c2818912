//! The `ofi` provider: libfabric 1.17 RDM endpoints for `tcp;ofi_rxm` (`ofi:tcp`), `shm`
//! (`ofi:shm`) and `efa` (`ofi:efa`, untested here: no EFA hardware; see [`OfiKind::Efa`]).
//!
//! libfabric is opened at run time ([`library`]), so a host without it runs the node and gets
//! `BusError::Unavailable` from [`OfiProvider::open`]. Our own bindings ([`sys`]) declare the
//! 1.17 ABI; most libfabric calls are inline functions in the C headers that call through ops
//! tables, which we call the same way.
//!
//! Layers: [`domain`] (one fabric + domain per provider), [`region`] (registration per the
//! domain's `mr_mode`), [`endpoint`] (an RDM endpoint with its CQ and AV), [`rdm`] (operation
//! contexts, bounce receives, staging), then the contract's types: [`conn`], [`listener`],
//! [`datagram`].
//!
//! Progress: tcp and shm are manual-progress providers: data moves only while the process is
//! inside a libfabric call. Every endpoint's `poll`/`wait`/`try_recv` reads its CQ each time it
//! is called, and **a process that is the target of one-sided writes must keep polling**, or
//! the writes (and the initiator's completions) stall.
//!
//! Where `ofi` differs from verbs (each one tested, or stated where it cannot be):
//! - SENDs carry at most [`OFI_SEND_MAX`] bytes (they land in bounce buffers; see [`rdm`]).
//! - A first SEND or datagram to a new tcp peer may meet `Full` while rxm connects: poll and
//!   post again (datagrams wait in a bounded outbox instead).
//! - A WRITE/READ with a wrong key: `RemoteAccess` on tcp (and the connection is unusable
//!   after, as an RC QP would be); on shm 1.17 it is rejected at the target, and the
//!   initiator is not told: our shm WRITEs are injected pieces that complete when posted
//!   (`piecewise.rs`: shm's answered operations let one dead peer stall a shared endpoint),
//!   and an answered one never completes (`answer_writes`, [`OfiKind::wants_delivery_complete`]).
//! - `RecvWriteImm::byte_len` is 0 on tcp (libfabric does not report it); the immediate is
//!   exact everywhere.
//! - `ofi:tcp` endpoints are IPv4 only. EFA meets peers over a TCP socket ([`Rendezvous`]).
//! - The target of a bad-key WRITE gets no event from libfabric (tcp drops the transport
//!   underneath, shm drops the request): protocols detect misbehaving peers by their own
//!   checks and deadlines.
//!
//! Memory protection (libfabric checks keys per domain, not per endpoint or peer):
//! - every region has at least 64 random bits of key and address ([`mr_key`], [`placement`]),
//!   and exactly the rights it asks for ([`region::fi_access`]: write targets are not
//!   readable; only SEND sources, which rxm makes readable, carry what peers receive anyway);
//! - `ofi:tcp` does not open when an environment variable would make rxm expose more
//!   ([`env_guard`]);
//! - `ofi:shm` and `ofi:efa` make the process non-dumpable, closing shm's key-less
//!   cross-memory-attach path to same-user processes ([`dumpable`]).

pub(crate) mod conn;
pub(crate) mod datagram;
pub(crate) mod domain;
pub(crate) mod dumpable;
pub(crate) mod endpoint;
pub(crate) mod env_guard;
pub(crate) mod handshake;
pub mod hub;
pub(crate) mod info;
pub(crate) mod kind;
pub(crate) mod library;
pub mod listener;
pub(crate) mod mr_key;
mod note_gate;
pub(crate) mod open;
mod piecewise;
mod placement;
pub(crate) mod rdm;
pub(crate) mod region;
pub(crate) mod rendezvous_socket;
mod shm_sweep;
pub(crate) mod sys;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::access::Access;
use crate::config::EndpointConfig;
use crate::error::BusError;
use crate::provider::Provider;

pub use conn::OfiConnection;
pub use datagram::{OfiDatagram, DATAGRAM_MTU};
pub use domain::OfiOrdering;
pub use kind::{OfiKind, Rendezvous};
pub use library::LIBFABRIC_SONAME;
pub use listener::OfiListener;
pub use open::OFI_SEND_MAX;
pub use piecewise::answer_writes;
pub use region::OfiRegion;

use domain::Domain;
use library::Library;

/// A libfabric provider: one fabric and domain, shared by all its regions and endpoints.
#[derive(Debug, Clone)]
pub struct OfiProvider {
    domain: Arc<Domain>,
    rendezvous: Rendezvous,
}

impl OfiProvider {
    /// Opens `kind` through the system's libfabric (`libfabric.so.1`).
    pub fn open(kind: OfiKind) -> Result<Self, BusError> {
        Self::open_with_library(kind, LIBFABRIC_SONAME)
    }

    /// Opens `kind` through the library at `library` (a soname or path). Refuses an
    /// environment that would weaken memory protection ([`env_guard`]); `ofi:shm` and
    /// `ofi:efa` make the process non-dumpable ([`dumpable`]).
    pub fn open_with_library(kind: OfiKind, library: &str) -> Result<Self, BusError> {
        Self::open_with(kind, library, OfiOrdering::default())
    }

    /// Opens `kind` through the system's libfabric with endpoints asking for `ordering`.
    pub fn open_with_ordering(kind: OfiKind, ordering: OfiOrdering) -> Result<Self, BusError> {
        Self::open_with(kind, LIBFABRIC_SONAME, ordering)
    }

    fn open_with(kind: OfiKind, library: &str, ordering: OfiOrdering) -> Result<Self, BusError> {
        env_guard::check(kind)?;
        let lib = Library::shared(library)?;
        if matches!(kind, OfiKind::Shm | OfiKind::Efa) {
            dumpable::forbid_cross_memory_attach(kind.name())?;
        }
        let domain = Domain::open(lib, kind, ordering)?;
        Ok(OfiProvider {
            domain,
            rendezvous: kind.default_rendezvous(),
        })
    }

    /// Opens a provider by its `fabric-provider` name (`ofi:tcp`, `ofi:shm`, `ofi:efa`).
    pub fn open_named(name: &str) -> Result<Self, BusError> {
        let kind = OfiKind::from_name(name).ok_or_else(|| BusError::Invalid {
            what: "fabric-provider",
            reason: format!("{name:?} is not ofi:tcp, ofi:shm or ofi:efa"),
        })?;
        Self::open(kind)
    }

    pub fn kind(&self) -> OfiKind {
        self.domain.kind
    }

    /// What ordering its endpoints ask for.
    pub fn ordering(&self) -> OfiOrdering {
        self.domain.ordering
    }

    /// The transmit message ordering `fi_getinfo` answered for this provider (`FI_ORDER_*`
    /// bits): what endpoints get unless opened with [`OfiOrdering::None`].
    pub fn answered_msg_order(&self) -> u64 {
        self.domain.info.tx_attr().msg_order
    }

    /// Uses `rendezvous` for listen/connect instead of the provider's default. Both ends must
    /// agree. Tests use it to run EFA's TCP-socket rendezvous on tcp and shm.
    pub fn with_rendezvous(mut self, rendezvous: Rendezvous) -> Self {
        self.rendezvous = rendezvous;
        self
    }
}

impl Provider for OfiProvider {
    type Region = OfiRegion;
    type Conn = OfiConnection;
    type Listener = OfiListener;
    type Datagram = OfiDatagram;

    fn name(&self) -> &str {
        self.domain.kind.name()
    }

    fn register(&self, len: usize, access: Access) -> Result<OfiRegion, BusError> {
        OfiRegion::register(&self.domain, len, access)
    }

    fn listen(&self, bind: SocketAddr, config: &EndpointConfig) -> Result<OfiListener, BusError> {
        self.kind().check_socket_addr(bind)?;
        OfiListener::open(&self.domain, self.rendezvous, bind, config)
    }

    fn connect(
        &self,
        to: SocketAddr,
        config: &EndpointConfig,
        timeout: Duration,
    ) -> Result<OfiConnection, BusError> {
        self.kind().check_socket_addr(to)?;
        listener::connect(&self.domain, self.rendezvous, to, config, timeout)
    }

    fn datagram(&self, config: &EndpointConfig) -> Result<OfiDatagram, BusError> {
        OfiDatagram::open(&self.domain, config, None)
    }

    fn datagram_at(
        &self,
        ip: Option<std::net::IpAddr>,
        config: &EndpointConfig,
    ) -> Result<OfiDatagram, BusError> {
        OfiDatagram::open(&self.domain, config, ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: when libfabric cannot be loaded the provider reports `Unavailable` (and names the
    /// provider), so the node can refuse the fabric listener with a clear message.
    #[test]
    fn bogus_library_name_is_unavailable() {
        let err = OfiProvider::open_with_library(OfiKind::Tcp, "libfabric-bogus.so.0").unwrap_err();
        assert!(
            matches!(
                err,
                BusError::Unavailable {
                    provider: "ofi",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("libfabric-bogus.so.0"), "{err}");
    }
}
