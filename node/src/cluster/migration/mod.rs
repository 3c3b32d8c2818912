//! Atomic slot migration as cores without I/O (docs/atomic-migration.md has the design):
//!
//! - [`ranges`]: the slots an op names, checked, merged and cut into batches;
//! - [`ledger`]: the migrations as the topology log applied them (open, begin, commit,
//!   abort): the single point of truth for who owns a moving slot;
//! - [`source`]: the source node's state machine for one migration (copy, catch up, bounded
//!   pause, commit), fed `(now_ms, input)` and answering actions for its driver;
//! - [`link_queue`]: a link's outbound stream, its bounds and the copy's backpressure;
//! - [`settings`]: its limits;
//! - [`stats`]: what the source measured of a migration (write pauses, keys, bytes, time).
//! - [`visibility`]: which slots a target keeps out of sight while it holds their copy.
//!
//! Not wired to the node yet: the topology records, the driver (slot copy, link, write
//! pause) and the admin API's MigrateSlots come next. `sim_tests` runs the source machine
//! and the ledger against a simulated log, link, keyspace and clients with faults.

pub mod gate;
pub mod ledger;
mod ledger_codec;
pub mod link_queue;
pub mod planner;
pub mod ranges;
pub mod settings;
pub mod source;
pub mod stats;
pub mod visibility;

#[cfg(test)]
mod ledger_tests;
#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod source_hold_tests;

pub use gate::MigrationGate;
pub use ledger::{MigrationId, MigrationLedger, MigrationRecord, MigrationState};
pub use link_queue::{LinkQueue, NoRoom, QueueBounds};
pub use ranges::SlotRanges;
pub use settings::MigrationSettings;
pub use source::SourceMigration;
pub use stats::{MigrationStats, PauseLog};
