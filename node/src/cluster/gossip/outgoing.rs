//! Building and queueing this node's messages: the header every message carries, the
//! gossip section of PING/PONG/MEET (§2.4), FAIL and UPDATE.

use super::convert::{owners, slots_of};
use super::{Action, Gossip};
use crate::cluster::flags::bit;
use crate::cluster::id::NodeId;
use crate::cluster::slots::NodeIndex;
use crate::cluster::topology::{Health, Topology};
use proto::bus::{Body, BusMessage, Fail, GossipEntry, Header, NodeRecord, Update};
use rand::Rng;

/// Flags a header or gossip entry carries: the role and liveness bits, never MYSELF or MEET
/// (which only mean something on the node that holds them).
const WIRE_FLAGS: u16 =
    bit::MASTER | bit::SLAVE | bit::PFAIL | bit::FAIL | bit::NOADDR | bit::NOFAILOVER;

/// Which of the gossip-carrying kinds to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PingKind {
    Ping,
    Pong,
    Meet,
}

/// CLUSTER INFO's counter index of a body (bus type codes, protocols.md §2.3).
pub fn stat_index(body: &Body) -> usize {
    match body {
        Body::Ping(_) => 0,
        Body::Pong(_) => 1,
        Body::Meet(_) => 2,
        Body::Fail(_) => 3,
        Body::Publish(_) => 4,
        Body::Update(_) => 7,
        Body::PublishShard(_) => 10,
        // Raft has no Redis counterpart; it is counted with module messages.
        Body::Raft(_) | Body::RaftPropose(_) => 9,
    }
}

impl Gossip {
    pub(super) fn header(&self, t: &Topology) -> Header {
        let me = t.myself();
        let index = t.myself_index();
        // A replica advertises its primary's slots and epoch (Redis does the same).
        let slot_owner = match me.primary.and_then(|p| t.index_of(&p)) {
            Some(p) if me.is_replica() => p,
            _ => index,
        };
        Header {
            sender: me.id.to_string(),
            current_epoch: t.current_epoch,
            config_epoch: t.node_epoch(me),
            topology_version: self.topology_version,
            flags: (me.flags.0 & WIRE_FLAGS) as u32,
            primary: match me.primary {
                Some(p) if me.is_replica() => p.to_string(),
                _ => String::new(),
            },
            slots: slots_of(t, slot_owner),
            record: Some(NodeRecord {
                bus_addr: me.bus_addr.clone().into_bytes(),
                ip: me.ip.clone(),
                port: me.port as u32,
                rdma_port: self.settings.rdma_port as u32,
                hostname: me.hostname.clone(),
                shard_id: me.shard.to_string(),
                repl_offset: me.repl_offset,
                cport: me.cport as u32,
                incarnation: self.incarnation,
                repl_id: me.repl_id.map(|id| id.to_string()).unwrap_or_default(),
                fenced: me.fenced,
            }),
            state_ok: t.state() == Health::Ok,
        }
    }

    fn entry(t: &Topology, index: NodeIndex) -> Option<GossipEntry> {
        let n = t.node(index)?;
        Some(GossipEntry {
            node_id: n.id.to_string(),
            ping_sent: n.ping_sent,
            pong_received: n.pong_received,
            ip: n.ip.clone(),
            port: n.port as u32,
            cport: n.cport as u32,
            flags: (n.flags.0 & WIRE_FLAGS) as u32,
            bus_addr: n.bus_addr.clone().into_bytes(),
        })
    }

    /// Redis's choice (§2.4): max(3, N/10) random nodes, at most N-2, skipping myself,
    /// handshakes, nodes without an address, suspected nodes (added after) and unreachable
    /// nodes without slots; then every PFAIL node, so failure reports spread.
    fn gossip_section(&mut self, t: &Topology, to: Option<NodeIndex>) -> Vec<GossipEntry> {
        let n = t.nodes.len();
        let wanted = (n / 10).max(3).min(n.saturating_sub(2));
        let owns = owners(t);
        let mut chosen: Vec<NodeIndex> = Vec::with_capacity(wanted);
        // A bounded number of draws, as Redis: 3 per wanted entry.
        for _ in 0..wanted * 3 {
            if chosen.len() >= wanted {
                break;
            }
            let i = self.rng.gen_range(0..n) as NodeIndex;
            let node = &t.nodes[i as usize];
            let skip = i == t.myself_index()
                || Some(i) == to
                || node.flags.has(bit::PFAIL)
                || node.flags.has(bit::HANDSHAKE)
                || node.flags.has(bit::NOADDR)
                || node.bus_addr.is_empty()
                || (node.link == crate::cluster::node::LinkState::Disconnected
                    && !owns[i as usize])
                || chosen.contains(&i);
            if !skip {
                chosen.push(i);
            }
        }
        for (i, node) in t.nodes.iter().enumerate() {
            let i = i as NodeIndex;
            if node.flags.has(bit::PFAIL) && !node.flags.has(bit::HANDSHAKE) && !chosen.contains(&i)
            {
                chosen.push(i);
            }
        }
        chosen
            .into_iter()
            .filter_map(|i| Self::entry(t, i))
            .collect()
    }

    /// Queues `msg` to `to` and counts it.
    pub(super) fn send(&mut self, t: &mut Topology, to: &str, msg: BusMessage) {
        if to.is_empty() {
            return;
        }
        if let Some(body) = &msg.body {
            t.stats.sent[stat_index(body)] += 1;
        }
        self.out.push(Action::Send {
            to: to.to_string(),
            msg: Box::new(msg),
        });
    }

    /// A PING, PONG or MEET to a fabric address; `to` is the node's index if it is known
    /// (its own entry is left out of the gossip).
    pub(super) fn send_ping(
        &mut self,
        now_ms: u64,
        t: &mut Topology,
        addr: &str,
        to: Option<NodeIndex>,
        kind: PingKind,
    ) {
        let to_id = to.map(|i| t.nodes[i as usize].id);
        let (echo_ms, basis_ms) = to_id
            .and_then(|id| self.peers.get(&id))
            .map_or((0, 0), |p| (p.stamp_received_ms, p.stamp_arrived_ms));
        let gossip = proto::bus::Gossip {
            entries: self.gossip_section(t, to),
            stamp_ms: now_ms,
            echo_ms,
            old_echo_age_ms: self.old_echo_age(now_ms),
        };
        if let Some(id) = to_id.filter(|_| echo_ms != 0) {
            self.echoes.record(id, self.topology_version, basis_ms);
        }
        let body = match kind {
            PingKind::Ping => Body::Ping(gossip),
            PingKind::Pong => Body::Pong(gossip),
            PingKind::Meet => Body::Meet(gossip),
        };
        let msg = self.message(t, body);
        if kind != PingKind::Pong {
            if let Some(i) = to {
                let node = &mut t.nodes[i as usize];
                if node.ping_sent == 0 {
                    node.ping_sent = now_ms;
                }
                let id = node.id;
                let peer = self.peer(id);
                peer.last_ping_send_ms = now_ms;
                if peer.link_to_since_ms == 0 {
                    peer.link_to_since_ms = now_ms;
                }
            }
        }
        self.send(t, addr, msg);
    }

    /// The `old_echo_age_ms` of a message at this node's version now (see `echo_ledger`),
    /// its basis computed once per input and version.
    fn old_echo_age(&mut self, now_ms: u64) -> u64 {
        let version = self.topology_version;
        let basis = match self.old_echo_basis {
            Some((v, basis)) if v == version => basis,
            _ => {
                let peers = &self.peers;
                let basis = self
                    .echoes
                    .old_echo_basis(version, |id| peers.get(id).map(|p| p.topology_version));
                self.old_echo_basis = Some((version, basis));
                basis
            }
        };
        now_ms.saturating_sub(basis)
    }

    /// Sends to every member but myself (handshakes are not members yet).
    pub(super) fn broadcast(&mut self, t: &mut Topology, body: Body) {
        let msg = self.message(t, body);
        let targets: Vec<String> = t
            .nodes
            .iter()
            .filter(|n| !n.is_myself() && !n.flags.has(bit::HANDSHAKE))
            .map(|n| n.bus_addr.clone())
            .collect();
        for addr in targets {
            self.send(t, &addr, msg.clone());
        }
    }

    pub(super) fn broadcast_fail(&mut self, t: &mut Topology, failed: NodeId) {
        self.broadcast(
            t,
            Body::Fail(Fail {
                node_id: failed.to_string(),
            }),
        );
    }

    /// Tells the node at `addr` who really owns slots it claims (§2.9).
    pub(super) fn send_update(&mut self, t: &mut Topology, addr: &str, owner: NodeIndex) {
        let Some(node) = t.node(owner) else { return };
        let body = Body::Update(Update {
            node_id: node.id.to_string(),
            config_epoch: node.config_epoch,
            slots: slots_of(t, owner),
        });
        let msg = self.message(t, body);
        self.send(t, addr, msg);
    }
}
