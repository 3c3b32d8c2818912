//! Applying the atomic-migration records (`MigrationOpen/Begin/Commit/Abort`) to the
//! topology: the ledger (`cluster::migration::ledger`) decides whether a record takes
//! effect, and a commit binds the batch's slots to the target in the same entry, so every
//! node switches the owner at the same log index.

use super::apply::{bind_slot_to, ApplyError};
use super::command::MigrationOpen;
use crate::cluster::id::NodeId;
use crate::cluster::migration::ledger::{MigrationId, OpenRequest};
use crate::cluster::migration::ranges::SlotRanges;
use crate::cluster::topology::Topology;

/// Owner of `slot` by node id, as the log's checks see it.
fn owner_of(t: &Topology) -> impl Fn(u16) -> Option<NodeId> + '_ {
    move |slot| t.slots.owner(slot).and_then(|i| t.node(i)).map(|n| n.id)
}

fn ranges(raw: &[(u16, u16)]) -> Result<SlotRanges, ApplyError> {
    SlotRanges::new(raw).map_err(|e| ApplyError::Migration(e.to_string()))
}

pub(super) fn open(t: &mut Topology, open: &MigrationOpen) -> Result<(), ApplyError> {
    // Both ends must be primaries the log knows; the source must own every slot (checked by
    // the ledger against the map as of this entry).
    super::apply::logged_primary(t, &open.source)?;
    super::apply::logged_primary(t, &open.target)?;
    let ranges = ranges(&open.ranges)?;
    let request = OpenRequest {
        id: MigrationId(open.id),
        request_id: &open.request_id,
        source: open.source,
        target: open.target,
        ranges,
        slots_per_batch: open.slots_per_batch.max(1) as usize,
    };
    let mut ledger = std::mem::take(&mut t.consensus.migrations);
    let result = ledger.open(request, owner_of(t));
    t.consensus.migrations = ledger;
    result.map(|_| ()).map_err(ApplyError::from)
}

pub(super) fn begin(
    t: &mut Topology,
    id: u64,
    batch: u32,
    raw: &[(u16, u16)],
) -> Result<(), ApplyError> {
    let ranges = ranges(raw)?;
    let mut ledger = std::mem::take(&mut t.consensus.migrations);
    let result = ledger.begin(MigrationId(id), batch, &ranges, owner_of(t));
    t.consensus.migrations = ledger;
    result.map_err(ApplyError::from)
}

pub(super) fn commit(t: &mut Topology, id: u64, batch: u32, index: u64) -> Result<(), ApplyError> {
    // The target must still be a primary the log knows: checked before the ledger moves.
    let target = t
        .consensus
        .migrations
        .get(MigrationId(id))
        .map(|r| r.target)
        .ok_or(ApplyError::Migration(format!(
            "no migration {}",
            MigrationId(id)
        )))?;
    let owner = super::apply::logged_primary(t, &target)?;
    // A failover of the source while the batch moved gave its slots to another node: the
    // batch can no longer be the source's to hand over.
    if let Some(record) = t.consensus.migrations.get(MigrationId(id)) {
        if let Some((_, moving)) = &record.moving {
            let owners = owner_of(t);
            if let Some(slot) = moving.slots().find(|&s| owners(s) != Some(record.source)) {
                return Err(ApplyError::Migration(format!(
                    "slot {slot} changed owner while moving"
                )));
            }
        }
    }
    let change = t.consensus.migrations.commit(MigrationId(id), batch)?;
    for slot in change.slots.slots() {
        bind_slot_to(t, slot, owner);
    }
    super::apply::grant_epoch_to(t, owner, index);
    Ok(())
}

pub(super) fn abort(
    t: &mut Topology,
    id: u64,
    reason: &str,
    cancelled: bool,
) -> Result<(), ApplyError> {
    t.consensus
        .migrations
        .abort(MigrationId(id), reason, cancelled)
        .map_err(ApplyError::from)
}
