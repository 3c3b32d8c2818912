//! Topology-log tests on the in-memory network of [`super::sim`]: election, ordering, leader
//! hints, crash and partition safety, snapshot catch-up, the voter cap, slot ownership under
//! conflicting claims, and hostile bytes. Everything is driven by ticks and seeds.

use super::command::TopologyCommand;
use super::log::{TopologyLog, STEP_BYTES_MAX, VOTERS_MAX};
use super::log_error::LogError;
use super::raft_id::raft_id;
use super::sim::{add_node, node_id, SimNet};
use super::TopologyImage;
use protobuf::Message as _;
use raft::prelude::{Message, MessageType};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Ticks enough for any election here (timeouts are 10-19 ticks, pre-vote adds a round).
const ELECTION_TICKS_MAX: usize = 200;

fn assign(n: usize, start: u16, end: u16) -> TopologyCommand {
    TopologyCommand::AssignSlots {
        node: node_id(n),
        ranges: vec![(start, end)],
    }
}

/// Proposes on the current leader and settles.
fn commit(net: &mut SimNet, command: &TopologyCommand) {
    let leader = net.elect(ELECTION_TICKS_MAX);
    net.log(leader).propose(command).unwrap();
    net.settle();
}

#[test]
fn three_voters_elect_exactly_one_leader() {
    for seed in 0..8 {
        let mut net = SimNet::new(3, 0, seed * 100);
        assert!(net.leaders().is_empty());
        let leader = net.elect(ELECTION_TICKS_MAX);
        // A while later it still leads, alone, and everyone agrees on who and which term.
        net.run(50);
        assert_eq!(net.leaders(), vec![leader], "seed {seed}");
        let term = net.log(leader).term();
        for i in 0..3 {
            assert_eq!(net.log(i).leader(), Some(node_id(leader)), "seed {seed}");
            assert_eq!(net.log(i).term(), term);
            // Each node's output told it so, once per change.
            let last = net.nodes[i].leader_reports.last().unwrap();
            assert_eq!((last.leader, last.term), (Some(node_id(leader)), term));
        }
        assert!(net.step_errors.is_empty(), "{:?}", net.step_errors);
    }
}

#[test]
fn elections_replay_from_the_seed() {
    let run = |seed| {
        let mut net = SimNet::new(5, 0, seed);
        let leader = net.elect(ELECTION_TICKS_MAX);
        (leader, net.log(leader).term())
    };
    assert_eq!(run(42), run(42));
    assert_eq!(run(7), run(7));
}

#[test]
fn leader_proposals_apply_in_one_order_everywhere() {
    let mut net = SimNet::new(3, 0, 1);
    let leader = net.elect(ELECTION_TICKS_MAX);
    let proposed = vec![
        add_node(0),
        add_node(1),
        add_node(2),
        assign(0, 0, 5460),
        assign(1, 5461, 10922),
        // Conflicts with the previous one: committed, then refused on apply everywhere.
        assign(2, 10000, 16383),
        assign(2, 10923, 16383),
    ];
    let mut ids = Vec::new();
    for c in &proposed {
        ids.push(net.log(leader).propose(c).unwrap());
    }
    net.settle();
    let order: Vec<TopologyCommand> = net.commands(0).into_iter().map(|(_, c)| c).collect();
    assert_eq!(order, proposed);
    for i in 1..3 {
        assert_eq!(net.commands(i), net.commands(0));
    }
    // The leader sees its own proposal ids on its entries; followers see none.
    let own: Vec<_> = net.nodes[leader]
        .applied
        .iter()
        .map(|(c, _)| c.proposal.unwrap())
        .collect();
    assert_eq!(own, ids);
    let follower = (leader + 1) % 3;
    assert!(net.nodes[follower]
        .applied
        .iter()
        .all(|(c, _)| c.proposal.is_none()));
    // The conflicting claim was refused on every node, the rest accepted.
    for n in &net.nodes {
        let accepted: Vec<bool> = n.applied.iter().map(|(_, ok)| *ok).collect();
        assert_eq!(accepted, vec![true, true, true, true, true, false, true]);
        assert_eq!(n.topology.state().name(), "ok");
        assert_eq!(n.topology.owner(16383).unwrap().id, node_id(2));
    }
    let version = net.nodes[0].topology.consensus.version;
    assert!(net
        .nodes
        .iter()
        .all(|n| n.topology.consensus.version == version));
    assert!(net.step_errors.is_empty(), "{:?}", net.step_errors);
}

#[test]
fn a_follower_refuses_proposals_and_names_the_leader() {
    let mut net = SimNet::new(3, 0, 2);
    // Before any election nobody leads, and nobody is named.
    assert_eq!(
        net.log(0).propose(&add_node(0)).unwrap_err(),
        LogError::NotLeader { leader: None }
    );
    let leader = net.elect(ELECTION_TICKS_MAX);
    let follower = (leader + 1) % 3;
    assert_eq!(
        net.log(follower).propose(&add_node(0)).unwrap_err(),
        LogError::NotLeader {
            leader: Some(node_id(leader))
        }
    );
    assert_eq!(
        net.log(follower)
            .propose_add_learner(&node_id(9))
            .unwrap_err(),
        LogError::NotLeader {
            leader: Some(node_id(leader))
        }
    );
    net.settle();
    assert!(net.nodes.iter().all(|n| n.applied.is_empty()));
}

#[test]
fn a_new_leader_after_a_crash_keeps_every_committed_entry() {
    let mut net = SimNet::new(3, 0, 3);
    for c in [add_node(0), add_node(1), add_node(2), assign(0, 0, 99)] {
        commit(&mut net, &c);
    }
    let old = net.elect(ELECTION_TICKS_MAX);
    let before = net.commands(old);
    assert_eq!(before.len(), 4);
    net.crash(old);
    let new = net.elect(ELECTION_TICKS_MAX);
    assert_ne!(new, old);
    commit(&mut net, &assign(1, 100, 199));
    let survivors: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    for &i in &survivors {
        let after = net.commands(i);
        assert_eq!(after[..4], before[..], "node {i} lost a committed entry");
        assert_eq!(after.len(), 5);
        assert_eq!(net.nodes[i].topology.owner(150).unwrap().id, node_id(1));
    }
}

#[test]
fn a_partitioned_minority_cannot_commit() {
    let mut net = SimNet::new(5, 0, 4);
    for c in [add_node(0), add_node(1), add_node(2)] {
        commit(&mut net, &c);
    }
    let old = net.elect(ELECTION_TICKS_MAX);
    let buddy = (old + 1) % 5;
    net.partition(&[old, buddy]);
    // The cut-off leader still accepts a proposal, but can never commit it.
    net.log(old).propose(&assign(0, 0, 100)).unwrap();
    net.run(100);
    let majority: Vec<usize> = (0..5).filter(|&i| i != old && i != buddy).collect();
    for i in [old, buddy] {
        assert_eq!(net.commands(i).len(), 3, "minority node {i} committed");
    }
    // The majority elects its own leader and commits a conflicting claim.
    let new = *net
        .leaders()
        .iter()
        .find(|l| majority.contains(l))
        .expect("the majority elected no leader");
    assert!(
        !net.log(old).is_leader(),
        "check-quorum: the old leader steps down"
    );
    net.log(new).propose(&assign(1, 50, 150)).unwrap();
    net.settle();
    for &i in &majority {
        assert_eq!(net.commands(i).len(), 4);
    }
    // Healed, the minority takes the majority's log; the stranded proposal is gone.
    net.heal();
    net.run(60);
    let expected = net.commands(majority[0]);
    for i in 0..5 {
        assert_eq!(net.commands(i), expected, "node {i}");
        assert_eq!(net.nodes[i].topology.owner(50).unwrap().id, node_id(1));
        assert!(net.nodes[i].topology.owner(0).is_none());
    }
}

#[test]
fn a_learner_catches_up_by_snapshot_after_compaction() {
    let mut net = SimNet::new(3, 0, 5);
    for c in [
        add_node(0),
        add_node(1),
        add_node(2),
        add_node(3),
        assign(0, 0, 8000),
        assign(1, 8001, 16383),
    ] {
        commit(&mut net, &c);
    }
    for i in 0..3 {
        let topology = net.nodes[i].topology.clone();
        net.compact(i, &topology).unwrap();
        assert_eq!(net.log(i).snapshot_index(), topology.consensus.version);
    }
    let joiner = net.push(TopologyLog::new(node_id(3), &[], &[], 99).unwrap());
    let leader = net.elect(ELECTION_TICKS_MAX);
    net.log(leader).propose_add_learner(&node_id(3)).unwrap();
    net.run(20);
    assert_eq!(net.nodes[joiner].restores, 1);
    let leader_image = TopologyImage::capture(&net.nodes[leader].topology);
    assert_eq!(
        TopologyImage::capture(&net.nodes[joiner].topology),
        leader_image
    );
    // It follows new entries from the log, and it does not vote.
    commit(
        &mut net,
        &TopologyCommand::SetSlotNode {
            slot: 0,
            node: node_id(3),
        },
    );
    assert_eq!(net.nodes[joiner].topology.owner(0).unwrap().id, node_id(3));
    assert!(net.nodes[joiner].topology.myself().config_epoch > 0);
    let (voters, learners) = net.log(leader).members();
    assert_eq!(voters.len(), 3);
    assert_eq!(learners, vec![node_id(3)]);
    assert_eq!(net.log(joiner).leader(), Some(node_id(leader)));
    assert!(net.step_errors.is_empty(), "{:?}", net.step_errors);
}

#[test]
fn compaction_needs_the_topology_the_log_applied() {
    let mut net = SimNet::new(3, 0, 6);
    commit(&mut net, &add_node(0));
    let mut stale = net.nodes[0].topology.clone();
    stale.consensus.version -= 1;
    assert!(matches!(
        net.compact(0, &stale).unwrap_err(),
        LogError::StaleTopology { .. }
    ));
}

#[test]
fn voters_are_capped_at_five() {
    let ids: Vec<_> = (0..6).map(node_id).collect();
    assert_eq!(
        TopologyLog::new(ids[0], &ids, &[], 0).unwrap_err(),
        LogError::TooManyVoters { count: 6, max: 5 }
    );
    let mut net = SimNet::new(3, 0, 7);
    for n in 3..6 {
        net.push(TopologyLog::new(node_id(n), &[], &[], n as u64).unwrap());
    }
    for n in 3..5 {
        let leader = net.elect(ELECTION_TICKS_MAX);
        net.log(leader).propose_add_voter(&node_id(n)).unwrap();
        net.run(5);
    }
    let leader = net.elect(ELECTION_TICKS_MAX);
    assert_eq!(net.log(leader).members().0.len(), VOTERS_MAX);
    assert_eq!(
        net.log(leader).propose_add_voter(&node_id(5)).unwrap_err(),
        LogError::VotersFull { max: VOTERS_MAX }
    );
    net.log(leader).propose_add_learner(&node_id(5)).unwrap();
    assert_eq!(
        net.log(leader)
            .propose_add_learner(&node_id(5))
            .unwrap_err(),
        LogError::ConfChangePending
    );
    net.run(5);
    let (voters, learners) = net.log(leader).members();
    assert_eq!((voters.len(), learners), (5, vec![node_id(5)]));
    // Every member agrees, the new voters and the learner included.
    for i in 0..6 {
        assert_eq!(
            net.log(i).members(),
            (voters.clone(), vec![node_id(5)]),
            "node {i}"
        );
    }
}

/// Random conflicting slot claims from whoever leads, through a leader crash and a
/// partition: at every version all nodes that reached it hold the same topology (the sim
/// checks each turn), so no slot ever has two owners in one version.
#[test]
fn conflicting_slot_claims_never_give_a_slot_two_owners_in_one_version() {
    let mut rng = SmallRng::seed_from_u64(8);
    let mut net = SimNet::new(5, 0, 8);
    for n in 0..5 {
        commit(&mut net, &add_node(n));
    }
    for round in 0..60 {
        match round {
            20 => {
                let l = net.elect(ELECTION_TICKS_MAX);
                net.crash(l);
            }
            35 => {
                let l = net.elect(ELECTION_TICKS_MAX);
                net.partition(&[l]);
            }
            50 => net.heal(),
            _ => {}
        }
        let start = rng.gen_range(0..16000u16);
        let end = start + rng.gen_range(0..300u16);
        let owner = rng.gen_range(0..5usize);
        let command = match rng.gen_range(0..4) {
            0 | 1 => assign(owner, start, end),
            2 => TopologyCommand::SetSlotNode {
                slot: start,
                node: node_id(owner),
            },
            _ => TopologyCommand::RemoveSlots {
                ranges: vec![(start, end)],
            },
        };
        for l in net.leaders() {
            let _ = net.log(l).propose(&command);
        }
        net.run(3);
    }
    net.run(60);
    let alive: Vec<usize> = (0..5).filter(|&i| net.nodes[i].log.is_some()).collect();
    let image = TopologyImage::capture(&net.nodes[alive[0]].topology);
    for &i in &alive {
        assert_eq!(TopologyImage::capture(&net.nodes[i].topology), image);
    }
    let accepted = net.nodes[alive[0]]
        .applied
        .iter()
        .filter(|(_, ok)| *ok)
        .count();
    assert!(accepted > 20, "only {accepted} commands applied");
    assert!(net.versions_seen() > 20);
}

#[test]
fn bad_bytes_to_step_are_errors_not_panics() {
    let mut net = SimNet::new(3, 0, 9);
    let leader = net.elect(ELECTION_TICKS_MAX);
    let follower = (leader + 1) % 3;
    let from = node_id(leader);
    let me = raft_id(&node_id(follower));
    let message = |t: MessageType, f: &dyn Fn(&mut Message)| {
        let mut m = Message::default();
        m.set_msg_type(t);
        m.from = raft_id(&from);
        m.to = me;
        m.term = 1000;
        f(&mut m);
        m.write_to_bytes().unwrap()
    };
    let mut bad_snapshot = Message::default();
    bad_snapshot.set_msg_type(MessageType::MsgSnapshot);
    bad_snapshot.from = raft_id(&from);
    bad_snapshot.to = me;
    bad_snapshot.term = 1000;
    bad_snapshot.mut_snapshot().mut_metadata().index = 50;
    bad_snapshot.mut_snapshot().data = vec![1, 2, 3].into();
    type Expected = fn(&LogError) -> bool;
    let cases: Vec<(Vec<u8>, Expected)> = vec![
        (vec![0xff; 64], |e| matches!(e, LogError::BadMessage(_))),
        (
            message(MessageType::MsgAppend, &|_| {})[..5].to_vec(),
            |e| matches!(e, LogError::BadMessage(_) | LogError::WrongRecipient { .. }),
        ),
        (Vec::new(), |e| {
            matches!(e, LogError::WrongRecipient { to: 0 })
        }),
        (message(MessageType::MsgAppend, &|m| m.to = 12345), |e| {
            matches!(e, LogError::WrongRecipient { to: 12345 })
        }),
        (message(MessageType::MsgAppend, &|m| m.from = 777), |e| {
            matches!(e, LogError::SenderMismatch { claimed: 777 })
        }),
        (message(MessageType::MsgPropose, &|_| {}), |e| {
            matches!(e, LogError::UnexpectedMessage(_))
        }),
        (message(MessageType::MsgHup, &|_| {}), |e| {
            matches!(e, LogError::UnexpectedMessage(_))
        }),
        (bad_snapshot.write_to_bytes().unwrap(), |e| {
            matches!(e, LogError::BadSnapshot(_))
        }),
        (vec![0; STEP_BYTES_MAX + 1], |e| {
            matches!(e, LogError::MessageTooLarge { .. })
        }),
    ];
    for (k, (bytes, expected)) in cases.iter().enumerate() {
        let err = net.log(follower).step(&from, bytes).unwrap_err();
        assert!(expected(&err), "case {k}: {err:?}");
    }
    // A heartbeat committing past the follower's log (its leader believes it holds entries
    // it lost in a restart) is clamped to the log and accepted, not refused.
    let term = net.log(leader).term();
    let heartbeat = message(MessageType::MsgHeartbeat, &|m| {
        m.commit = 1_000_000;
        m.term = term;
    });
    net.log(follower).step(&from, &heartbeat).unwrap();
    // A forged acknowledgement to the leader, past its log.
    let mut ack = Message::default();
    ack.set_msg_type(MessageType::MsgAppendResponse);
    ack.from = me;
    ack.to = raft_id(&from);
    ack.term = net.log(leader).term();
    ack.index = 1_000_000;
    let err = net
        .log(leader)
        .step(&node_id(follower), &ack.write_to_bytes().unwrap())
        .unwrap_err();
    assert!(matches!(err, LogError::Inconsistent(_)), "{err:?}");
    // Nothing was disturbed: the group still commits, the follower included.
    commit(&mut net, &add_node(0));
    assert_eq!(net.commands(follower).len(), 1);
    assert_eq!(net.log(follower).leader(), Some(node_id(leader)));
}

#[test]
fn a_removed_voter_leaves_the_group_and_the_rest_still_commit() {
    let mut net = SimNet::new(3, 0, 10);
    let leader = net.elect(ELECTION_TICKS_MAX);
    let gone = (leader + 1) % 3;
    net.log(leader).propose_remove(&node_id(gone)).unwrap();
    net.settle();
    net.crash(gone);
    let (voters, _) = net.log(leader).members();
    assert_eq!(voters.len(), 2);
    assert!(!voters.contains(&node_id(gone)));
    // Two voters of two: both needed, both there.
    commit(&mut net, &add_node(0));
    let other = 3 - leader - gone;
    assert_eq!(net.commands(other).len(), 1);
    assert_eq!(net.commands(leader), net.commands(other));
}

#[test]
fn node_ids_sharing_a_raft_id_are_refused() {
    let a = crate::cluster::id::HexId::parse(b"00000000000000ab0000000000000000000000aa").unwrap();
    let b = crate::cluster::id::HexId::parse(b"00000000000000ab0000000000000000000000bb").unwrap();
    assert_eq!(raft_id(&a), raft_id(&b));
    assert_eq!(
        TopologyLog::new(a, &[a, b], &[], 0).unwrap_err(),
        LogError::RaftIdCollision(b)
    );
    let mut net = SimNet::new(3, 0, 11);
    let leader = net.elect(ELECTION_TICKS_MAX);
    let twin = crate::cluster::id::HexId::parse(
        format!("{}{}", &node_id(0).as_str()[..16], "f".repeat(24)).as_bytes(),
    )
    .unwrap();
    assert_eq!(
        net.log(leader).propose_add_learner(&twin).unwrap_err(),
        LogError::RaftIdCollision(twin)
    );
}

/// The log is driven from runtime tasks: it must move between threads.
#[test]
fn the_log_can_move_between_threads() {
    fn send<T: Send>(_: &T) {}
    let log = TopologyLog::new(node_id(0), &[node_id(0)], &[], 0).unwrap();
    send(&log);
}

/// A fifth of all messages lost, snapshots included: leaders may come and go, proposals may
/// be lost with them, but whatever commits is the same everywhere, and a learner added after
/// compaction still catches up (a lost snapshot is sent again).
#[test]
fn a_lossy_network_still_converges() {
    let mut net = SimNet::new(3, 0, 12);
    for n in 0..4 {
        commit(&mut net, &add_node(n));
    }
    net.set_loss(20);
    for k in 0..30u16 {
        if let Some(&l) = net.leaders().first() {
            let _ = net
                .log(l)
                .propose(&assign(k as usize % 4, k * 100, k * 100 + 50));
        }
        net.run(5);
    }
    let joiner = net.push(TopologyLog::new(node_id(3), &[], &[], 77).unwrap());
    let mut added = false;
    for _ in 0..100 {
        if let Some(&l) = net.leaders().first() {
            added |= net.log(l).propose_add_learner(&node_id(3)).is_ok();
        }
        net.run(5);
        if added && net.nodes[joiner].restores > 0 {
            break;
        }
    }
    net.set_loss(0);
    net.run(60);
    assert!(net.nodes[joiner].restores >= 1);
    let image = TopologyImage::capture(&net.nodes[0].topology);
    for i in 0..4 {
        assert_eq!(
            TopologyImage::capture(&net.nodes[i].topology),
            image,
            "node {i}"
        );
    }
    assert!(
        image.slots.len() > 10,
        "only {} slot runs",
        image.slots.len()
    );
}

/// Should raft-rs panic inside a call, the panic stays inside: the call and every later one
/// return Poisoned, and the driver rebuilds the log.
#[test]
fn a_panic_inside_raft_poisons_the_log_instead_of_unwinding() {
    let mut log = TopologyLog::new(node_id(0), &[node_id(0)], &[], 0).unwrap();
    let result: Result<(), LogError> = log.guarded_call(|_| panic!("raft invariant broken"));
    assert_eq!(result.unwrap_err(), LogError::Poisoned);
    assert_eq!(log.tick().unwrap_err(), LogError::Poisoned);
    assert_eq!(log.ready().unwrap_err(), LogError::Poisoned);
    assert_eq!(log.propose(&add_node(0)).unwrap_err(), LogError::Poisoned);
    assert_eq!(log.step(&node_id(1), &[]).unwrap_err(), LogError::Poisoned);
}
