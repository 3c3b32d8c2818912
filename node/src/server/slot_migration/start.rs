//! Starting a migration on its source: the checks a caller hears at once (the log checks
//! them again when it applies the open), then the driver thread.

use super::driver::{self, Plan};
use crate::cluster::id::NodeId;
use crate::cluster::migration::{MigrationId, MigrationSettings, SlotRanges};
use crate::server::Server;
use std::sync::Arc;

pub struct StartRequest {
    pub request_id: String,
    pub ranges: SlotRanges,
    pub target: NodeId,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StartError {
    #[error("ERR This instance has cluster support disabled")]
    NotCluster,
    #[error("ERR the cluster has no topology group yet: atomic slot migration needs one")]
    NoGroup,
    #[error("ERR only a primary can migrate its slots")]
    NotPrimary,
    #[error("ERR I don't know about node {0}")]
    UnknownTarget(NodeId),
    #[error("ERR the target {0} is not a primary")]
    TargetNotPrimary(NodeId),
    #[error("ERR the target is this node")]
    TargetIsMe,
    #[error("ERR the address of {0} is not known yet")]
    NoAddress(NodeId),
    #[error("ERR I'm not the owner of hash slot {0}")]
    NotOwner(u16),
    #[error("ERR slot {0} is already migrating")]
    SlotBusy(u16),
    #[error("ERR {0}")]
    Thread(String),
}

/// The limits a migration starting now runs under: the defaults, with the batch size and
/// the link's queue bound from the config.
fn settings_from_config(server: &Server) -> MigrationSettings {
    let config = server.config.read();
    MigrationSettings {
        slots_per_batch: config.cluster.migration_slots_per_batch.max(1),
        link_queue_bytes_max: config.cluster.migration_queue_max as usize,
        ..MigrationSettings::default()
    }
}

/// Starts migrating `request.ranges` from this node to `request.target`; answers the
/// migration's id at once (the driver proposes the open). The same `request_id` as a
/// migration the log already holds answers that migration.
pub fn start(server: &Arc<Server>, request: StartRequest) -> Result<MigrationId, StartError> {
    let cluster = server.cluster.as_ref().ok_or(StartError::NotCluster)?;
    if !cluster.in_group() {
        return Err(StartError::NoGroup);
    }
    {
        let t = cluster.topology.read();
        let ledger = &t.consensus.migrations;
        if !request.request_id.is_empty() {
            if let Some(existing) = ledger.by_request_id(&request.request_id) {
                return Ok(existing.id);
            }
        }
        let me = t.myself();
        if !me.is_primary() {
            return Err(StartError::NotPrimary);
        }
        if request.target == me.id {
            return Err(StartError::TargetIsMe);
        }
        let target = t
            .index_of(&request.target)
            .and_then(|i| t.node(i))
            .ok_or(StartError::UnknownTarget(request.target))?;
        if !target.is_primary() {
            return Err(StartError::TargetNotPrimary(request.target));
        }
        if target.ip.is_empty() || target.port == 0 {
            return Err(StartError::NoAddress(request.target));
        }
        let my_index = t.myself_index();
        for slot in request.ranges.slots() {
            if t.slots.owner(slot) != Some(my_index) {
                return Err(StartError::NotOwner(slot));
            }
            if ledger.moving(slot).is_some() {
                return Err(StartError::SlotBusy(slot));
            }
        }
    }
    let id = MigrationId(loop {
        let candidate = rand::random::<u64>();
        if candidate != 0 {
            break candidate;
        }
    });
    let state = server.slot_migrations.add(id);
    let plan = Plan {
        id,
        request_id: request.request_id,
        ranges: request.ranges,
        target: request.target,
        settings: settings_from_config(server),
    };
    let owner = server.clone();
    std::thread::Builder::new()
        .name(format!("migration-{id}"))
        .spawn(move || {
            driver::run(owner.clone(), plan, state);
            owner.slot_migrations.remove(id);
        })
        .map_err(|e| {
            server.slot_migrations.remove(id);
            StartError::Thread(e.to_string())
        })?;
    Ok(id)
}
