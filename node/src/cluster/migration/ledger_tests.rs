use super::ledger::*;
use super::ranges::SlotRanges;
use crate::cluster::id::NodeId;

fn node(n: u8) -> NodeId {
    NodeId::parse(format!("{:040x}", n).as_bytes()).unwrap()
}

fn r(ranges: &[(u16, u16)]) -> SlotRanges {
    SlotRanges::new(ranges).unwrap()
}

const ID: MigrationId = MigrationId(7);

/// An `open` record in batches of 5 slots.
fn req(
    id: MigrationId,
    request_id: &str,
    source: NodeId,
    target: NodeId,
    ranges: SlotRanges,
) -> OpenRequest<'_> {
    OpenRequest {
        id,
        request_id,
        source,
        target,
        ranges,
        slots_per_batch: 5,
    }
}

/// Node 1 owns slots 0-99, node 2 owns 100-199.
fn owners(slot: u16) -> Option<NodeId> {
    match slot {
        0..=99 => Some(node(1)),
        100..=199 => Some(node(2)),
        _ => None,
    }
}

fn opened(ledger: &mut MigrationLedger, ranges: &[(u16, u16)]) {
    let got = ledger.open(req(ID, "req", node(1), node(2), r(ranges)), owners);
    assert_eq!(got, Ok(Opened::New(ID)));
}

#[test]
fn open_checks_ownership_and_names_one_op_per_request_id() {
    let mut l = MigrationLedger::default();
    assert_eq!(
        l.open(req(ID, "", node(1), node(1), r(&[(0, 9)])), owners),
        Err(Refusal::SameNode)
    );
    assert_eq!(
        l.open(req(ID, "", node(1), node(2), r(&[(95, 105)])), owners),
        Err(Refusal::NotOwnedBySource {
            slot: 100,
            source_id: node(1)
        })
    );
    opened(&mut l, &[(0, 9)]);
    assert_eq!(l.get(ID).unwrap().batches_total, 2);
    // The same request again (a retry through another node): the same op.
    assert_eq!(
        l.open(
            req(MigrationId(8), "req", node(1), node(2), r(&[(0, 9)])),
            owners
        ),
        Ok(Opened::Existing(ID))
    );
    assert_eq!(
        l.open(req(ID, "other", node(1), node(2), r(&[(0, 9)])), owners),
        Err(Refusal::DuplicateId(ID))
    );
    assert_eq!(l.by_request_id("req").unwrap().id, ID);
}

#[test]
fn batches_begin_and_commit_in_order_and_the_last_commit_ends_the_op() {
    let mut l = MigrationLedger::default();
    opened(&mut l, &[(0, 9)]);
    let (b0, b1) = (r(&[(0, 4)]), r(&[(5, 9)]));
    assert!(matches!(
        l.begin(ID, 1, &b1, owners),
        Err(Refusal::WrongBatch { expected: 0, .. })
    ));
    assert_eq!(
        l.begin(ID, 0, &r(&[(0, 4), (50, 50)]), owners),
        Err(Refusal::NotInMigration(ID))
    );
    assert_eq!(l.commit(ID, 0).err().map(|_| ()), Some(()), "nothing begun");
    l.begin(ID, 0, &b0, owners).unwrap();
    assert_eq!(l.moving(3), Some(ID));
    assert_eq!(l.begin(ID, 0, &b0, owners), Err(Refusal::BatchOpen(ID)));
    let change = l.commit(ID, 0).unwrap();
    assert_eq!(change.slots, b0);
    assert_eq!(change.to, Some(node(2)));
    assert_eq!(l.moving(3), None);
    // The commit applied twice (a retried proposal) takes no second effect.
    assert!(l.commit(ID, 0).is_err());
    // The slot map now gives 0-4 to node 2; batch 1 still checks against it.
    let after = |s: u16| if s <= 4 { Some(node(2)) } else { owners(s) };
    l.begin(ID, 1, &b1, after).unwrap();
    l.commit(ID, 1).unwrap();
    assert_eq!(l.get(ID).unwrap().state, MigrationState::Succeeded);
    assert_eq!(l.get(ID).unwrap().slots_done, 10);
    // After the end: abort and commit take no effect.
    assert_eq!(l.abort(ID, "late", false), Err(Refusal::Ended(ID)));
}

#[test]
fn an_abort_frees_the_moving_batch_and_a_commit_after_it_does_nothing() {
    let mut l = MigrationLedger::default();
    opened(&mut l, &[(0, 9)]);
    l.begin(ID, 0, &r(&[(0, 4)]), owners).unwrap();
    l.abort(ID, "target out of memory", false).unwrap();
    assert_eq!(l.moving(0), None);
    assert_eq!(
        l.get(ID).unwrap().state,
        MigrationState::Failed("target out of memory".into())
    );
    assert_eq!(l.commit(ID, 0), Err(Refusal::Ended(ID)));
    assert_eq!(l.running().count(), 0);
}

#[test]
fn a_slot_moves_in_one_migration_at_a_time() {
    let mut l = MigrationLedger::default();
    opened(&mut l, &[(0, 9)]);
    let other = MigrationId(9);
    l.open(req(other, "", node(1), node(3), r(&[(3, 3)])), owners)
        .unwrap();
    l.begin(ID, 0, &r(&[(0, 4)]), owners).unwrap();
    assert_eq!(
        l.begin(other, 0, &r(&[(3, 3)]), owners),
        Err(Refusal::SlotBusy { slot: 3, by: ID })
    );
}

#[test]
fn the_leader_aborts_ops_with_a_dead_end_or_a_moved_slot_and_sources_their_orphans() {
    let mut l = MigrationLedger::default();
    opened(&mut l, &[(0, 9)]);
    l.begin(ID, 0, &r(&[(0, 4)]), owners).unwrap();
    assert!(l.to_abort(|_| true, owners).is_empty());
    let dead_target = l.to_abort(|n| *n != node(2), owners);
    assert_eq!(dead_target.len(), 1);
    assert!(dead_target[0].1.contains("target"), "{dead_target:?}");
    // A failover gave slot 2 to another node while it was moving.
    let failed_over = |s: u16| if s == 2 { Some(node(4)) } else { owners(s) };
    let moved = l.to_abort(|_| true, failed_over);
    assert!(moved[0].1.contains("slot 2"), "{moved:?}");
    assert_eq!(l.orphans_of(&node(1), |_| false), vec![ID]);
    assert!(l.orphans_of(&node(1), |id| id == ID).is_empty());
    assert!(l.orphans_of(&node(2), |_| false).is_empty());
}

#[test]
fn running_and_remembered_ops_are_bounded() {
    let mut l = MigrationLedger::default();
    for i in 0..RUNNING_MIGRATIONS_MAX as u16 {
        l.open(
            req(MigrationId(i.into()), "", node(1), node(2), r(&[(i, i)])),
            owners,
        )
        .unwrap();
    }
    assert_eq!(
        l.open(
            req(MigrationId(999), "", node(1), node(2), r(&[(50, 50)])),
            owners
        ),
        Err(Refusal::TooManyRunning)
    );
    for i in 0..RUNNING_MIGRATIONS_MAX as u64 {
        l.abort(MigrationId(i), "x", true).unwrap();
    }
    for i in 0..(FINISHED_MIGRATIONS_KEPT as u64 + 10) {
        let id = MigrationId(1000 + i);
        l.open(
            req(id, &format!("r{i}"), node(1), node(2), r(&[(1, 1)])),
            owners,
        )
        .unwrap();
        l.abort(id, "x", false).unwrap();
    }
    assert!(l.get(MigrationId(0)).is_none(), "the oldest is forgotten");
    assert!(l.by_request_id("r0").is_none());
    assert!(l
        .by_request_id(&format!("r{}", FINISHED_MIGRATIONS_KEPT + 9))
        .is_some());
    let long = "x".repeat(REQUEST_ID_MAX + 1);
    assert_eq!(
        l.open(
            req(MigrationId(5000), &long, node(1), node(2), r(&[(1, 1)])),
            owners
        ),
        Err(Refusal::RequestIdTooLong)
    );
}

/// A link failure's text can be any length (the target's reply is quoted in it); the abort
/// made of it must still encode, or the migration stays running forever.
#[test]
fn any_failure_text_makes_an_abort_the_log_takes() {
    use crate::cluster::consensus::TopologyCommand;
    for reason in [
        "short".to_string(),
        "é".repeat(2000),
        "x".repeat(REASON_MAX + 1),
    ] {
        let fitted = abort_reason(&reason);
        assert!(fitted.len() <= REASON_MAX, "{}", fitted.len());
        let command = TopologyCommand::MigrationAbort {
            id: 1,
            reason: fitted.clone(),
            cancelled: false,
        };
        let decoded = TopologyCommand::decode(&command.encode().expect("encodes")).unwrap();
        assert_eq!(decoded, command);
        if reason.len() <= REASON_MAX {
            assert_eq!(fitted, reason);
        } else {
            assert!(fitted.ends_with("..."), "{fitted}");
        }
    }
    let unfitted = TopologyCommand::MigrationAbort {
        id: 1,
        reason: "x".repeat(REASON_MAX + 1),
        cancelled: false,
    };
    assert!(
        unfitted.encode().is_err(),
        "the log takes any length after all"
    );
}
