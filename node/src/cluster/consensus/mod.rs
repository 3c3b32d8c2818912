//! The Raft-replicated topology (DESIGN.md §1): the slot map, shard membership and roles
//! change only through commands a Raft group has committed, so every node applies the same
//! changes in the same order and no slot has two owners in one topology version. No I/O:
//! the log takes ticks and peer bytes and hands back bytes to send and entries to apply.
//!
//! - [`codec`]: the explicit byte layout shared by commands and images;
//! - [`command`]: [`TopologyCommand`], one per log entry;
//! - [`apply`]: a committed command applied to a [`Topology`](super::Topology);
//! - [`state`]: the log's bookkeeping inside the topology (version, nodes it added);
//! - [`image`]: the replicated topology as one value, carried by snapshots;
//! - [`log`]: [`TopologyLog`], the Raft group (raft-rs `RawNode`) that commits commands;
//!   [`membership`] its conf changes, [`output`] what each turn hands back, [`storage`] and
//!   [`snapshot`] what it keeps, [`raft_id`] how node ids become raft ids,
//!   [`slog_bridge`] raft's logging into tracing.

pub mod apply;
pub mod codec;
pub mod command;
pub mod image;
pub mod log;
pub mod log_error;
pub mod membership;
pub mod output;
pub mod raft_id;
pub mod slog_bridge;
pub mod snapshot;
pub mod state;
pub mod storage;

#[cfg(test)]
mod apply_tests;
#[cfg(test)]
mod log_tests;
#[cfg(test)]
mod sim;

pub use apply::{apply, ApplyError};
pub use codec::CodecError;
pub use command::{NodeAddress, TopologyCommand};
pub use image::TopologyImage;
pub use log::TopologyLog;
pub use log_error::LogError;
pub use output::{Committed, LeaderChange, MemberRole, MembershipChange, Output, ProposalId};
pub use state::ConsensusState;
