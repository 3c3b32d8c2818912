//! Typed errors of the fabric. Callers branch on them: a `Unavailable` provider makes the node
//! refuse the fabric listener at start with a clear message, `Closed` tears one connection down,
//! `Full` means "post later" (back-pressure), anything else is a bug or bad input from a peer.

use thiserror::Error;

/// Errors from fabric operations.
#[derive(Debug, Error)]
pub enum BusError {
    /// The provider's library or device is not present on this host (no rdma-core, no libfabric,
    /// no RDMA device). The text says which and why.
    #[error("fabric provider {provider} is unavailable: {reason}")]
    Unavailable {
        provider: &'static str,
        reason: String,
    },
    /// An address, config value or argument is invalid.
    #[error("invalid {what}: {reason}")]
    Invalid { what: &'static str, reason: String },
    /// A queue (send/recv work requests, completion queue, ring space) has no room now; retry
    /// after polling completions.
    #[error("{what} is full")]
    Full { what: &'static str },
    /// A local or remote slice falls outside its memory region.
    #[error("out of bounds: offset {offset} + len {len} > region length {region_len}")]
    OutOfBounds {
        offset: u64,
        len: u64,
        region_len: u64,
    },
    /// The connection is closed or the peer is gone.
    #[error("connection closed: {0}")]
    Closed(String),
    /// Nothing happened before the deadline.
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The peer broke the protocol (bad control message, bad record, wrong rkey...).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The provider library returned an error code.
    #[error("{provider} {call} failed: {reason}")]
    Provider {
        provider: &'static str,
        call: &'static str,
        reason: String,
    },
}

/// Result alias for the crate.
pub type Result<T, E = BusError> = std::result::Result<T, E>;
