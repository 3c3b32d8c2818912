//! The ledger in the topology image (a Raft snapshot): running migrations and the finished
//! ones still remembered, in the order they finished, so that a node restored from the image
//! decides every later record as the nodes that applied the log did.

use super::ledger::{
    MigrationId, MigrationLedger, MigrationRecord, MigrationState, FINISHED_MIGRATIONS_KEPT,
    REASON_MAX, REQUEST_ID_MAX, RUNNING_MIGRATIONS_MAX,
};
use super::ranges::SlotRanges;
use crate::cluster::consensus::codec::{CodecError, Reader, Writer};
use crate::cluster::consensus::command::MIGRATION_RANGES_MAX;

const RUNNING: u8 = 0;
const SUCCEEDED: u8 = 1;
const FAILED: u8 = 2;
const CANCELLED: u8 = 3;

impl MigrationLedger {
    /// Running records first (by id), then finished ones oldest first.
    pub fn encode_into(&self, w: &mut Writer) {
        let records: Vec<&MigrationRecord> = self.records_in_image_order();
        w.u32(records.len() as u32);
        for r in records {
            write_record(w, r);
        }
    }

    pub fn decode_from(r: &mut Reader<'_>) -> Result<Self, CodecError> {
        let count = r.count(
            "migrations",
            RUNNING_MIGRATIONS_MAX + FINISHED_MIGRATIONS_KEPT,
        )?;
        let mut records = Vec::with_capacity(count);
        for _ in 0..count {
            records.push(read_record(r)?);
        }
        MigrationLedger::from_records(records)
            .map_err(|what| CodecError::BadValue { what, value: 0 })
    }
}

fn write_ranges(w: &mut Writer, ranges: &SlotRanges) {
    w.u32(ranges.ranges().len() as u32);
    for &(start, end) in ranges.ranges() {
        w.u16(start);
        w.u16(end);
    }
}

fn read_ranges(r: &mut Reader<'_>) -> Result<SlotRanges, CodecError> {
    let count = r.count("migration slot ranges", MIGRATION_RANGES_MAX)?;
    let raw: Vec<(u16, u16)> = (0..count).map(|_| r.range()).collect::<Result<_, _>>()?;
    SlotRanges::new(&raw).map_err(|_| CodecError::BadValue {
        what: "migration slot ranges",
        value: count as u64,
    })
}

fn write_optional_ranges(w: &mut Writer, ranges: Option<&SlotRanges>) {
    match ranges {
        Some(ranges) => {
            w.u8(1);
            write_ranges(w, ranges);
        }
        None => w.u8(0),
    }
}

fn read_optional_ranges(r: &mut Reader<'_>) -> Result<Option<SlotRanges>, CodecError> {
    match r.bool("has slot ranges")? {
        true => Ok(Some(read_ranges(r)?)),
        false => Ok(None),
    }
}

fn write_record(w: &mut Writer, r: &MigrationRecord) {
    w.u64(r.id.0);
    w.text(&r.request_id);
    w.id(&r.source);
    w.id(&r.target);
    write_ranges(w, &r.ranges);
    w.u32(r.batches_total);
    w.u32(r.batches_done);
    match &r.moving {
        Some((batch, slots)) => {
            w.u8(1);
            w.u32(*batch);
            write_ranges(w, slots);
        }
        None => w.u8(0),
    }
    w.u32(r.slots_done as u32);
    let (kind, reason) = match &r.state {
        MigrationState::Running => (RUNNING, ""),
        MigrationState::Succeeded => (SUCCEEDED, ""),
        MigrationState::Failed(why) => (FAILED, why.as_str()),
        MigrationState::Cancelled(why) => (CANCELLED, why.as_str()),
    };
    w.u8(kind);
    w.text(reason);
    write_optional_ranges(w, r.aborted_slots.as_ref());
}

fn read_record(r: &mut Reader<'_>) -> Result<MigrationRecord, CodecError> {
    let id = MigrationId(r.u64()?);
    let request_id = r.text("request_id", REQUEST_ID_MAX)?;
    let source = r.id()?;
    let target = r.id()?;
    let ranges = read_ranges(r)?;
    let batches_total = r.u32()?;
    let batches_done = r.u32()?;
    let moving = match r.bool("has a moving batch")? {
        true => Some((r.u32()?, read_ranges(r)?)),
        false => None,
    };
    let slots_done = r.u32()? as usize;
    let kind = r.u8()?;
    let reason = r.text("reason", REASON_MAX)?;
    let state = match kind {
        RUNNING => MigrationState::Running,
        SUCCEEDED => MigrationState::Succeeded,
        FAILED => MigrationState::Failed(reason),
        CANCELLED => MigrationState::Cancelled(reason),
        other => {
            return Err(CodecError::BadValue {
                what: "migration state",
                value: other as u64,
            })
        }
    };
    let aborted_slots = read_optional_ranges(r)?;
    Ok(MigrationRecord {
        id,
        request_id,
        source,
        target,
        ranges,
        batches_total,
        batches_done,
        moving,
        slots_done,
        state,
        aborted_slots,
    })
}
