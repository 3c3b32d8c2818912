//! The simulated network: datagrams in flight ordered by delivery time, each one delayed,
//! lost or duplicated by a seeded rng, and held back at delivery when a partition separates
//! its ends. Random delays reorder datagrams, fragments of one message included.

use rand::rngs::StdRng;
use rand::Rng;
use std::collections::BTreeMap;

/// Most datagrams in flight: a run that floods the network is a bug in the simulation or in
/// a core, not something to buffer without end.
pub const IN_FLIGHT_MAX: usize = 200_000;

/// How the network misbehaves right now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weather {
    /// Chance a datagram is lost.
    pub loss: f64,
    /// Chance a datagram is delivered twice (the copy with its own delay).
    pub duplicate: f64,
    /// Delays are drawn uniformly from 0..=delay_max_ms.
    pub delay_max_ms: u64,
}

impl Weather {
    pub const CALM: Weather = Weather {
        loss: 0.0,
        duplicate: 0.0,
        delay_max_ms: 1,
    };
}

/// One datagram on its way.
#[derive(Clone, Debug)]
pub struct Datagram {
    pub from: usize,
    pub to: usize,
    pub bytes: Vec<u8>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetStats {
    pub sent: u64,
    pub lost: u64,
    pub duplicated: u64,
    /// Dropped at delivery: a partition lay between the ends.
    pub cut: u64,
    /// Dropped because IN_FLIGHT_MAX was reached.
    pub overflow: u64,
    pub delivered: u64,
}

pub struct Net {
    /// Keyed by (delivery time, sequence): the sequence keeps equal times in send order.
    in_flight: BTreeMap<(u64, u64), Datagram>,
    seq: u64,
    pub weather: Weather,
    /// Partition group of each node (by index); nodes in different groups cannot talk.
    groups: Vec<u8>,
    pub stats: NetStats,
}

impl Net {
    pub fn new(weather: Weather) -> Self {
        Net {
            in_flight: BTreeMap::new(),
            seq: 0,
            weather,
            groups: Vec::new(),
            stats: NetStats::default(),
        }
    }

    /// Puts the datagrams of one message on the wire at `now`.
    pub fn send(
        &mut self,
        rng: &mut StdRng,
        now: u64,
        from: usize,
        to: usize,
        parts: Vec<Vec<u8>>,
    ) {
        for bytes in parts {
            self.stats.sent += 1;
            if rng.gen_bool(self.weather.loss) {
                self.stats.lost += 1;
                continue;
            }
            if rng.gen_bool(self.weather.duplicate) {
                self.stats.duplicated += 1;
                self.enqueue(rng, now, from, to, bytes.clone());
            }
            self.enqueue(rng, now, from, to, bytes);
        }
    }

    fn enqueue(&mut self, rng: &mut StdRng, now: u64, from: usize, to: usize, bytes: Vec<u8>) {
        if self.in_flight.len() >= IN_FLIGHT_MAX {
            self.stats.overflow += 1;
            return;
        }
        let at = now + rng.gen_range(0..=self.weather.delay_max_ms);
        self.seq += 1;
        self.in_flight
            .insert((at, self.seq), Datagram { from, to, bytes });
    }

    /// The next datagram due at or before `until` that may pass, with its delivery time;
    /// ones a partition stops are dropped on the way.
    pub fn next_due(&mut self, until: u64) -> Option<(u64, Datagram)> {
        loop {
            let (&(at, seq), _) = self.in_flight.iter().next()?;
            if at > until {
                return None;
            }
            let d = self.in_flight.remove(&(at, seq))?;
            if self.reachable(d.from, d.to) {
                self.stats.delivered += 1;
                return Some((at, d));
            }
            self.stats.cut += 1;
        }
    }

    pub fn reachable(&self, a: usize, b: usize) -> bool {
        self.group(a) == self.group(b)
    }

    fn group(&self, node: usize) -> u8 {
        self.groups.get(node).copied().unwrap_or(0)
    }

    /// Splits the nodes: `groups[i]` is node i's side (missing nodes are on side 0).
    pub fn partition(&mut self, groups: Vec<u8>) {
        self.groups = groups;
    }

    pub fn heal(&mut self) {
        self.groups.clear();
    }

    pub fn is_partitioned(&self) -> bool {
        self.groups.iter().any(|&g| g != 0)
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}
