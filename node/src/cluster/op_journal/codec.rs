//! The journal's records in bytes: one record as `OperationOpen` carries it, and the whole
//! journal in the topology image (a Raft snapshot). Every length is checked against its
//! limit before anything is proposed, and again when decoded.

use super::{
    OperationJournal, OperationKind, OperationOutcome, OperationPlan, OperationRecord, PlannedMove,
    FINISHED_OPERATIONS_KEPT, HOST_MAX, PLAN_MOVES_MAX, PLAN_RANGES_MAX, REQUEST_BASE_MAX,
    REQUEST_ID_MAX, RUNNING_OPERATIONS_MAX, TEXT_MAX,
};
use crate::cluster::consensus::codec::{CodecError, Reader, Writer};
use crate::cluster::consensus::command::{check_ranges, check_text};

mod plan_tag {
    pub const NOTHING: u8 = 0;
    pub const MOVES: u8 = 1;
    pub const ADD_NODE: u8 = 2;
    pub const FAILOVER: u8 = 3;
}

mod outcome_tag {
    pub const SUCCEEDED: u8 = 1;
    pub const FAILED: u8 = 2;
    pub const CANCELLED: u8 = 3;
}

/// Whether `record` fits every limit (checked before it is proposed).
pub fn check_record(record: &OperationRecord) -> Result<(), CodecError> {
    check_text("request_id", &record.request_id, REQUEST_ID_MAX)?;
    check_text("fingerprint", &record.fingerprint, TEXT_MAX)?;
    check_text("description", &record.description, TEXT_MAX)?;
    if let Some((outcome, _)) = &record.ended {
        check_outcome(outcome)?;
    }
    match &record.plan {
        OperationPlan::Nothing | OperationPlan::Failover { .. } => Ok(()),
        OperationPlan::AddNode { host, .. } => check_text("host", host, HOST_MAX),
        OperationPlan::Moves {
            moves,
            request_base,
            ..
        } => {
            check_text("request base", request_base, REQUEST_BASE_MAX)?;
            if moves.len() > PLAN_MOVES_MAX {
                return Err(CodecError::TooMany {
                    what: "planned moves",
                    count: moves.len(),
                    max: PLAN_MOVES_MAX,
                });
            }
            let ranges: usize = moves.iter().map(|m| m.ranges.len()).sum();
            if ranges > PLAN_RANGES_MAX {
                return Err(CodecError::TooMany {
                    what: "planned slot ranges",
                    count: ranges,
                    max: PLAN_RANGES_MAX,
                });
            }
            moves.iter().try_for_each(|m| check_ranges(&m.ranges))
        }
    }
}

pub fn check_outcome(outcome: &OperationOutcome) -> Result<(), CodecError> {
    match outcome {
        OperationOutcome::Succeeded => Ok(()),
        OperationOutcome::Failed(why) | OperationOutcome::Cancelled(why) => {
            check_text("error", why, TEXT_MAX)
        }
    }
}

pub fn write_record(w: &mut Writer, r: &OperationRecord) {
    w.u64(r.id);
    w.text(&r.request_id);
    w.u8(r.kind.code());
    w.text(&r.fingerprint);
    w.text(&r.description);
    w.id(&r.coordinator);
    w.u64(r.start_ms);
    write_plan(w, &r.plan);
    w.u8(u8::from(r.cancel_requested));
    match &r.ended {
        None => w.u8(0),
        Some((outcome, end_ms)) => {
            w.u8(1);
            write_outcome(w, outcome);
            w.u64(*end_ms);
        }
    }
}

pub fn read_record(r: &mut Reader<'_>) -> Result<OperationRecord, CodecError> {
    let id = r.u64()?;
    let request_id = r.text("request_id", REQUEST_ID_MAX)?;
    let kind = r.u8()?;
    let kind = OperationKind::from_code(kind).ok_or(CodecError::BadValue {
        what: "operation kind",
        value: kind as u64,
    })?;
    let record = OperationRecord {
        id,
        request_id,
        kind,
        fingerprint: r.text("fingerprint", TEXT_MAX)?,
        description: r.text("description", TEXT_MAX)?,
        coordinator: r.id()?,
        start_ms: r.u64()?,
        plan: read_plan(r)?,
        cancel_requested: r.bool("cancel requested")?,
        ended: match r.bool("ended")? {
            false => None,
            true => Some((read_outcome(r)?, r.u64()?)),
        },
    };
    check_record(&record)?;
    Ok(record)
}

pub fn write_outcome(w: &mut Writer, outcome: &OperationOutcome) {
    match outcome {
        OperationOutcome::Succeeded => w.u8(outcome_tag::SUCCEEDED),
        OperationOutcome::Failed(why) => {
            w.u8(outcome_tag::FAILED);
            w.text(why);
        }
        OperationOutcome::Cancelled(why) => {
            w.u8(outcome_tag::CANCELLED);
            w.text(why);
        }
    }
}

pub fn read_outcome(r: &mut Reader<'_>) -> Result<OperationOutcome, CodecError> {
    Ok(match r.u8()? {
        outcome_tag::SUCCEEDED => OperationOutcome::Succeeded,
        outcome_tag::FAILED => OperationOutcome::Failed(r.text("error", TEXT_MAX)?),
        outcome_tag::CANCELLED => OperationOutcome::Cancelled(r.text("error", TEXT_MAX)?),
        other => {
            return Err(CodecError::BadValue {
                what: "operation outcome",
                value: other as u64,
            })
        }
    })
}

fn write_optional_id(w: &mut Writer, id: Option<&crate::cluster::id::NodeId>) {
    match id {
        Some(id) => {
            w.u8(1);
            w.id(id);
        }
        None => w.u8(0),
    }
}

fn read_optional_id(
    r: &mut Reader<'_>,
    what: &'static str,
) -> Result<Option<crate::cluster::id::NodeId>, CodecError> {
    match r.bool(what)? {
        true => Ok(Some(r.id()?)),
        false => Ok(None),
    }
}

fn write_plan(w: &mut Writer, plan: &OperationPlan) {
    match plan {
        OperationPlan::Nothing => w.u8(plan_tag::NOTHING),
        OperationPlan::Moves {
            moves,
            drained,
            request_base,
        } => {
            w.u8(plan_tag::MOVES);
            w.u32(moves.len() as u32);
            for m in moves {
                w.id(&m.source);
                w.id(&m.target);
                w.u32(m.ranges.len() as u32);
                for &(start, end) in &m.ranges {
                    w.u16(start);
                    w.u16(end);
                }
            }
            write_optional_id(w, drained.as_ref());
            w.text(request_base);
        }
        OperationPlan::AddNode {
            host,
            port,
            replica_of,
        } => {
            w.u8(plan_tag::ADD_NODE);
            w.text(host);
            w.u16(*port);
            write_optional_id(w, replica_of.as_ref());
        }
        OperationPlan::Failover { replica, force } => {
            w.u8(plan_tag::FAILOVER);
            w.id(replica);
            w.u8(u8::from(*force));
        }
    }
}

fn read_plan(r: &mut Reader<'_>) -> Result<OperationPlan, CodecError> {
    Ok(match r.u8()? {
        plan_tag::NOTHING => OperationPlan::Nothing,
        plan_tag::MOVES => {
            let count = r.count("planned moves", PLAN_MOVES_MAX)?;
            let mut moves = Vec::with_capacity(count);
            let mut ranges_left = PLAN_RANGES_MAX;
            for _ in 0..count {
                let source = r.id()?;
                let target = r.id()?;
                let n = r.count("planned slot ranges", ranges_left)?;
                ranges_left -= n;
                let ranges = (0..n).map(|_| r.range()).collect::<Result<_, _>>()?;
                moves.push(PlannedMove {
                    source,
                    target,
                    ranges,
                });
            }
            OperationPlan::Moves {
                moves,
                drained: read_optional_id(r, "has a drained node")?,
                request_base: r.text("request base", REQUEST_BASE_MAX)?,
            }
        }
        plan_tag::ADD_NODE => OperationPlan::AddNode {
            host: r.text("host", HOST_MAX)?,
            port: r.u16()?,
            replica_of: read_optional_id(r, "has a primary")?,
        },
        plan_tag::FAILOVER => OperationPlan::Failover {
            replica: r.id()?,
            force: r.bool("force")?,
        },
        other => {
            return Err(CodecError::BadValue {
                what: "operation plan",
                value: other as u64,
            })
        }
    })
}

impl OperationJournal {
    pub fn encode_into(&self, w: &mut Writer) {
        let records: Vec<&OperationRecord> = self.records().collect();
        w.u32(records.len() as u32);
        for r in records {
            write_record(w, r);
        }
    }

    pub fn decode_from(r: &mut Reader<'_>) -> Result<Self, CodecError> {
        let count = r.count(
            "operations",
            RUNNING_OPERATIONS_MAX + FINISHED_OPERATIONS_KEPT,
        )?;
        let mut records = Vec::with_capacity(count);
        for _ in 0..count {
            records.push(read_record(r)?);
        }
        OperationJournal::from_records(records)
            .map_err(|what| CodecError::BadValue { what, value: 0 })
    }
}
