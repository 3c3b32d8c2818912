//! The timer (Redis's `clusterCron`): handshake timeouts, the heartbeat pings and their
//! retries, link state, PFAIL, and FAIL once enough reports are in.

use super::outgoing::PingKind;
use super::settings::{RANDOM_PING_EVERY_TICKS, RANDOM_PING_SAMPLE, TICK_MS};
use super::{Event, Gossip};
use crate::cluster::flags::bit;
use crate::cluster::node::LinkState;
use crate::cluster::slots::NodeIndex;
use crate::cluster::topology::Topology;
use rand::Rng;

/// How often state of nodes no longer in the topology is dropped: a linear scan per node,
/// so not every tick (every 10 s at the expected tick rate).
const PEER_SWEEP_EVERY_TICKS: u64 = 100;

/// Handshake windows one CLUSTER MEET gets before it is given up.
const MEET_ATTEMPTS_MAX: u8 = 5;

impl Gossip {
    pub(super) fn tick(&mut self, now_ms: u64, t: &mut Topology) {
        // The runtime may tick more often than TICK_MS (a short node timeout wants finer
        // failure detection); the periodic chores still run per TICK_MS of time.
        let period = now_ms / TICK_MS;
        let new_period = self.last_tick_period != Some(period);
        self.last_tick_period = Some(period);
        if new_period {
            self.ticks += 1;
        }
        self.expire_handshakes(now_ms, t);
        if new_period && self.ticks.is_multiple_of(RANDOM_PING_EVERY_TICKS) {
            self.ping_random(now_ms, t);
        }
        if new_period && self.ticks.is_multiple_of(PEER_SWEEP_EVERY_TICKS) {
            // Nodes removed from the topology elsewhere (CLUSTER FORGET) leave state here.
            self.peers.retain(|id, _| t.index_of(id).is_some());
            // Echoes older than any lease need no accounting (their newest basis stays in
            // the ledger's floor).
            self.echoes.prune(now_ms, 2 * self.settings.node_timeout_ms);
            self.old_echo_basis = None;
        }
        let timeout = self.settings.node_timeout_ms;
        let half = self.settings.ping_interval_ms();
        let heartbeat = self.settings.heartbeat_ms();
        let mut newly_suspected = false;
        for i in 0..t.nodes.len() as NodeIndex {
            let node = &t.nodes[i as usize];
            if node.is_myself() {
                continue;
            }
            let id = node.id;
            let addr = node.bus_addr.clone();
            let handshake = node.flags.has(bit::HANDSHAKE);
            let ping_sent = node.ping_sent;
            let pong_received = node.pong_received;
            let peer = self.peer(id);
            let (data_received_ms, last_ping_send_ms) =
                (peer.data_received_ms, peer.last_ping_send_ms);
            if handshake {
                if now_ms.saturating_sub(last_ping_send_ms) >= self.settings.ping_retry_ms {
                    self.send_ping(now_ms, t, &addr, Some(i), PingKind::Meet);
                }
                continue;
            }
            if addr.is_empty() {
                // A member we cannot reach (say, loaded from a Redis nodes.conf): Redis
                // shows such nodes as `noaddr` until someone tells where they are.
                let node = &mut t.nodes[i as usize];
                if !node.flags.has(bit::NOADDR) {
                    node.flags.set(bit::NOADDR, true);
                    self.save = true;
                }
                continue;
            }
            let since_data = now_ms.saturating_sub(data_received_ms);
            if ping_sent != 0 && now_ms.saturating_sub(ping_sent) > half && since_data > half {
                t.nodes[i as usize].link = LinkState::Disconnected;
                // Both "links" are down (Redis frees the TCP link here and makes a new one).
                let peer = self.peer(id);
                peer.link_to_since_ms = 0;
                peer.link_from_since_ms = 0;
                // Redis reconnects to the node's ip:cport; here the bus address may have
                // moved with a restart: ask the node's bus port where it is now.
                self.rediscover(now_ms, t, i);
            }
            // Heartbeat when due, or a retry of a ping still unanswered.
            let due = ping_sent == 0 && now_ms.saturating_sub(pong_received) > heartbeat;
            let retry = ping_sent != 0
                && now_ms.saturating_sub(last_ping_send_ms) >= self.settings.ping_retry_ms;
            if due || retry {
                self.send_ping(now_ms, t, &addr, Some(i), PingKind::Ping);
            }
            let ping_sent = t.nodes[i as usize].ping_sent;
            if ping_sent != 0 {
                // Silence is counted from the last message of any kind (heartbeats flow both
                // ways every lease/2), not from the unanswered ping as Redis does: that ping
                // left up to a heartbeat after the node went quiet, and counting from it
                // would add that much to every failover. Before anything arrived at all,
                // from the ping.
                let silence = if data_received_ms == 0 {
                    now_ms.saturating_sub(ping_sent)
                } else {
                    since_data
                };
                let node = &mut t.nodes[i as usize];
                if silence > timeout && !node.flags.has(bit::PFAIL) && !node.flags.has(bit::FAIL) {
                    node.flags.set(bit::PFAIL, true);
                    self.event(Event::PFail { id });
                    newly_suspected = true;
                }
            }
            if t.nodes[i as usize].flags.has(bit::PFAIL) {
                self.mark_failing_if_needed(now_ms, t, i);
            }
        }
        if newly_suspected {
            self.ping_everyone(now_ms, t);
        }
        self.ping_handoff_peers(now_ms, t);
    }

    /// A promoted primary waiting out its hand-off asks the peers that do not count yet
    /// every tick (`Gossip::handoff_pending`); a ping still unanswered keeps its place as
    /// the first one for failure detection.
    fn ping_handoff_peers(&mut self, now_ms: u64, t: &mut Topology) {
        let interval = self.settings.tick_interval_ms();
        for i in self.handoff_pending(now_ms, t) {
            let node = &t.nodes[i as usize];
            let last = self.peers.get(&node.id).map_or(0, |p| p.last_ping_send_ms);
            if now_ms.saturating_sub(last) >= interval && !node.bus_addr.is_empty() {
                let addr = node.bus_addr.clone();
                self.send_ping(now_ms, t, &addr, Some(i), PingKind::Ping);
            }
        }
    }

    /// The topology version moved (a committed change applied here): every reachable node
    /// gets a ping now carrying it, so that a promoted primary's hand-off (`quorum.rs`,
    /// counted from when peers advertise the new version) starts at once rather than at
    /// their next heartbeats. At most one such round per tick interval (a reshard commits
    /// thousands of changes in a row). Returns the sends.
    pub fn announce_version(&mut self, now_ms: u64, t: &mut Topology) -> Vec<super::Action> {
        let interval = self.settings.tick_interval_ms();
        if now_ms.saturating_sub(self.last_announce_ms) >= interval {
            self.last_announce_ms = now_ms;
            self.ping_everyone(now_ms, t);
        }
        std::mem::take(&mut self.out)
    }

    /// A node just suspected: every other reachable node gets a ping now, whose gossip
    /// section carries the suspicion (PFAIL nodes are always gossiped), so the failure
    /// reports that make it FAIL gather in one round trip instead of over the next
    /// heartbeats (Redis waits for them; failover time is most of what this saves).
    fn ping_everyone(&mut self, now_ms: u64, t: &mut Topology) {
        let targets: Vec<(NodeIndex, String)> = (0..t.nodes.len() as NodeIndex)
            .filter_map(|j| {
                let n = &t.nodes[j as usize];
                let skip = n.is_myself()
                    || n.bus_addr.is_empty()
                    || n.flags.has(bit::HANDSHAKE)
                    || n.flags.has(bit::PFAIL)
                    || n.flags.has(bit::FAIL);
                (!skip).then(|| (j, n.bus_addr.clone()))
            })
            .collect();
        for (j, addr) in targets {
            self.send_ping(now_ms, t, &addr, Some(j), PingKind::Ping);
        }
    }

    /// Handshakes unanswered for too long are forgotten, except that one CLUSTER MEET asked
    /// for gets [`MEET_ATTEMPTS_MAX`] windows in all: on a loaded machine the first
    /// exchange on a fresh fabric connection can take most of a second each way, and the
    /// node met already knows this one from the MEET, so giving up would leave the pair
    /// half met for good (gossip from a node we do not know is not taken).
    fn expire_handshakes(&mut self, now_ms: u64, t: &mut Topology) {
        let limit = self.settings.handshake_timeout_ms();
        for n in t.nodes.iter().filter(|n| n.flags.has(bit::HANDSHAKE)) {
            if let Some(p) = self.peers.get_mut(&n.id) {
                let due = now_ms.saturating_sub(p.created_ms) > limit;
                if due && p.met_by_command && p.meet_attempts + 1 < MEET_ATTEMPTS_MAX {
                    p.meet_attempts += 1;
                    p.created_ms = now_ms;
                    tracing::debug!(addr = %n.bus_addr, attempt = p.meet_attempts + 1, "meet retried");
                }
            }
        }
        let expired: Vec<NodeIndex> = t
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                n.flags.has(bit::HANDSHAKE)
                    && now_ms.saturating_sub(self.peers.get(&n.id).map_or(0, |p| p.created_ms))
                        > limit
            })
            .map(|(i, _)| i as NodeIndex)
            .collect();
        for i in expired.into_iter().rev() {
            if let Some(n) = t.remove_node(i) {
                self.peers.remove(&n.id);
                self.event(Event::HandshakeTimedOut { addr: n.bus_addr });
            }
        }
    }

    /// Out of a few random members with no ping pending, the one heard from least recently.
    fn ping_random(&mut self, now_ms: u64, t: &mut Topology) {
        let n = t.nodes.len();
        let mut best: Option<NodeIndex> = None;
        for _ in 0..RANDOM_PING_SAMPLE {
            let i = self.rng.gen_range(0..n) as NodeIndex;
            let node = &t.nodes[i as usize];
            if node.is_myself()
                || node.flags.has(bit::HANDSHAKE)
                || node.ping_sent != 0
                || node.bus_addr.is_empty()
            {
                continue;
            }
            if best.is_none_or(|b| node.pong_received < t.nodes[b as usize].pong_received) {
                best = Some(i);
            }
        }
        if let Some(i) = best {
            let addr = t.nodes[i as usize].bus_addr.clone();
            self.send_ping(now_ms, t, &addr, Some(i), PingKind::Ping);
        }
    }
}
