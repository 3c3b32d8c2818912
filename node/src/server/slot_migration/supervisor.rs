//! Ends what no driver will end, and drops what no one owns, on every node of a topology
//! group (a background thread with its own pace):
//! - a migration the log shows running with this node as its source and no driver here
//!   (the source restarted mid-way, or its open landed after it gave up): abort;
//! - on the group's leader, a migration whose source or target failed, or whose moving
//!   slots changed owner (a failover): abort;
//! - keys of a batch an abort stopped, copied to this node as its target, and keys of
//!   committed batches this node handed over but had not dropped yet (it died in between):
//!   delete them, once each slot is neither this node's nor moving (asked again before each
//!   DEL), and never while this node's driver of that migration still runs;
//! - a primary emptied by its last migration as a source that has not followed the taker
//!   yet (it died, or its proposals failed, between the last commit and its role change):
//!   `replica_migration::follow_the_taker`, once per process start, again while it fails.

use crate::cluster::consensus::TopologyCommand;
use crate::cluster::migration::{MigrationId, MigrationState};
use crate::server::Server;
use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

const PACE: Duration = Duration::from_millis(250);

pub fn start(server: &Arc<Server>) {
    if server.cluster.is_none() {
        return;
    }
    let weak = Arc::downgrade(server);
    let spawned = std::thread::Builder::new()
        .name("migration-supervisor".into())
        .spawn(move || run(weak));
    if let Err(e) = spawned {
        tracing::error!(error = %e, "the slot migration supervisor did not start");
    }
}

fn run(server: Weak<Server>) {
    let mut cleaned: HashSet<MigrationId> = HashSet::new();
    let mut followed: Option<MigrationId> = None;
    loop {
        std::thread::sleep(PACE);
        let Some(server) = server.upgrade() else {
            return;
        };
        if server.shutdown.is_triggered() {
            return;
        }
        round(&server, &mut cleaned);
        follow_the_last_taker(&server, &mut followed);
    }
}

/// The last migration this node was the source of that committed a batch and has ended,
/// with no driver of it here: its taker is followed if this node was left without a slot
/// (`replica_migration` decides), once (`followed` remembers it) unless that failed.
fn follow_the_last_taker(server: &Server, followed: &mut Option<MigrationId>) {
    let Some(cluster) = server.cluster.as_ref() else {
        return;
    };
    let last = {
        let t = cluster.topology.read();
        let me = t.myself().id;
        t.consensus
            .migrations
            .ended()
            .filter(|r| r.source == me && r.batches_done > 0)
            .last()
            .map(|r| (r.id, r.target))
    };
    let Some((id, taker)) = last else {
        return;
    };
    if *followed == Some(id) || server.slot_migrations.runs(id) {
        return;
    }
    if super::replica_migration::follow_the_taker(server, taker) {
        *followed = Some(id);
    }
}

fn round(server: &Arc<Server>, cleaned: &mut HashSet<MigrationId>) {
    let Some(cluster) = server.cluster.as_ref() else {
        return;
    };
    if !cluster.in_group() {
        return;
    }
    let leader = cluster.group_view().leader;
    let mut aborts: Vec<(MigrationId, String)> = Vec::new();
    let mut purge: Vec<(MigrationId, Vec<u16>)> = Vec::new();
    {
        let t = cluster.topology.read();
        let me = t.myself();
        let ledger = &t.consensus.migrations;
        for id in ledger.orphans_of(&me.id, |id| server.slot_migrations.runs(id)) {
            aborts.push((id, "the source restarted while the slots moved".into()));
        }
        if leader == Some(me.id) {
            let alive = |id: &crate::cluster::id::NodeId| {
                t.index_of(id)
                    .and_then(|i| t.node(i))
                    .is_some_and(|n| !n.is_failed() && n.is_primary())
            };
            let owner_of = |slot: u16| t.owner(slot).map(|n| n.id);
            aborts.extend(ledger.to_abort(alive, owner_of));
        }
        if me.is_primary() {
            let mine = |slot: u16| t.slots.owner(slot) == Some(t.myself_index());
            cleaned.retain(|id| ledger.get(*id).is_some());
            for r in ledger.all().filter(|r| !r.state.is_running()) {
                // A driver still running here drops what it handed over itself, once it
                // has closed the batch's link (see `purge`); until then the last batch's
                // slots may still stream to a target that has not applied the commit.
                if cleaned.contains(&r.id) || server.slot_migrations.runs(r.id) {
                    continue;
                }
                let slots: Vec<u16> = match (&r.state, r.target == me.id, r.source == me.id) {
                    (MigrationState::Failed(_) | MigrationState::Cancelled(_), true, _) => r
                        .aborted_slots
                        .iter()
                        .flat_map(|s| s.slots().collect::<Vec<_>>())
                        .collect(),
                    (_, _, true) => r.ranges.slots().collect(),
                    _ => Vec::new(),
                };
                let slots: Vec<u16> = slots
                    .into_iter()
                    .filter(|&s| !mine(s) && ledger.moving(s).is_none())
                    .collect();
                purge.push((r.id, slots));
            }
        }
    }
    for (id, why) in aborts {
        let command = TopologyCommand::MigrationAbort {
            id: id.0,
            reason: crate::cluster::migration::ledger::abort_reason(&why),
            cancelled: false,
        };
        match cluster.propose(command) {
            Ok(()) => tracing::warn!(migration = %id, why, "slot migration aborted"),
            Err(e) => tracing::debug!(migration = %id, error = %e, "abort not made"),
        }
    }
    for (id, slots) in purge {
        let holding: Vec<u16> = slots
            .into_iter()
            .filter(|&s| server.keyspace.count_in_slot(s) > 0)
            .collect();
        if !holding.is_empty() {
            let dropped = super::purge::purge_slots(server, holding.into_iter(), |slot| {
                let t = cluster.topology.read();
                t.slots.owner(slot) != Some(t.myself_index())
                    && t.consensus.migrations.moving(slot).is_none()
            });
            tracing::info!(migration = %id, dropped, "keys of slots this node does not own dropped");
        }
        cleaned.insert(id);
    }
}
