//! Atomic slot migration as commands reach it (CLUSTER MIGRATESLOTS, CANCELSLOTMIGRATIONS):
//! the driver threads live in `server::slot_migration`.

use crate::cluster::id::NodeId;
use crate::cluster::migration::{MigrationId, MigrationStats, SlotRanges};

pub trait SlotMigrations {
    /// Starts moving `ranges` (this node's) to `target`; the error is the reply's text.
    fn start_migration(
        &self,
        request_id: &str,
        ranges: SlotRanges,
        target: NodeId,
    ) -> Result<MigrationId, String>;
    /// Asks every migration this node drives to cancel; returns how many.
    fn cancel_migrations(&self) -> usize;
    /// Whether this node drives `id` now.
    fn drives(&self, id: MigrationId) -> bool;
    /// What this node measured of `id` as its source (running, or among the last finished).
    fn stats(&self, id: MigrationId) -> Option<MigrationStats>;
}
