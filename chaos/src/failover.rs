//! One seeded failover run: three shards (a primary with slots and one replica each) in
//! one topology group, clients reading and writing a few keys while primaries are killed
//! (and come back later with their data, as replicas once failed over), the network is
//! partitioned and storms lose and delay messages; failovers are made by the group's
//! leader (agent `failover`). After the faults every key is read again, and each key's
//! history must be linearizable.

use crate::clients::Clients;
use crate::data_net::{DataNet, DataNetStats, Endpoint, Msg};
use crate::data_path::{DataPath, DataStats, STEP_MS};
use crate::linearizable::CheckError;
use crate::net::Weather;
use crate::sim::{Sim, START_MS};
use node::cluster::consensus::TopologyCommand;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub const SHARDS: usize = 3;
/// Replicas per shard by default. With one, `repl-sync-acks 1` means every replica, and
/// the promoted replica holds every acknowledged write. [`run_failover_seed_with`] takes
/// more, to study the rule with replicas that did not all acknowledge.
pub const REPLICAS: usize = 1;
pub const CLIENTS: usize = 3;
pub const KEYS: u8 = 4;
/// How long clients run under faults.
pub const FAULT_MS: u64 = 14_000;
/// How long the reads after the faults may take to reach every key.
pub const FINAL_LIMIT_MS: u64 = 20_000;
/// How long the replicas may take, after the final reads, to hold their primaries' stores.
pub const CONVERGE_LIMIT_MS: u64 = 10_000;
pub const BOOT_LIMIT_MS: u64 = 30_000;
/// A killed primary stays down this long (ms): long enough to be failed over (FAIL takes
/// over the 2 s node timeout, then a commit) in most runs, not in all.
const DOWN_MS: std::ops::Range<u64> = 2_000..8_000;
/// Chances per 100 ms round.
const KILL_CHANCE: f64 = 0.04;
const PARTITION_CHANCE: f64 = 0.02;
/// How long a partition lasts (ms).
const PARTITION_MS: std::ops::Range<u64> = 500..8_000;
const STORM_CHANCE: f64 = 0.03;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailoverReport {
    pub seed: u64,
    pub virtual_ms: u64,
    pub kills: u32,
    pub partitions: u32,
    pub storms: u32,
    pub data: DataStats,
    pub net: DataNetStats,
    pub writes_acked: u64,
    pub writes_unknown: u64,
    pub reads: u64,
    pub refused: u64,
    /// Most operations one key's history held.
    pub ops_per_key_max: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FailoverViolation {
    #[error("seed {seed}: {error}; replay: {}", replay_failover(*seed))]
    NotLinearizable { seed: u64, error: CheckError },
    #[error("seed {seed}: replicas diverged: {detail}; replay: {}", replay_failover(*seed))]
    Diverged { seed: u64, detail: String },
    #[error("seed {seed}: {phase} not reached within {limit_ms} ms: {detail}; replay: {}", replay_failover(*seed))]
    Stuck {
        seed: u64,
        phase: &'static str,
        limit_ms: u64,
        detail: String,
    },
}

pub fn replay_failover(seed: u64) -> String {
    format!("CHAOS_SEED={seed} cargo test -p chaos --test failover -- replay_one_seed --nocapture")
}

struct Run {
    sim: Sim,
    data: DataPath,
    clients: Clients,
    rng: StdRng,
    calm: Weather,
    down: Option<(usize, u64)>,
    /// When the data path's links turn next (every STEP_MS of virtual time).
    next_step: u64,
    partition_until: Option<u64>,
    storm_until: Option<u64>,
    report: FailoverReport,
    /// Each node's view when last traced.
    seen: std::collections::HashMap<usize, String>,
}

/// Runs the failover scenario of `seed`, deterministically.
pub fn run_failover_seed(seed: u64) -> Result<FailoverReport, FailoverViolation> {
    run_failover_seed_with(seed, REPLICAS)
}

/// [`run_failover_seed`] with `replicas` per shard.
pub fn run_failover_seed_with(
    seed: u64,
    replicas: usize,
) -> Result<FailoverReport, FailoverViolation> {
    run_traced(seed, replicas, false).0
}

/// Runs the scenario, keeping a trace of the data path if `trace` (printed by a replay):
/// the outcome, the trace lines and each key's history.
pub fn run_traced(
    seed: u64,
    replicas: usize,
    trace: bool,
) -> (
    Result<FailoverReport, FailoverViolation>,
    Vec<String>,
    crate::linearizable::Histories,
) {
    let mut run = Run::new(seed, replicas);
    if trace {
        run.data.trace = Some(Vec::new());
    }
    let outcome = run.run_all();
    let lines = run.data.trace.take().unwrap_or_default();
    let histories = run.clients.histories.clone();
    (outcome.map(|()| run.finish()), lines, histories)
}

impl Run {
    fn run_all(&mut self) -> Result<(), FailoverViolation> {
        let seed = self.sim.seed;
        self.boot()?;
        self.faults();
        // A run whose final reads stall (a liveness failure) still has its histories
        // checked: a violation outranks the stall.
        let reads = self.final_reads();
        self.clients.finish();
        self.clients
            .histories
            .check()
            .map_err(|error| FailoverViolation::NotLinearizable { seed, error })?;
        reads?;
        self.converge()
    }

    /// Without faults or clients, every replica reaches its primary's offset with the same
    /// store.
    fn converge(&mut self) -> Result<(), FailoverViolation> {
        let start = self.sim.now;
        loop {
            match self.data.converged(&self.sim) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(detail) => {
                    return Err(FailoverViolation::Diverged {
                        seed: self.sim.seed,
                        detail,
                    })
                }
            }
            if self.sim.now - start > CONVERGE_LIMIT_MS {
                let detail = "replicas not caught up".to_string();
                return Err(self.stuck("convergence", CONVERGE_LIMIT_MS, detail));
            }
            self.round(false);
        }
    }

    fn new(seed: u64, replicas: usize) -> Run {
        let nodes = SHARDS * (1 + replicas);
        let mut rng = StdRng::seed_from_u64(seed ^ 0xda7a);
        let mut sim = Sim::new(seed, nodes);
        let calm = Weather {
            loss: rng.gen_range(0.0..0.03),
            duplicate: rng.gen_range(0.0..0.03),
            delay_max_ms: rng.gen_range(1..30),
        };
        sim.net.weather = calm;
        let net = DataNet::new(StdRng::seed_from_u64(rng.gen()));
        let data_seed = rng.gen();
        Run {
            data: DataPath::new(nodes, net, data_seed),
            next_step: 0,
            clients: Clients::new(CLIENTS, KEYS),
            sim,
            rng,
            calm,
            down: None,
            partition_until: None,
            storm_until: None,
            seen: Default::default(),
            report: FailoverReport {
                seed,
                virtual_ms: 0,
                kills: 0,
                partitions: 0,
                storms: 0,
                data: DataStats::default(),
                net: DataNetStats::default(),
                writes_acked: 0,
                writes_unknown: 0,
                reads: 0,
                refused: 0,
                ops_per_key_max: 0,
            },
        }
    }

    fn stuck(&self, phase: &'static str, limit_ms: u64, detail: String) -> FailoverViolation {
        FailoverViolation::Stuck {
            seed: self.sim.seed,
            phase,
            limit_ms,
            detail,
        }
    }

    /// Primaries 0..SHARDS take a third of the slots each, everyone meets node 0, the group
    /// is founded, the other nodes become replicas (node i of shard i % SHARDS, through the
    /// group) and sync.
    fn boot(&mut self) -> Result<(), FailoverViolation> {
        let n = self.sim.nodes.len();
        for i in 0..SHARDS {
            let start = (i * 16384 / SHARDS) as u16;
            let end = ((i + 1) * 16384 / SHARDS - 1) as u16;
            self.sim.nodes[i]
                .topology
                .add_slots(&[(start, end)])
                .unwrap();
        }
        for i in 1..n {
            self.sim.meet(i, 0);
        }
        let start = self.sim.now;
        let mut last_ask = 0;
        loop {
            let done = (0..n).all(|i| {
                let t = &self.sim.nodes[i].topology;
                let me = t.myself();
                i < SHARDS || me.primary == Some(self.sim.nodes[i % SHARDS].id())
            }) && self.sim.nodes.iter().all(|sn| {
                sn.core.in_group()
                    && (SHARDS..n).all(|r| {
                        sn.topology
                            .index_of(&self.sim.nodes[r].id())
                            .is_some_and(|k| sn.topology.nodes[k as usize].is_replica())
                    })
            }) && self.data.replicas_linked(&self.sim);
            if done {
                return Ok(());
            }
            if self.sim.now - start > BOOT_LIMIT_MS {
                let detail = (0..n)
                    .map(|i| {
                        let sn = &self.sim.nodes[i];
                        let (voters, learners) = sn.core.agent.members();
                        format!(
                            "\n  {i}: group {} leader {} members {}+{} v{} primary {:?}",
                            sn.core.in_group(),
                            sn.core.agent.is_leader(),
                            voters.len(),
                            learners.len(),
                            sn.topology.consensus.version,
                            sn.topology
                                .myself()
                                .primary
                                .map(|p| p.to_string()[..6].to_string()),
                        )
                    })
                    .collect::<String>();
                return Err(self.stuck(
                    "boot",
                    BOOT_LIMIT_MS,
                    format!(
                        "no group with replicas, linked {}{detail}",
                        self.data.replicas_linked(&self.sim)
                    ),
                ));
            }
            // The operator makes the replicas once a group is there (retried every second).
            if self.sim.nodes[0].core.in_group() && self.sim.now - last_ask >= 1_000 {
                last_ask = self.sim.now;
                for r in SHARDS..n {
                    let replica = self.sim.nodes[r].id();
                    let primary = self.sim.nodes[r % SHARDS].id();
                    let t = &self.sim.nodes[0].topology;
                    let done = t
                        .index_of(&replica)
                        .is_some_and(|k| t.nodes[k as usize].primary == Some(primary));
                    if !done {
                        self.sim
                            .propose(0, TopologyCommand::SetReplicaOf { replica, primary });
                    }
                }
            }
            self.round(false);
        }
    }

    /// One 100 ms round: gossip and data messages and the data path's link turns (every
    /// STEP_MS) in time order, then every node's tick and the clients'.
    fn round(&mut self, clients: bool) {
        let next_tick = self.sim.next_tick();
        self.next_step = self.next_step.max(self.sim.now);
        loop {
            let message = self.data.net.next_time().filter(|&at| at <= next_tick);
            let step = Some(self.next_step).filter(|&at| at <= next_tick);
            let at = match (message, step) {
                (Some(m), Some(s)) => m.min(s),
                (Some(m), None) => m,
                (None, Some(s)) => s,
                (None, None) => break,
            };
            self.sim.deliver_until(at);
            self.sim.now = self.sim.now.max(at);
            if step == Some(at) && message.is_none_or(|m| m > at) {
                self.data.step(&self.sim);
                self.next_step = at + STEP_MS;
                continue;
            }
            let Some((_, from, to, msg)) = self.data.net.pop_due(at) else {
                break;
            };
            match (to, msg) {
                (Endpoint::Node(i), msg) => self.data.deliver_to_node(&self.sim, from, i, msg),
                (Endpoint::Client(c), Msg::Reply { op, result }) => {
                    self.clients
                        .answer(&self.sim, &mut self.data.net, c, op, result)
                }
                _ => {}
            }
        }
        self.sim.deliver_until(next_tick);
        self.data.publish_offsets(&mut self.sim);
        self.sim.tick_all(next_tick);
        if self.data.trace.is_some() {
            self.trace_flags();
        }
        if clients {
            self.clients.tick(&self.sim, &mut self.data.net);
        }
    }

    fn faults(&mut self) {
        let end = self.sim.now + FAULT_MS;
        while self.sim.now < end {
            self.maybe_fault();
            self.round(true);
        }
        self.heal();
    }

    fn maybe_fault(&mut self) {
        let now = self.sim.now;
        if let Some((i, back)) = self.down {
            if back <= now {
                self.restart(i);
            }
        }
        if self.partition_until.is_some_and(|t| t <= now) {
            self.partition_until = None;
            self.sim.net.heal();
            self.data.note(now, || "partition healed".into());
        }
        if self.storm_until.is_some_and(|t| t <= now) {
            self.storm_until = None;
            self.sim.net.weather = self.calm;
            self.data.set_weather(self.calm, true);
        }
        if self.down.is_none() && self.rng.gen_bool(KILL_CHANCE) {
            let primaries = self.primaries();
            if !primaries.is_empty() {
                let victim = primaries[self.rng.gen_range(0..primaries.len())];
                self.sim.crash(victim);
                self.data.crash(victim);
                self.data.note(now, || format!("kill node {victim}"));
                self.down = Some((victim, now + self.rng.gen_range(DOWN_MS)));
                self.report.kills += 1;
            }
        }
        if self.partition_until.is_none() && self.rng.gen_bool(PARTITION_CHANCE) {
            let n = self.sim.nodes.len();
            let primaries = self.primaries();
            let groups: Vec<u8> = if !primaries.is_empty() && self.rng.gen_bool(0.5) {
                // A primary cut off from the rest, long enough to be failed over while
                // clients still reach it: the case the serving lease is for.
                let victim = primaries[self.rng.gen_range(0..primaries.len())];
                (0..n).map(|i| (i == victim) as u8).collect()
            } else {
                (0..n).map(|_| self.rng.gen_range(0..2)).collect()
            };
            self.data.note(now, || format!("partition {groups:?}"));
            self.sim.net.partition(groups);
            self.partition_until = Some(now + self.rng.gen_range(PARTITION_MS));
            self.report.partitions += 1;
        }
        if self.storm_until.is_none() && self.rng.gen_bool(STORM_CHANCE) {
            self.sim.net.weather = Weather {
                loss: self.rng.gen_range(0.0..0.25),
                duplicate: self.rng.gen_range(0.0..0.1),
                delay_max_ms: self.rng.gen_range(1..=250),
            };
            self.data.set_weather(self.sim.net.weather, false);
            self.storm_until = Some(now + self.rng.gen_range(500..4_000));
            self.report.storms += 1;
        }
    }

    /// Notes every change of who a node sees failing, and of its topology version.
    fn trace_flags(&mut self) {
        use node::cluster::flags::bit;
        let n = self.sim.nodes.len();
        for i in self.sim.live().collect::<Vec<_>>() {
            let t = &self.sim.nodes[i].topology;
            let mut seen = String::new();
            for j in 0..n {
                let f = t
                    .index_of(&self.sim.nodes[j].id())
                    .map(|k| t.nodes[k as usize].flags);
                let c = match f {
                    Some(f) if f.has(bit::FAIL) => 'F',
                    Some(f) if f.has(bit::PFAIL) => 'p',
                    Some(f) if f.has(bit::MASTER) => 'M',
                    Some(_) => 's',
                    None => '?',
                };
                seen.push(c);
            }
            let inm = self.sim.nodes[i].core.gossip.in_majority(self.sim.now, t);
            let line = format!("{seen} v{} maj {inm}", t.consensus.version);
            if self.seen.get(&i) != Some(&line) {
                self.data.note(self.sim.now, || format!("view {i}: {line}"));
                self.seen.insert(i, line);
            }
        }
    }

    /// Live primaries that own slots, each in its own view.
    fn primaries(&self) -> Vec<usize> {
        self.sim
            .live()
            .filter(|&i| {
                let t = &self.sim.nodes[i].topology;
                t.myself().is_primary() && t.slots.owns_any(t.myself_index())
            })
            .collect()
    }

    fn restart(&mut self, i: usize) {
        self.down = None;
        self.data.note(self.sim.now, || format!("restart node {i}"));
        // The config file always loads in the simulation; a failure is a core bug that the
        // seeds test reports, here it only keeps the node down.
        if self.sim.restart(i).is_ok() {
            self.data.restart(i);
        }
    }

    fn heal(&mut self) {
        if let Some((i, _)) = self.down {
            self.restart(i);
        }
        self.sim.net.heal();
        self.sim.net.weather = self.calm;
        self.data.set_weather(self.calm, true);
        self.partition_until = None;
        self.storm_until = None;
    }

    /// Reads only, until every key was read a few times (acknowledged writes must show).
    fn final_reads(&mut self) -> Result<(), FailoverViolation> {
        self.clients.writing = false;
        self.clients.reset_reads();
        let start = self.sim.now;
        while self.clients.reads_per_key.iter().any(|&r| r < 3) {
            if self.sim.now - start > FINAL_LIMIT_MS {
                let detail = format!("reads per key {:?}", self.clients.reads_per_key);
                return Err(self.stuck("final reads", FINAL_LIMIT_MS, detail));
            }
            self.round(true);
        }
        Ok(())
    }

    fn finish(mut self) -> FailoverReport {
        let s = self.clients.stats;
        self.report.virtual_ms = self.sim.now - START_MS;
        self.report.data = self.data.stats;
        self.report.net = self.data.net.stats;
        self.report.writes_acked = s.writes_acked;
        self.report.writes_unknown = s.writes_unknown;
        self.report.reads = s.reads;
        self.report.refused = s.refused;
        self.report.ops_per_key_max = (0..KEYS)
            .map(|k| self.clients.histories.ops_of(k))
            .max()
            .unwrap_or(0);
        self.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the convergence check is not vacuous: after a booted cluster carried writes
    /// through the real replication core, a replica store forged behind replication's back
    /// is reported as diverged, and the honest cluster converges.
    #[test]
    fn a_forged_replica_store_is_caught_as_divergence() {
        let mut run = Run::new(7, 1);
        run.boot().unwrap();
        for _ in 0..30 {
            run.round(true);
        }
        run.clients.writing = false;
        run.converge().unwrap();
        assert!(run.data.stats.stream_bytes > 0, "writes were streamed");
        let replica = (SHARDS..run.sim.nodes.len())
            .find(|&r| !run.data.nodes[r].store.is_empty())
            .expect("a replica holding data");
        let (&key, &value) = run.data.nodes[replica].store.iter().next().unwrap();
        run.data.nodes[replica].store.insert(key, value + 1_000_000);
        assert!(matches!(
            run.converge(),
            Err(FailoverViolation::Diverged { seed: 7, .. })
        ));
    }
}
