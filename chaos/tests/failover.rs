//! Failovers under seeded faults with a data path, every key's history checked for
//! linearizability (issue 5): many seeds per run (CHAOS_FAILOVER_SEEDS to run more), one
//! seed replayed (CHAOS_SEED), and the checker shown to fail on a forged history.

use chaos::env_u64;
use chaos::failover::FailoverReport;
use chaos::linearizable::{check_key, CheckError, Op, Recorded};
use std::sync::atomic::{AtomicU64, Ordering};

/// Seeds run by default: the issue asks for at least 300 per CI run.
const DEFAULT_SEEDS: u64 = 300;

fn run_or_panic(seed: u64) -> FailoverReport {
    let replicas = env_u64("CHAOS_REPLICAS").map_or(chaos::failover::REPLICAS, |r| r as usize);
    chaos::failover::run_failover_seed_with(seed, replicas)
        .unwrap_or_else(|v| panic!("failover run failed: {v}"))
}

/// Goal: zero linearizability violations over many seeds, with failovers actually made in
/// a good share of them and writes acknowledged across them.
#[test]
fn many_seeds_fail_over_and_stay_linearizable() {
    let count = env_u64("CHAOS_FAILOVER_SEEDS").unwrap_or(DEFAULT_SEEDS);
    let base = env_u64("CHAOS_SEED_BASE").unwrap_or(0);
    let next = AtomicU64::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let outcomes: Vec<Result<FailoverReport, chaos::failover::FailoverViolation>> =
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let k = next.fetch_add(1, Ordering::Relaxed);
                            if k >= count {
                                return done;
                            }
                            let replicas = env_u64("CHAOS_REPLICAS")
                                .map_or(chaos::failover::REPLICAS, |r| r as usize);
                            done.push(chaos::failover::run_failover_seed_with(base + k, replicas));
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
    let mut reports = Vec::new();
    let mut stalled = Vec::new();
    for outcome in outcomes {
        match outcome {
            Ok(r) => reports.push(r),
            // Histories were checked and linearizable; the run did not end its final reads.
            Err(v @ chaos::failover::FailoverViolation::Stuck { .. }) => {
                stalled.push(v.to_string())
            }
            Err(v) => panic!("failover run failed: {v}"),
        }
    }
    assert_eq!((reports.len() + stalled.len()) as u64, count);
    eprintln!(
        "{} of {count} runs stalled (liveness, not safety):",
        stalled.len()
    );
    for s in &stalled {
        eprintln!("  {s}");
    }
    // Zero violations is the requirement; stalls are a known liveness weakness under these
    // faults (a shard that does not come back within the final reads' limit), kept rare.
    assert!(
        stalled.len() as u64 * 100 <= count,
        "too many stalled runs: {stalled:?}"
    );
    let failed_over = reports.iter().filter(|r| r.data.promotions > 0).count() as u64;
    let promotions: u64 = reports.iter().map(|r| r.data.promotions as u64).sum();
    let acked: u64 = reports.iter().map(|r| r.writes_acked).sum();
    let unknown: u64 = reports.iter().map(|r| r.writes_unknown).sum();
    let reads: u64 = reports.iter().map(|r| r.reads).sum();
    let kills: u64 = reports.iter().map(|r| r.kills as u64).sum();
    let partitions: u64 = reports.iter().map(|r| r.partitions as u64).sum();
    eprintln!(
        "{count} seeds: {failed_over} with failovers ({promotions} in all), {kills} kills, \
         {partitions} partitions; {acked} writes acknowledged, {unknown} unknown, {reads} reads"
    );
    let full_syncs: u64 = reports.iter().map(|r| r.data.full_syncs).sum();
    let partial_syncs: u64 = reports.iter().map(|r| r.data.partial_syncs).sum();
    let streamed: u64 = reports.iter().map(|r| r.data.stream_bytes).sum();
    let links_dropped: u64 = reports.iter().map(|r| r.data.links_dropped).sum();
    eprintln!(
        "replication: {full_syncs} full syncs, {partial_syncs} partial, {streamed} stream \
         bytes executed by replicas, {links_dropped} links dropped"
    );
    if count >= 50 {
        // Not vacuous: failovers happened in most runs, with traffic around them, and the
        // real replication core carried it: full and partial resyncs, the stream executed.
        assert!(
            failed_over * 100 >= count * 50,
            "only {failed_over} of {count} runs failed over"
        );
        assert!(full_syncs > count && partial_syncs > count / 2 && streamed > count * 1000);
        assert!(acked > count * 20 && reads > count * 20 && unknown > 0);
        assert!(partitions > count / 2);
    }
}

/// Replays one seed: `CHAOS_SEED=N cargo test -p chaos --test failover -- replay_one_seed
/// --nocapture` (without CHAOS_SEED it runs seed 0; CHAOS_REPLICAS=2 for two replicas per
/// shard). On a violation it prints the data path's trace and the failing histories.
#[test]
fn replay_one_seed() {
    let seed = env_u64("CHAOS_SEED").unwrap_or(0);
    let replicas = env_u64("CHAOS_REPLICAS").map_or(chaos::failover::REPLICAS, |r| r as usize);
    let (first, trace, histories) = chaos::failover::run_traced(seed, replicas, true);
    let first = first.unwrap_or_else(|v| {
        for line in &trace {
            eprintln!("{line}");
        }
        for (key, ops) in &histories.keys {
            let mut ops = ops.clone();
            ops.sort_by_key(|o| o.call);
            eprintln!("key {key}:");
            for o in ops {
                eprintln!("  {o:?}");
            }
        }
        panic!("failover run failed: {v}")
    });
    eprintln!("{first:?}");
    assert_eq!(
        run_or_panic(seed),
        first,
        "seed {seed} is not deterministic"
    );
}

/// The checker is not vacuous: a forged history where an acknowledged write is lost by a
/// failover (a later read sees the value before it) fails, and the honest one passes.
#[test]
fn the_checker_fails_a_forged_lost_write() {
    let op = |call, answer, what| Op { call, answer, what };
    let honest = [
        op(1, Some(2), Recorded::Write(10)),
        op(3, Some(4), Recorded::Write(11)),
        op(5, None, Recorded::Write(12)),
        op(6, Some(7), Recorded::Read(11)),
        op(8, Some(9), Recorded::Read(12)),
    ];
    assert_eq!(check_key(0, &honest), Ok(()));
    let lost = [
        op(1, Some(2), Recorded::Write(10)),
        op(3, Some(4), Recorded::Write(11)),
        // After the failover the acknowledged 11 is gone.
        op(6, Some(7), Recorded::Read(10)),
    ];
    assert!(matches!(
        check_key(0, &lost),
        Err(CheckError::NotLinearizable { .. })
    ));
}
