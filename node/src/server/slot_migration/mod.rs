//! Atomic slot migration as the node runs it (design: docs/atomic-migration.md): the
//! source's driver thread per migration ([`driver`]), its link to the target ([`link`]),
//! the slot copy ([`copy`]) and the write tap ([`tap`]), the drop of keys a node no longer
//! owns ([`purge`]), the [`supervisor`] that ends migrations whose driver or end is
//! gone, and [`replica_migration`]: an emptied source following the node that took its
//! last slot. The decisions are the cores of `cluster::migration`; this layer does the I/O.

pub mod copy;
pub mod driver;
pub mod link;
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
