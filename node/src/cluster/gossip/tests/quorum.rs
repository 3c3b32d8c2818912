//! The serving lease (`Gossip::in_majority`): lost within half a node timeout of being cut
//! off, strictly before anyone can fail the node, regained once healed; peers ahead in
//! topology version do not count.

use super::harness::{settings, Net, TICK_MS};
use crate::cluster::flags::bit;
use crate::cluster::gossip::GossipSettings;

const NODES: usize = 5;

/// `NODES` primaries, each owning a fifth of the slots, known everywhere.
fn five_primaries(seed: u64) -> Net {
    five_primaries_with(seed, settings())
}

fn five_primaries_with(seed: u64, s: GossipSettings) -> Net {
    let mut net = Net::converged_with(NODES, seed, s);
    let per = 16384 / NODES as u16 + 1;
    for i in 0..NODES {
        let start = i as u16 * per;
        let end = (start + per - 1).min(16383);
        net.nodes[i].topology.add_slots(&[(start, end)]).unwrap();
    }
    let spread = net.run_until(10_000, |net| {
        (0..NODES).all(|i| net.nodes[i].topology.size() == NODES)
    });
    assert!(spread.is_some(), "slot ownership did not spread");
    net
}

fn in_majority(net: &Net, i: usize) -> bool {
    let n = &net.nodes[i];
    n.gossip.in_majority(net.now, &n.topology)
}

fn anyone_fails(net: &Net, j: usize) -> bool {
    (0..NODES).any(|i| i != j && net.flags_of(i, j).is_some_and(|f| f & bit::FAIL != 0))
}

#[test]
fn a_cut_off_primary_stops_serving_before_anyone_can_fail_it() {
    for seed in [51, 52, 53] {
        let mut net = five_primaries(seed);
        net.run(3_000);
        assert!((0..NODES).all(|i| in_majority(&net, i)), "seed {seed}");
        let lease = net.nodes[0].gossip.lease_ms();
        assert_eq!(lease, settings().lease_ms());
        assert!(lease < settings().node_timeout_ms / 2);
        let cut_at = net.now;
        net.cut = (1..NODES).map(|j| (0, j)).collect();
        let mut lost_at = None;
        let mut failed_at = None;
        while net.now - cut_at < 4 * settings().node_timeout_ms {
            net.run(TICK_MS);
            if lost_at.is_none() && !in_majority(&net, 0) {
                lost_at = Some(net.now);
            }
            if failed_at.is_none() && anyone_fails(&net, 0) {
                failed_at = Some(net.now);
            }
            // The other side keeps its majority all along.
            assert!((1..NODES).all(|i| in_majority(&net, i)), "seed {seed}");
        }
        let lost_at = lost_at.expect("the cut-off node kept serving");
        let failed_at = failed_at.expect("nobody failed the cut-off node");
        // Lost within the lease (plus the tick it is looked at), and half a node timeout
        // or more before the FAIL that a promotion needs.
        assert!(lost_at - cut_at <= lease + TICK_MS, "seed {seed}");
        assert!(
            failed_at - lost_at >= lease - TICK_MS,
            "seed {seed}: {lost_at} {failed_at}"
        );
        net.cut.clear();
        let back = net.run_until(3 * settings().node_timeout_ms, |net| in_majority(net, 0));
        assert!(back.is_some(), "seed {seed}: no majority after healing");
    }
}

/// A link that fails one way only: node 0 still hears everyone, nobody hears node 0. The
/// others' echoes of node 0's stamps go stale, so it stops serving within the lease, long
/// before they fail it (counting arrivals alone, it would have served on).
#[test]
fn a_primary_nobody_hears_stops_serving_though_it_hears_them() {
    let mut net = five_primaries(54);
    net.run(3_000);
    assert!(in_majority(&net, 0));
    let lease = settings().lease_ms();
    let cut_at = net.now;
    net.one_way_cut = (1..NODES).map(|j| (0, j)).collect();
    let lost = net.run_until(4 * lease, |net| !in_majority(net, 0));
    let lost = lost.expect("a primary nobody hears kept serving");
    assert!(lost <= lease + TICK_MS, "lost after {lost} ms");
    assert!(!anyone_fails(&net, 0), "failed before it stopped serving");
    let failed = net.run_until(4 * settings().node_timeout_ms, |net| anyone_fails(net, 0));
    assert!(failed.is_some(), "nobody failed the unheard node");
    assert!(!in_majority(&net, 0));
    assert!(net.now - cut_at > lease);
}

/// The lease is published as a deadline: with no further input it runs out by itself,
/// within a lease of the newest echo a majority has sent.
#[test]
fn the_lease_is_a_deadline_that_runs_out_without_a_step() {
    let mut net = five_primaries(56);
    net.run(3_000);
    let lease = settings().lease_ms();
    let n = &net.nodes[0];
    let until = n.gossip.serving_until(net.now, &n.topology);
    assert!(
        until >= net.now && until <= net.now + lease,
        "{until} vs {}",
        net.now
    );
    assert!(n.gossip.in_majority(until, &n.topology));
    assert!(!n.gossip.in_majority(until + 1, &n.topology));
    // A lone slot owner is its own majority for good.
    let mut alone = Net::converged(1, 57);
    alone.nodes[0].topology.add_slots(&[(0, 16383)]).unwrap();
    let a = &alone.nodes[0];
    assert_eq!(a.gossip.serving_until(alone.now, &a.topology), u64::MAX);
}

/// Echoes that arrive late count from when their stamp was taken, not from their arrival:
/// with every delivery slower than the lease, nobody counts anybody.
#[test]
fn late_echoes_do_not_extend_the_lease() {
    let mut net = five_primaries(55);
    net.run(3_000);
    assert!(in_majority(&net, 0));
    let lease = settings().lease_ms();
    net.delay_max_ms = 0;
    net.run(100);
    // Every datagram now takes more than a lease in each direction.
    net.min_delay_ms = 2 * lease;
    net.delay_max_ms = 2 * lease;
    net.run(6 * lease);
    assert!((0..NODES).all(|i| !in_majority(&net, i)));
    net.min_delay_ms = 0;
    net.delay_max_ms = 5;
    let back = net.run_until(4 * lease, |net| (0..NODES).all(|i| in_majority(net, i)));
    assert!(
        back.is_some(),
        "prompt delivery did not restore the majority"
    );
}

#[test]
fn a_peer_ahead_in_topology_version_does_not_count() {
    let mut net = five_primaries(61);
    for i in 0..NODES {
        net.nodes[i].gossip.set_consensus_mode(true);
        net.nodes[i].gossip.set_topology_version(7);
    }
    net.run(4_000);
    assert!(in_majority(&net, 0));
    // Three peers applied a change node 0 has not: only node 0 and one peer count.
    for i in 1..4 {
        net.nodes[i].gossip.set_topology_version(8);
    }
    net.run(2_000);
    assert!(!in_majority(&net, 0));
    assert!(in_majority(&net, 1), "a node ahead counts the others");
    net.nodes[0].gossip.set_topology_version(8);
    assert!(in_majority(&net, 0), "caught up, it counts them again");
}

#[test]
fn without_voting_primaries_there_is_no_majority() {
    let net = Net::converged(3, 71);
    assert_eq!(net.nodes[0].topology.size(), 0);
    assert!(!in_majority(&net, 0));
    // A slot owner alone is its own majority of one.
    let mut net = net;
    net.nodes[0].topology.add_slots(&[(0, 16383)]).unwrap();
    assert!(in_majority(&net, 0));
    assert_eq!(net.nodes[0].gossip.last_heard_ms(&net.id(0)), None);
    assert!(net.nodes[0].gossip.last_heard_ms(&net.id(1)).is_some());
}

/// Settings whose lease spans several harness ticks, so hand-off times can be told apart.
fn long_lease() -> GossipSettings {
    GossipSettings {
        lease_divisor: 4,
        ..settings()
    }
}

/// Every node in consensus mode at topology version 8, all serving.
fn group_at_8(net: &mut Net) {
    for i in 0..NODES {
        net.nodes[i].gossip.set_consensus_mode(true);
        net.nodes[i].gossip.set_topology_version(8);
    }
    net.run(4_000);
    assert!((0..NODES).all(|i| in_majority(net, i)));
}

/// The hand-off: node 0 is promoted at version 9 in place of node 4, which is cut off from
/// hearing anyone (it still reaches them) and stays at version 8, counting the echoes it
/// has. At no tick do both serve; node 0 serves once node 4's echoes have run out, and not
/// before the peers are past its grant.
#[test]
fn a_promoted_node_never_serves_while_the_deposed_one_does() {
    for seed in [62, 64, 65] {
        let mut net = five_primaries_with(seed, long_lease());
        group_at_8(&mut net);
        let lease = long_lease().lease_ms();
        assert_eq!(net.nodes[0].gossip.handoff_ms(), lease);
        net.one_way_cut = (0..4).map(|j| (j, 4)).collect();
        net.nodes[0].topology.consensus.promoted_at = 9;
        for i in 0..4 {
            net.apply_version(i, 9);
        }
        assert!(!in_majority(&net, 0), "peers are not past the grant yet");
        let start = net.now;
        let mut deposed_stopped = None;
        let mut promoted_started = None;
        while net.now - start < 6 * lease {
            net.run(TICK_MS);
            let (old, new) = (in_majority(&net, 4), in_majority(&net, 0));
            assert!(
                !(old && new),
                "seed {seed}: both serve at {}",
                net.now - start
            );
            if !old && deposed_stopped.is_none() {
                deposed_stopped = Some(net.now - start);
            }
            if new && promoted_started.is_none() {
                promoted_started = Some(net.now - start);
            }
        }
        let stopped = deposed_stopped.expect("the deposed primary kept serving");
        let started = promoted_started.expect("the promoted primary never served");
        assert!(
            stopped <= lease + TICK_MS,
            "seed {seed}: stopped at {stopped}"
        );
        assert!(started >= stopped, "seed {seed}: {started} < {stopped}");
    }
}

/// The fast hand-off: the deposed primary is dead (a node timeout silent), so once the live
/// nodes told each other they applied the promotion, each vouches that its old echoes ran
/// out and the promoted node serves within a couple of ticks, not a lease later.
#[test]
fn after_a_crash_the_promoted_node_serves_without_waiting_a_lease() {
    for seed in [66, 67, 68] {
        let mut net = five_primaries_with(seed, long_lease());
        group_at_8(&mut net);
        let lease = long_lease().lease_ms();
        net.nodes[4].alive = false;
        net.run(long_lease().node_timeout_ms + 500);
        net.nodes[0].topology.consensus.promoted_at = 9;
        for i in 0..4 {
            net.apply_version(i, 9);
        }
        let took = net.run_until(4 * lease, |net| in_majority(net, 0));
        let took = took.expect("the promoted node never served");
        assert!(took <= 2 * TICK_MS, "seed {seed}: took {took} ms");
        assert!(took < lease);
        // Without the peers' word it would have waited out the lease: a peer's claim is
        // what counted.
        let peer = net.nodes[0].gossip.peers.get(&net.id(1)).unwrap();
        assert!(peer.echoes_expired_below >= 9);
    }
}

/// A slot grant (SETSLOT NODE at the end of a migration, ADDSLOTS) moves the owner's config
/// epoch but is no promotion: the owner keeps serving while peers catch up.
#[test]
fn a_slot_grant_needs_no_hand_off() {
    let mut net = five_primaries(63);
    for i in 0..NODES {
        net.nodes[i].gossip.set_consensus_mode(true);
        net.nodes[i].gossip.set_topology_version(8);
    }
    net.run(4_000);
    assert!(in_majority(&net, 0));
    net.nodes[0].topology.myself_mut().config_epoch = 9;
    net.nodes[0].gossip.set_topology_version(9);
    assert!(
        in_majority(&net, 0),
        "a slot grant stopped the owner serving"
    );
}
