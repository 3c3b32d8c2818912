//! Atomic slot migration as the node runs it (design: docs/atomic-migration.md): the
//! source's driver thread per migration ([`driver`]), its link to the target ([`link`],
//! set up by [`link_setup`], over TCP or the fabric ([`fabric_link`]), its replies counted by
//! [`link_replies`]),
//! the slot copy ([`copy`]) and the write tap ([`tap`]), the drop of keys a node no longer
//! owns ([`purge`]), the [`supervisor`] that ends migrations whose driver or end is
//! gone, and [`replica_migration`]: an emptied source following the node that took its
//! last slot. The decisions are the cores of `cluster::migration`; this layer does the I/O.

pub mod copy;
pub mod driver;
pub mod fabric_link;
pub mod link;
pub mod link_replies;
pub mod link_setup;
pub mod purge;
#[cfg(test)]
mod purge_tests;
pub mod registry;
pub mod replica_migration;
pub mod start;
pub mod supervisor;
pub mod tap;

pub use registry::Registry;
pub use start::{start, StartError, StartRequest};
