//! Whole-protocol behaviour on the in-memory network ([`super::harness`]): convergence from
//! one introducer, failure detection and recovery, slot ownership spreading, and UPDATE.

use super::harness::{settings, Net};
use crate::cluster::flags::bit;
use crate::cluster::gossip::Event;
use crate::cluster::nodes_text::cluster_nodes;

const NODES: usize = 5;

/// Goal: 5 nodes that each met only node 0 all learn each other by gossip, over a network
/// losing 5% of datagrams and reordering them (up to 50 ms of delay each). Method: run virtual time until every node knows every node as a
/// member (no handshake left); then every link shows connected and nobody is suspected.
#[test]
fn five_nodes_meeting_one_introducer_converge() {
    for seed in [1, 2, 3] {
        let mut net = Net::new(NODES, seed);
        net.loss = 0.05;
        net.delay_max_ms = 50;
        for i in 1..NODES {
            net.meet(i, 0);
        }
        let took = net.run_until(30_000, |net| (0..NODES).all(|i| net.knows_all(i)));
        let took = took.unwrap_or_else(|| panic!("seed {seed}: no convergence"));
        assert!(took < 10_000, "seed {seed}: took {took} ms");
        net.run(3_000);
        for i in 0..NODES {
            let text = cluster_nodes(&net.nodes[i].topology);
            assert_eq!(text.lines().count(), NODES, "{text}");
            for line in text.lines() {
                assert!(line.contains(" connected"), "seed {seed} node {i}: {line}");
                assert!(
                    !line.contains("fail") && !line.contains("handshake"),
                    "{line}"
                );
            }
            assert!(net.knows_all(i));
        }
    }
}

/// Each node claims a fifth of the slots in its own topology; the claims spread through the
/// headers until every node has the same, complete slot map and the cluster is ok.
fn assign_and_spread(net: &mut Net) {
    let per = 16384 / NODES as u16 + 1;
    for i in 0..NODES {
        let start = i as u16 * per;
        let end = (start + per - 1).min(16383);
        net.nodes[i].topology.add_slots(&[(start, end)]).unwrap();
    }
    let spread = net.run_until(10_000, |net| {
        (0..NODES).all(|i| {
            let t = &net.nodes[i].topology;
            t.state() == crate::cluster::topology::Health::Ok
                && (0..NODES).all(|j| {
                    let owner = t.owner(j as u16 * per).map(|n| n.id);
                    owner == Some(net.id(j))
                })
        })
    });
    assert!(spread.is_some(), "slot ownership did not spread");
}

/// Goal: slot ownership claimed locally reaches every node.
#[test]
fn slot_ownership_spreads() {
    for seed in [11, 12, 13] {
        let mut net = Net::converged(NODES, seed);
        net.loss = 0.05;
        assign_and_spread(&mut net);
        for i in 0..NODES {
            assert_eq!(net.nodes[i].topology.slots.assigned(), 16384);
            assert!(net.nodes[i].saves > 0);
        }
    }
}

/// Goal: a killed primary becomes PFAIL, then FAIL on every live node within a bounded
/// time; it stays FAIL for the undo time after it returns (it still owns slots), then
/// clears everywhere.
#[test]
fn killed_node_fails_everywhere_and_clears_when_back() {
    for seed in [21, 22, 23, 24] {
        killed_node_case(seed);
    }
}

fn killed_node_case(seed: u64) {
    let mut net = Net::converged(NODES, seed);
    net.loss = 0.01;
    assign_and_spread(&mut net);
    let victim = 4;
    let victim_id = net.id(victim);
    net.nodes[victim].alive = false;
    let timeout = settings().node_timeout_ms;
    let live: Vec<usize> = (0..NODES).filter(|&i| i != victim).collect();
    let failed = net.run_until(3 * timeout, |net| {
        live.iter()
            .all(|&i| net.flags_of(i, victim).is_some_and(|f| f & bit::FAIL != 0))
    });
    let failed = failed.expect("the killed node is FAIL everywhere");
    assert!(
        failed > timeout,
        "FAIL before the node timeout: {failed} ms"
    );
    // Someone suspected it before anyone failed it, and the cluster went down with it.
    let suspected = live.iter().any(|&i| {
        let ev = &net.nodes[i].events;
        let p = ev
            .iter()
            .position(|(_, e)| *e == Event::PFail { id: victim_id });
        let f = ev
            .iter()
            .position(|(_, e)| *e == Event::Fail { id: victim_id });
        matches!((p, f), (Some(p), Some(f)) if p < f)
    });
    assert!(suspected, "no node went through PFAIL first");
    for &i in &live {
        let line = cluster_nodes(&net.nodes[i].topology);
        assert!(line.contains("master,fail "), "{line}");
        assert_eq!(
            net.nodes[i].topology.state(),
            crate::cluster::topology::Health::Fail
        );
    }

    net.nodes[victim].alive = true;
    net.run(timeout / 2);
    assert!(
        live.iter()
            .all(|&i| net.flags_of(i, victim).is_some_and(|f| f & bit::FAIL != 0)),
        "a primary with slots is cleared only after the undo time"
    );
    let cleared = net.run_until(3 * timeout, |net| {
        live.iter().all(|&i| {
            net.flags_of(i, victim)
                .is_some_and(|f| f & (bit::FAIL | bit::PFAIL) == 0)
                && net.nodes[i].topology.state() == crate::cluster::topology::Health::Ok
        })
    });
    assert!(
        cleared.is_some(),
        "FAIL did not clear after the node came back"
    );
}

/// Goal: a node partitioned away while its slots moved to a node with a greater config
/// epoch learns, when the partition heals, that it lost them: the others send it UPDATE
/// and it gives the slots up (and, left without slots, follows their new owner).
#[test]
fn stale_owner_gets_updated() {
    for seed in [31, 32, 33, 34] {
        stale_owner_case(seed);
    }
}

fn stale_owner_case(seed: u64) {
    let n = 3;
    let mut net = Net::converged(n, seed);
    net.nodes[0].topology.add_slots(&[(0, 100)]).unwrap();
    net.run(3_000);
    let node0 = net.id(0);
    assert!((0..n).all(|i| net.nodes[i].topology.owner(50).map(|o| o.id) == Some(node0)));

    net.cut = vec![(0, 1), (0, 2)];
    // Node 1 takes the slots over with a newer epoch (as a failover would).
    {
        let t = &mut net.nodes[1].topology;
        let me = t.myself_index();
        let epoch = t.current_epoch + 10;
        t.current_epoch = epoch;
        t.myself_mut().config_epoch = epoch;
        for s in 0..=100 {
            t.slots.set_owner(s, Some(me));
        }
    }
    let node1 = net.id(1);
    let moved = net.run_until(5_000, |net| {
        net.nodes[2].topology.owner(50).map(|o| o.id) == Some(node1)
    });
    assert!(moved.is_some(), "node 2 did not learn the new owner");
    assert_eq!(net.nodes[0].topology.owner(50).map(|o| o.id), Some(node0));

    net.cut.clear();
    let healed = net.run_until(5_000, |net| {
        net.nodes[0].topology.owner(50).map(|o| o.id) == Some(node1)
    });
    assert!(healed.is_some(), "the stale owner kept its slots");
    let updated = (1..n).any(|i| {
        net.nodes[i]
            .events
            .iter()
            .any(|(_, e)| matches!(e, Event::UpdateSent { to, .. } if *to == node0))
    });
    assert!(updated, "nobody sent node 0 an UPDATE");
    assert!(
        net.nodes[0].topology.stats.received[7] > 0,
        "no UPDATE reached node 0"
    );
    let me = net.nodes[0].topology.myself();
    assert!(me.is_replica() && me.primary == Some(node1));
}

/// Goal (§2.12): a node cut off from the others sees the cluster down (it reaches no
/// majority of slot-owning primaries) while never failing them on its own, and the cluster
/// is ok everywhere again once the partition heals.
#[test]
fn a_partitioned_minority_sees_the_cluster_down_and_recovers() {
    use crate::cluster::topology::Health;
    let mut net = Net::converged(NODES, 41);
    assign_and_spread(&mut net);
    net.cut = (1..NODES).map(|j| (0, j)).collect();
    let timeout = settings().node_timeout_ms;
    let down = net.run_until(3 * timeout, |net| {
        net.nodes[0].topology.state() == Health::Fail
    });
    assert!(down.is_some(), "the isolated node still says ok");
    net.run(timeout);
    // Alone it cannot gather a quorum: the others stay suspected, not failed.
    for j in 1..NODES {
        let f = net.flags_of(0, j).unwrap();
        assert!(
            f & bit::PFAIL != 0 && f & bit::FAIL == 0,
            "node {j}: {f:#x}"
        );
    }
    net.cut.clear();
    let back = net.run_until(5 * timeout, |net| {
        (0..NODES).all(|i| {
            net.nodes[i].topology.state() == Health::Ok
                && (0..NODES).all(|j| {
                    net.flags_of(i, j)
                        .is_some_and(|f| f & (bit::PFAIL | bit::FAIL) == 0)
                })
        })
    });
    assert!(
        back.is_some(),
        "the cluster did not recover after the partition healed"
    );
}
