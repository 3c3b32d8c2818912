//! The topology group on a calm simulated network: founding after the nodes meet, every node
//! a voter (up to five), changes through proposals, and the group surviving one voter's loss.

use chaos::checks;
use chaos::sim::Sim;
use node::cluster::consensus::TopologyCommand;

fn rounds(sim: &mut Sim, n: usize) {
    for _ in 0..n {
        sim.round();
    }
}

/// `n` nodes that met node 0, gave themselves slots by hand (as redis-cli's ADDSLOTS before
/// MEET), and had 10 s of calm.
fn grouped(n: usize, seed: u64) -> Sim {
    let mut sim = Sim::new(seed, n);
    for i in 0..n {
        let start = (i * 16384 / n) as u16;
        let end = ((i + 1) * 16384 / n - 1) as u16;
        sim.nodes[i].topology.add_slots(&[(start, end)]).unwrap();
    }
    for i in 1..n {
        sim.meet(i, 0);
    }
    rounds(&mut sim, 100);
    sim
}

fn describe_all(sim: &Sim) -> String {
    (0..sim.nodes.len())
        .map(|i| format!("\n  {i}: {}", checks::describe(sim, i)))
        .collect()
}

#[test]
fn met_nodes_found_one_group_and_all_become_voters() {
    for n in [2, 3, 5, 7] {
        let sim = grouped(n, 11 + n as u64);
        let group = sim.nodes[0].core.agent.group();
        assert!(group.is_some(), "n={n}: no group{}", describe_all(&sim));
        let version = sim.nodes[0].topology.consensus.version;
        for i in 0..n {
            let a = &sim.nodes[i].core.agent;
            assert_eq!(a.group(), group, "n={n} node {i}{}", describe_all(&sim));
            assert_eq!(
                sim.nodes[i].topology.consensus.version,
                version,
                "n={n} node {i}{}",
                describe_all(&sim)
            );
        }
        let leader = (0..n)
            .find(|&i| sim.nodes[i].core.agent.is_leader())
            .expect("a leader");
        let (voters, learners) = sim.nodes[leader].core.agent.members();
        assert_eq!(voters.len(), n.min(5), "n={n}{}", describe_all(&sim));
        assert_eq!(voters.len() + learners.len(), n);
        // The slots the nodes gave themselves survived founding.
        checks::converged(&sim).unwrap();
        assert_eq!(checks::slots_without_live_owner(&sim, 0), 0);
    }
}

#[test]
fn a_follower_proposal_commits_everywhere_and_a_voter_loss_is_survived() {
    let mut sim = grouped(3, 5);
    let follower = (0..3)
        .find(|&i| !sim.nodes[i].core.agent.is_leader())
        .unwrap();
    let waiter = sim.propose(
        follower,
        TopologyCommand::RemoveSlots {
            ranges: vec![(0, 99)],
        },
    );
    rounds(&mut sim, 10);
    assert!(
        sim.nodes[follower]
            .replies
            .iter()
            .any(|(w, r)| *w == waiter && r.is_ok()),
        "{:?}{}",
        sim.nodes[follower].replies,
        describe_all(&sim)
    );
    for i in 0..3 {
        assert_eq!(sim.nodes[i].topology.slots.owner(50), None, "node {i}");
    }
    // The leader dies: the two others elect one and still commit.
    let leader = (0..3)
        .find(|&i| sim.nodes[i].core.agent.is_leader())
        .unwrap();
    sim.crash(leader);
    rounds(&mut sim, 50);
    let other = (0..3).find(|&i| i != leader).unwrap();
    let me = sim.nodes[other].id();
    let waiter = sim.propose(
        other,
        TopologyCommand::AssignSlots {
            node: me,
            ranges: vec![(0, 99)],
        },
    );
    rounds(&mut sim, 10);
    assert!(
        sim.nodes[other]
            .replies
            .iter()
            .any(|(w, r)| *w == waiter && r.is_ok()),
        "{:?}{}",
        sim.nodes[other].replies,
        describe_all(&sim)
    );
}

/// A founder that dies right after founding (before any other member got its snapshot) is
/// given up by the others after `abandon_ms`; once the dead node is forgotten they found a
/// working group without it.
#[test]
fn a_group_whose_founder_dies_at_once_is_given_up() {
    let mut sim = Sim::new(21, 3);
    for i in 0..3 {
        let start = (i * 16384 / 3) as u16;
        let end = ((i + 1) * 16384 / 3 - 1) as u16;
        sim.nodes[i].topology.add_slots(&[(start, end)]).unwrap();
    }
    sim.meet(1, 0);
    sim.meet(2, 0);
    let founder = loop {
        sim.round();
        if let Some(i) = (0..3).find(|&i| sim.nodes[i].core.agent.group().is_some()) {
            break i;
        }
        assert!(sim.now < chaos::sim::START_MS + 30_000, "no group founded");
    };
    let dead_group = sim.nodes[founder].core.agent.group();
    sim.crash(founder);
    rounds(&mut sim, 200);
    let others: Vec<usize> = (0..3).filter(|&i| i != founder).collect();
    // The dead group is given up; founding a new one waits for the dead node (it could be
    // on the other side of a partition) until the operator forgets it, as on Redis.
    for &i in &others {
        assert_eq!(
            sim.nodes[i].core.agent.group(),
            None,
            "{}",
            describe_all(&sim)
        );
    }
    let dead = sim.nodes[founder].id();
    for &i in &others {
        let addr = {
            let t = &mut sim.nodes[i].topology;
            let node = t.forget(dead.as_bytes()).expect("a known node");
            node.bus_addr
        };
        sim.step(i, node::cluster::gossip::Input::Forget { id: dead, addr });
    }
    rounds(&mut sim, 100);
    for &i in &others {
        let a = &sim.nodes[i].core.agent;
        assert!(
            a.group().is_some() && a.group() != dead_group,
            "{}",
            describe_all(&sim)
        );
        assert!(a.leader().is_some(), "{}", describe_all(&sim));
    }
}
