//! The topology log's file (`<dir>/topology-raft.log`), moved here from the consensus layer
//! so that layer does no I/O: it sees the file as a `LogFile` (load, create, reopen,
//! remove) and the open file as a `LogStore` (save a turn); this module implements both.
//!
//! - [`durable`]: the file's rules ([`durable::TopologyLogFile`], [`durable::DurableLog`]);
//! - [`durable_record`]: one record's framing;
//! - [`durable_load`]: its replay at start (a torn tail dropped, damage refused).

pub mod durable;
pub mod durable_load;
pub mod durable_record;

#[cfg(test)]
mod crash_sim;
#[cfg(test)]
mod durable_tests;
