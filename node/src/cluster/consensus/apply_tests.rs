//! Apply and image tests: each command's effect and refusals, the version rule, and that
//! nodes with different `myself` reach the same replicated state from the same entries.

use super::*;
use crate::cluster::id::{HexId, NodeId};
use crate::cluster::node::ClusterNode;
use crate::cluster::topology::Topology;

fn id(n: u8) -> NodeId {
    HexId::parse(format!("{n:02x}").repeat(20).as_bytes()).unwrap()
}

fn shard(n: u8) -> NodeId {
    HexId::parse(format!("{:02x}", n + 100).repeat(20).as_bytes()).unwrap()
}

/// A node's topology before the log touched it: only itself.
fn lone(me: u8) -> Topology {
    Topology::new(ClusterNode::new(id(me), shard(me)))
}

fn add(n: u8) -> TopologyCommand {
    TopologyCommand::AddNode {
        id: id(n),
        shard: shard(n),
        address: NodeAddress {
            ip: format!("10.0.0.{n}"),
            port: 7000 + n as u16,
            cport: 17000 + n as u16,
            hostname: String::new(),
        },
    }
}

fn assign(n: u8, ranges: &[(u16, u16)]) -> TopologyCommand {
    TopologyCommand::AssignSlots {
        node: id(n),
        ranges: ranges.to_vec(),
    }
}

/// Applies `commands` from index `first` on, returning each outcome as text.
fn run(t: &mut Topology, first: u64, commands: &[TopologyCommand]) -> Vec<Result<(), String>> {
    commands
        .iter()
        .enumerate()
        .map(|(k, c)| apply(t, first + k as u64, c).map_err(|e| e.to_string()))
        .collect()
}

fn owner(t: &Topology, slot: u16) -> Option<NodeId> {
    t.owner(slot).map(|n| n.id)
}

#[test]
fn slots_are_assigned_moved_and_removed_with_epochs_from_the_index() {
    let mut t = lone(1);
    let out = run(
        &mut t,
        1,
        &[
            add(1),
            add(2),
            assign(1, &[(0, 99)]),
            assign(2, &[(50, 60)]),
            assign(2, &[(100, 16383)]),
            TopologyCommand::SetSlotNode {
                slot: 5,
                node: id(2),
            },
            TopologyCommand::RemoveSlots {
                ranges: vec![(7, 7), (200, 200)],
            },
        ],
    );
    assert_eq!(out[3], Err("ERR Slot 50 is already busy".into()));
    assert!(out.iter().enumerate().all(|(i, r)| i == 3 || r.is_ok()));
    assert_eq!(t.consensus.version, 7);
    assert_eq!(owner(&t, 0), Some(id(1)));
    assert_eq!(owner(&t, 5), Some(id(2)));
    assert_eq!(owner(&t, 7), None);
    assert_eq!(owner(&t, 200), None);
    assert_eq!(owner(&t, 16383), Some(id(2)));
    let epoch = |n| t.nodes[t.index_of(&id(n)).unwrap() as usize].config_epoch;
    assert_eq!((epoch(1), epoch(2), t.current_epoch), (3, 6, 6));
    // Node 1 is myself: the table kept it first and MYSELF-flagged.
    assert!(t.myself().is_myself() && t.myself().id == id(1));
    assert_eq!(t.myself().ip, "10.0.0.1");
}

#[test]
fn refused_entries_advance_the_version_and_change_nothing() {
    let mut t = lone(1);
    run(&mut t, 1, &[add(1), assign(1, &[(0, 10)])]);
    let before = t.clone();
    let refusals = [
        assign(1, &[(20, 30), (25, 25)]),
        assign(9, &[(100, 100)]),
        TopologyCommand::RemoveSlots {
            ranges: vec![(0, 0), (11, 11)],
        },
        TopologyCommand::ForgetNode { id: id(1) },
        TopologyCommand::Promote { replica: id(1) },
        TopologyCommand::SetReplicaOf {
            replica: id(1),
            primary: id(1),
        },
    ];
    let out = run(&mut t, 3, &refusals);
    assert_eq!(
        out,
        vec![
            Err("ERR Slot 25 specified multiple times".into()),
            Err(format!("unknown node {}", id(9))),
            Err("ERR Slot 11 is already unassigned".into()),
            Err(format!("node {} owns slots", id(1))),
            Err(format!(
                "node {} is not a replica of a known primary",
                id(1)
            )),
            Err(format!("node {} cannot replicate itself", id(1))),
        ]
    );
    assert_eq!(t.consensus.version, 8);
    let mut expected = before;
    expected.consensus.version = 8;
    assert_eq!(t, expected);
    // An entry at or below the version is refused without any change.
    assert_eq!(
        apply(&mut t, 8, &add(3)).unwrap_err(),
        ApplyError::AlreadyApplied {
            index: 8,
            version: 8
        }
    );
    assert!(t.index_of(&id(3)).is_none());
}

#[test]
fn a_node_known_only_by_gossip_is_unknown_to_the_log() {
    let mut t = lone(1);
    t.add_node(ClusterNode::new(id(2), shard(2))).unwrap();
    assert_eq!(
        apply(&mut t, 1, &assign(2, &[(0, 0)])).unwrap_err(),
        ApplyError::UnknownNode(id(2))
    );
    apply(&mut t, 2, &add(2)).unwrap();
    apply(&mut t, 3, &assign(2, &[(0, 0)])).unwrap();
    assert_eq!(owner(&t, 0), Some(id(2)));
}

#[test]
fn replicas_join_shards_and_promotion_moves_the_slots() {
    let mut t = lone(3);
    let out = run(
        &mut t,
        1,
        &[
            add(1),
            add(2),
            add(3),
            assign(1, &[(0, 8191)]),
            TopologyCommand::SetReplicaOf {
                replica: id(2),
                primary: id(1),
            },
            TopologyCommand::SetReplicaOf {
                replica: id(3),
                primary: id(1),
            },
            TopologyCommand::Promote { replica: id(2) },
        ],
    );
    assert!(out.iter().all(Result::is_ok), "{out:?}");
    let node = |n| &t.nodes[t.index_of(&id(n)).unwrap() as usize];
    assert!(node(2).is_primary() && !node(2).is_replica());
    assert_eq!(node(1).primary, Some(id(2)));
    assert_eq!(node(3).primary, Some(id(2)));
    assert!(node(1).is_replica() && node(3).is_replica());
    assert_eq!(node(3).shard, shard(1));
    assert_eq!(owner(&t, 8191), Some(id(2)));
    assert_eq!(node(2).config_epoch, 7);
    // Myself (3) is a replica now; SETSLOT-style checks see it so.
    assert!(t.myself().is_replica());
    // The old primary cannot be forgotten while it has... nothing: it is a slot-less
    // replica, so it can go; the new primary cannot (slots, replicas).
    assert_eq!(
        apply(&mut t, 8, &TopologyCommand::ForgetNode { id: id(2) }).unwrap_err(),
        ApplyError::OwnsSlots(id(2))
    );
    apply(&mut t, 9, &TopologyCommand::ForgetNode { id: id(1) }).unwrap();
    assert!(t.index_of(&id(1)).is_none());
    assert_eq!(t.myself().id, id(3));
    assert_eq!(owner(&t, 0), Some(id(2)));
}

#[test]
fn forgetting_myself_keeps_me_in_my_own_table_but_outside_the_log() {
    let mut t = lone(2);
    run(&mut t, 1, &[add(1), add(2)]);
    apply(&mut t, 3, &TopologyCommand::ForgetNode { id: id(2) }).unwrap();
    assert_eq!(t.myself().id, id(2));
    assert!(!t.consensus.nodes.contains(&id(2)));
    assert_eq!(
        apply(&mut t, 4, &assign(2, &[(0, 0)])).unwrap_err(),
        ApplyError::UnknownNode(id(2))
    );
}

/// The same entries on nodes with different `myself` (and different gossip-only nodes) give
/// the same replicated image at every version.
#[test]
fn nodes_reach_the_same_image_from_the_same_entries() {
    let commands = [
        add(1),
        add(2),
        add(3),
        assign(1, &[(0, 5000)]),
        assign(2, &[(5001, 10000)]),
        assign(3, &[(9000, 16383)]),
        assign(3, &[(10001, 16383)]),
        TopologyCommand::SetSlotNode {
            slot: 0,
            node: id(3),
        },
        TopologyCommand::SetReplicaOf {
            replica: id(3),
            primary: id(1),
        },
        TopologyCommand::RemoveSlots {
            ranges: vec![(0, 0)],
        },
        TopologyCommand::SetReplicaOf {
            replica: id(3),
            primary: id(1),
        },
        TopologyCommand::RemoveSlots {
            ranges: vec![(10001, 16383)],
        },
        TopologyCommand::SetReplicaOf {
            replica: id(3),
            primary: id(1),
        },
        TopologyCommand::Promote { replica: id(3) },
    ];
    let mut views: Vec<Topology> = (1..=3).map(lone).collect();
    let mut accepted = 0;
    views[1]
        .add_node(ClusterNode::new(id(7), shard(7)))
        .unwrap();
    for (k, c) in commands.iter().enumerate() {
        let outcomes: Vec<bool> = views
            .iter_mut()
            .map(|t| apply(t, k as u64 + 1, c).is_ok())
            .collect();
        assert!(outcomes.iter().all(|&o| o == outcomes[0]), "entry {k}");
        accepted += outcomes[0] as usize;
        let images: Vec<TopologyImage> = views.iter().map(TopologyImage::capture).collect();
        assert!(images.iter().all(|i| *i == images[0]), "entry {k}");
    }
    // Refused: 9000-16383 (busy), both SetReplicaOf while 3 still owned slots.
    assert_eq!(accepted, commands.len() - 3);
    assert_eq!(owner(&views[0], 1), Some(id(3)));
    assert_eq!(owner(&views[0], 0), None);
    assert!(views[2].myself().is_primary());
}

#[test]
fn an_image_restores_the_replicated_part_and_keeps_local_fields() {
    let mut source = lone(1);
    run(
        &mut source,
        1,
        &[
            add(1),
            add(2),
            add(3),
            assign(1, &[(0, 100), (300, 400)]),
            assign(2, &[(101, 299)]),
            TopologyCommand::SetReplicaOf {
                replica: id(3),
                primary: id(2),
            },
        ],
    );
    let image = TopologyImage::capture(&source);
    let bytes = image.encode().unwrap();
    let decoded = TopologyImage::decode(&bytes).unwrap();
    assert_eq!(decoded, image);

    // A lagging node that knows an old node the log since forgot, and a gossip-only node.
    let mut lagging = lone(3);
    run(&mut lagging, 1, &[add(9), add(3)]);
    lagging.add_node(ClusterNode::new(id(7), shard(7))).unwrap();
    lagging.myself_mut().repl_offset = 42;
    decoded.restore(&mut lagging).unwrap();
    assert_eq!(TopologyImage::capture(&lagging), image);
    assert!(lagging.index_of(&id(9)).is_none());
    assert!(lagging.index_of(&id(7)).is_some());
    assert_eq!(lagging.myself().id, id(3));
    assert!(lagging.myself().is_myself() && lagging.myself().is_replica());
    assert_eq!(lagging.myself().repl_offset, 42);
    assert_eq!(owner(&lagging, 350), Some(id(1)));
    assert_eq!(owner(&lagging, 101), Some(id(2)));
    // Later entries apply on top; stale images are refused.
    apply(&mut lagging, 7, &assign(1, &[(500, 500)])).unwrap();
    assert!(matches!(
        decoded.restore(&mut lagging).unwrap_err(),
        ApplyError::AlreadyApplied { .. }
    ));
}

#[test]
fn bad_images_are_refused_with_typed_errors() {
    let mut t = lone(1);
    run(&mut t, 1, &[add(1), add(2), assign(2, &[(0, 10)])]);
    let good = TopologyImage::capture(&t).encode().unwrap();
    assert!(TopologyImage::decode(&good).is_ok());
    for cut in [0, 1, 17, 30, good.len() - 1] {
        assert!(matches!(
            TopologyImage::decode(&good[..cut]).unwrap_err(),
            CodecError::Truncated { .. }
        ));
    }
    // The last run's owner (the u16 before the empty ledger's and journal's counts) past
    // the node list.
    let mut bad_owner = good.clone();
    let n = bad_owner.len();
    bad_owner[n - 10..n - 8].copy_from_slice(&5u16.to_be_bytes());
    assert_eq!(
        TopologyImage::decode(&bad_owner).unwrap_err(),
        CodecError::BadValue {
            what: "slot owner",
            value: 5
        }
    );
    let mut bad_format = good.clone();
    bad_format[0] = 77;
    assert_eq!(
        TopologyImage::decode(&bad_format).unwrap_err(),
        CodecError::UnknownVersion(77)
    );
    assert!(matches!(
        TopologyImage::decode(&vec![0u8; image::IMAGE_BYTES_MAX + 1]).unwrap_err(),
        CodecError::TooLarge { .. }
    ));
}

/// Whether an AddNode fits depends on the log's nodes only: a table filled by gossip makes
/// room by dropping gossip-only nodes.
#[test]
fn a_table_full_of_gossip_nodes_still_takes_the_logs_nodes() {
    use crate::cluster::topology::NODES_MAX;
    let mut t = lone(1);
    let mut n = 0u32;
    while t.nodes.len() < NODES_MAX {
        let gossip = HexId::parse(format!("{:040x}", 0xabc000 + n).as_bytes()).unwrap();
        t.add_node(ClusterNode::new(gossip, shard(1))).unwrap();
        n += 1;
    }
    apply(&mut t, 1, &add(2)).unwrap();
    assert_eq!(t.nodes.len(), NODES_MAX);
    assert!(t.index_of(&id(2)).is_some());
    assert_eq!(t.myself().id, id(1));
}

fn open_migration(
    id_: u64,
    request: &str,
    from: u8,
    to: u8,
    ranges: &[(u16, u16)],
) -> TopologyCommand {
    TopologyCommand::MigrationOpen(command::MigrationOpen {
        id: id_,
        request_id: request.into(),
        source: id(from),
        target: id(to),
        ranges: ranges.to_vec(),
        slots_per_batch: 10,
    })
}

/// A migration's records move ownership only at its commits, the same way on every node,
/// and records out of order or after the end change nothing.
#[test]
fn migration_records_switch_owners_at_commit_only() {
    use crate::cluster::migration::{MigrationId, MigrationState};
    let mut t = lone(1);
    let begin = |batch, ranges: &[(u16, u16)]| TopologyCommand::MigrationBegin {
        id: 9,
        batch,
        ranges: ranges.to_vec(),
    };
    let out = run(
        &mut t,
        1,
        &[
            add(1),
            add(2),
            assign(1, &[(0, 99)]),
            open_migration(9, "req", 1, 2, &[(0, 19)]),
            // The same request id again: the same migration, nothing new.
            open_migration(10, "req", 1, 2, &[(0, 19)]),
            // Not the source's slots.
            open_migration(11, "other", 2, 1, &[(0, 1)]),
            TopologyCommand::MigrationCommit { id: 9, batch: 0 },
            begin(0, &[(0, 9)]),
        ],
    );
    assert_eq!(out[..5], [Ok(()), Ok(()), Ok(()), Ok(()), Ok(())]);
    assert!(out[5]
        .as_ref()
        .unwrap_err()
        .contains("not owned by the source"));
    assert!(out[6].is_err(), "a commit before its begin: {out:?}");
    assert_eq!(out[7], Ok(()));
    assert_eq!(owner(&t, 5), Some(id(1)), "moving, still the source's");
    assert_eq!(t.consensus.migrations.moving(5), Some(MigrationId(9)));
    // The image carries the running migration to a node that restores it.
    let image = TopologyImage::decode(&TopologyImage::capture(&t).encode().unwrap()).unwrap();
    let mut other = lone(2);
    image.restore(&mut other).unwrap();
    assert_eq!(other.consensus.migrations, t.consensus.migrations);

    for node in [&mut t, &mut other] {
        let out = run(
            node,
            9,
            &[
                TopologyCommand::MigrationCommit { id: 9, batch: 0 },
                begin(1, &[(10, 19)]),
                TopologyCommand::MigrationAbort {
                    id: 9,
                    reason: "the target failed".into(),
                    cancelled: false,
                },
                TopologyCommand::MigrationCommit { id: 9, batch: 1 },
            ],
        );
        assert_eq!(out[..3], [Ok(()), Ok(()), Ok(())]);
        assert!(out[3].is_err(), "a commit after the abort: {out:?}");
        assert_eq!(owner(node, 5), Some(id(2)));
        assert_eq!(owner(node, 15), Some(id(1)), "the aborted batch stays");
        let record = node.consensus.migrations.get(MigrationId(9)).unwrap();
        assert_eq!(
            record.state,
            MigrationState::Failed("the target failed".into())
        );
        assert_eq!(
            record.aborted_slots.as_ref().map(|s| s.ranges().to_vec()),
            Some(vec![(10, 19)])
        );
    }
    assert_eq!(t.consensus.migrations, other.consensus.migrations);
    let image = TopologyImage::capture(&t);
    assert_eq!(
        TopologyImage::decode(&image.encode().unwrap()).unwrap(),
        image
    );
}

/// Goal: operation records apply through the log like any entry (a refusal is the same
/// typed error on every node), the journal travels in the image, and an image of format 2
/// (before the journal) loads with none.
#[test]
fn operation_records_apply_and_travel_in_the_image() {
    use crate::cluster::op_journal::{
        JournalRefusal, OperationKind, OperationOutcome, OperationPlan, OperationRecord,
    };
    let mut t = lone(1);
    run(&mut t, 1, &[add(1), add(2)]);
    let record = OperationRecord {
        id: 7,
        request_id: "r".into(),
        kind: OperationKind::Failover,
        fingerprint: "failover".into(),
        description: "failover of 2".into(),
        coordinator: id(1),
        start_ms: 5,
        plan: OperationPlan::Failover {
            replica: id(2),
            force: false,
        },
        cancel_requested: false,
        ended: None,
    };
    let open = TopologyCommand::OperationOpen(Box::new(record.clone()));
    apply(&mut t, 3, &open).unwrap();
    assert!(matches!(
        apply(&mut t, 4, &open).unwrap_err(),
        ApplyError::Operation(JournalRefusal::DuplicateId(7))
    ));
    let adopt = TopologyCommand::OperationAdopt {
        id: 7,
        coordinator: id(2),
    };
    apply(&mut t, 5, &adopt).unwrap();
    assert_eq!(t.consensus.operations.get(7).unwrap().coordinator, id(2));
    let image = TopologyImage::capture(&t).encode().unwrap();
    let decoded = TopologyImage::decode(&image).unwrap();
    assert_eq!(decoded.operations, t.consensus.operations);
    let mut restored = lone(1);
    decoded.restore(&mut restored).unwrap();
    assert_eq!(restored.consensus.operations, t.consensus.operations);
    // The restored node decides later records as the others do.
    let end = TopologyCommand::OperationEnd {
        id: 7,
        outcome: OperationOutcome::Succeeded,
        end_ms: 9,
    };
    apply(&mut restored, 6, &end).unwrap();
    assert!(matches!(
        apply(&mut restored, 7, &adopt).unwrap_err(),
        ApplyError::Operation(JournalRefusal::Ended(7))
    ));

    // Format 2: the image without the journal's count, under its version byte.
    let plain = TopologyImage::capture(&lone(1)).encode().unwrap();
    let mut format_2 = plain[..plain.len() - 4].to_vec();
    format_2[0] = 2;
    let old = TopologyImage::decode(&format_2).unwrap();
    assert_eq!(old.operations, Default::default());
}
