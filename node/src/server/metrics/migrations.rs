//! The slot migrations this node drove as their source (atomic slot migration,
//! docs/atomic-migration.md), added up since it started: how many started and how they
//! ended, how many run now, the keys, bytes and slots they moved, and the write pauses
//! clients saw. Every node shows the families (zeros where it drove none), so a dashboard
//! sums them over the cluster.

use super::exposition::{Exposition, Kind};
use crate::server::Server;

pub fn migrations(e: &mut Exposition, server: &Server) {
    let t = server.slot_migrations.totals();
    e.single(
        "rdma_store_slot_migrations_started_total",
        Kind::Counter,
        "Slot migrations this node started as their source.",
        t.started as f64,
    );
    e.single(
        "rdma_store_slot_migrations_committed_total",
        Kind::Counter,
        "Slot migrations this node drove that committed every batch.",
        t.succeeded as f64,
    );
    e.family(
        "rdma_store_slot_migrations_aborted_total",
        Kind::Counter,
        "Slot migrations this node drove that were aborted (rolled back), by why.",
    )
    .sample("", &[("reason", "failed")], t.failed as f64)
    .sample("", &[("reason", "cancelled")], t.cancelled as f64);
    e.single(
        "rdma_store_slot_migrations_running",
        Kind::Gauge,
        "Slot migrations this node drives now.",
        t.running as f64,
    );
    e.single(
        "rdma_store_slot_migration_keys_copied_total",
        Kind::Counter,
        "Keys the slot copies put on migration links.",
        t.keys_copied as f64,
    );
    e.single(
        "rdma_store_slot_migration_bytes_total",
        Kind::Counter,
        "Bytes put on migration links: slot copies and the writes streamed after them.",
        t.bytes_streamed as f64,
    );
    e.single(
        "rdma_store_slot_migration_slots_moved_total",
        Kind::Counter,
        "Slots whose batch committed to the target.",
        t.slots_moved as f64,
    );
    e.single(
        "rdma_store_slot_migration_write_pauses_total",
        Kind::Counter,
        "Write pauses of migrating batches (one per batch unless a pause ran too long).",
        t.pauses as f64,
    );
    e.single(
        "rdma_store_slot_migration_write_pause_seconds_total",
        Kind::Counter,
        "Time writes to migrating slots were paused, added up over every pause.",
        t.pause_us as f64 / 1e6,
    );
}
