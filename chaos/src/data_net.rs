//! The data path's message network: client requests and replies, and the two handshake
//! messages that set a replication link up (in their wire form), with the same weather
//! (loss, delay, reordering) and the same partitions as the cluster bus of [`crate::net`].
//! Clients reach every node (they sit outside the partitions), so a primary cut off from its
//! cluster still gets requests. The replication stream itself goes over the simulated
//! fabric (`bus::sim`), as ring WRITEs (see the `data_path` module).

use crate::net::Weather;
use rand::rngs::StdRng;
use rand::Rng;
use std::collections::BTreeMap;

/// Most data messages in flight: past it a message is lost (a run that floods the network is
/// a bug in the simulation).
pub const DATA_IN_FLIGHT_MAX: usize = 100_000;

pub type Key = u8;
pub type Value = u64;

/// Who sends or receives a data message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Node(usize),
    Client(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Read,
    /// Values are unique per run, never 0 (0 is "no value").
    Write(Value),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpResult {
    Written,
    Read(Value),
    /// Not served (not the owner, not in the majority, not committed yet): nothing happened.
    Refused,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// Client to node.
    Request { op: u64, key: Key, kind: OpKind },
    /// Node to client.
    Reply { op: u64, result: OpResult },
    /// Replica to the primary its topology names: `node::replication::handshake::LinkRequest`
    /// (ring advert, PSYNC) for the fabric connection of link attempt `attempt`.
    LinkRequest { attempt: u64, bytes: Vec<u8> },
    /// Primary to replica: `LinkAccept` (ack words, `+CONTINUE` / `+FULLRESYNC`) for
    /// `attempt`.
    LinkAccept { attempt: u64, bytes: Vec<u8> },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataNetStats {
    pub sent: u64,
    pub lost: u64,
    pub cut: u64,
    pub delivered: u64,
}

pub struct DataNet {
    in_flight: BTreeMap<(u64, u64), (Endpoint, Endpoint, Msg)>,
    seq: u64,
    rng: StdRng,
    pub stats: DataNetStats,
}

impl DataNet {
    pub fn new(rng: StdRng) -> Self {
        DataNet {
            in_flight: BTreeMap::new(),
            seq: 0,
            rng,
            stats: DataNetStats::default(),
        }
    }

    pub fn send(&mut self, weather: Weather, now: u64, from: Endpoint, to: Endpoint, msg: Msg) {
        self.stats.sent += 1;
        if self.rng.gen_bool(weather.loss) || self.in_flight.len() >= DATA_IN_FLIGHT_MAX {
            self.stats.lost += 1;
            return;
        }
        let at = now + self.rng.gen_range(0..=weather.delay_max_ms);
        self.seq += 1;
        self.in_flight.insert((at, self.seq), (from, to, msg));
    }

    /// When the next message is due, if any.
    pub fn next_time(&self) -> Option<u64> {
        self.in_flight.keys().next().map(|&(at, _)| at)
    }

    /// The next message due at or before `until`.
    pub fn pop_due(&mut self, until: u64) -> Option<(u64, Endpoint, Endpoint, Msg)> {
        let (&(at, seq), _) = self.in_flight.iter().next()?;
        if at > until {
            return None;
        }
        let (from, to, msg) = self.in_flight.remove(&(at, seq))?;
        Some((at, from, to, msg))
    }

    pub fn rng(&mut self) -> &mut StdRng {
        &mut self.rng
    }
}
