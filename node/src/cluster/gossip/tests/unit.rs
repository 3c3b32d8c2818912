//! One behaviour per test, driving a single core with hand-made messages.

use super::harness::settings;
use crate::cluster::config_file;
use crate::cluster::flags::bit;
use crate::cluster::gossip::{Action, Event, Gossip, Input};
use crate::cluster::id::{HexId, NodeId};
use crate::cluster::node::{ClusterNode, LinkState};
use crate::cluster::nodes_text::cluster_nodes;
use crate::cluster::topology::Topology;
use proto::bus::{
    Body, BusMessage, Fail, Gossip as GossipBody, GossipEntry, Header, NodeRecord, Publish,
    SlotRange, Update,
};
use rand::SeedableRng;

const T0: u64 = 1_000_000;

fn make_ids(n: usize) -> Vec<NodeId> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut v: Vec<NodeId> = (0..n).map(|_| HexId::random(&mut rng)).collect();
    // Sorted, so tests can pick the smaller or the larger id.
    v.sort();
    v
}

/// A node none of the tests' clusters has.
fn stranger() -> NodeId {
    HexId::random(&mut rand::rngs::StdRng::seed_from_u64(99))
}

fn member(id: NodeId, i: usize) -> ClusterNode {
    let mut n = ClusterNode::new(id, id);
    n.ip = format!("10.0.0.{i}");
    n.port = 7000 + i as u16;
    n.cport = 17000 + i as u16;
    n.bus_addr = format!("sim:{i}");
    n
}

/// Node 0 is myself; nodes 1.. are members it knows, linked, heard from at T0.
fn cluster(n: usize) -> (Topology, Vec<NodeId>) {
    let ids = make_ids(n);
    let mut t = Topology::new(member(ids[0], 0));
    for (i, id) in ids.iter().enumerate().skip(1) {
        let mut m = member(*id, i);
        m.link = LinkState::Connected;
        m.pong_received = T0;
        t.add_node(m).unwrap();
    }
    (t, ids)
}

fn give_slots(t: &mut Topology, id: NodeId, start: u16, end: u16) {
    let i = t.index_of(&id).unwrap();
    for s in start..=end {
        t.slots.set_owner(s, Some(i));
    }
}

fn header(id: NodeId, i: usize, epoch: u64, slots: &[(u32, u32)]) -> Header {
    Header {
        sender: id.to_string(),
        current_epoch: epoch,
        config_epoch: epoch,
        flags: bit::MASTER as u32,
        slots: slots
            .iter()
            .map(|&(start, end)| SlotRange { start, end })
            .collect(),
        record: Some(NodeRecord {
            bus_addr: format!("sim:{i}").into_bytes(),
            ip: format!("10.0.0.{i}"),
            port: 7000 + i as u32,
            cport: 17000 + i as u32,
            ..NodeRecord::default()
        }),
        ..Header::default()
    }
}

fn msg(h: Header, body: Body) -> BusMessage {
    BusMessage {
        header: Some(h),
        body: Some(body),
    }
}

fn pfail_entry(id: NodeId, i: usize) -> GossipEntry {
    GossipEntry {
        node_id: id.to_string(),
        flags: (bit::MASTER | bit::PFAIL) as u32,
        bus_addr: format!("sim:{i}").into_bytes(),
        ..GossipEntry::default()
    }
}

fn recv(g: &mut Gossip, t: &mut Topology, now: u64, from: usize, m: BusMessage) -> Vec<Action> {
    g.step(
        now,
        Input::Receive {
            from: format!("sim:{from}"),
            msg: Box::new(m),
        },
        t,
    )
}

fn sends(actions: &[Action]) -> Vec<(String, &'static str)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { to, msg } => Some((to.clone(), msg.body.as_ref().unwrap().kind())),
            _ => None,
        })
        .collect()
}

fn events(actions: &[Action]) -> Vec<Event> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Event(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

fn flags(t: &Topology, id: NodeId) -> u16 {
    t.nodes[t.index_of(&id).unwrap() as usize].flags.0
}

#[test]
fn meet_adds_a_handshake_node_and_sends_meet() {
    let (mut t, _) = cluster(1);
    let mut g = Gossip::new(settings(), 1);
    let actions = g.step(
        T0,
        Input::Meet {
            addr: "sim:9".into(),
        },
        &mut t,
    );
    assert_eq!(sends(&actions), vec![("sim:9".to_string(), "meet")]);
    assert_eq!(t.nodes.len(), 2);
    let hs = &t.nodes[1];
    assert!(hs.flags.has(bit::HANDSHAKE) && hs.flags.has(bit::MEET));
    assert_eq!(hs.bus_addr, "sim:9");
    assert!(cluster_nodes(&t).contains(" master,handshake - "));
    // Not a member yet: the config file leaves it out.
    assert_eq!(config_file::render(&t).lines().count(), 2);
    // A second MEET of the same address does nothing.
    let again = g.step(
        T0,
        Input::Meet {
            addr: "sim:9".into(),
        },
        &mut t,
    );
    assert!(sends(&again).is_empty());
    assert_eq!(t.nodes.len(), 2);
}

#[test]
fn a_meet_adds_its_sender_and_the_pong_completes_the_handshake() {
    let ids = make_ids(2);
    let mut a = Topology::new(member(ids[0], 0));
    let mut b = Topology::new(member(ids[1], 1));
    let (mut ga, mut gb) = (Gossip::new(settings(), 1), Gossip::new(settings(), 2));
    let out = ga.step(
        T0,
        Input::Meet {
            addr: "sim:1".into(),
        },
        &mut a,
    );
    let meet = out
        .into_iter()
        .find_map(|a| match a {
            Action::Send { msg, .. } => Some(msg),
            _ => None,
        })
        .expect("a MEET");
    let out = recv(&mut gb, &mut b, T0 + 1, 0, *meet);
    assert!(events(&out).contains(&Event::NodeJoined {
        id: ids[0],
        addr: "sim:0".into()
    }));
    assert!(out.contains(&Action::SaveConfig));
    let pong = out
        .into_iter()
        .find_map(|a| match a {
            Action::Send { to, msg } if to == "sim:0" => Some(msg),
            _ => None,
        })
        .expect("a PONG back");
    assert_eq!(pong.body.as_ref().unwrap().kind(), "pong");
    assert_eq!(b.nodes[1].port, 7000);
    let out = recv(&mut ga, &mut a, T0 + 2, 1, *pong);
    assert!(events(&out).contains(&Event::NodeJoined {
        id: ids[1],
        addr: "sim:1".into()
    }));
    assert_eq!(a.nodes.len(), 2);
    assert_eq!(a.nodes[1].id, ids[1]);
    assert_eq!(flags(&a, ids[1]) & (bit::HANDSHAKE | bit::MEET), 0);
    assert_eq!(a.nodes[1].pong_received, T0 + 2);
    assert_eq!(a.nodes[1].ping_sent, 0);
}

#[test]
fn a_ping_from_a_stranger_is_answered_but_not_added() {
    let (mut t, _) = cluster(1);
    let mut g = Gossip::new(settings(), 1);
    let stranger = stranger();
    let out = recv(
        &mut g,
        &mut t,
        T0,
        7,
        msg(
            header(stranger, 7, 0, &[]),
            Body::Ping(GossipBody::default()),
        ),
    );
    assert_eq!(sends(&out), vec![("sim:7".to_string(), "pong")]);
    assert_eq!(t.nodes.len(), 1);
}

#[test]
fn an_unanswered_handshake_times_out() {
    let (mut t, _) = cluster(1);
    let mut g = Gossip::new(settings(), 1);
    g.step(
        T0,
        Input::Meet {
            addr: "sim:9".into(),
        },
        &mut t,
    );
    let out = g.step(T0 + 500, Input::Tick, &mut t);
    assert_eq!(t.nodes.len(), 2);
    assert_eq!(sends(&out), vec![("sim:9".to_string(), "meet")], "retried");
    // A MEET asked for by command gets five handshake windows (a slow first exchange on
    // a loaded machine must not leave the pair half met), then is given up.
    let window = settings().handshake_timeout_ms() + 1;
    for attempt in 1..5 {
        let out = g.step(T0 + attempt * window, Input::Tick, &mut t);
        assert_eq!(t.nodes.len(), 2, "given up after {attempt} windows");
        assert!(events(&out).is_empty());
    }
    let out = g.step(T0 + 5 * window + 1, Input::Tick, &mut t);
    assert_eq!(t.nodes.len(), 1);
    assert!(events(&out).contains(&Event::HandshakeTimedOut {
        addr: "sim:9".into()
    }));
}

#[test]
fn gossip_about_an_unknown_node_starts_a_handshake_with_it() {
    let (mut t, ids) = cluster(2);
    let mut g = Gossip::new(settings(), 1);
    let newcomer = stranger();
    let entry = GossipEntry {
        node_id: newcomer.to_string(),
        flags: bit::MASTER as u32,
        bus_addr: b"sim:5".to_vec(),
        ..GossipEntry::default()
    };
    let out = recv(
        &mut g,
        &mut t,
        T0,
        1,
        msg(
            header(ids[1], 1, 0, &[]),
            Body::Ping(GossipBody {
                entries: vec![entry.clone()],
                ..GossipBody::default()
            }),
        ),
    );
    assert!(sends(&out).contains(&("sim:5".to_string(), "meet")));
    assert_eq!(t.nodes.len(), 3);
    // The same gossip again does not start a second handshake.
    recv(
        &mut g,
        &mut t,
        T0,
        1,
        msg(
            header(ids[1], 1, 0, &[]),
            Body::Ping(GossipBody {
                entries: vec![entry],
                ..GossipBody::default()
            }),
        ),
    );
    assert_eq!(t.nodes.len(), 3);
}

#[test]
fn silence_past_the_node_timeout_is_pfail_and_a_pong_clears_it() {
    let (mut t, ids) = cluster(2);
    let mut g = Gossip::new(settings(), 1);
    let timeout = settings().node_timeout_ms;
    // Half the timeout after the last pong, a ping goes out.
    let out = g.step(T0 + timeout / 2 + 1, Input::Tick, &mut t);
    assert!(sends(&out).contains(&("sim:1".to_string(), "ping")));
    let sent_at = T0 + timeout / 2 + 1;
    assert_eq!(t.nodes[1].ping_sent, sent_at);
    // Retried while pending, without moving ping_sent.
    let out = g.step(sent_at + settings().ping_retry_ms, Input::Tick, &mut t);
    assert!(sends(&out).contains(&("sim:1".to_string(), "ping")));
    assert_eq!(t.nodes[1].ping_sent, sent_at);
    let out = g.step(sent_at + timeout + 1, Input::Tick, &mut t);
    assert!(events(&out).contains(&Event::PFail { id: ids[1] }));
    let text = cluster_nodes(&t);
    assert!(text.contains(" master,fail? - "), "{text}");
    assert!(text.contains(" disconnected"), "{text}");
    let out = recv(
        &mut g,
        &mut t,
        sent_at + timeout + 2,
        1,
        msg(header(ids[1], 1, 0, &[]), Body::Pong(GossipBody::default())),
    );
    assert!(events(&out).contains(&Event::PFailCleared { id: ids[1] }));
    assert_eq!(flags(&t, ids[1]) & bit::PFAIL, 0);
    assert!(cluster_nodes(&t).lines().all(|l| l.contains(" connected")));
}

/// myself (0) and nodes 1, 2, 4 own slots: size 4, quorum 3. Node 4 is suspected here.
fn suspect_setup() -> (Topology, Vec<NodeId>, Gossip) {
    let (mut t, ids) = cluster(5);
    give_slots(&mut t, ids[0], 0, 99);
    give_slots(&mut t, ids[1], 100, 199);
    give_slots(&mut t, ids[2], 200, 299);
    give_slots(&mut t, ids[4], 300, 399);
    let i = t.index_of(&ids[4]).unwrap();
    t.nodes[i as usize].flags.set(bit::PFAIL, true);
    (t, ids, Gossip::new(settings(), 1))
}

fn report(
    g: &mut Gossip,
    t: &mut Topology,
    now: u64,
    reporter: usize,
    ids: &[NodeId],
) -> Vec<Action> {
    let slots: &[(u32, u32)] = match reporter {
        1 => &[(100, 199)],
        2 => &[(200, 299)],
        _ => &[],
    };
    recv(
        g,
        t,
        now,
        reporter,
        msg(
            header(ids[reporter], reporter, 0, slots),
            Body::Ping(GossipBody {
                entries: vec![pfail_entry(ids[4], 4)],
                ..GossipBody::default()
            }),
        ),
    )
}

#[test]
fn fail_needs_reports_from_a_majority_of_voting_primaries() {
    let (mut t, ids, mut g) = suspect_setup();
    // Node 3 owns no slot: its report does not count.
    let out = report(&mut g, &mut t, T0, 3, &ids);
    assert!(!events(&out).contains(&Event::Fail { id: ids[4] }));
    // Node 1's report plus myself: 2 of 3.
    let out = report(&mut g, &mut t, T0, 1, &ids);
    assert!(!events(&out).contains(&Event::Fail { id: ids[4] }));
    assert_ne!(flags(&t, ids[4]) & bit::PFAIL, 0);
    // Node 2's makes 3: FAIL, broadcast to every other member, saved.
    let out = report(&mut g, &mut t, T0 + 10, 2, &ids);
    assert!(events(&out).contains(&Event::Fail { id: ids[4] }));
    assert_eq!(flags(&t, ids[4]) & (bit::FAIL | bit::PFAIL), bit::FAIL);
    let fails: Vec<String> = sends(&out)
        .into_iter()
        .filter(|(_, k)| *k == "fail")
        .map(|(to, _)| to)
        .collect();
    assert_eq!(fails.len(), 4, "{fails:?}");
    assert!(out.contains(&Action::SaveConfig));
    assert!(cluster_nodes(&t).contains(" master,fail - "));
}

#[test]
fn failure_reports_expire() {
    let (mut t, ids, mut g) = suspect_setup();
    report(&mut g, &mut t, T0, 1, &ids);
    let late = T0 + settings().fail_report_validity_ms() + 1;
    let out = report(&mut g, &mut t, late, 2, &ids);
    assert!(!events(&out).contains(&Event::Fail { id: ids[4] }));
    assert_eq!(flags(&t, ids[4]) & bit::FAIL, 0);
}

#[test]
fn a_report_withdrawn_in_gossip_no_longer_counts() {
    let (mut t, ids, mut g) = suspect_setup();
    report(&mut g, &mut t, T0, 1, &ids);
    let mut healthy = pfail_entry(ids[4], 4);
    healthy.flags = bit::MASTER as u32;
    recv(
        &mut g,
        &mut t,
        T0 + 1,
        1,
        msg(
            header(ids[1], 1, 0, &[(100, 199)]),
            Body::Ping(GossipBody {
                entries: vec![healthy],
                ..GossipBody::default()
            }),
        ),
    );
    let out = report(&mut g, &mut t, T0 + 2, 2, &ids);
    assert!(!events(&out).contains(&Event::Fail { id: ids[4] }));
}

#[test]
fn a_fail_message_forces_fail_and_only_from_members() {
    let (mut t, ids) = cluster(3);
    let mut g = Gossip::new(settings(), 1);
    let fail = Body::Fail(Fail {
        node_id: ids[2].to_string(),
    });
    let stranger = stranger();
    recv(
        &mut g,
        &mut t,
        T0,
        9,
        msg(header(stranger, 9, 0, &[]), fail.clone()),
    );
    assert_eq!(flags(&t, ids[2]) & bit::FAIL, 0);
    let out = recv(&mut g, &mut t, T0, 1, msg(header(ids[1], 1, 0, &[]), fail));
    assert!(events(&out).contains(&Event::Fail { id: ids[2] }));
    assert_ne!(flags(&t, ids[2]) & bit::FAIL, 0);
}

#[test]
fn fail_clears_at_once_without_slots_and_after_the_undo_time_with_slots() {
    let (mut t, ids) = cluster(3);
    give_slots(&mut t, ids[2], 0, 10);
    let mut g = Gossip::new(settings(), 1);
    for id in [ids[1], ids[2]] {
        let fail = Body::Fail(Fail {
            node_id: id.to_string(),
        });
        let sender = if id == ids[1] { ids[2] } else { ids[1] };
        let i = if id == ids[1] { 2 } else { 1 };
        recv(&mut g, &mut t, T0, i, msg(header(sender, i, 0, &[]), fail));
    }
    let pong = |id, i, slots: &[(u32, u32)]| {
        msg(header(id, i, 0, slots), Body::Pong(GossipBody::default()))
    };
    // Slotless primary: cleared by its first pong.
    let out = recv(&mut g, &mut t, T0 + 100, 1, pong(ids[1], 1, &[]));
    assert!(events(&out).contains(&Event::FailCleared { id: ids[1] }));
    // Primary with slots: not before the undo time...
    recv(&mut g, &mut t, T0 + 100, 2, pong(ids[2], 2, &[(0, 10)]));
    assert_ne!(flags(&t, ids[2]) & bit::FAIL, 0);
    // ...then cleared.
    let later = T0 + settings().fail_undo_ms() + 1;
    let out = recv(&mut g, &mut t, later, 2, pong(ids[2], 2, &[(0, 10)]));
    assert!(events(&out).contains(&Event::FailCleared { id: ids[2] }));
}

#[test]
fn a_failed_replica_is_cleared_at_once() {
    let (mut t, ids) = cluster(3);
    give_slots(&mut t, ids[1], 0, 10);
    let mut g = Gossip::new(settings(), 1);
    let fail = Body::Fail(Fail {
        node_id: ids[2].to_string(),
    });
    recv(
        &mut g,
        &mut t,
        T0,
        1,
        msg(header(ids[1], 1, 0, &[(0, 10)]), fail),
    );
    let mut h = header(ids[2], 2, 0, &[(0, 10)]);
    h.flags = bit::SLAVE as u32;
    h.primary = ids[1].to_string();
    let out = recv(
        &mut g,
        &mut t,
        T0 + 1,
        2,
        msg(h, Body::Pong(GossipBody::default())),
    );
    assert!(events(&out).contains(&Event::FailCleared { id: ids[2] }));
    let i = t.index_of(&ids[2]).unwrap() as usize;
    assert!(t.nodes[i].is_replica() && t.nodes[i].primary == Some(ids[1]));
}

#[test]
fn claims_win_by_config_epoch_and_a_stale_claimer_gets_an_update() {
    let (mut t, ids) = cluster(3);
    let mut g = Gossip::new(settings(), 1);
    // Node 1 claims free slots at epoch 3: bound.
    let out = recv(
        &mut g,
        &mut t,
        T0,
        1,
        msg(
            header(ids[1], 1, 3, &[(0, 99)]),
            Body::Ping(GossipBody::default()),
        ),
    );
    assert!(events(&out).contains(&Event::SlotsMoved {
        owner: ids[1],
        count: 100
    }));
    assert_eq!(t.owner(50).unwrap().id, ids[1]);
    assert_eq!(t.nodes[1].config_epoch, 3);
    // Node 2 claims some of them at epoch 2: refused, and told who owns them.
    let out = recv(
        &mut g,
        &mut t,
        T0,
        2,
        msg(
            header(ids[2], 2, 2, &[(50, 60)]),
            Body::Ping(GossipBody::default()),
        ),
    );
    assert_eq!(t.owner(55).unwrap().id, ids[1]);
    assert!(events(&out).contains(&Event::UpdateSent {
        to: ids[2],
        about: ids[1]
    }));
    let update = out
        .iter()
        .find_map(|a| match a {
            Action::Send { to, msg } if to == "sim:2" => match &msg.body {
                Some(Body::Update(u)) => Some(u.clone()),
                _ => None,
            },
            _ => None,
        })
        .expect("an UPDATE to node 2");
    assert_eq!(update.node_id, ids[1].to_string());
    assert_eq!(update.config_epoch, 3);
    assert_eq!(update.slots, vec![SlotRange { start: 0, end: 99 }]);
    // At epoch 4 the same claim wins.
    recv(
        &mut g,
        &mut t,
        T0,
        2,
        msg(
            header(ids[2], 2, 4, &[(50, 60)]),
            Body::Ping(GossipBody::default()),
        ),
    );
    assert_eq!(t.owner(55).unwrap().id, ids[2]);
    assert_eq!(t.owner(49).unwrap().id, ids[1]);
}

#[test]
fn an_update_moves_slots_and_a_primary_left_without_slots_follows_the_taker() {
    let (mut t, ids) = cluster(3);
    give_slots(&mut t, ids[0], 0, 99);
    t.myself_mut().config_epoch = 1;
    let mut g = Gossip::new(settings(), 1);
    let update = Body::Update(Update {
        node_id: ids[2].to_string(),
        config_epoch: 5,
        slots: vec![SlotRange { start: 0, end: 99 }],
    });
    let out = recv(
        &mut g,
        &mut t,
        T0,
        1,
        msg(header(ids[1], 1, 0, &[]), update.clone()),
    );
    assert_eq!(t.owner(0).unwrap().id, ids[2]);
    assert!(events(&out).contains(&Event::BecameReplica { primary: ids[2] }));
    assert!(t.myself().is_replica());
    assert!(out.contains(&Action::SaveConfig));
    // An UPDATE that is not newer changes nothing.
    let out = recv(
        &mut g,
        &mut t,
        T0,
        1,
        msg(header(ids[1], 1, 0, &[]), update),
    );
    assert!(!out.contains(&Action::SaveConfig));
}

#[test]
fn equal_config_epochs_are_resolved_by_the_smaller_id() {
    // ids are sorted: myself (ids[0]) has the smaller id than ids[1].
    let (mut t, ids) = cluster(2);
    t.myself_mut().config_epoch = 5;
    t.current_epoch = 7;
    let mut g = Gossip::new(settings(), 1);
    let out = recv(
        &mut g,
        &mut t,
        T0,
        1,
        msg(header(ids[1], 1, 5, &[]), Body::Ping(GossipBody::default())),
    );
    assert!(events(&out).contains(&Event::ConfigEpochCollision { new_epoch: 8 }));
    assert_eq!((t.current_epoch, t.myself().config_epoch), (8, 8));

    // The node with the larger id does nothing.
    let ids2 = ids;
    let mut t = Topology::new(member(ids2[1], 1));
    t.add_node(member(ids2[0], 0)).unwrap();
    t.myself_mut().config_epoch = 5;
    let mut g = Gossip::new(settings(), 1);
    let out = recv(
        &mut g,
        &mut t,
        T0,
        0,
        msg(
            header(ids2[0], 0, 5, &[]),
            Body::Ping(GossipBody::default()),
        ),
    );
    assert!(events(&out).is_empty());
    assert_eq!(t.myself().config_epoch, 5);
}

#[test]
fn larger_current_epochs_are_adopted_and_topology_versions_remembered() {
    let (mut t, ids) = cluster(2);
    let mut g = Gossip::new(settings(), 1);
    let mut h = header(ids[1], 1, 3, &[]);
    h.current_epoch = 42;
    h.topology_version = 17;
    assert_eq!(g.topology_version_of(&ids[1]), None);
    recv(
        &mut g,
        &mut t,
        T0,
        1,
        msg(h, Body::Ping(GossipBody::default())),
    );
    assert_eq!(g.topology_version_of(&ids[1]), Some(17));
    assert_eq!(t.current_epoch, 42);
    assert_eq!(t.nodes[1].config_epoch, 3);
}

#[test]
fn gossip_carries_a_few_random_nodes_and_every_suspected_one() {
    let (mut t, _) = cluster(40);
    for i in [5, 6, 7, 8, 9] {
        t.nodes[i].flags.set(bit::PFAIL, true);
    }
    let pfail: Vec<String> = [5, 6, 7, 8, 9]
        .iter()
        .map(|&i| t.nodes[i].id.to_string())
        .collect();
    let mut g = Gossip::new(settings(), 1);
    // Everyone is due a ping: each carries the gossip section.
    let out = g.step(T0 + settings().ping_interval_ms() + 1, Input::Tick, &mut t);
    let mut pings = 0;
    for a in &out {
        let Action::Send { msg, .. } = a else {
            continue;
        };
        let Some(Body::Ping(body)) = &msg.body else {
            continue;
        };
        pings += 1;
        let names: Vec<&String> = body.entries.iter().map(|e| &e.node_id).collect();
        for p in &pfail {
            assert!(names.contains(&p), "a suspected node is missing");
        }
        // max(3, 40/10) = 4 random ones at most, besides the suspects.
        assert!(
            body.entries.len() <= 4 + pfail.len(),
            "{}",
            body.entries.len()
        );
        assert!(body.entries.len() > pfail.len());
        assert!(!names.contains(&&t.myself().id.to_string()));
    }
    assert_eq!(pings, 39);
}

#[test]
fn publish_and_raft_from_members_are_delivered() {
    let (mut t, ids) = cluster(2);
    let mut g = Gossip::new(settings(), 1);
    let body = Body::Publish(Publish {
        channel: b"ch".to_vec(),
        message: b"hi".to_vec(),
    });
    let out = recv(
        &mut g,
        &mut t,
        T0,
        1,
        msg(header(ids[1], 1, 0, &[]), body.clone()),
    );
    assert!(out.contains(&Action::Deliver {
        from: ids[1],
        body: body.clone()
    }));
    let stranger = stranger();
    let out = recv(
        &mut g,
        &mut t,
        T0,
        8,
        msg(header(stranger, 8, 0, &[]), body),
    );
    assert!(!out.iter().any(|a| matches!(a, Action::Deliver { .. })));
    assert_eq!(t.stats.received[4], 2);
}

#[test]
fn a_member_without_an_address_is_noaddr_until_it_is_heard_from() {
    let (mut t, ids) = cluster(2);
    t.nodes[1].bus_addr.clear();
    let mut g = Gossip::new(settings(), 1);
    let out = g.step(T0 + settings().ping_interval_ms() + 1, Input::Tick, &mut t);
    assert!(sends(&out).is_empty(), "nowhere to send");
    assert!(cluster_nodes(&t).contains(" master,noaddr - "));
    recv(
        &mut g,
        &mut t,
        T0 + 1,
        1,
        msg(header(ids[1], 1, 0, &[]), Body::Ping(GossipBody::default())),
    );
    assert_eq!(t.nodes[1].bus_addr, "sim:1");
    assert!(!cluster_nodes(&t).contains("noaddr"));
}

#[test]
fn gossip_about_a_node_without_an_address_starts_no_handshake() {
    let (mut t, ids) = cluster(2);
    let mut g = Gossip::new(settings(), 1);
    let entry = GossipEntry {
        node_id: stranger().to_string(),
        flags: (bit::MASTER | bit::NOADDR) as u32,
        bus_addr: b"sim:5".to_vec(),
        ..GossipEntry::default()
    };
    let out = recv(
        &mut g,
        &mut t,
        T0,
        1,
        msg(
            header(ids[1], 1, 0, &[]),
            Body::Ping(GossipBody {
                entries: vec![entry],
                ..GossipBody::default()
            }),
        ),
    );
    assert!(!sends(&out).iter().any(|(to, _)| to == "sim:5"));
    assert_eq!(t.nodes.len(), 2);
}

/// A bus address survives the config file (in the link field) and the node loads as
/// disconnected, as every link is at start.
#[test]
fn bus_addresses_survive_the_config_file() {
    let (mut t, _) = cluster(3);
    t.myself_mut().bus_addr = "ofi:tcp;ofi_rxm:0a0b".into();
    t.nodes[2].bus_addr.clear();
    let text = config_file::render(&t);
    assert!(text.contains(" bus=ofi:tcp;ofi_rxm:0a0b"), "{text}");
    assert!(text.contains(" bus=sim:1"), "{text}");
    let back = config_file::parse(&text, &mut rand::rngs::StdRng::seed_from_u64(1)).unwrap();
    assert_eq!(back.myself().bus_addr, "ofi:tcp;ofi_rxm:0a0b");
    assert_eq!(back.nodes[1].bus_addr, "sim:1");
    assert_eq!(back.nodes[1].link, LinkState::Disconnected);
    assert_eq!(back.nodes[2].bus_addr, "");
    // CLUSTER NODES keeps the link state.
    assert!(cluster_nodes(&back)
        .lines()
        .nth(1)
        .unwrap()
        .contains(" disconnected"));
    assert!(config_file::parse(
        &text.replace("bus=sim:1", "bus="),
        &mut rand::rngs::StdRng::seed_from_u64(1)
    )
    .is_err());
}

fn lookups(actions: &[Action]) -> Vec<(NodeId, String, u16)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Lookup { id, ip, cport } => Some((*id, ip.clone(), *cport)),
            _ => None,
        })
        .collect()
}

/// A peer silent at its bus address (a restart moved it) is looked up at its bus port, at
/// most once per retry period; the address found replaces the old one, is saved, and is
/// pinged at once; the same address again changes nothing.
#[test]
fn a_silent_peer_is_looked_up_at_its_bus_port_and_found_again() {
    let (mut t, ids) = cluster(2);
    let mut g = Gossip::new(settings(), 1);
    let timeout = settings().node_timeout_ms;
    let sent_at = T0 + timeout / 2 + 1;
    let out = g.step(sent_at, Input::Tick, &mut t);
    assert!(lookups(&out).is_empty(), "asked before any silence");
    let silent = sent_at + timeout / 2 + 1;
    let out = g.step(silent, Input::Tick, &mut t);
    assert_eq!(lookups(&out), vec![(ids[1], "10.0.0.1".to_string(), 17001)]);
    let out = g.step(silent + 1, Input::Tick, &mut t);
    assert!(
        lookups(&out).is_empty(),
        "asked again within the retry period"
    );
    let retry = (timeout / 2).max(super::super::rediscover::LOOKUP_RETRY_MIN_MS);
    let out = g.step(silent + retry, Input::Tick, &mut t);
    assert_eq!(
        lookups(&out).len(),
        1,
        "not asked again after the retry period"
    );

    let found = Input::AddressFound {
        id: ids[1],
        addr: "sim:9".into(),
    };
    let out = g.step(silent + retry + 1, found, &mut t);
    assert_eq!(t.nodes[1].bus_addr, "sim:9");
    assert!(
        sends(&out).contains(&("sim:9".to_string(), "ping")),
        "{out:?}"
    );
    assert!(out.iter().any(|a| matches!(a, Action::SaveConfig)));
    assert!(events(&out).contains(&Event::AddressFound {
        id: ids[1],
        addr: "sim:9".into()
    }));
    let again = Input::AddressFound {
        id: ids[1],
        addr: "sim:9".into(),
    };
    let out = g.step(silent + retry + 2, again, &mut t);
    assert!(sends(&out).is_empty() && !out.iter().any(|a| matches!(a, Action::SaveConfig)));
    // Never about myself.
    let me = Input::AddressFound {
        id: ids[0],
        addr: "sim:8".into(),
    };
    g.step(silent + retry + 3, me, &mut t);
    assert_eq!(t.myself().bus_addr, "sim:0");
}

/// Goal: a member's header names its process incarnation, replication history and fence;
/// the core keeps them (the peer view carries the incarnation) and a new incarnation from
/// a known member is a restart, logged once. An older node (incarnation 0) changes nothing.
#[test]
fn a_restarted_peer_is_seen_by_its_new_incarnation() {
    let (mut t, ids) = cluster(2);
    let mut g = Gossip::new(settings(), 1);
    assert_ne!(g.incarnation(), 0);
    let replid = make_ids(3)[2];
    let ping_with = |incarnation: u64, fenced: bool| {
        let mut h = header(ids[1], 1, 0, &[]);
        let r = h.record.as_mut().unwrap();
        r.incarnation = incarnation;
        r.repl_id = replid.to_string();
        r.repl_offset = 77;
        r.fenced = fenced;
        msg(h, Body::Ping(GossipBody::default()))
    };
    let restarted = |out: &[Action]| {
        events(out)
            .into_iter()
            .filter(|e| matches!(e, Event::PeerRestarted { .. }))
            .collect::<Vec<_>>()
    };
    let out = recv(&mut g, &mut t, T0, 1, ping_with(5, false));
    assert!(restarted(&out).is_empty(), "the first incarnation heard");
    let node = &t.nodes[t.index_of(&ids[1]).unwrap() as usize];
    assert_eq!(
        (node.repl_id, node.repl_offset, node.fenced),
        (Some(replid), 77, false)
    );
    assert_eq!(g.peer_view(T0, &t).get(&ids[1]).unwrap().incarnation, 5);
    let out = recv(&mut g, &mut t, T0 + 1, 1, ping_with(5, false));
    assert!(restarted(&out).is_empty(), "the same incarnation again");
    let out = recv(&mut g, &mut t, T0 + 2, 1, ping_with(0, false));
    assert!(restarted(&out).is_empty(), "an older node says none");
    assert_eq!(g.peer_view(T0, &t).get(&ids[1]).unwrap().incarnation, 5);
    let out = recv(&mut g, &mut t, T0 + 3, 1, ping_with(9, true));
    assert_eq!(
        restarted(&out),
        vec![Event::PeerRestarted {
            id: ids[1],
            incarnation: 9
        }]
    );
    assert_eq!(g.peer_view(T0, &t).get(&ids[1]).unwrap().incarnation, 9);
    assert!(t.nodes[t.index_of(&ids[1]).unwrap() as usize].fenced);
    // What this node says of itself: its own incarnation, history and fence.
    let me = t.myself_mut();
    me.repl_id = Some(replid);
    me.fenced = true;
    let out = g.step(T0 + 10_000, Input::Tick, &mut t);
    let record = out
        .iter()
        .find_map(|a| match a {
            Action::Send { msg, .. } => msg.header.as_ref()?.record.clone(),
            _ => None,
        })
        .expect("a ping went out");
    assert_eq!(record.incarnation, g.incarnation());
    assert_eq!(record.repl_id, replid.to_string());
    assert!(record.fenced);
}
