//! The Raft-replicated topology (DESIGN.md §1): the slot map, shard membership and roles
//! change only through commands a Raft group has committed, so every node applies the same
//! changes in the same order and no slot has two owners in one topology version. The log
//! takes ticks and peer bytes and hands back bytes to send, entries to apply and what must
//! be made durable first; it does no I/O: the driver writes each turn's [`Persist`] through
//! a [`LogStore`] (the node's file, which a [`log_file::LogFile`] hands out; or memory)
//! before it sends or applies anything of that turn.
//!
//! A driver (the node's runtime, or the chaos simulator) runs each group member so:
//!
//! ```text
//! at start:              (file: a LogFile, e.g. the node's topology-raft.log)
//!                        let (log, store) = match TopologyLog::open(me, &file, seed)? {
//!                            Some(kept) => kept,  (a restart: term, vote, log kept)
//!                            None => TopologyLog::new(me, &voters, &learners, seed)?
//!                                        .with_file(&file)?,
//!                        };
//!                        (Durable(Corrupt) → refuse to start: never start a new log over it;
//!                         Poisoned or Durable(_) later → drop the log and open it again)
//! every TICK_MS:         log.tick()
//! bus RAFT message:      log.step(&sender, &bytes)        (errors: drop the message, log it)
//! operator/failover:     log.propose(&command)            (NotLeader { leader } → redirect)
//! after any of these:    let out = log.ready()?;
//!                        if let Some(p) = &out.persist {
//!                            log_store::save(&mut log, &mut store, p)?   (write + fsync)
//!                        }
//!                        send out.messages (opaque bytes, bus RAFT messages);
//!                        out.apply_to(&mut topology);     (under the topology lock)
//!                        if out.snapshot_due {
//!                            if let Some(p) = log.compact(&topology)? { save it likewise }
//!                        }
//! ```
//!
//! `topology.consensus.version` is the version gossip carries: equal versions mean equal
//! replicated topologies.
//!
//! - [`codec`]: the explicit byte layout shared by commands and images;
//! - [`command`]: [`TopologyCommand`], one per log entry;
//! - [`apply`](mod@apply): a committed command applied to a [`Topology`](super::Topology);
//! - [`state`]: the log's bookkeeping inside the topology (version, nodes it added);
//! - [`image`]: the replicated topology as one value, carried by snapshots;
//! - [`log`]: [`TopologyLog`], the Raft group (raft-rs `RawNode`) that commits commands;
//!   [`membership`] its conf changes, [`peer_check`] its checks on peer bytes, [`output`] what each turn hands back, [`storage`] and
//!   [`snapshot`] what it keeps, [`raft_id`] how node ids become raft ids,
//!   [`slog_bridge`] raft's logging into tracing;
//! - [`log_store`]: [`Persist`] (what a turn must make durable) and the [`LogStore`] trait
//!   the driver writes it through, with [`log_store::MemoryStore`];
//! - [`log_file`]: the log kept across restarts ([`TopologyLog::open`],
//!   [`TopologyLog::with_file`]) in a [`log_file::LogFile`] ([`durable_error`] its errors);
//!   the node's is the file `server::persistence::topology_log` reads and writes.

pub mod apply;
mod apply_migration;
pub mod codec;
pub mod command;
pub mod durable_error;
pub mod image;
pub mod log;
pub mod log_error;
pub mod log_file;
pub mod log_store;
pub mod membership;
pub mod output;
pub mod peer_check;
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
pub(crate) mod sim;

pub use apply::{apply, ApplyError};
pub use codec::CodecError;
pub use command::{NodeAddress, TopologyCommand};
pub use durable_error::DurableError;
pub use image::TopologyImage;
pub use log::TopologyLog;
pub use log_error::LogError;
pub use log_store::{LogStore, Persist};
pub use output::{Committed, LeaderChange, MemberRole, MembershipChange, Output, ProposalId};
pub use state::ConsensusState;
