use super::codec::{read_record, write_record};
use super::*;
use crate::cluster::consensus::codec::{Reader, Writer};

fn node(c: u8) -> NodeId {
    NodeId::parse(&[c; 40]).unwrap()
}

fn record(id: u64, request_id: &str) -> OperationRecord {
    OperationRecord {
        id,
        request_id: request_id.into(),
        kind: OperationKind::MigrateSlots,
        fingerprint: format!("migrate {request_id}"),
        description: "migrate 0-99 to b".into(),
        coordinator: node(b'a'),
        start_ms: 1_000,
        plan: OperationPlan::Moves {
            moves: vec![PlannedMove {
                source: node(b'a'),
                target: node(b'b'),
                ranges: vec![(0, 99), (200, 200)],
            }],
            drained: None,
            request_base: format!("admin:{request_id}"),
        },
        cancel_requested: false,
        ended: None,
    }
}

/// Goal: open, adopt, cancel and end take effect in order; a request_id names one
/// operation; an ended operation keeps no plan and refuses later records.
#[test]
fn records_take_effect_in_order_and_request_ids_name_one_operation() {
    let mut j = OperationJournal::default();
    j.open(record(1, "r1")).unwrap();
    assert_eq!(
        j.open(record(1, "other")),
        Err(JournalRefusal::DuplicateId(1))
    );
    assert_eq!(
        j.open(record(2, "r1")),
        Err(JournalRefusal::DuplicateRequest("r1".into(), 1))
    );
    // Operations without a request_id never collide by it.
    j.open(record(3, "")).unwrap();
    j.open(record(4, "")).unwrap();
    j.adopt(1, node(b'c')).unwrap();
    assert_eq!(j.get(1).unwrap().coordinator, node(b'c'));
    j.request_cancel(1).unwrap();
    assert!(j.get(1).unwrap().cancel_requested);
    j.end(1, OperationOutcome::Cancelled("asked".into()), 2_000)
        .unwrap();
    let ended = j.get(1).unwrap();
    assert_eq!(ended.plan, OperationPlan::Nothing);
    assert!(!ended.cancel_requested);
    assert_eq!(
        ended.ended,
        Some((OperationOutcome::Cancelled("asked".into()), 2_000))
    );
    assert_eq!(j.by_request_id("r1").map(|r| r.id), Some(1));
    assert_eq!(j.adopt(1, node(b'd')), Err(JournalRefusal::Ended(1)));
    assert_eq!(
        j.end(1, OperationOutcome::Succeeded, 3_000),
        Err(JournalRefusal::Ended(1))
    );
    assert_eq!(j.request_cancel(9), Err(JournalRefusal::Unknown(9)));
    assert_eq!(j.running().count(), 2);
    let mut ended = record(5, "r5");
    ended.ended = Some((OperationOutcome::Succeeded, 1));
    assert_eq!(j.open(ended), Err(JournalRefusal::NotFresh));
}

/// Goal: running operations and remembered ended ones are bounded.
#[test]
fn the_journal_is_bounded() {
    let mut j = OperationJournal::default();
    for id in 0..RUNNING_OPERATIONS_MAX as u64 {
        j.open(record(id, "")).unwrap();
    }
    assert_eq!(j.open(record(999, "")), Err(JournalRefusal::TooMany));
    for id in 0..RUNNING_OPERATIONS_MAX as u64 {
        j.end(id, OperationOutcome::Succeeded, id).unwrap();
    }
    let more = FINISHED_OPERATIONS_KEPT as u64;
    for id in 100..100 + more {
        j.open(record(id, "")).unwrap();
        j.end(id, OperationOutcome::Succeeded, id).unwrap();
    }
    assert_eq!(j.records().count(), FINISHED_OPERATIONS_KEPT);
    // The oldest went first.
    assert!(j.get(0).is_none());
    assert!(j.get(100).is_some());
    assert!(j.get(99 + more).is_some());
}

fn round_trip(r: &OperationRecord) -> OperationRecord {
    let mut w = Writer::default();
    write_record(&mut w, r);
    let mut reader = Reader::new(&w.buf, 1 << 20).unwrap();
    let back = read_record(&mut reader).unwrap();
    reader.finish().unwrap();
    back
}

/// Goal: every plan and outcome survives its bytes; the journal survives the image's.
#[test]
fn records_and_the_journal_survive_their_bytes() {
    let mut plans = vec![
        record(1, "a"),
        OperationRecord {
            kind: OperationKind::AddNode,
            plan: OperationPlan::AddNode {
                host: "10.0.0.7".into(),
                port: 7005,
                replica_of: Some(node(b'e')),
            },
            ..record(2, "b")
        },
        OperationRecord {
            kind: OperationKind::Failover,
            plan: OperationPlan::Failover {
                replica: node(b'f'),
                force: true,
            },
            cancel_requested: true,
            ..record(3, "")
        },
        OperationRecord {
            kind: OperationKind::DrainNode,
            plan: OperationPlan::Nothing,
            ended: Some((OperationOutcome::Failed("why".into()), 77)),
            ..record(4, "d")
        },
    ];
    if let OperationPlan::Moves { drained, .. } = &mut plans[0].plan {
        *drained = Some(node(b'a'));
    }
    for r in &plans {
        assert_eq!(&round_trip(r), r);
    }
    let mut j = OperationJournal::default();
    for r in plans.iter().take(3) {
        j.open(OperationRecord {
            cancel_requested: false,
            ..r.clone()
        })
        .unwrap();
    }
    j.end(2, OperationOutcome::Succeeded, 9).unwrap();
    let mut w = Writer::default();
    j.encode_into(&mut w);
    let mut reader = Reader::new(&w.buf, 1 << 20).unwrap();
    assert_eq!(OperationJournal::decode_from(&mut reader).unwrap(), j);
}

/// Goal: over-limit records are refused before they are proposed, and the same bytes are
/// refused when read.
#[test]
fn oversized_plans_are_refused_both_ways() {
    let moves: Vec<PlannedMove> = (0..PLAN_MOVES_MAX as u16 + 1)
        .map(|i| PlannedMove {
            source: node(b'a'),
            target: node(b'b'),
            ranges: vec![(i, i)],
        })
        .collect();
    let big = OperationRecord {
        plan: OperationPlan::Moves {
            moves,
            drained: None,
            request_base: "x".into(),
        },
        ..record(1, "")
    };
    assert!(codec::check_record(&big).is_err());
    let mut w = Writer::default();
    write_record(&mut w, &big);
    let mut reader = Reader::new(&w.buf, 1 << 20).unwrap();
    assert!(read_record(&mut reader).is_err());
    let long = OperationRecord {
        description: "d".repeat(TEXT_MAX + 1),
        ..record(2, "")
    };
    assert!(codec::check_record(&long).is_err());
    let reversed = OperationRecord {
        plan: OperationPlan::Moves {
            moves: vec![PlannedMove {
                source: node(b'a'),
                target: node(b'b'),
                ranges: vec![(9, 3)],
            }],
            drained: None,
            request_base: "x".into(),
        },
        ..record(3, "")
    };
    assert!(codec::check_record(&reversed).is_err());
}

#[test]
fn display_ids_read_back() {
    assert_eq!(display_id(0xab), "op-00000000000000ab");
    assert_eq!(parse_display_id("op-00000000000000ab"), Some(0xab));
    assert_eq!(parse_display_id("op-ab"), None);
    assert_eq!(parse_display_id("00000000000000ab"), None);
}
