//! The migrations as the topology log has applied them: which ops run, which batch of each
//! is moving, which finished how. Every node applies the same records in the same order,
//! so every node's ledger is the same; the ledger alone decides whether a record takes
//! effect (a commit after an abort does nothing, and the other way round).
//!
//! Records (`TopologyCommand::Migration*` once wired into the log):
//! - `open`: the op exists (its `request_id` names it from then on), nothing moves yet;
//! - `begin(batch)`: the batch's slots are *moving* (the source still owns them);
//! - `commit(batch)`: the batch's slots belong to the target (the caller applies that to
//!   the slot map in the same entry); the op succeeds with its last batch;
//! - `abort`: nothing moving any more; the op ends FAILED or CANCELLED.

use super::ranges::SlotRanges;
use crate::cluster::id::NodeId;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A migration's id in the log: chosen at random by its coordinator (64 bits, so two
/// coordinators do not pick the same one); a repeat is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MigrationId(pub u64);

impl std::fmt::Display for MigrationId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Migrations running at once; more are refused at `open`.
pub const RUNNING_MIGRATIONS_MAX: usize = 16;
/// Finished migrations remembered (for `request_id` and GetOperation); the oldest goes.
pub const FINISHED_MIGRATIONS_KEPT: usize = 64;
/// Longest `request_id` kept.
pub const REQUEST_ID_MAX: usize = 256;
/// Longest abort reason kept.
pub const REASON_MAX: usize = 512;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigrationState {
    /// `batches_done` batches committed; `moving` is the batch begun and not yet committed.
    Running,
    Succeeded,
    Failed(String),
    Cancelled(String),
}

impl MigrationState {
    pub fn is_running(&self) -> bool {
        matches!(self, MigrationState::Running)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationRecord {
    pub id: MigrationId,
    pub request_id: String,
    pub source: NodeId,
    pub target: NodeId,
    /// Every slot the op moves.
    pub ranges: SlotRanges,
    pub batches_total: u32,
    pub batches_done: u32,
    /// The batch begun and not committed: its number and slots.
    pub moving: Option<(u32, SlotRanges)>,
    pub slots_done: usize,
    pub state: MigrationState,
    /// The batch an abort stopped: its target drops what it had copied of these slots.
    pub aborted_slots: Option<SlotRanges>,
}

/// Why a record took no effect (the same on every node).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("migration {0} already exists")]
    DuplicateId(MigrationId),
    #[error("no migration {0}")]
    Unknown(MigrationId),
    #[error("migration {0} has ended")]
    Ended(MigrationId),
    #[error("source and target are the same node")]
    SameNode,
    #[error("{RUNNING_MIGRATIONS_MAX} migrations are running already")]
    TooManyRunning,
    #[error("request_id is longer than {REQUEST_ID_MAX} bytes")]
    RequestIdTooLong,
    #[error("slot {slot} is not owned by the source {source_id}")]
    NotOwnedBySource { slot: u16, source_id: NodeId },
    #[error("slot {slot} is moving already (migration {by})")]
    SlotBusy { slot: u16, by: MigrationId },
    #[error("batch {batch} of migration {id} is not the one expected ({expected})")]
    WrongBatch {
        id: MigrationId,
        batch: u32,
        expected: u32,
    },
    #[error("the batch's slots are not slots of migration {0}")]
    NotInMigration(MigrationId),
    #[error("a batch of migration {0} is moving already")]
    BatchOpen(MigrationId),
}

/// The `open` record: a migration of `ranges` from `source` to `target` in batches of
/// `slots_per_batch`.
#[derive(Clone, Debug)]
pub struct OpenRequest<'a> {
    pub id: MigrationId,
    pub request_id: &'a str,
    pub source: NodeId,
    pub target: NodeId,
    pub ranges: SlotRanges,
    pub slots_per_batch: usize,
}

/// What `open` found: a new op, or the one its `request_id` already names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    New(MigrationId),
    Existing(MigrationId),
}

/// What a record changed that the slot map must follow.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnerChange {
    /// Slots that now belong to `to`.
    pub slots: SlotRanges,
    pub to: Option<NodeId>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrationLedger {
    ops: BTreeMap<MigrationId, MigrationRecord>,
    by_request: HashMap<String, MigrationId>,
    /// Slots of every begun batch, with their migration.
    moving: BTreeMap<u16, MigrationId>,
    /// Finished ops, oldest first, to forget past [`FINISHED_MIGRATIONS_KEPT`].
    finished: VecDeque<MigrationId>,
}

impl MigrationLedger {
    pub fn get(&self, id: MigrationId) -> Option<&MigrationRecord> {
        self.ops.get(&id)
    }

    pub fn by_request_id(&self, request_id: &str) -> Option<&MigrationRecord> {
        self.by_request
            .get(request_id)
            .and_then(|id| self.ops.get(id))
    }

    pub fn running(&self) -> impl Iterator<Item = &MigrationRecord> {
        self.ops.values().filter(|r| r.state.is_running())
    }

    /// The migration moving `slot`, if one is.
    pub fn moving(&self, slot: u16) -> Option<MigrationId> {
        self.moving.get(&slot).copied()
    }

    /// Registers a migration (the `open` record). `owner_of` is the slot map as of this
    /// record.
    pub fn open(
        &mut self,
        request: OpenRequest<'_>,
        owner_of: impl Fn(u16) -> Option<NodeId>,
    ) -> Result<Opened, Refusal> {
        let OpenRequest {
            id,
            request_id,
            source,
            target,
            ranges,
            slots_per_batch,
        } = request;
        if request_id.len() > REQUEST_ID_MAX {
            return Err(Refusal::RequestIdTooLong);
        }
        if let Some(existing) = (!request_id.is_empty())
            .then(|| self.by_request.get(request_id))
            .flatten()
        {
            return Ok(Opened::Existing(*existing));
        }
        if self.ops.contains_key(&id) {
            return Err(Refusal::DuplicateId(id));
        }
        if source == target {
            return Err(Refusal::SameNode);
        }
        if self.running().count() >= RUNNING_MIGRATIONS_MAX {
            return Err(Refusal::TooManyRunning);
        }
        check_owned(&ranges, &source, &owner_of)?;
        let batches_total = ranges.batches(slots_per_batch.max(1)).len() as u32;
        let record = MigrationRecord {
            id,
            request_id: request_id.to_string(),
            source,
            target,
            ranges,
            batches_total,
            batches_done: 0,
            moving: None,
            slots_done: 0,
            state: MigrationState::Running,
            aborted_slots: None,
        };
        if !request_id.is_empty() {
            self.by_request.insert(request_id.to_string(), id);
        }
        self.ops.insert(id, record);
        Ok(Opened::New(id))
    }

    /// Marks batch `batch` (`ranges`) of `id` moving.
    pub fn begin(
        &mut self,
        id: MigrationId,
        batch: u32,
        ranges: &SlotRanges,
        owner_of: impl Fn(u16) -> Option<NodeId>,
    ) -> Result<(), Refusal> {
        let record = self.running_op(id)?;
        if record.moving.is_some() {
            return Err(Refusal::BatchOpen(id));
        }
        if batch != record.batches_done {
            return Err(Refusal::WrongBatch {
                id,
                batch,
                expected: record.batches_done,
            });
        }
        if ranges.slots().any(|s| !record.ranges.contains(s)) || ranges.ranges().is_empty() {
            return Err(Refusal::NotInMigration(id));
        }
        check_owned(ranges, &record.source, &owner_of)?;
        if let Some((slot, by)) = ranges
            .slots()
            .find_map(|s| self.moving.get(&s).map(|by| (s, *by)))
        {
            return Err(Refusal::SlotBusy { slot, by });
        }
        for slot in ranges.slots() {
            self.moving.insert(slot, id);
        }
        let record = self.ops.get_mut(&id).expect("checked running above");
        record.moving = Some((batch, ranges.clone()));
        Ok(())
    }

    /// Commits batch `batch` of `id`: its slots belong to the target from this record on.
    pub fn commit(&mut self, id: MigrationId, batch: u32) -> Result<OwnerChange, Refusal> {
        let record = self.running_op(id)?;
        let expected = record.batches_done;
        let Some((begun, _)) = &record.moving else {
            return Err(Refusal::WrongBatch {
                id,
                batch,
                expected,
            });
        };
        if *begun != batch {
            return Err(Refusal::WrongBatch {
                id,
                batch,
                expected: *begun,
            });
        }
        let record = self.ops.get_mut(&id).expect("checked running above");
        let (_, slots) = record.moving.take().expect("checked above");
        for slot in slots.slots() {
            self.moving.remove(&slot);
        }
        record.batches_done += 1;
        record.slots_done += slots.slot_count();
        let target = record.target;
        if record.batches_done == record.batches_total {
            record.state = MigrationState::Succeeded;
            self.finish(id);
        }
        Ok(OwnerChange {
            slots,
            to: Some(target),
        })
    }

    /// Ends `id` without moving its open batch (batches committed before stay moved).
    pub fn abort(&mut self, id: MigrationId, reason: &str, cancelled: bool) -> Result<(), Refusal> {
        self.running_op(id)?;
        let record = self.ops.get_mut(&id).expect("checked running above");
        if let Some((_, slots)) = record.moving.take() {
            for slot in slots.slots() {
                self.moving.remove(&slot);
            }
            record.aborted_slots = Some(slots);
        }
        let reason = truncate(reason, REASON_MAX);
        record.state = match cancelled {
            true => MigrationState::Cancelled(reason),
            false => MigrationState::Failed(reason),
        };
        self.finish(id);
        Ok(())
    }

    /// The running migrations a leader must abort: one end is no longer a live member, or
    /// the source no longer owns what it is moving (a failover took its slots).
    pub fn to_abort(
        &self,
        alive: impl Fn(&NodeId) -> bool,
        owner_of: impl Fn(u16) -> Option<NodeId>,
    ) -> Vec<(MigrationId, String)> {
        let mut out = Vec::new();
        for r in self.running() {
            let why = if !alive(&r.source) {
                Some(format!("the source {} failed", r.source))
            } else if !alive(&r.target) {
                Some(format!("the target {} failed", r.target))
            } else {
                r.moving
                    .as_ref()
                    .and_then(|(_, slots)| slots.slots().find(|&s| owner_of(s) != Some(r.source)))
                    .map(|s| format!("slot {s} changed owner while moving"))
            };
            if let Some(why) = why {
                out.push((r.id, why));
            }
        }
        out
    }

    /// Running migrations whose source is `me` and that no machine of `me` runs (`runs`
    /// false): an open that landed after its source gave up, or a source restarted
    /// mid-migration. `me` proposes their abort.
    pub fn orphans_of(&self, me: &NodeId, runs: impl Fn(MigrationId) -> bool) -> Vec<MigrationId> {
        self.running()
            .filter(|r| r.source == *me && !runs(r.id))
            .map(|r| r.id)
            .collect()
    }

    /// Running records by id, then finished ones oldest first (the image's order).
    pub(super) fn records_in_image_order(&self) -> Vec<&MigrationRecord> {
        let mut out: Vec<&MigrationRecord> = self.running().collect();
        out.extend(self.finished.iter().filter_map(|id| self.ops.get(id)));
        out
    }

    /// The ledger an image describes (see [`Self::records_in_image_order`]); `Err` names
    /// what is inconsistent.
    pub(super) fn from_records(records: Vec<MigrationRecord>) -> Result<Self, &'static str> {
        let mut ledger = MigrationLedger::default();
        let mut running = 0;
        for r in records {
            if ledger.ops.contains_key(&r.id) {
                return Err("repeated migration id");
            }
            if r.state.is_running() {
                running += 1;
                if running > RUNNING_MIGRATIONS_MAX || !ledger.finished.is_empty() {
                    return Err("running migrations");
                }
                if let Some((_, slots)) = &r.moving {
                    for slot in slots.slots() {
                        if ledger.moving.insert(slot, r.id).is_some() {
                            return Err("slot moving twice");
                        }
                    }
                }
            } else {
                if r.moving.is_some() {
                    return Err("finished migration with a moving batch");
                }
                ledger.finished.push_back(r.id);
                if ledger.finished.len() > FINISHED_MIGRATIONS_KEPT {
                    return Err("finished migrations");
                }
            }
            if !r.request_id.is_empty()
                && ledger
                    .by_request
                    .insert(r.request_id.clone(), r.id)
                    .is_some()
            {
                return Err("repeated request_id");
            }
            ledger.ops.insert(r.id, r);
        }
        Ok(ledger)
    }

    /// The finished migrations remembered, in the order they ended (oldest first).
    pub fn ended(&self) -> impl Iterator<Item = &MigrationRecord> {
        self.finished.iter().filter_map(|id| self.ops.get(id))
    }

    /// Every remembered migration (running and finished), by id.
    pub fn all(&self) -> impl Iterator<Item = &MigrationRecord> {
        self.ops.values()
    }

    fn running_op(&self, id: MigrationId) -> Result<&MigrationRecord, Refusal> {
        let record = self.ops.get(&id).ok_or(Refusal::Unknown(id))?;
        match record.state.is_running() {
            true => Ok(record),
            false => Err(Refusal::Ended(id)),
        }
    }

    fn finish(&mut self, id: MigrationId) {
        self.finished.push_back(id);
        while self.finished.len() > FINISHED_MIGRATIONS_KEPT {
            let Some(old) = self.finished.pop_front() else {
                break;
            };
            if let Some(r) = self.ops.remove(&old) {
                if !r.request_id.is_empty() {
                    self.by_request.remove(&r.request_id);
                }
            }
        }
    }
}

fn check_owned(
    ranges: &SlotRanges,
    source: &NodeId,
    owner_of: &impl Fn(u16) -> Option<NodeId>,
) -> Result<(), Refusal> {
    match ranges
        .slots()
        .find(|&s| owner_of(s).as_ref() != Some(source))
    {
        Some(slot) => Err(Refusal::NotOwnedBySource {
            slot,
            source_id: *source,
        }),
        None => Ok(()),
    }
}

/// `reason` cut to fit a `MigrationAbort` record (the log refuses longer ones): an abort
/// must always be recordable, whatever a failure's text says.
pub fn abort_reason(reason: &str) -> String {
    if reason.len() <= REASON_MAX {
        return reason.to_string();
    }
    format!("{}...", truncate(reason, REASON_MAX - 3))
}

fn truncate(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
