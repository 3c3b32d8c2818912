//! The data path of the failover simulation: per node a store ([`ReplNode`]) replicated by
//! node's real replication core over the simulated fabric (`bus::sim`): the primary's
//! [`Shipper`] WRITEs its backlog into each replica's ring, the replica's [`ReplicaLink`]
//! releases the records in offset order (WRITEs are reordered, torn and duplicated by the
//! fabric), the replica executes whole commands and publishes its applied offset into the
//! primary's ack word. Links are set up with the real handshake messages and PSYNC decision
//! (`handshake`, `psync`, `ids`), paced by [`ShipPace`] and [`LinkPace`], and acknowledgements are counted by
//! [`ReplicaAcks`]. Partitions and crashes of the cluster's network apply to the fabric too.
//!
//! The rules by which a node serves clients (the contract the real node follows):
//!
//! 1. A node serves a request for a key only if its topology makes it the primary owning the
//!    key's slot **and** `Gossip::in_majority` is true at that moment (else -CLUSTERDOWN /
//!    MOVED: here `Refused`, and nothing is applied). `in_majority` also holds a freshly
//!    promoted primary back for the hand-off (lease + delivery bound after a majority of
//!    voters applied its promotion), so old and new primary never serve at once.
//! 2. A write is applied locally and fed to the backlog, and is answered only once a replica
//!    acknowledged an offset at or past its end (`repl-sync-acks 1`; the default simulated
//!    shards have one replica each, so 1 is all of them). A write never answered is an
//!    unknown outcome to its client. The topology agent's `failover_sync_acks` must equal
//!    this count.
//! 3. A read returns the applied value only if the key's last write is *committed* (at or
//!    below the highest offset a replica acknowledged); else it is refused.
//! 4. A replica links only to the primary its own topology names and drops the link when
//!    its topology names another (so the old primary gets no more acks from it: fenced); the
//!    PSYNC decision says whether its history continues the primary's.
//! 5. A replica that becomes primary shifts its replication id (`shift_on_promotion`) and
//!    everything it had applied counts as committed.
//! 6. A crash keeps the store, history and committed offset (each write is persisted before
//!    it is acknowledged, as with appendfsync always); links, acks and waiting writes are
//!    lost, and the node's fabric host with them (a restarted node is a new host).

use crate::data_net::{DataNet, Endpoint, Key, Msg, OpKind, OpResult, Value};
use crate::net::Weather;
use crate::repl_node::ReplNode;
use crate::sim::Sim;
use bus::sim::{Faults, SimConnection, SimFabric, SimListener, SimProvider};
use bus::{EndpointConfig, Listener, Provider};
use node::replication::ack::ReplicaAcks;
use node::replication::apply_order::REORDER_BYTES_MAX_DEFAULT;
use node::replication::handshake::{LinkAccept, LinkDecision, LinkRequest};
use node::replication::link::{LinkLimits, ReplicaLink};
use node::replication::link_pace::LinkPace;
use node::replication::psync::{self, PsyncDecision, PsyncRequest};
use node::replication::ship::{ShipStart, Shipper};
use node::replication::ship_pace::{PaceLimits, ShipPace};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// Ring bytes per link: small, so that rings fill and wrap often.
pub const RING_BYTES: usize = 4096;
/// Largest full sync a replica accepts.
pub const SNAPSHOT_BYTES_MAX: u64 = 1 << 20;
/// Writes waiting for a replica's ack, per primary; past it writes are refused.
pub const PENDING_MAX: usize = 256;
/// Virtual time between two turns of every node's links (pump, poll).
pub const STEP_MS: u64 = 5;
/// A replica gives up on a link whose primary did not accept within this long.
pub const LINK_SETUP_MS: u64 = 1_000;
/// Pause before a replica tries to link again.
pub const LINK_RETRY_MS: u64 = 200;
/// A replica drops a link that brought no record (pings included) for this long.
pub const SILENCE_MS: u64 = 2_000;
/// An idle primary pings this often (below [`SILENCE_MS`]).
pub const PING_MS: u64 = 250;
/// A primary drops a replica that acknowledged nothing shipped for this long.
pub const REPL_TIMEOUT_MS: u64 = 2_000;

/// The slot of a simulated key.
pub fn key_slot(key: Key) -> u16 {
    proto::slot::key_slot(format!("key:{key}").as_bytes())
}

/// What the data path did, for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataStats {
    /// Replicas that became primaries owning slots.
    pub promotions: u32,
    /// Full syncs loaded by replicas.
    pub full_syncs: u64,
    /// Links that continued a history (`+CONTINUE`).
    pub partial_syncs: u64,
    /// Stream bytes replicas executed.
    pub stream_bytes: u64,
    /// Links dropped (fabric errors, timeouts, a new primary, a failed setup).
    pub links_dropped: u64,
    /// Full syncs a replica refused (`psync::full_sync_allowed`).
    pub syncs_refused: u64,
    pub refused: u64,
}

/// A replica's link to its primary.
struct Upstream {
    primary: usize,
    attempt: u64,
    link: ReplicaLink<SimConnection>,
    /// The primary's decision, once its accept arrived.
    accepted: Option<LinkDecision>,
    /// The dataset is the primary's history (a continue, or the full sync loaded): only
    /// then is anything acknowledged.
    synced: bool,
    started_ms: u64,
    /// Silence is counted from the accept on.
    pace: LinkPace,
}

/// A primary's link to one replica.
struct Downstream {
    shipper: Shipper<SimConnection>,
    pace: ShipPace,
}

/// What a node loses in a crash.
#[derive(Default)]
struct Links {
    host: Option<SimProvider>,
    /// By replica index: where that replica connects.
    listeners: BTreeMap<usize, SimListener>,
    upstream: Option<Upstream>,
    retry_at: u64,
    downstream: BTreeMap<usize, Downstream>,
    acks: ReplicaAcks<usize>,
    /// (client, op, offset) of writes not answered yet.
    pending: Vec<(usize, u64, u64)>,
}

pub struct DataPath {
    pub nodes: Vec<ReplNode>,
    links: Vec<Links>,
    /// Primary at the last look (a change is a promotion or a demotion).
    was_primary: Vec<Option<bool>>,
    fabric: SimFabric,
    faults: Faults,
    pub net: DataNet,
    pub stats: DataStats,
    /// What happened, for a replay to print (None: not kept). At most TRACE_MAX lines.
    pub trace: Option<Vec<String>>,
    rng: StdRng,
    next_attempt: u64,
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

/// The config epoch of node `p` as node `i`'s topology knows it (what a node records as its
/// history's epoch when it syncs from `p`).
fn primary_epoch(sim: &Sim, i: usize, p: usize) -> u64 {
    let t = &sim.nodes[i].topology;
    t.index_of(&sim.nodes[p].id())
        .and_then(|x| t.node(x))
        .map_or(0, |n| t.node_epoch(n))
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

/// Where replica `replica` connects to reach `primary`.
fn link_addr(primary: usize, replica: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, primary as u8, 1], 7000 + replica as u16))
}

fn ms(at: u64) -> Duration {
    Duration::from_millis(at)
}

fn pace_limits() -> PaceLimits {
    PaceLimits {
        ping_every: ms(PING_MS),
        repl_timeout: ms(REPL_TIMEOUT_MS),
    }
}

fn link_limits() -> LinkLimits {
    LinkLimits {
        ring_data_len: RING_BYTES,
        reorder_bytes_max: REORDER_BYTES_MAX_DEFAULT,
        snapshot_bytes_max: SNAPSHOT_BYTES_MAX,
    }
}

/// The fabric's faults in calm weather: WRITEs placed out of order, torn and some landing
/// twice, delays drawn per run.
fn calm_faults(rng: &mut StdRng) -> Faults {
    Faults {
        delay_min: Duration::from_micros(1),
        delay_max: Duration::from_micros(rng.gen_range(20..3_000)),
        reorder_writes: true,
        tear_writes: true,
        duplicate_writes: rng.gen_range(0.0..0.05),
        duplicate_delay_max: ms(2),
        ..Faults::default()
    }
}

impl DataPath {
    pub fn new(nodes: usize, net: DataNet, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let faults = calm_faults(&mut rng);
        let fabric = SimFabric::new(rng.gen(), faults.clone()).expect("valid sim faults");
        let mut data = DataPath {
            nodes: (0..nodes).map(|_| ReplNode::new(&mut rng)).collect(),
            links: (0..nodes).map(|_| Links::default()).collect(),
            was_primary: vec![None; nodes],
            fabric,
            faults,
            net,
            stats: DataStats::default(),
            trace: None,
            rng,
            next_attempt: 1,
        };
        for i in 0..nodes {
            data.start_host(i);
        }
        data
    }

    /// A (re)started node's fabric host, listening for every other node as its replica.
    fn start_host(&mut self, i: usize) {
        let host = self.fabric.add_host().expect("room for a sim host");
        let cfg = EndpointConfig::default();
        let mut listeners = BTreeMap::new();
        for r in (0..self.nodes.len()).filter(|&r| r != i) {
            let listener = host
                .listen(link_addr(i, r), &cfg)
                .expect("a free sim address");
            listeners.insert(r, listener);
        }
        self.links[i] = Links {
            host: Some(host),
            listeners,
            ..Links::default()
        };
    }

    /// Adds a line to the trace, if one is kept.
    pub fn note(&mut self, now: u64, line: impl FnOnce() -> String) {
        if let Some(t) = &mut self.trace {
            if t.len() < TRACE_MAX {
                t.push(format!("{:>7} {}", now - crate::sim::START_MS, line()));
            }
        }
    }

    /// Rule 6: the node's host, links, acks and waiting writes are gone; its data stays.
    pub fn crash(&mut self, i: usize) {
        if let Some(host) = self.links[i].host.take() {
            self.fabric.crash(host.host());
        }
        self.links[i] = Links::default();
    }

    /// The node runs again, on a new fabric host.
    pub fn restart(&mut self, i: usize) {
        self.crash(i);
        self.start_host(i);
    }

    /// The fabric's delays follow the weather (a storm slows WRITEs as it slows messages).
    pub fn set_weather(&mut self, weather: Weather, calm: bool) {
        let faults = if calm {
            self.faults.clone()
        } else {
            Faults {
                delay_max: ms(weather.delay_max_ms.max(1)),
                ..self.faults.clone()
            }
        };
        self.fabric
            .set_faults(faults)
            .expect("weather within the sim's limits");
    }

    fn send(&mut self, sim: &Sim, from: Endpoint, to: Endpoint, msg: Msg) {
        self.net.send(sim.net.weather, sim.now, from, to, msg);
    }

    /// Promotion and demotion as the node's topology says (rule 5).
    fn observe_role(&mut self, sim: &Sim, i: usize) {
        let primary = sim.nodes[i].topology.myself().is_primary();
        let was = self.was_primary[i].replace(primary);
        if was == Some(primary) {
            return;
        }
        let links = &mut self.links[i];
        if links.upstream.take().is_some() || !links.downstream.is_empty() {
            self.stats.links_dropped += 1;
        }
        links.downstream.clear();
        links.acks = ReplicaAcks::default();
        links.pending.clear();
        if !primary {
            return;
        }
        let n = &mut self.nodes[i];
        if was == Some(false) {
            n.ids.shift_on_promotion(n.offset(), &mut self.rng);
            n.history_primary = Some(i);
            let t = &sim.nodes[i].topology;
            n.history_epoch = t.node_epoch(t.myself());
            if t.slots.owns_any(t.myself_index()) {
                self.stats.promotions += 1;
            }
        }
        n.committed = n.offset();
        let (offset, replid, store) = (n.offset(), n.ids.replid(), format!("{:?}", n.store));
        self.note(sim.now, || {
            format!("node {i} primary at offset {offset} replid {replid} {store}")
        });
    }

    /// One turn of every live node's links at `sim.now`: the fabric catches up with the
    /// simulation's time and partitions, primaries pump, replicas poll and execute.
    pub fn step(&mut self, sim: &Sim) {
        self.sync_partitions(sim);
        let target = ms(sim.now);
        let now = self.fabric.now();
        if target > now {
            self.fabric.advance(target - now);
        }
        for i in 0..self.nodes.len() {
            if !sim.nodes[i].alive || self.links[i].host.is_none() {
                continue;
            }
            self.observe_role(sim, i);
            match role(sim, i) {
                Role::Primary => self.pump(sim, i),
                Role::Replica(p) => self.follow(sim, i, p),
                Role::Lost => {}
            }
        }
    }

    /// The cluster network's partition, applied to the fabric between the nodes' hosts.
    fn sync_partitions(&self, sim: &Sim) {
        for a in 0..self.nodes.len() {
            for b in a + 1..self.nodes.len() {
                let (Some(ha), Some(hb)) = (&self.links[a].host, &self.links[b].host) else {
                    continue;
                };
                if sim.net.reachable(a, b) {
                    self.fabric.heal(ha.host(), hb.host());
                } else {
                    self.fabric.partition(ha.host(), hb.host());
                }
            }
        }
    }

    /// A primary ships to each replica, reads its acknowledgements and answers the writes
    /// they cover (rule 2).
    fn pump(&mut self, sim: &Sim, i: usize) {
        let now = sim.now;
        let node = &mut self.nodes[i];
        let links = &mut self.links[i];
        let mut dropped = Vec::new();
        for (&r, d) in links.downstream.iter_mut() {
            let progress = match d.shipper.pump(&node.backlog, ms(now)) {
                Ok(p) => p,
                Err(e) => {
                    dropped.push((r, e.to_string()));
                    continue;
                }
            };
            let verdict = d
                .pace
                .after_pump(&progress, d.shipper.ring_in_use(), ms(now));
            if verdict.ping_due {
                match d.shipper.ping() {
                    Ok(true) => d.pace.pinged(ms(now)),
                    Ok(false) => {}
                    Err(e) => {
                        dropped.push((r, e.to_string()));
                        continue;
                    }
                }
            }
            if verdict.went_online {
                links.acks.set_online(&r, now);
            }
            links
                .acks
                .observe(&r, progress.acked_offset, node.offset(), now);
            if verdict.timed_out {
                dropped.push((r, "acknowledges nothing".into()));
            }
        }
        for (r, why) in dropped {
            self.links[i].downstream.remove(&r);
            self.links[i].acks.detach(&r);
            self.stats.links_dropped += 1;
            self.note(now, || format!("node {i} drops replica {r}: {why}"));
        }
        let node = &mut self.nodes[i];
        if let Some(best) = self.links[i].acks.best_offset() {
            node.committed = node.committed.max(best);
        }
        self.answer_committed(sim, i);
    }

    /// A replica links to its primary `p` (rule 4), then polls, executes and acknowledges.
    fn follow(&mut self, sim: &Sim, i: usize, p: usize) {
        let now = sim.now;
        if self.links[i]
            .upstream
            .as_ref()
            .is_some_and(|u| u.primary != p)
        {
            self.drop_upstream(now, i, "the topology names another primary");
        }
        let Some(up) = self.links[i].upstream.as_mut() else {
            if now >= self.links[i].retry_at {
                self.connect(sim, i, p);
            }
            return;
        };
        if up.accepted.is_none() {
            if now - up.started_ms > LINK_SETUP_MS {
                self.drop_upstream(now, i, "no accept");
            }
            return;
        }
        let mut released = Vec::new();
        let polled = match up.link.poll(&mut released, ms(now)) {
            Ok(polled) => polled,
            Err(e) => return self.drop_upstream(now, i, &e.to_string()),
        };
        if let Err(silent) = up.pace.after_poll(polled.records, ms(now)) {
            return self.drop_upstream(now, i, &silent.to_string());
        }
        let node = &mut self.nodes[i];
        if let Err(e) = node.execute(&released) {
            return self.drop_upstream(now, i, &e.to_string());
        }
        self.stats.stream_bytes += released.len() as u64;
        if let Some(snapshot) = polled.snapshot {
            let Some(LinkDecision::FullResync { replid, offset, .. }) = up.accepted else {
                return self.drop_upstream(now, i, "a snapshot on a continued link");
            };
            if snapshot.offset != offset {
                return self.drop_upstream(now, i, "a snapshot at another offset");
            }
            let ids = psync::on_full_resync(replid);
            let epoch = primary_epoch(sim, i, p);
            if let Err(e) = node.load(&snapshot.bytes, offset, ids, p, epoch) {
                return self.drop_upstream(now, i, &e.to_string());
            }
            up.synced = true;
            self.stats.full_syncs += 1;
            let store = format!("{:?}", node.store);
            self.note(now, || {
                format!("node {i} loads a full sync from {p} at {offset} {store}")
            });
        }
        let Some(up) = self.links[i].upstream.as_mut() else {
            return;
        };
        if up.synced {
            if let Err(e) = up.link.publish_applied(self.nodes[i].offset(), ms(now)) {
                self.drop_upstream(now, i, &e.to_string());
            }
        }
    }

    fn drop_upstream(&mut self, now: u64, i: usize, why: &str) {
        if let Some(up) = self.links[i].upstream.take() {
            self.stats.links_dropped += 1;
            self.links[i].retry_at = now + LINK_RETRY_MS;
            let p = up.primary;
            self.note(now, || format!("node {i} drops its link to {p}: {why}"));
        }
    }

    /// Opens a fabric connection to `p` and sends the link request over the data network.
    fn connect(&mut self, sim: &Sim, i: usize, p: usize) {
        let now = sim.now;
        self.links[i].retry_at = now + LINK_RETRY_MS;
        let Some(host) = &self.links[i].host else {
            return;
        };
        let cfg = EndpointConfig::default();
        let Ok(conn) = host.connect(link_addr(p, i), &cfg, Duration::ZERO) else {
            return;
        };
        let node = &mut self.nodes[i];
        node.start_link();
        let Ok(link) = ReplicaLink::create(conn, link_limits(), node.offset()) else {
            return;
        };
        let Ok(ring) = link.ring_advert() else {
            return;
        };
        let request = LinkRequest {
            ring,
            psync: PsyncRequest::from_replica(Some((node.ids.replid(), node.offset()))),
        };
        let attempt = self.next_attempt;
        self.next_attempt += 1;
        self.links[i].upstream = Some(Upstream {
            primary: p,
            attempt,
            link,
            accepted: None,
            synced: false,
            started_ms: now,
            pace: LinkPace::new(ms(SILENCE_MS), ms(now)),
        });
        let bytes = request.encode();
        self.send(
            sim,
            Endpoint::Node(i),
            Endpoint::Node(p),
            Msg::LinkRequest { attempt, bytes },
        );
    }

    /// A primary takes a replica's link request: the PSYNC decision, a shipper over the
    /// connection the replica opened, the accept back.
    fn on_link_request(&mut self, sim: &Sim, i: usize, r: usize, attempt: u64, bytes: &[u8]) {
        if role(sim, i) != Role::Primary {
            return;
        }
        let Ok(request) = LinkRequest::decode(bytes) else {
            return;
        };
        let Some(listener) = self.links[i].listeners.get_mut(&r) else {
            return;
        };
        // The newest connection is the request's; older ones were given up.
        let mut conn = None;
        while let Ok(Some(c)) = listener.accept(Duration::ZERO) {
            conn = Some(c);
        }
        let Some(conn) = conn else {
            return;
        };
        let node = &self.nodes[i];
        let decision = psync::decide(
            &node.ids,
            Some(&node.backlog),
            node.offset(),
            &request.psync,
        );
        let (start, accepted, online_at) = match decision {
            PsyncDecision::Continue { from, new_replid } => (
                ShipStart::Continue { from },
                LinkDecision::Continue { new_replid },
                from - 1,
            ),
            PsyncDecision::FullResync { replid, offset, .. } => (
                ShipStart::FullSync {
                    offset,
                    snapshot: node.snapshot(),
                },
                LinkDecision::FullResync {
                    replid,
                    offset,
                    claim: psync::HistoryClaim {
                        promoted_in: match node.history_primary {
                            Some(h) if h == i => node.history_epoch,
                            _ => 0,
                        },
                        // The simulated nodes keep their histories across crashes.
                        succeeds: None,
                    },
                },
                offset,
            ),
        };
        let cfg = EndpointConfig::default();
        let Ok(shipper) = Shipper::create(conn, request.ring, &cfg, start) else {
            return;
        };
        let Ok((ring_ack, applied_word)) = shipper.adverts() else {
            return;
        };
        let now = sim.now;
        let links = &mut self.links[i];
        let acked = match accepted {
            LinkDecision::Continue { .. } => online_at,
            LinkDecision::FullResync { .. } => 0,
        };
        if links.acks.attach(r, acked, now).is_err() {
            return;
        }
        links.downstream.insert(
            r,
            Downstream {
                shipper,
                pace: ShipPace::new(pace_limits(), online_at, ms(now)),
            },
        );
        self.note(now, || format!("node {i} links replica {r}: {accepted:?}"));
        let bytes = LinkAccept {
            ring_ack,
            applied_word,
            decision: accepted,
        }
        .encode();
        self.send(
            sim,
            Endpoint::Node(i),
            Endpoint::Node(r),
            Msg::LinkAccept { attempt, bytes },
        );
    }

    /// A replica takes its primary's accept: checks a full sync may replace its data, then
    /// streams (continue) or waits for the snapshot.
    fn on_link_accept(&mut self, sim: &Sim, i: usize, p: usize, attempt: u64, bytes: &[u8]) {
        let now = sim.now;
        let Some(up) = self.links[i].upstream.as_mut() else {
            return;
        };
        if up.primary != p || up.attempt != attempt || up.accepted.is_some() {
            return;
        }
        let accept = match LinkAccept::decode(bytes) {
            Ok(a) => a,
            Err(e) => return self.drop_upstream(now, i, &e.to_string()),
        };
        let node = &mut self.nodes[i];
        if let LinkDecision::FullResync {
            replid,
            offset,
            claim,
        } = accept.decision
        {
            let mine = psync::HeldHistory {
                replid: node.ids.replid(),
                offset: node.offset(),
                primary: node.history_primary.map(|h| sim.nodes[h].id()),
                epoch: node.history_epoch,
            };
            let offer = psync::SyncOffer {
                by: Some(sim.nodes[p].id()),
                replid,
                offset,
                claim,
            };
            if let Err(reason) = psync::full_sync_allowed(mine, offer) {
                self.stats.syncs_refused += 1;
                return self.drop_upstream(now, i, &format!("full sync refused: {reason}"));
            }
        }
        if let Err(e) = up
            .link
            .connect_primary(accept.ring_ack, accept.applied_word)
        {
            return self.drop_upstream(now, i, &e.to_string());
        }
        if let LinkDecision::Continue { new_replid } = accept.decision {
            let processed = node.offset();
            psync::on_continue(&mut node.ids, new_replid, processed);
            node.history_primary = Some(p);
            node.history_epoch = primary_epoch(sim, i, p);
            up.synced = true;
            self.stats.partial_syncs += 1;
        }
        up.accepted = Some(accept.decision);
        up.pace.heard(ms(now));
    }

    /// Delivers one data message that arrived at node `to` (clients are handled by the
    /// caller). A message to a dead node, or across a partition, is lost.
    pub fn deliver_to_node(&mut self, sim: &Sim, from: Endpoint, to: usize, msg: Msg) {
        if !sim.nodes[to].alive || self.links[to].host.is_none() {
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
            (Endpoint::Node(r), Msg::LinkRequest { attempt, bytes }) => {
                self.on_link_request(sim, to, r, attempt, &bytes)
            }
            (Endpoint::Node(p), Msg::LinkAccept { attempt, bytes }) => {
                self.on_link_accept(sim, to, p, attempt, &bytes)
            }
            _ => {}
        }
    }

    fn request(&mut self, sim: &Sim, i: usize, client: usize, op: u64, key: Key, kind: OpKind) {
        let reply = |data: &mut DataPath, result| {
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
                if self.links[i].pending.len() >= PENDING_MAX {
                    self.stats.refused += 1;
                    return reply(self, OpResult::Refused);
                }
                let offset = n.write(key, value);
                self.links[i].pending.push((client, op, offset));
                self.note(sim.now, || {
                    format!("node {i} applies op {op} key {key}={value} at {offset}")
                });
                // As the ship thread wakes on new bytes.
                self.pump(sim, i);
            }
            OpKind::Read => {
                if n.last_write(key) > n.committed {
                    self.stats.refused += 1;
                    return reply(self, OpResult::Refused);
                }
                let value: Value = n.store.get(&key).copied().unwrap_or(0);
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
        let committed = self.nodes[i].committed;
        let links = &mut self.links[i];
        let (done, waiting): (Vec<_>, Vec<_>) = links
            .pending
            .drain(..)
            .partition(|&(_, _, offset)| offset <= committed);
        links.pending = waiting;
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

    /// Whether every replica streams from the primary its topology names.
    pub fn replicas_linked(&self, sim: &Sim) -> bool {
        (0..self.nodes.len()).all(|i| match role(sim, i) {
            Role::Replica(p) => self.links[i]
                .upstream
                .as_ref()
                .is_some_and(|u| u.primary == p && u.synced),
            _ => true,
        })
    }

    /// Where the replicas stand against the primaries their topologies name: `Ok(true)` when
    /// every live replica streams from its primary and holds its history to the last byte,
    /// `Ok(false)` while some still catch up, `Err` when one holds all the bytes (same
    /// history, same offset) but another store than its primary: replication diverged.
    pub fn converged(&self, sim: &Sim) -> Result<bool, String> {
        let mut all = true;
        for i in sim.live() {
            let Role::Replica(p) = role(sim, i) else {
                continue;
            };
            let (replica, primary) = (&self.nodes[i], &self.nodes[p]);
            let linked = self.links[i]
                .upstream
                .as_ref()
                .is_some_and(|u| u.primary == p && u.synced);
            let caught_up = linked
                && sim.nodes[p].alive
                && replica.ids.replid() == primary.ids.replid()
                && replica.offset() == primary.offset();
            if !caught_up {
                all = false;
                continue;
            }
            if replica.store != primary.store {
                return Err(format!(
                    "replica {i} holds {:?}, its primary {p} {:?}, both at offset {} of {}",
                    replica.store,
                    primary.store,
                    primary.offset(),
                    primary.ids.replid()
                ));
            }
        }
        Ok(all)
    }

    /// What gossip advertises as each node's replication offset.
    pub fn publish_offsets(&self, sim: &mut Sim) {
        for (i, n) in self.nodes.iter().enumerate() {
            sim.nodes[i].topology.myself_mut().repl_offset = n.offset();
        }
    }
}
