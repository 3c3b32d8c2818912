//! Simulated clients: each issues one single-key read or write at a time on a handful of
//! keys, routed by the topology of a node it asks (possibly stale, possibly dead: a client
//! learns the slot map from whoever answers CLUSTER SLOTS), with a timeout. Every outcome
//! goes into the per-key histories: answered, refused (left out) or unknown.

use crate::data_net::{DataNet, Endpoint, Key, Msg, OpKind, OpResult};
use crate::data_path::key_slot;
use crate::linearizable::{Histories, Op, Recorded, OPS_PER_KEY_MAX};
use crate::sim::Sim;
use rand::Rng;

/// How long a client waits for an answer before the outcome is unknown.
pub const CLIENT_TIMEOUT_MS: u64 = 1_000;
/// Pause after a refusal or an answer before the next operation.
pub const THINK_MS_MAX: u64 = 60;
/// Operations per key kept for the reads after the faults.
const FINAL_READS_ROOM: usize = 60;

#[derive(Clone, Copy, Debug)]
struct Waiting {
    op: u64,
    key: Key,
    kind: OpKind,
    call: u64,
    sent_ms: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    pub writes_acked: u64,
    pub writes_unknown: u64,
    pub reads: u64,
    pub refused: u64,
    pub timeouts: u64,
}

pub struct Clients {
    waiting: Vec<Option<Waiting>>,
    next_at: Vec<u64>,
    keys: Key,
    next_op: u64,
    next_value: u64,
    /// Order of events across all keys (calls and answers).
    clock: u64,
    pub histories: Histories,
    pub stats: ClientStats,
    /// Writes allowed (the final phase only reads).
    pub writing: bool,
    /// Reads answered per key since [`Clients::reset_reads`].
    pub reads_per_key: Vec<u64>,
}

impl Clients {
    pub fn new(clients: usize, keys: Key) -> Self {
        Clients {
            waiting: vec![None; clients],
            next_at: vec![0; clients],
            keys,
            next_op: 1,
            next_value: 1,
            clock: 0,
            histories: Histories::default(),
            stats: ClientStats::default(),
            writing: true,
            reads_per_key: vec![0; keys as usize],
        }
    }

    pub fn reset_reads(&mut self) {
        self.reads_per_key = vec![0; self.keys as usize];
    }

    fn tick_clock(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Issues what is due, and times out what waited too long.
    pub fn tick(&mut self, sim: &Sim, net: &mut DataNet) {
        for c in 0..self.waiting.len() {
            if let Some(w) = self.waiting[c] {
                if sim.now.saturating_sub(w.sent_ms) >= CLIENT_TIMEOUT_MS {
                    self.stats.timeouts += 1;
                    if let OpKind::Write(v) = w.kind {
                        self.stats.writes_unknown += 1;
                        self.histories.record(
                            w.key,
                            Op {
                                call: w.call,
                                answer: None,
                                what: Recorded::Write(v),
                            },
                        );
                    }
                    self.waiting[c] = None;
                }
            }
            if self.waiting[c].is_none() && sim.now >= self.next_at[c] {
                self.issue(sim, net, c);
            }
        }
    }

    fn issue(&mut self, sim: &Sim, net: &mut DataNet, c: usize) {
        let rng = net.rng();
        let key = rng.gen_range(0..self.keys);
        // Every operation, answered or not, may land in the history: stay under the bound.
        // Room is kept for the final reads.
        let limit = if self.writing {
            OPS_PER_KEY_MAX - FINAL_READS_ROOM
        } else {
            OPS_PER_KEY_MAX
        };
        if self.histories.ops_of(key) + self.open_ops() + 1 >= limit {
            return;
        }
        let write = self.writing && rng.gen_bool(0.5);
        let asked = rng.gen_range(0..sim.nodes.len());
        let t = &sim.nodes[asked].topology;
        let Some(owner) = t.owner(key_slot(key)).map(|o| o.id) else {
            self.next_at[c] = sim.now + rng.gen_range(1..=THINK_MS_MAX);
            return;
        };
        let Some(node) = sim.nodes.iter().position(|n| n.id() == owner) else {
            return;
        };
        let kind = if write {
            let v = self.next_value;
            self.next_value += 1;
            OpKind::Write(v)
        } else {
            OpKind::Read
        };
        let op = self.next_op;
        self.next_op += 1;
        let call = self.tick_clock();
        self.waiting[c] = Some(Waiting {
            op,
            key,
            kind,
            call,
            sent_ms: sim.now,
        });
        net.send(
            sim.net.weather,
            sim.now,
            Endpoint::Client(c),
            Endpoint::Node(node),
            Msg::Request { op, key, kind },
        );
    }

    /// The end of the run: writes still waiting are unknown.
    pub fn finish(&mut self) {
        for c in 0..self.waiting.len() {
            if let Some(w) = self.waiting[c].take() {
                if let OpKind::Write(v) = w.kind {
                    self.stats.writes_unknown += 1;
                    self.histories.record(
                        w.key,
                        Op {
                            call: w.call,
                            answer: None,
                            what: Recorded::Write(v),
                        },
                    );
                }
            }
        }
    }

    fn open_ops(&self) -> usize {
        self.waiting.iter().filter(|w| w.is_some()).count()
    }

    /// An answer reached client `c` (late answers, to an op given up, are dropped).
    pub fn answer(&mut self, sim: &Sim, net: &mut DataNet, c: usize, op: u64, result: OpResult) {
        let Some(w) = self.waiting[c].filter(|w| w.op == op) else {
            return;
        };
        self.waiting[c] = None;
        self.next_at[c] = sim.now + net.rng().gen_range(1..=THINK_MS_MAX);
        let what = match (w.kind, result) {
            (_, OpResult::Refused) => {
                self.stats.refused += 1;
                return;
            }
            (OpKind::Write(v), OpResult::Written) => {
                self.stats.writes_acked += 1;
                Recorded::Write(v)
            }
            (OpKind::Read, OpResult::Read(v)) => {
                self.stats.reads += 1;
                self.reads_per_key[w.key as usize] += 1;
                Recorded::Read(v)
            }
            // A node answering the wrong kind is a simulation bug: keep it visible.
            (kind, result) => panic!("answer {result:?} to {kind:?}"),
        };
        let answer = self.tick_clock();
        self.histories.record(
            w.key,
            Op {
                call: w.call,
                answer: Some(answer),
                what,
            },
        );
    }
}
