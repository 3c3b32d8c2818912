//! `sim`: a deterministic, in-process fabric for tests and the `chaos` crate (DESIGN §4.1).
//!
//! A [`SimFabric`] is one network, created from a seed. Each [`SimProvider`] attached to it is
//! one host with its own endpoint ids (`EndpointAddr::Sim`). Hosts listen and connect by
//! `SocketAddr` through the network's registry. Everything is safe Rust: registered memory is a
//! heap buffer behind a mutex.
//!
//! Semantics follow verbs RC/UD:
//! - SEND/RECV, WRITE WITH IMM and READ on a connection are reliable and in order. A SEND or
//!   WRITE WITH IMM that finds no posted receive is retried after `rnr_delay` (receiver not
//!   ready), blocking what follows it, and fails with `RetryExceeded` after `rnr_retry_limit`.
//! - Plain WRITEs may be placed out of order (`Faults::reorder_writes`, as EFA allows).
//! - Send-side completions surface in post order; every work request completes.
//! - WRITE/READ with a wrong rkey, out of range or without the REMOTE_* right completes with
//!   `RemoteAccess`, and both queue pairs go to error: what was queued completes `Flushed`.
//! - Partitions and crashes make reliable operations fail with `RetryExceeded` (the sender's
//!   queue pair then goes to error) and drop datagrams. A crashed host's memory vanishes.
//! - Datagrams are lost and duplicated with the configured probabilities, and reordered by the
//!   drawn delays.
//!
//! Time is virtual: nothing is delivered until the driver steps the network, unless it was
//! made with [`SimFabric::new_realtime`], where the real clock drives it and blocking `wait`s
//! work across threads.

mod connection;
mod datagram;
mod deliver;
mod fabric;
mod faults;
mod network;
mod post;
mod provider;
mod qp;
mod region;

#[cfg(test)]
mod tests;

pub use connection::{SimConnection, SimListener};
pub use datagram::SimDatagram;
pub use fabric::SimFabric;
pub use faults::{Faults, DELAY_MAX, RNR_RETRY_LIMIT_MAX};
pub use network::{
    SimStats, DATAGRAM_INBOX_MAX, HOSTS_MAX, LISTEN_BACKLOG_MAX, PUMP_STEPS_MAX, REGIONS_MAX,
    REGION_LEN_MAX,
};
pub use post::SIM_DATAGRAM_MTU;
pub use provider::SimProvider;
pub use region::SimRegion;

/// A simulated host's index on its network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub u32);
