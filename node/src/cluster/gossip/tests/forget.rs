//! CLUSTER FORGET in the core (the blacklist) and the per-node view commands read.

use super::harness::settings;
use crate::cluster::flags::bit;
use crate::cluster::gossip::blacklist::BLACKLIST_TTL_MS;
use crate::cluster::gossip::{Action, Event, Gossip, Input};
use crate::cluster::id::{HexId, NodeId};
use crate::cluster::node::{ClusterNode, LinkState};
use crate::cluster::topology::Topology;
use proto::bus::{Body, BusMessage, Gossip as GossipBody, GossipEntry, Header, NodeRecord};
use rand::SeedableRng;

const T0: u64 = 1_000_000;

fn member(id: NodeId, i: usize) -> ClusterNode {
    let mut n = ClusterNode::new(id, id);
    n.port = 7000 + i as u16;
    n.bus_addr = format!("sim:{i}");
    n.link = LinkState::Connected;
    n
}

/// Myself (sim:0) and members at sim:1.. that own slots 100*i.., so they vote.
fn cluster(n: usize) -> (Topology, Vec<NodeId>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(21);
    let ids: Vec<NodeId> = (0..n).map(|_| HexId::random(&mut rng)).collect();
    let mut t = Topology::new(member(ids[0], 0));
    for (i, id) in ids.iter().enumerate().skip(1) {
        let idx = t.add_node(member(*id, i)).unwrap();
        for s in (i as u16 * 100)..(i as u16 * 100 + 10) {
            t.slots.set_owner(s, Some(idx));
        }
    }
    (t, ids)
}

fn header(id: NodeId, i: usize) -> Header {
    Header {
        sender: id.to_string(),
        flags: bit::MASTER as u32,
        slots: vec![proto::bus::SlotRange {
            start: i as u32 * 100,
            end: i as u32 * 100 + 9,
        }],
        record: Some(NodeRecord {
            bus_addr: format!("sim:{i}").into_bytes(),
            port: 7000 + i as u32,
            ..NodeRecord::default()
        }),
        ..Header::default()
    }
}

fn entry(id: NodeId, i: usize, flags: u16) -> GossipEntry {
    GossipEntry {
        node_id: id.to_string(),
        flags: flags as u32,
        bus_addr: format!("sim:{i}").into_bytes(),
        ..GossipEntry::default()
    }
}

/// A message from member `from` (at sim:`from`) carrying `entries`.
fn gossip_from(
    g: &mut Gossip,
    t: &mut Topology,
    now: u64,
    ids: &[NodeId],
    from: usize,
    body: fn(GossipBody) -> Body,
    entries: Vec<GossipEntry>,
) -> Vec<Action> {
    let msg = BusMessage {
        header: Some(header(ids[from], from)),
        body: Some(body(GossipBody {
            entries,
            ..GossipBody::default()
        })),
    };
    g.step(
        now,
        Input::Receive {
            from: format!("sim:{from}"),
            msg: Box::new(msg),
        },
        t,
    )
}

fn meets_to(actions: &[Action], addr: &str) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, Action::Send { to, msg } if to == addr && matches!(msg.body, Some(Body::Meet(_)))))
        .count()
}

fn forget(g: &mut Gossip, t: &mut Topology, now: u64, id: NodeId, addr: &str) -> Vec<Action> {
    g.step(
        now,
        Input::Forget {
            id,
            addr: addr.to_string(),
        },
        t,
    )
}

#[test]
fn a_forgotten_node_is_not_met_again_through_gossip_until_the_ttl_passes() {
    let (mut t, ids) = cluster(3);
    let mut g = Gossip::new(settings(), 1);
    let out = forget(&mut g, &mut t, T0, ids[2], "sim:2");
    assert!(t.index_of(&ids[2]).is_none());
    assert!(out.contains(&Action::Event(Event::NodeForgotten { id: ids[2] })));
    assert!(out.contains(&Action::SaveConfig));
    // Node 1 still knows it and says so: nothing happens.
    let about = vec![entry(ids[2], 2, bit::MASTER)];
    let out = gossip_from(
        &mut g,
        &mut t,
        T0 + 1_000,
        &ids,
        1,
        Body::Ping,
        about.clone(),
    );
    assert_eq!(meets_to(&out, "sim:2"), 0);
    assert_eq!(t.nodes.len(), 2);
    let last = T0 + BLACKLIST_TTL_MS;
    gossip_from(&mut g, &mut t, last, &ids, 1, Body::Ping, about.clone());
    assert_eq!(t.nodes.len(), 2);
    // A minute later the same gossip brings it back, as in Redis.
    let out = gossip_from(&mut g, &mut t, last + 1, &ids, 1, Body::Ping, about);
    assert_eq!(meets_to(&out, "sim:2"), 1);
    assert_eq!(t.nodes.len(), 3);
}

#[test]
fn a_gossip_handshake_begun_before_the_forget_is_dropped_or_refused() {
    let (mut t, ids) = cluster(3);
    let mut g = Gossip::new(settings(), 1);
    // The command removed it; gossip from node 1 starts a handshake before the core
    // hears of the FORGET.
    t.forget(ids[2].as_bytes()).unwrap();
    let about = vec![entry(ids[2], 2, bit::MASTER)];
    gossip_from(&mut g, &mut t, T0, &ids, 1, Body::Ping, about.clone());
    assert_eq!(t.nodes.len(), 3, "a handshake node");
    forget(&mut g, &mut t, T0 + 1, ids[2], "sim:2");
    assert_eq!(t.nodes.len(), 2, "the handshake went with the FORGET");
    // Had the core not known the address: a handshake completing with a blacklisted id
    // is refused.
    let (mut t, ids) = cluster(3);
    let mut g = Gossip::new(settings(), 1);
    t.forget(ids[2].as_bytes()).unwrap();
    forget(&mut g, &mut t, T0, ids[2], "");
    // Start one by hand the way gossip does (a stale address that now answers as 2).
    let mut hs = ClusterNode::new(
        HexId::random(&mut rand::rngs::StdRng::seed_from_u64(5)),
        ids[0],
    );
    hs.flags.set(bit::HANDSHAKE, true);
    hs.bus_addr = "sim:2".into();
    t.add_node(hs).unwrap();
    let out = gossip_from(&mut g, &mut t, T0 + 5, &ids, 2, Body::Pong, vec![]);
    assert!(out.contains(&Action::Event(Event::ForgottenNodeRefused { id: ids[2] })));
    assert_eq!(t.nodes.len(), 2);
    assert!(t.index_of(&ids[2]).is_none());
}

#[test]
fn cluster_meet_may_bring_a_forgotten_node_back_at_once() {
    let (mut t, ids) = cluster(3);
    let mut g = Gossip::new(settings(), 1);
    forget(&mut g, &mut t, T0, ids[2], "sim:2");
    g.step(
        T0 + 10,
        Input::Meet {
            addr: "sim:2".into(),
        },
        &mut t,
    );
    gossip_from(&mut g, &mut t, T0 + 20, &ids, 2, Body::Pong, vec![]);
    let i = t.index_of(&ids[2]).expect("met again");
    assert!(!t.nodes[i as usize].flags.has(bit::HANDSHAKE));
}

#[test]
fn forget_drops_the_reports_the_node_made() {
    let (mut t, ids) = cluster(4);
    let mut g = Gossip::new(settings(), 1);
    // Node 2 and 3 report node 1 failing.
    for from in [2, 3] {
        gossip_from(
            &mut g,
            &mut t,
            T0,
            &ids,
            from,
            Body::Ping,
            vec![entry(ids[1], 1, bit::MASTER | bit::PFAIL)],
        );
    }
    let count = |g: &Gossip, t: &Topology| g.peer_view(T0, t).get(&ids[1]).unwrap().fail_reports;
    assert_eq!(count(&g, &t), 2);
    forget(&mut g, &mut t, T0, ids[3], "sim:3");
    assert_eq!(count(&g, &t), 1);
    // Reports expire in the view as in Redis's count.
    let late = T0 + settings().fail_report_validity_ms() + 1;
    assert_eq!(g.peer_view(late, &t).get(&ids[1]).unwrap().fail_reports, 0);
}

#[test]
fn links_appear_with_traffic_and_go_when_the_node_is_unreachable() {
    let (mut t, ids) = cluster(2);
    let mut g = Gossip::new(settings(), 1);
    let view = g.peer_view(T0, &t);
    assert_eq!(view.peers.len(), 1, "myself is not listed");
    let p = view.get(&ids[1]).unwrap();
    assert_eq!((p.link_to_since_ms, p.link_from_since_ms), (None, None));
    gossip_from(&mut g, &mut t, T0 + 5, &ids, 1, Body::Ping, vec![]);
    // The first tick pings it (its last pong is long ago).
    let first_tick = T0 + settings().node_timeout_ms;
    g.step(first_tick, Input::Tick, &mut t);
    let p = *g.peer_view(first_tick, &t).get(&ids[1]).unwrap();
    assert_eq!(p.link_from_since_ms, Some(T0 + 5));
    assert_eq!(p.link_to_since_ms, Some(first_tick));
    // More traffic does not move the creation times.
    gossip_from(&mut g, &mut t, first_tick + 5, &ids, 1, Body::Ping, vec![]);
    let q = *g.peer_view(first_tick + 5, &t).get(&ids[1]).unwrap();
    assert_eq!(
        (q.link_from_since_ms, q.link_to_since_ms),
        (p.link_from_since_ms, p.link_to_since_ms)
    );
    assert_eq!(q.heard_ms, first_tick + 5, "but it was heard again");
    // Silence past half the node timeout: the links are down (the next ping makes a new
    // outbound one).
    let silent = first_tick + settings().node_timeout_ms;
    g.step(silent, Input::Tick, &mut t);
    let r = *g.peer_view(silent, &t).get(&ids[1]).unwrap();
    assert_eq!(r.link_from_since_ms, None);
    assert_ne!(r.link_to_since_ms, Some(first_tick));
    assert_eq!(
        t.nodes[t.index_of(&ids[1]).unwrap() as usize].link,
        LinkState::Disconnected
    );
}

#[test]
fn reset_forgets_every_peer_state() {
    let (mut t, ids) = cluster(4);
    let mut g = Gossip::new(settings(), 1);
    gossip_from(
        &mut g,
        &mut t,
        T0,
        &ids,
        2,
        Body::Ping,
        vec![entry(ids[1], 1, bit::MASTER | bit::PFAIL)],
    );
    g.step(T0, Input::Reset, &mut t);
    assert_eq!(g.peer_view(T0, &t).get(&ids[1]).unwrap().fail_reports, 0);
    assert!(!g.is_blacklisted(&ids[1], T0), "a reset blacklists nobody");
}
