//! The changes the Raft log agrees on: one `TopologyCommand` per log entry. Each encodes to
//! one byte string (format version, tag, fields) so that every node decodes the same entry
//! to the same command, or refuses it with the same error.

use super::codec::{CodecError, Reader, Writer};
use crate::cluster::id::{NodeId, ShardId};
use crate::cluster::migration::ledger::{REASON_MAX, REQUEST_ID_MAX};
use crate::cluster::node::{HOSTNAME_MAX, IP_MAX};
use crate::cluster::op_journal::{self, OperationOutcome, OperationRecord};
use proto::slot::SLOT_COUNT;

/// The encoding's version byte; a node refuses entries of a version it does not know (the
/// same way on every node of one build).
pub const COMMAND_FORMAT: u8 = 1;

/// Most slot ranges one command names: one range per slot at worst.
pub const RANGES_MAX: usize = SLOT_COUNT;

/// Largest encoded command: RANGES_MAX single-slot ranges (4 bytes each) plus the header
/// and a node id, rounded up. It bounds what a proposal or a log entry can cost.
pub const COMMAND_BYTES_MAX: usize = 96 * 1024;
const _: () = assert!(RANGES_MAX * 4 + 64 < COMMAND_BYTES_MAX);

/// Where a node is reached: the client address and the bus port, as CLUSTER NODES shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeAddress {
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub hostname: String,
}

/// One change to the replicated topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyCommand {
    /// Gives unassigned slots to a primary.
    AssignSlots {
        node: NodeId,
        ranges: Vec<(u16, u16)>,
    },
    /// Unassigns slots, whoever owns them.
    RemoveSlots { ranges: Vec<(u16, u16)> },
    /// Binds one slot to a primary, whoever held it (the end of a migration).
    SetSlotNode { slot: u16, node: NodeId },
    /// Adds a node as a primary without slots, or updates the address of a known one.
    AddNode {
        id: NodeId,
        shard: ShardId,
        address: NodeAddress,
    },
    /// Removes a node that owns no slots and has no replicas.
    ForgetNode { id: NodeId },
    /// Failover: a replica takes its primary's slots; the old primary becomes its replica.
    Promote { replica: NodeId },
    /// Makes a slot-less node a replica of a primary (joins the primary's shard).
    SetReplicaOf { replica: NodeId, primary: NodeId },
    /// An atomic slot migration exists (`cluster::migration::ledger`); nothing moves yet.
    MigrationOpen(MigrationOpen),
    /// Batch `batch` of migration `id` (its `ranges`) is moving; the source still owns it.
    MigrationBegin {
        id: u64,
        batch: u32,
        ranges: Vec<(u16, u16)>,
    },
    /// Batch `batch` of migration `id` belongs to its target from this entry on.
    MigrationCommit { id: u64, batch: u32 },
    /// Migration `id` ends without moving its open batch.
    MigrationAbort {
        id: u64,
        reason: String,
        cancelled: bool,
    },
    /// An admin operation exists (`cluster::op_journal`), coordinated by the node it names.
    OperationOpen(Box<OperationRecord>),
    /// `coordinator` carries operation `id` on from this entry.
    OperationAdopt { id: u64, coordinator: NodeId },
    /// A cancel of operation `id` was asked for; its coordinator passes it on.
    OperationCancel { id: u64 },
    /// Operation `id` ended.
    OperationEnd {
        id: u64,
        outcome: OperationOutcome,
        end_ms: u64,
    },
}

/// The `MigrationOpen` record's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationOpen {
    pub id: u64,
    pub request_id: String,
    pub source: NodeId,
    pub target: NodeId,
    pub ranges: Vec<(u16, u16)>,
    pub slots_per_batch: u32,
}

/// Most ranges one migration names: keeps every running migration's record (and so the
/// topology image) small; a request naming more is refused before it is proposed.
pub const MIGRATION_RANGES_MAX: usize = 256;

mod tag {
    pub const ASSIGN_SLOTS: u8 = 1;
    pub const REMOVE_SLOTS: u8 = 2;
    pub const SET_SLOT_NODE: u8 = 3;
    pub const ADD_NODE: u8 = 4;
    pub const FORGET_NODE: u8 = 5;
    pub const PROMOTE: u8 = 6;
    pub const SET_REPLICA_OF: u8 = 7;
    pub const MIGRATION_OPEN: u8 = 8;
    pub const MIGRATION_BEGIN: u8 = 9;
    pub const MIGRATION_COMMIT: u8 = 10;
    pub const MIGRATION_ABORT: u8 = 11;
    pub const OPERATION_OPEN: u8 = 12;
    pub const OPERATION_ADOPT: u8 = 13;
    pub const OPERATION_CANCEL: u8 = 14;
    pub const OPERATION_END: u8 = 15;
}

impl TopologyCommand {
    /// The command's bytes. Refused when a field is over its limit, so that nothing is
    /// proposed that every node would then refuse to decode.
    pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
        self.check_limits()?;
        let mut w = Writer::default();
        w.u8(COMMAND_FORMAT);
        match self {
            TopologyCommand::AssignSlots { node, ranges } => {
                w.u8(tag::ASSIGN_SLOTS);
                w.id(node);
                write_ranges(&mut w, ranges);
            }
            TopologyCommand::RemoveSlots { ranges } => {
                w.u8(tag::REMOVE_SLOTS);
                write_ranges(&mut w, ranges);
            }
            TopologyCommand::SetSlotNode { slot, node } => {
                w.u8(tag::SET_SLOT_NODE);
                w.u16(*slot);
                w.id(node);
            }
            TopologyCommand::AddNode { id, shard, address } => {
                w.u8(tag::ADD_NODE);
                w.id(id);
                w.id(shard);
                write_address(&mut w, address);
            }
            TopologyCommand::ForgetNode { id } => {
                w.u8(tag::FORGET_NODE);
                w.id(id);
            }
            TopologyCommand::Promote { replica } => {
                w.u8(tag::PROMOTE);
                w.id(replica);
            }
            TopologyCommand::SetReplicaOf { replica, primary } => {
                w.u8(tag::SET_REPLICA_OF);
                w.id(replica);
                w.id(primary);
            }
            TopologyCommand::MigrationOpen(open) => {
                w.u8(tag::MIGRATION_OPEN);
                w.u64(open.id);
                w.text(&open.request_id);
                w.id(&open.source);
                w.id(&open.target);
                write_ranges(&mut w, &open.ranges);
                w.u32(open.slots_per_batch);
            }
            TopologyCommand::MigrationBegin { id, batch, ranges } => {
                w.u8(tag::MIGRATION_BEGIN);
                w.u64(*id);
                w.u32(*batch);
                write_ranges(&mut w, ranges);
            }
            TopologyCommand::MigrationCommit { id, batch } => {
                w.u8(tag::MIGRATION_COMMIT);
                w.u64(*id);
                w.u32(*batch);
            }
            TopologyCommand::MigrationAbort {
                id,
                reason,
                cancelled,
            } => {
                w.u8(tag::MIGRATION_ABORT);
                w.u64(*id);
                w.text(reason);
                w.u8(u8::from(*cancelled));
            }
            TopologyCommand::OperationOpen(record) => {
                w.u8(tag::OPERATION_OPEN);
                op_journal::codec::write_record(&mut w, record);
            }
            TopologyCommand::OperationAdopt { id, coordinator } => {
                w.u8(tag::OPERATION_ADOPT);
                w.u64(*id);
                w.id(coordinator);
            }
            TopologyCommand::OperationCancel { id } => {
                w.u8(tag::OPERATION_CANCEL);
                w.u64(*id);
            }
            TopologyCommand::OperationEnd {
                id,
                outcome,
                end_ms,
            } => {
                w.u8(tag::OPERATION_END);
                w.u64(*id);
                op_journal::codec::write_outcome(&mut w, outcome);
                w.u64(*end_ms);
            }
        }
        debug_assert!(w.buf.len() <= COMMAND_BYTES_MAX);
        Ok(w.buf)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let mut r = Reader::new(bytes, COMMAND_BYTES_MAX)?;
        let version = r.u8()?;
        if version != COMMAND_FORMAT {
            return Err(CodecError::UnknownVersion(version));
        }
        let command = match r.u8()? {
            tag::ASSIGN_SLOTS => TopologyCommand::AssignSlots {
                node: r.id()?,
                ranges: read_ranges(&mut r)?,
            },
            tag::REMOVE_SLOTS => TopologyCommand::RemoveSlots {
                ranges: read_ranges(&mut r)?,
            },
            tag::SET_SLOT_NODE => TopologyCommand::SetSlotNode {
                slot: r.slot()?,
                node: r.id()?,
            },
            tag::ADD_NODE => TopologyCommand::AddNode {
                id: r.id()?,
                shard: r.id()?,
                address: read_address(&mut r)?,
            },
            tag::FORGET_NODE => TopologyCommand::ForgetNode { id: r.id()? },
            tag::PROMOTE => TopologyCommand::Promote { replica: r.id()? },
            tag::SET_REPLICA_OF => TopologyCommand::SetReplicaOf {
                replica: r.id()?,
                primary: r.id()?,
            },
            tag::MIGRATION_OPEN => TopologyCommand::MigrationOpen(MigrationOpen {
                id: r.u64()?,
                request_id: r.text("request_id", REQUEST_ID_MAX)?,
                source: r.id()?,
                target: r.id()?,
                ranges: read_migration_ranges(&mut r)?,
                slots_per_batch: r.u32()?,
            }),
            tag::MIGRATION_BEGIN => TopologyCommand::MigrationBegin {
                id: r.u64()?,
                batch: r.u32()?,
                ranges: read_migration_ranges(&mut r)?,
            },
            tag::MIGRATION_COMMIT => TopologyCommand::MigrationCommit {
                id: r.u64()?,
                batch: r.u32()?,
            },
            tag::MIGRATION_ABORT => TopologyCommand::MigrationAbort {
                id: r.u64()?,
                reason: r.text("reason", REASON_MAX)?,
                cancelled: match r.u8()? {
                    0 => false,
                    1 => true,
                    other => {
                        return Err(CodecError::BadValue {
                            what: "cancelled",
                            value: other as u64,
                        })
                    }
                },
            },
            tag::OPERATION_OPEN => {
                TopologyCommand::OperationOpen(Box::new(op_journal::codec::read_record(&mut r)?))
            }
            tag::OPERATION_ADOPT => TopologyCommand::OperationAdopt {
                id: r.u64()?,
                coordinator: r.id()?,
            },
            tag::OPERATION_CANCEL => TopologyCommand::OperationCancel { id: r.u64()? },
            tag::OPERATION_END => TopologyCommand::OperationEnd {
                id: r.u64()?,
                outcome: op_journal::codec::read_outcome(&mut r)?,
                end_ms: r.u64()?,
            },
            other => return Err(CodecError::UnknownTag(other)),
        };
        r.finish()?;
        Ok(command)
    }

    fn check_limits(&self) -> Result<(), CodecError> {
        match self {
            TopologyCommand::AssignSlots { ranges, .. }
            | TopologyCommand::RemoveSlots { ranges } => check_ranges(ranges),
            TopologyCommand::SetSlotNode { slot, .. }
                if *slot > crate::cluster::slots::SLOT_MAX =>
            {
                Err(CodecError::BadSlot(*slot))
            }
            TopologyCommand::AddNode { address, .. } => check_address(address),
            TopologyCommand::MigrationOpen(open) => {
                check_migration_ranges(&open.ranges)?;
                check_text("request_id", &open.request_id, REQUEST_ID_MAX)
            }
            TopologyCommand::MigrationBegin { ranges, .. } => check_migration_ranges(ranges),
            TopologyCommand::MigrationAbort { reason, .. } => {
                check_text("reason", reason, REASON_MAX)
            }
            TopologyCommand::OperationOpen(record) => op_journal::codec::check_record(record),
            TopologyCommand::OperationEnd { outcome, .. } => {
                op_journal::codec::check_outcome(outcome)
            }
            _ => Ok(()),
        }
    }
}

fn check_migration_ranges(ranges: &[(u16, u16)]) -> Result<(), CodecError> {
    if ranges.len() > MIGRATION_RANGES_MAX {
        return Err(CodecError::TooMany {
            what: "migration slot ranges",
            count: ranges.len(),
            max: MIGRATION_RANGES_MAX,
        });
    }
    check_ranges(ranges)
}

pub(crate) fn check_text(what: &'static str, text: &str, max: usize) -> Result<(), CodecError> {
    match text.len() > max {
        true => Err(CodecError::FieldTooLong {
            what,
            len: text.len(),
            max,
        }),
        false => Ok(()),
    }
}

fn read_migration_ranges(r: &mut Reader<'_>) -> Result<Vec<(u16, u16)>, CodecError> {
    let count = r.count("migration slot ranges", MIGRATION_RANGES_MAX)?;
    (0..count).map(|_| r.range()).collect()
}

pub(crate) fn check_ranges(ranges: &[(u16, u16)]) -> Result<(), CodecError> {
    if ranges.len() > RANGES_MAX {
        return Err(CodecError::TooMany {
            what: "slot ranges",
            count: ranges.len(),
            max: RANGES_MAX,
        });
    }
    for &(start, end) in ranges {
        for s in [start, end] {
            if s > crate::cluster::slots::SLOT_MAX {
                return Err(CodecError::BadSlot(s));
            }
        }
        if start > end {
            return Err(CodecError::RangeReversed(start, end));
        }
    }
    Ok(())
}

pub(super) fn check_address(a: &NodeAddress) -> Result<(), CodecError> {
    let field = |what, len, max| {
        if len > max {
            Err(CodecError::FieldTooLong { what, len, max })
        } else {
            Ok(())
        }
    };
    field("ip", a.ip.len(), IP_MAX)?;
    field("hostname", a.hostname.len(), HOSTNAME_MAX)
}

fn write_ranges(w: &mut Writer, ranges: &[(u16, u16)]) {
    w.u32(ranges.len() as u32);
    for &(start, end) in ranges {
        w.u16(start);
        w.u16(end);
    }
}

fn read_ranges(r: &mut Reader<'_>) -> Result<Vec<(u16, u16)>, CodecError> {
    let count = r.count("slot ranges", RANGES_MAX)?;
    (0..count).map(|_| r.range()).collect()
}

pub(super) fn write_address(w: &mut Writer, a: &NodeAddress) {
    w.text(&a.ip);
    w.u16(a.port);
    w.u16(a.cport);
    w.text(&a.hostname);
}

pub(super) fn read_address(r: &mut Reader<'_>) -> Result<NodeAddress, CodecError> {
    Ok(NodeAddress {
        ip: r.text("ip", IP_MAX)?,
        port: r.u16()?,
        cport: r.u16()?,
        hostname: r.text("hostname", HOSTNAME_MAX)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::id::HexId;
    use proptest::prelude::*;

    fn id(c: char) -> NodeId {
        HexId::parse(c.to_string().repeat(40).as_bytes()).unwrap()
    }

    fn samples() -> Vec<TopologyCommand> {
        vec![
            TopologyCommand::AssignSlots {
                node: id('a'),
                ranges: vec![(0, 100), (16383, 16383)],
            },
            TopologyCommand::RemoveSlots { ranges: vec![] },
            TopologyCommand::SetSlotNode {
                slot: 42,
                node: id('b'),
            },
            TopologyCommand::AddNode {
                id: id('c'),
                shard: id('d'),
                address: NodeAddress {
                    ip: "10.0.0.1".into(),
                    port: 7000,
                    cport: 17000,
                    hostname: "host-c".into(),
                },
            },
            TopologyCommand::ForgetNode { id: id('e') },
            TopologyCommand::Promote { replica: id('f') },
            TopologyCommand::SetReplicaOf {
                replica: id('1'),
                primary: id('2'),
            },
            TopologyCommand::MigrationOpen(MigrationOpen {
                id: 7,
                request_id: "req-1".into(),
                source: id('3'),
                target: id('4'),
                ranges: vec![(0, 99), (200, 200)],
                slots_per_batch: 64,
            }),
            TopologyCommand::MigrationBegin {
                id: 7,
                batch: 1,
                ranges: vec![(64, 99)],
            },
            TopologyCommand::MigrationCommit { id: 7, batch: 1 },
            TopologyCommand::MigrationAbort {
                id: u64::MAX,
                reason: "the target failed".into(),
                cancelled: true,
            },
            TopologyCommand::OperationOpen(Box::new(op_journal::OperationRecord {
                id: 9,
                request_id: "req-2".into(),
                kind: op_journal::OperationKind::AddNode,
                fingerprint: "add-node 10.0.0.9:7000 None".into(),
                description: "add 10.0.0.9:7000 as a primary".into(),
                coordinator: id('5'),
                start_ms: 1_700_000_000_000,
                plan: op_journal::OperationPlan::AddNode {
                    host: "10.0.0.9".into(),
                    port: 7000,
                    replica_of: Some(id('6')),
                },
                cancel_requested: false,
                ended: None,
            })),
            TopologyCommand::OperationAdopt {
                id: 9,
                coordinator: id('7'),
            },
            TopologyCommand::OperationCancel { id: 9 },
            TopologyCommand::OperationEnd {
                id: 9,
                outcome: OperationOutcome::Failed("the new node is not empty".into()),
                end_ms: 1_700_000_000_500,
            },
        ]
    }

    #[test]
    fn every_command_round_trips_and_encodes_stably() {
        for c in samples() {
            let bytes = c.encode().unwrap();
            assert_eq!(bytes, c.encode().unwrap());
            assert_eq!(TopologyCommand::decode(&bytes).unwrap(), c);
        }
    }

    #[test]
    fn bad_bytes_get_typed_errors() {
        let good = samples()[0].encode().unwrap();
        assert_eq!(
            TopologyCommand::decode(&[]).unwrap_err(),
            CodecError::Truncated { at: 0, needed: 1 }
        );
        assert_eq!(
            TopologyCommand::decode(&[9, 1]).unwrap_err(),
            CodecError::UnknownVersion(9)
        );
        assert_eq!(
            TopologyCommand::decode(&[COMMAND_FORMAT, 99]).unwrap_err(),
            CodecError::UnknownTag(99)
        );
        let mut trailing = good.clone();
        trailing.push(0);
        assert_eq!(
            TopologyCommand::decode(&trailing).unwrap_err(),
            CodecError::TrailingBytes(1)
        );
        let mut bad_id = good.clone();
        bad_id[2] = b'z';
        assert_eq!(
            TopologyCommand::decode(&bad_id).unwrap_err(),
            CodecError::BadNodeId(2)
        );
        // Slot 100 as the end of the first range becomes 0: a reversed range.
        let mut reversed = good.clone();
        reversed[48..50].copy_from_slice(&0u16.to_be_bytes());
        reversed[46..48].copy_from_slice(&5u16.to_be_bytes());
        assert_eq!(
            TopologyCommand::decode(&reversed).unwrap_err(),
            CodecError::RangeReversed(5, 0)
        );
        assert!(matches!(
            TopologyCommand::decode(&vec![0; COMMAND_BYTES_MAX + 1]).unwrap_err(),
            CodecError::TooLarge { .. }
        ));
    }

    #[test]
    fn limits_are_checked_when_encoding() {
        let too_long = TopologyCommand::AddNode {
            id: id('a'),
            shard: id('b'),
            address: NodeAddress {
                hostname: "h".repeat(HOSTNAME_MAX + 1),
                ..NodeAddress::default()
            },
        };
        assert!(matches!(
            too_long.encode().unwrap_err(),
            CodecError::FieldTooLong { .. }
        ));
        let every_slot: Vec<(u16, u16)> = (0..SLOT_COUNT as u16).map(|s| (s, s)).collect();
        let biggest = TopologyCommand::AssignSlots {
            node: id('a'),
            ranges: every_slot,
        };
        assert!(biggest.encode().unwrap().len() <= COMMAND_BYTES_MAX);
        let reversed = TopologyCommand::RemoveSlots {
            ranges: vec![(9, 3)],
        };
        assert_eq!(
            reversed.encode().unwrap_err(),
            CodecError::RangeReversed(9, 3)
        );
    }

    proptest! {
        /// Whatever the bytes, decoding returns a value or an error, and a value re-encodes
        /// to the very same bytes (one encoding per command).
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(c) = TopologyCommand::decode(&bytes) {
                prop_assert_eq!(c.encode().unwrap(), bytes);
            }
        }
    }
}
