//! The data path of the failover simulation: per node a key→value store, replication from
//! each primary to its replicas over the lossy network, and the rules by which a node serves
//! client reads and writes. These rules are the contract the real node follows:
//!
//! 1. A node serves a request for a key only if its topology makes it the primary owning the
//!    key's slot **and** `Gossip::in_majority` is true at that moment (else -CLUSTERDOWN /
//!    MOVED: here `Refused`, and nothing is applied). `in_majority` also holds a freshly
//!    promoted primary back for the hand-off (lease + delivery bound after a majority of
//!    voters applied its promotion), so old and new primary never serve at once.
//! 2. A write is applied locally, gets the next offset of the replication history, and is
//!    answered only once a replica acknowledged an offset at or past it (`repl-sync-acks 1`;
//!    the default simulated shards have one replica each, so 1 is all of them). A write
//!    never answered is an unknown outcome to its client. The topology agent's
//!    `failover_sync_acks` must equal this count (with more replicas than acks, automatic
//!    failover then waits for enough healthy replicas).
//! 3. A read returns the applied value only if the key's last write is *committed* (at or
//!    below the highest offset a replica acknowledged); else it is refused (the node may
//!    instead hold it until committed). Without this a read could show a write that a
//!    failover then loses.
//! 4. A replica accepts a snapshot or stream only from the primary its own topology names,
//!    and only of the history (`replid`) it synced from; it applies in offset order and acks
//!    its applied offset to that primary only. So once a replica applied a `Promote` (of
//!    itself or a sibling) the old primary gets no more acks from it: fenced.
//! 5. A replica that becomes primary starts a new history (new `replid`); everything it had
//!    applied counts as committed (every acknowledged write of the old primary is in it:
//!    rule 2 with one replica). A node that follows a (new) primary full-syncs from it.
//! 6. A crash keeps the store, history and committed offset (the node persists each write
//!    before it acknowledges, as with appendfsync always); links, follower acks and waiting
//!    writes are lost.

use crate::data_net::{DataNet, Endpoint, Key, Msg, OpKind, OpResult, Value};
use crate::sim::Sim;
use std::collections::{BTreeMap, VecDeque};

/// Writes kept for streaming; a replica further behind gets a snapshot.
pub const BACKLOG_MAX: usize = 4096;
/// Writes per stream message (a retransmission resends from the replica's ack).
pub const STREAM_BATCH_MAX: usize = 64;
/// Writes waiting for a replica's ack, per primary; past it writes are refused.
pub const PENDING_MAX: usize = 256;

/// The slot of a simulated key.
pub fn key_slot(key: Key) -> u16 {
    proto::slot::key_slot(format!("key:{key}").as_bytes())
}

#[derive(Clone, Copy, Debug)]
struct Follower {
    replid: u64,
    acked: u64,
}

#[derive(Debug, Default)]
pub struct DataNode {
    // Kept across a crash.
    pub store: BTreeMap<Key, Value>,
    /// Offset of each key's last write.
    last_write: BTreeMap<Key, u64>,
    pub replid: u64,
    /// Offset of the first write the backlog does not hold (the one before `log[0]`).
    base: u64,
    log: VecDeque<(Key, Value)>,
    /// Highest offset known to be on a replica (or inherited at promotion).
    pub committed: u64,
    /// Primary at the last look (a change is a promotion or a demotion).
    was_primary: Option<bool>,
    histories: u64,
    // Lost in a crash.
    /// As a replica: (primary's index, history) synced from.
    link: Option<(usize, u64)>,
    followers: BTreeMap<usize, Follower>,
    /// (client, op, offset) of writes not answered yet.
    pending: Vec<(usize, u64, u64)>,
}

impl DataNode {
    pub fn offset(&self) -> u64 {
        self.base + self.log.len() as u64
    }

    fn append(&mut self, key: Key, value: Value) -> u64 {
        self.log.push_back((key, value));
        if self.log.len() > BACKLOG_MAX {
            self.log.pop_front();
            self.base += 1;
        }
        self.store.insert(key, value);
        let offset = self.offset();
        self.last_write.insert(key, offset);
        offset
    }

    fn crash(&mut self) {
        self.link = None;
        self.followers.clear();
        self.pending.clear();
    }
}

/// What the data path did, for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataStats {
    /// Replicas that became primaries owning slots.
    pub promotions: u32,
    pub snapshots: u64,
    pub refused: u64,
}

pub struct Data {
    pub nodes: Vec<DataNode>,
    pub net: DataNet,
    pub stats: DataStats,
    /// What happened, for a replay to print (None: not kept). At most TRACE_MAX lines.
    pub trace: Option<Vec<String>>,
}

/// Lines a trace keeps.
pub const TRACE_MAX: usize = 100_000;

/// A node's role in its own topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Primary,
    Replica(usize),
    /// A replica of a node the simulation does not know (cannot happen) or none.
    Lost,
}

fn index_of(sim: &Sim, id: &node::cluster::id::NodeId) -> Option<usize> {
    sim.nodes.iter().position(|n| n.id() == *id)
}

fn role(sim: &Sim, i: usize) -> Role {
    let me = sim.nodes[i].topology.myself();
    if me.is_primary() {
        return Role::Primary;
    }
    match me.primary.and_then(|p| index_of(sim, &p)) {
        Some(p) => Role::Replica(p),
        None => Role::Lost,
    }
}

/// Rule 1: primary owning the key's slot, and in the majority.
pub fn serves(sim: &Sim, i: usize, key: Key) -> bool {
    let n = &sim.nodes[i];
    let t = &n.topology;
    t.myself().is_primary()
        && t.slots.owner(key_slot(key)) == Some(t.myself_index())
        && n.core.gossip.in_majority(sim.now, t)
}

impl Data {
    pub fn new(nodes: usize, net: DataNet) -> Self {
        Data {
            nodes: (0..nodes).map(|_| DataNode::default()).collect(),
            net,
            stats: DataStats::default(),
            trace: None,
        }
    }

    /// Adds a line to the trace, if one is kept.
    pub fn note(&mut self, now: u64, line: impl FnOnce() -> String) {
        if let Some(t) = &mut self.trace {
            if t.len() < TRACE_MAX {
                t.push(format!("{:>7} {}", now - crate::sim::START_MS, line()));
            }
        }
    }

    pub fn crash(&mut self, i: usize) {
        self.nodes[i].crash();
    }

    fn send(&mut self, sim: &Sim, from: Endpoint, to: Endpoint, msg: Msg) {
        self.net.send(sim.net.weather, sim.now, from, to, msg);
    }

    /// Promotion and demotion as the node's topology says (rules 5).
    fn observe_role(&mut self, sim: &Sim, i: usize) {
        let primary = sim.nodes[i].topology.myself().is_primary();
        let was = self.nodes[i].was_primary.replace(primary);
        if was == Some(primary) {
            return;
        }
        let n = &mut self.nodes[i];
        n.link = None;
        n.followers.clear();
        n.pending.clear();
        if primary {
            n.histories += 1;
            n.replid = ((i as u64 + 1) << 32) | n.histories;
            n.committed = n.offset();
            let (offset, store) = (n.offset(), format!("{:?}", n.store));
            self.note(sim.now, || {
                format!("node {i} primary at offset {offset} {store}")
            });
            let t = &sim.nodes[i].topology;
            if was == Some(false) && t.slots.owns_any(t.myself_index()) {
                self.stats.promotions += 1;
            }
        }
    }

    /// Delivers one data message that arrived at node `to` (clients are handled by the
    /// caller). A message to a dead node, or across a partition, is lost.
    pub fn deliver_to_node(&mut self, sim: &Sim, from: Endpoint, to: usize, msg: Msg) {
        if !sim.nodes[to].alive {
            return;
        }
        if let Endpoint::Node(f) = from {
            if !sim.net.reachable(f, to) {
                self.net.stats.cut += 1;
                return;
            }
        }
        self.net.stats.delivered += 1;
        self.observe_role(sim, to);
        match (from, msg) {
            (Endpoint::Client(c), Msg::Request { op, key, kind }) => {
                self.request(sim, to, c, op, key, kind)
            }
            (Endpoint::Node(r), Msg::SyncRequest) if role(sim, to) == Role::Primary => {
                self.send_snapshot(sim, to, r);
            }
            (
                Endpoint::Node(p),
                Msg::Snapshot {
                    replid,
                    offset,
                    store,
                },
            ) => {
                if role(sim, to) != Role::Replica(p) {
                    return;
                }
                let n = &mut self.nodes[to];
                // A late copy of a snapshot already built on: never go back in history.
                let stale = n.link == Some((p, replid)) && offset <= n.offset();
                if stale {
                    return;
                }
                self.stats.snapshots += 1;
                n.store = store.into_iter().collect();
                n.last_write = n.store.keys().map(|&k| (k, offset)).collect();
                n.base = offset;
                n.log.clear();
                n.replid = replid;
                n.link = Some((p, replid));
                self.send(
                    sim,
                    Endpoint::Node(to),
                    Endpoint::Node(p),
                    Msg::Ack {
                        replid,
                        applied: offset,
                    },
                );
            }
            (
                Endpoint::Node(p),
                Msg::Stream {
                    replid,
                    first,
                    entries,
                },
            ) => {
                let n = &mut self.nodes[to];
                if role(sim, to) != Role::Replica(p) || n.link != Some((p, replid)) {
                    return;
                }
                for (k, (key, value)) in entries.into_iter().enumerate() {
                    let offset = first + k as u64;
                    if offset == n.offset() + 1 {
                        n.append(key, value);
                    }
                }
                let applied = n.offset();
                self.send(
                    sim,
                    Endpoint::Node(to),
                    Endpoint::Node(p),
                    Msg::Ack { replid, applied },
                );
            }
            (Endpoint::Node(r), Msg::Ack { replid, applied }) => {
                let n = &mut self.nodes[to];
                if role(sim, to) != Role::Primary || replid != n.replid {
                    return;
                }
                // A replica acking this history holds it up to `applied` (it synced
                // from this node, perhaps before a crash here).
                let offset = n.offset();
                let f = n
                    .followers
                    .entry(r)
                    .or_insert(Follower { replid, acked: 0 });
                f.replid = replid;
                f.acked = f.acked.max(applied.min(offset));
                n.committed = n.committed.max(f.acked);
                self.answer_committed(sim, to);
            }
            _ => {}
        }
    }

    fn request(&mut self, sim: &Sim, i: usize, client: usize, op: u64, key: Key, kind: OpKind) {
        let reply = |data: &mut Data, result| {
            data.send(
                sim,
                Endpoint::Node(i),
                Endpoint::Client(client),
                Msg::Reply { op, result },
            )
        };
        if !serves(sim, i, key) {
            self.stats.refused += 1;
            return reply(self, OpResult::Refused);
        }
        let n = &mut self.nodes[i];
        match kind {
            OpKind::Write(value) => {
                if n.pending.len() >= PENDING_MAX {
                    self.stats.refused += 1;
                    return reply(self, OpResult::Refused);
                }
                let offset = n.append(key, value);
                n.pending.push((client, op, offset));
                self.note(sim.now, || {
                    format!("node {i} applies op {op} key {key}={value} at {offset}")
                });
                self.stream(sim, i);
            }
            OpKind::Read => {
                let last = n.last_write.get(&key).copied().unwrap_or(0);
                if last > n.committed {
                    self.stats.refused += 1;
                    return reply(self, OpResult::Refused);
                }
                let value = n.store.get(&key).copied().unwrap_or(0);
                let committed = n.committed;
                self.note(sim.now, || {
                    format!("node {i} reads op {op} key {key}={value} (committed {committed})")
                });
                reply(self, OpResult::Read(value));
            }
        }
    }

    /// Answers the waiting writes a replica has acknowledged (rule 2).
    fn answer_committed(&mut self, sim: &Sim, i: usize) {
        let n = &mut self.nodes[i];
        let committed = n.committed;
        let (done, waiting): (Vec<_>, Vec<_>) = n
            .pending
            .drain(..)
            .partition(|&(_, _, offset)| offset <= committed);
        n.pending = waiting;
        for (client, op, offset) in done {
            self.note(sim.now, || {
                format!("node {i} acks op {op} at {offset} (committed {committed})")
            });
            self.send(
                sim,
                Endpoint::Node(i),
                Endpoint::Client(client),
                Msg::Reply {
                    op,
                    result: OpResult::Written,
                },
            );
        }
    }

    fn send_snapshot(&mut self, sim: &Sim, i: usize, to: usize) {
        let n = &mut self.nodes[i];
        let replid = n.replid;
        let f = n
            .followers
            .entry(to)
            .or_insert(Follower { replid, acked: 0 });
        if f.replid != replid {
            *f = Follower { replid, acked: 0 };
        }
        let msg = Msg::Snapshot {
            replid,
            offset: n.offset(),
            store: n.store.iter().map(|(&k, &v)| (k, v)).collect(),
        };
        self.send(sim, Endpoint::Node(i), Endpoint::Node(to), msg);
    }

    /// Sends each follower what it has not acknowledged (a retransmission when it was sent
    /// before).
    fn stream(&mut self, sim: &Sim, i: usize) {
        let n = &self.nodes[i];
        let offset = n.offset();
        let mut msgs = Vec::new();
        let mut resync = Vec::new();
        for (&to, f) in &n.followers {
            if f.acked >= offset {
                continue;
            }
            if f.acked < n.base {
                resync.push(to);
                continue;
            }
            let skip = (f.acked - n.base) as usize;
            let entries: Vec<(Key, Value)> = n
                .log
                .iter()
                .skip(skip)
                .take(STREAM_BATCH_MAX)
                .copied()
                .collect();
            msgs.push((
                to,
                Msg::Stream {
                    replid: n.replid,
                    first: f.acked + 1,
                    entries,
                },
            ));
        }
        for (to, msg) in msgs {
            self.send(sim, Endpoint::Node(i), Endpoint::Node(to), msg);
        }
        for to in resync {
            self.send_snapshot(sim, i, to);
        }
    }

    /// The 100 ms timer of node `i`: a primary streams, a replica asks for a sync or acks.
    pub fn tick(&mut self, sim: &Sim, i: usize) {
        if !sim.nodes[i].alive {
            return;
        }
        self.observe_role(sim, i);
        match role(sim, i) {
            Role::Primary => self.stream(sim, i),
            Role::Replica(p) => {
                let n = &mut self.nodes[i];
                if n.link.is_some_and(|(q, _)| q != p) {
                    n.link = None;
                }
                let msg = match n.link {
                    Some((_, replid)) => Msg::Ack {
                        replid,
                        applied: n.offset(),
                    },
                    None => Msg::SyncRequest,
                };
                self.send(sim, Endpoint::Node(i), Endpoint::Node(p), msg);
            }
            Role::Lost => {}
        }
    }

    /// Whether every replica is synced with the primary its topology names.
    pub fn replicas_linked(&self, sim: &Sim) -> bool {
        (0..self.nodes.len()).all(|i| match role(sim, i) {
            Role::Replica(p) => self.nodes[i].link.is_some_and(|(q, _)| q == p),
            _ => true,
        })
    }

    /// What gossip advertises as each node's replication offset.
    pub fn publish_offsets(&self, sim: &mut Sim) {
        for (i, n) in self.nodes.iter().enumerate() {
            sim.nodes[i].topology.myself_mut().repl_offset = n.offset();
        }
    }
}
