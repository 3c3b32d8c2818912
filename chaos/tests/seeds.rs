//! The seeded simulation as tests: many seeds per run (CHAOS_SEEDS to run more), one seed
//! replayed (CHAOS_SEED), determinism, and checkers that do fail on bad input.

use chaos::checks::{self, Checker, ViolationKind};
use chaos::env_u64;
use chaos::sim::Sim;
use chaos::{run_seed, Report};
use node::cluster::agent::AgentSettings;
use std::sync::atomic::{AtomicU64, Ordering};

/// Seeds run by default: enough to meet the 500 per CI run.
const DEFAULT_SEEDS: u64 = 500;

fn run_or_panic(seed: u64) -> Report {
    run_seed(seed).unwrap_or_else(|v| panic!("chaos run failed: {v}"))
}

/// Goal: no checker violation over many seeds (CHAOS_SEEDS, default 500; CHAOS_SEED_BASE
/// shifts the range). Seeds are shared out to one thread per core; the first failure
/// panics with its seed and replay command.
#[test]
fn many_seeds_pass_every_checker() {
    let count = env_u64("CHAOS_SEEDS").unwrap_or(DEFAULT_SEEDS);
    let base = env_u64("CHAOS_SEED_BASE").unwrap_or(0);
    let next = AtomicU64::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let reports: Vec<Vec<Report>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= count {
                            return done;
                        }
                        done.push(run_or_panic(base + k));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let reports: Vec<Report> = reports.into_iter().flatten().collect();
    assert_eq!(reports.len() as u64, count);
    // The faults did happen: a run that injects nothing checks nothing.
    let crashes: u64 = reports.iter().map(|r| r.crashes as u64).sum();
    let partitions: u64 = reports.iter().map(|r| r.partitions as u64).sum();
    let lost: u64 = reports.iter().map(|r| r.net.lost).sum();
    let duplicated: u64 = reports.iter().map(|r| r.net.duplicated).sum();
    if count >= 50 {
        assert!(crashes > count / 2, "too few crashes: {crashes}");
        assert!(partitions > count / 2, "too few partitions: {partitions}");
        assert!(lost > 0 && duplicated > 0);
    }
    // The topology is Raft's in nearly every run: a group was founded and every node (all are
    // alive at the end) is in it. A run whose smallest node was down for good while the
    // others settled stays on gossip until it returns (founding waits for every known node),
    // and may end before that node's group starts.
    let grouped = reports
        .iter()
        .filter(|r| r.topology_version > 0 && r.grouped == r.nodes)
        .count() as u64;
    assert!(
        grouped * 100 >= count * 95,
        "only {grouped} of {count} runs ended in one topology group"
    );
    // The operator's slot moves during the faults (and its other changes) did commit.
    let proposals: usize = reports.iter().map(|r| r.proposals_ok).sum();
    if count >= 50 {
        assert!(
            proposals as u64 > count * 5,
            "only {proposals} proposals committed"
        );
    }
    let sizes: std::collections::BTreeSet<usize> = reports.iter().map(|r| r.nodes).collect();
    eprintln!(
        "{count} seeds ({grouped} ended in one topology group): sizes {sizes:?}, {crashes} crashes, {partitions} partitions, \
         {lost} datagrams lost, {duplicated} duplicated, {proposals} proposals committed; \
         slowest heal {} ms, replace {} ms",
        reports.iter().map(|r| r.heal_ms).max().unwrap_or(0),
        reports.iter().map(|r| r.replace_ms).max().unwrap_or(0),
    );
}

/// Replays one seed, CHAOS_SEED (seed 0 when unset, so that the test checks something in
/// every run): it must pass every checker (a violation panics with its seed) and give the same
/// report twice. Prints the report.
#[test]
fn replay_one_seed() {
    let seed = env_u64("CHAOS_SEED").unwrap_or(0);
    // RUST_LOG=node=debug shows what the cores did (the simulator's clock is virtual: log
    // times are wall times). Another test of this binary may have installed it already.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let report = run_or_panic(seed);
    eprintln!("{report:#?}");
    assert_eq!(
        run_or_panic(seed),
        report,
        "seed {seed} is not deterministic"
    );
}

/// Goal: a seed is a replay: two runs of it give the same trace, to the datagram.
#[test]
fn one_seed_twice_gives_one_trace() {
    for seed in [7, 1234, 99_999] {
        let a = run_or_panic(seed);
        let b = run_or_panic(seed);
        assert_eq!(a, b, "seed {seed}");
    }
    // And the hash does tell runs apart.
    assert_ne!(run_or_panic(1).trace_hash, run_or_panic(2).trace_hash);
}

/// A converged 3-node cluster with the slots split, for the checker tests.
fn converged_cluster() -> Sim {
    converged_cluster_with(AgentSettings::default())
}

/// The same on gossip alone: no topology group is ever founded.
fn gossip_only_cluster() -> Sim {
    converged_cluster_with(AgentSettings {
        founding_quiet_ms: u64::MAX,
        ..AgentSettings::default()
    })
}

fn converged_cluster_with(agents: AgentSettings) -> Sim {
    let mut sim = Sim::with_agents(5, 3, agents);
    sim.meet(1, 0);
    sim.meet(2, 0);
    for (i, range) in [(0, (0, 5000)), (1, (5001, 10000)), (2, (10001, 16383))] {
        sim.nodes[i].topology.add_slots(&[range]).unwrap();
    }
    for _ in 0..100 {
        sim.round();
    }
    checks::converged(&sim).expect("3 calm nodes converge in 10 s");
    sim
}

/// Goal: the double-owner checker can fail: a forged claim of another node's slot at that
/// node's config epoch is caught.
#[test]
fn a_forged_double_owner_is_caught() {
    let mut sim = gossip_only_cluster();
    assert_eq!(checks::no_double_claims(&sim), Ok(()));
    let epoch0 = sim.nodes[0].topology.myself().config_epoch;
    let t = &mut sim.nodes[1].topology;
    t.myself_mut().config_epoch = epoch0;
    let me = t.myself_index();
    t.slots.set_owner(42, Some(me));
    match checks::no_double_claims(&sim) {
        Err(ViolationKind::DoubleClaim { slot, epoch, .. }) => {
            assert_eq!((slot, epoch), (42, epoch0));
        }
        other => panic!("not caught: {other:?}"),
    }
}

/// Goal: the convergence checker can fail: one node with another owner for a slot, or an
/// epoch that went back after a restart, is reported.
#[test]
fn divergence_and_lost_epochs_are_caught() {
    let mut sim = gossip_only_cluster();
    let mut checker = Checker::default();
    checker.after_step(&sim).unwrap();
    let node0 = sim.nodes[0].id();
    let t = &mut sim.nodes[2].topology;
    let other = t.index_of(&node0).unwrap();
    t.slots.set_owner(16000, Some(other));
    let diff = checks::converged(&sim).unwrap_err();
    assert!(diff.contains("slot map"), "{diff}");

    sim.nodes[1].topology.current_epoch += 5;
    checker.after_step(&sim).unwrap();
    sim.nodes[1].topology.current_epoch -= 1;
    assert!(matches!(
        checker.after_step(&sim),
        Err(ViolationKind::EpochWentBack { .. })
    ));
}

/// Goal: the per-version checker can fail: two nodes of one group at one topology version
/// with different slot owners are reported.
#[test]
fn two_topologies_at_one_version_are_caught() {
    let mut sim = converged_cluster();
    let group = sim.nodes[0].core.agent.group();
    assert!(group.is_some(), "the calm cluster founded a group");
    assert!((0..3).all(|i| sim.nodes[i].core.agent.group() == group));
    Checker::default().after_step(&sim).unwrap();
    let node0 = sim.nodes[0].id();
    let t = &mut sim.nodes[2].topology;
    let other = t.index_of(&node0).unwrap();
    t.slots.set_owner(16000, Some(other));
    assert!(matches!(
        Checker::default().after_step(&sim),
        Err(ViolationKind::VersionsDiverged { .. })
    ));
}

/// Goal: a violation's message names its seed and how to replay it.
#[test]
fn a_violation_says_how_to_replay() {
    let v = chaos::Violation {
        seed: 4242,
        at_ms: 10,
        kind: ViolationKind::NoConvergence {
            phase: "heal",
            limit_ms: 1,
            detail: "x".into(),
        },
    };
    let text = v.to_string();
    assert!(
        text.contains("seed 4242") && text.contains("CHAOS_SEED=4242 cargo test"),
        "{text}"
    );
}
