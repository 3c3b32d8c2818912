//! The seeded fault schedule: each round may start a partition, crash a node, or turn the
//! weather (loss, duplication, delay) bad for a while; everything it starts ends by itself,
//! and [`Faults::heal_all`] ends it all at once.

use crate::net::Weather;
use crate::sim::Sim;
use rand::Rng;

/// Chance per round (100 ms) that each kind of fault starts.
const PARTITION_CHANCE: f64 = 0.04;
const CRASH_CHANCE: f64 = 0.04;
const STORM_CHANCE: f64 = 0.05;
/// Worst weather of a storm.
const STORM_LOSS_MAX: f64 = 0.3;
const STORM_DUPLICATE_MAX: f64 = 0.2;
const STORM_DELAY_MAX_MS: u64 = 300;

#[derive(Debug, Default)]
pub struct Faults {
    partition_until: Option<u64>,
    storm_until: Option<u64>,
    /// Crashed nodes and when they restart.
    down: Vec<(usize, u64)>,
    pub partitions: u32,
    pub crashes: u32,
    pub storms: u32,
}

impl Faults {
    /// Ends what is due, maybe starts something new. `calm` is the weather between storms.
    /// Returns the nodes that failed to restart (a config file that does not load).
    pub fn on_round(&mut self, sim: &mut Sim, calm: Weather) -> Vec<(usize, String)> {
        let now = sim.now;
        let mut failed = Vec::new();
        if self.partition_until.is_some_and(|t| t <= now) {
            self.partition_until = None;
            sim.net.heal();
        }
        if self.storm_until.is_some_and(|t| t <= now) {
            self.storm_until = None;
            sim.net.weather = calm;
        }
        let due: Vec<usize> = self
            .down
            .iter()
            .filter(|&&(_, at)| at <= now)
            .map(|&(i, _)| i)
            .collect();
        self.down.retain(|&(_, at)| at > now);
        for i in due {
            if let Err(e) = sim.restart(i) {
                failed.push((i, e.to_string()));
            }
        }

        let n = sim.nodes.len();
        if self.partition_until.is_none() && sim.chance(PARTITION_CHANCE) {
            let groups: Vec<u8> = (0..n).map(|_| sim.rng_mut().gen_range(0..2)).collect();
            sim.net.partition(groups);
            self.partition_until = Some(now + sim.rng_mut().gen_range(500..5_000));
            self.partitions += 1;
        }
        // A minority may be down at once, at least one node.
        let down_max = ((n - 1) / 2).max(1);
        if self.down.len() < down_max && sim.chance(CRASH_CHANCE) {
            let live: Vec<usize> = sim.live().collect();
            if !live.is_empty() {
                let victim = live[sim.rng_mut().gen_range(0..live.len())];
                sim.crash(victim);
                let back = now + sim.rng_mut().gen_range(300..4_000);
                self.down.push((victim, back));
                self.crashes += 1;
            }
        }
        if self.storm_until.is_none() && sim.chance(STORM_CHANCE) {
            let rng = sim.rng_mut();
            let weather = Weather {
                loss: rng.gen_range(0.0..STORM_LOSS_MAX),
                duplicate: rng.gen_range(0.0..STORM_DUPLICATE_MAX),
                delay_max_ms: rng.gen_range(1..=STORM_DELAY_MAX_MS),
            };
            self.storm_until = Some(now + rng.gen_range(500..5_000));
            sim.net.weather = weather;
            self.storms += 1;
        }
        failed
    }

    /// Heals the partition, ends the storm and restarts every crashed node.
    pub fn heal_all(&mut self, sim: &mut Sim, calm: Weather) -> Vec<(usize, String)> {
        sim.net.heal();
        sim.net.weather = calm;
        self.partition_until = None;
        self.storm_until = None;
        let mut failed = Vec::new();
        for (i, _) in std::mem::take(&mut self.down) {
            if let Err(e) = sim.restart(i) {
                failed.push((i, e.to_string()));
            }
        }
        failed
    }
}
