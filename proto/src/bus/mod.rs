//! The cluster bus wire format (protocols.md §2.2-2.5, our own encoding): messages as
//! protobuf ([`message`]), their limits ([`limits`], [`validate`]), the authenticated
//! envelope ([`envelope`]) and the datagram fragmentation ([`fragment`]). No I/O: the node
//! hands the bytes to the fabric's Datagram endpoint.
//!
//! Sending: build a [`BusMessage`], [`seal`] it with the cluster secret, [`fragment`] it to
//! the endpoint's `max_payload()`, send each datagram ([`to_datagrams`] does the three).
//! Receiving: [`Reassembler::push`] each datagram; when it yields a message, [`open`] it
//! ([`from_datagram`] does both).

pub mod datagram;
pub mod envelope;
pub mod error;
pub mod fragment;
pub mod fuzz_checks;
pub mod limits;
pub mod link_proof;
pub mod message;
pub mod validate;

#[cfg(test)]
mod tests;

pub use datagram::{from_datagram, to_datagrams, DatagramError};
pub use envelope::{open, seal};
pub use error::{FragmentError, WireError};
pub use fragment::{fragment, fragment_as, Reassembler, ReassemblyLimits};
pub use message::{
    Body, BusMessage, Fail, Gossip, GossipEntry, Header, NodeRecord, Publish, Raft, RaftPropose,
    SlotRange, Update,
};
