//! The Raft-replicated topology (DESIGN.md §1): the slot map, shard membership and roles
//! change only through commands a Raft group has committed, so every node applies the same
//! changes in the same order and no slot has two owners in one topology version. No I/O:
//! the log takes ticks and peer bytes and hands back bytes to send and entries to apply.
//!
//! - [`codec`]: the explicit byte layout shared by commands and images;
//! - [`command`]: [`TopologyCommand`], one per log entry;
//! - [`apply`]: a committed command applied to a [`Topology`](super::Topology);
//! - [`state`]: the log's bookkeeping inside the topology (version, nodes it added);
//! - [`image`]: the replicated topology as one value, carried by snapshots.

pub mod apply;
pub mod codec;
pub mod command;
pub mod image;
pub mod state;

#[cfg(test)]
mod apply_tests;

pub use apply::{apply, ApplyError};
pub use codec::CodecError;
pub use command::{NodeAddress, TopologyCommand};
pub use image::TopologyImage;
pub use state::ConsensusState;
