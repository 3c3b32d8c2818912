//! The admin operations (MigrateSlots, Rebalance, AddNode, DrainNode, Failover) as the
//! topology log records them. Every node applies the same records in the same order, so
//! every node's journal is the same: any node answers GetOperation and ListOperations for any
//! operation, a `request_id` names one operation across the cluster, and an operation whose
//! coordinator died is adopted by the group's leader, which resumes it from its recorded
//! plan (`server::admin::op_supervisor`).
//!
//! Records (`TopologyCommand::Operation*`):
//! - `open`: the operation exists, coordinated by the node that took the request, with what
//!   it will do (its plan: the slot moves, the address to add, the replica to promote);
//! - `adopt`: another node coordinates it from this entry on;
//! - `cancel`: a cancel was asked for (on any node); its coordinator passes it on;
//! - `end`: it ended SUCCEEDED, FAILED or CANCELLED. Only running operations keep a plan.
//!
//! What the operation moves is recorded by its own records (a slot move is an atomic
//! migration in `cluster::migration::ledger`): this journal says what was asked and how it
//! ended, and holds what a new coordinator needs to carry on.

pub mod codec;
#[cfg(test)]
mod tests;

use crate::cluster::id::NodeId;
use std::collections::{BTreeMap, VecDeque};

/// Operations running at once; more are refused at `open`.
pub const RUNNING_OPERATIONS_MAX: usize = 16;
/// Ended operations remembered (GetOperation, `request_id`); the oldest goes.
pub const FINISHED_OPERATIONS_KEPT: usize = 64;
/// Longest `request_id`.
pub const REQUEST_ID_MAX: usize = 256;
/// Longest fingerprint, description and error text kept.
pub const TEXT_MAX: usize = 512;
/// Most slot moves in one plan, and most slot ranges across them: a running operation's
/// record stays a few kilobytes, so the journal stays small in the topology image.
pub const PLAN_MOVES_MAX: usize = 64;
pub const PLAN_RANGES_MAX: usize = 512;
/// Longest host name of an AddNode plan.
pub const HOST_MAX: usize = 255;
/// Longest request id base of a plan's slot moves (`admin:` + a request id, or an op id).
pub const REQUEST_BASE_MAX: usize = REQUEST_ID_MAX + 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationKind {
    MigrateSlots,
    Rebalance,
    AddNode,
    DrainNode,
    Failover,
}

impl OperationKind {
    pub fn code(self) -> u8 {
        match self {
            OperationKind::MigrateSlots => 1,
            OperationKind::Rebalance => 2,
            OperationKind::AddNode => 3,
            OperationKind::DrainNode => 4,
            OperationKind::Failover => 5,
        }
    }

    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => OperationKind::MigrateSlots,
            2 => OperationKind::Rebalance,
            3 => OperationKind::AddNode,
            4 => OperationKind::DrainNode,
            5 => OperationKind::Failover,
            _ => return None,
        })
    }
}

/// One slot move of a plan: `ranges` from `source` to `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedMove {
    pub source: NodeId,
    pub target: NodeId,
    pub ranges: Vec<(u16, u16)>,
}

/// What an operation does, as much as a new coordinator needs to carry it on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OperationPlan {
    /// Nothing to carry on (an ended operation's plan is dropped).
    Nothing,
    /// Slot moves in order (MigrateSlots, Rebalance, DrainNode), each an atomic migration
    /// whose request id in the ledger is `request_base/<index>`, so that a move already made
    /// is found done, not made again; then `drained` is forgotten.
    Moves {
        moves: Vec<PlannedMove>,
        drained: Option<NodeId>,
        request_base: String,
    },
    AddNode {
        host: String,
        port: u16,
        replica_of: Option<NodeId>,
    },
    Failover {
        replica: NodeId,
        force: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OperationOutcome {
    Succeeded,
    Failed(String),
    Cancelled(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationRecord {
    /// Chosen at random by the node that took the request (64 bits: two nodes do not pick
    /// the same one); shown as `op-<16 hex digits>`.
    pub id: u64,
    pub request_id: String,
    pub kind: OperationKind,
    /// What was asked, to tell a retry from another request under the same `request_id`.
    pub fingerprint: String,
    pub description: String,
    pub coordinator: NodeId,
    pub start_ms: u64,
    pub plan: OperationPlan,
    /// A cancel was asked for and the operation has not ended yet.
    pub cancel_requested: bool,
    /// How it ended, and when (Unix ms).
    pub ended: Option<(OperationOutcome, u64)>,
}

impl OperationRecord {
    /// The id as the admin API shows it.
    pub fn display_id(&self) -> String {
        display_id(self.id)
    }
}

pub fn display_id(id: u64) -> String {
    format!("op-{id:016x}")
}

/// The inverse of [`display_id`].
pub fn parse_display_id(text: &str) -> Option<u64> {
    let hex = text.strip_prefix("op-")?;
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

/// Why a record took no effect (the same on every node).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JournalRefusal {
    #[error("operation {} already exists", display_id(*.0))]
    DuplicateId(u64),
    #[error("request_id {request:?} already names operation {}", display_id(*.1), request = .0)]
    DuplicateRequest(String, u64),
    #[error("{RUNNING_OPERATIONS_MAX} operations are running in the cluster already")]
    TooMany,
    #[error("no operation {}", display_id(*.0))]
    Unknown(u64),
    #[error("operation {} has ended", display_id(*.0))]
    Ended(u64),
    #[error("an operation is opened without an end and without a cancel")]
    NotFresh,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperationJournal {
    running: BTreeMap<u64, OperationRecord>,
    /// Oldest first.
    finished: VecDeque<OperationRecord>,
}

impl OperationJournal {
    pub fn open(&mut self, record: OperationRecord) -> Result<(), JournalRefusal> {
        if record.ended.is_some() || record.cancel_requested {
            return Err(JournalRefusal::NotFresh);
        }
        if self.get(record.id).is_some() {
            return Err(JournalRefusal::DuplicateId(record.id));
        }
        if let Some(other) = self.by_request_id(&record.request_id) {
            return Err(JournalRefusal::DuplicateRequest(
                record.request_id.clone(),
                other.id,
            ));
        }
        if self.running.len() >= RUNNING_OPERATIONS_MAX {
            return Err(JournalRefusal::TooMany);
        }
        self.running.insert(record.id, record);
        Ok(())
    }

    /// `coordinator` carries the running operation `id` on from here.
    pub fn adopt(&mut self, id: u64, coordinator: NodeId) -> Result<(), JournalRefusal> {
        self.running_mut(id)?.coordinator = coordinator;
        Ok(())
    }

    pub fn request_cancel(&mut self, id: u64) -> Result<(), JournalRefusal> {
        self.running_mut(id)?.cancel_requested = true;
        Ok(())
    }

    pub fn end(
        &mut self,
        id: u64,
        outcome: OperationOutcome,
        end_ms: u64,
    ) -> Result<(), JournalRefusal> {
        self.running_mut(id)?;
        let mut record = self.running.remove(&id).expect("checked just above");
        record.plan = OperationPlan::Nothing;
        record.cancel_requested = false;
        record.ended = Some((outcome, end_ms));
        if self.finished.len() >= FINISHED_OPERATIONS_KEPT {
            self.finished.pop_front();
        }
        self.finished.push_back(record);
        Ok(())
    }

    fn running_mut(&mut self, id: u64) -> Result<&mut OperationRecord, JournalRefusal> {
        if !self.running.contains_key(&id) {
            return Err(match self.get(id) {
                Some(_) => JournalRefusal::Ended(id),
                None => JournalRefusal::Unknown(id),
            });
        }
        Ok(self.running.get_mut(&id).expect("checked just above"))
    }

    pub fn get(&self, id: u64) -> Option<&OperationRecord> {
        self.running
            .get(&id)
            .or_else(|| self.finished.iter().find(|r| r.id == id))
    }

    /// The operation `request_id` names (none for an empty one).
    pub fn by_request_id(&self, request_id: &str) -> Option<&OperationRecord> {
        if request_id.is_empty() {
            return None;
        }
        self.records().find(|r| r.request_id == request_id)
    }

    pub fn running(&self) -> impl Iterator<Item = &OperationRecord> {
        self.running.values()
    }

    /// Running operations by id, then ended ones oldest first (the image's order).
    pub fn records(&self) -> impl Iterator<Item = &OperationRecord> {
        self.running.values().chain(self.finished.iter())
    }

    /// The journal of `records` in [`OperationJournal::records`]'s order, checked as the
    /// records themselves would have been.
    pub fn from_records(records: Vec<OperationRecord>) -> Result<Self, &'static str> {
        let mut journal = OperationJournal::default();
        for record in records {
            if journal.get(record.id).is_some() {
                return Err("operation ids repeat");
            }
            match record.ended {
                None => {
                    if journal.running.len() >= RUNNING_OPERATIONS_MAX {
                        return Err("too many running operations");
                    }
                    journal.running.insert(record.id, record);
                }
                Some(_) => {
                    if journal.finished.len() >= FINISHED_OPERATIONS_KEPT {
                        return Err("too many ended operations");
                    }
                    journal.finished.push_back(record);
                }
            }
        }
        Ok(journal)
    }
}
