//! What an incoming message does (Redis's `clusterProcessPacket`). The sender is named by its
//! header; the MAC of the envelope (checked before this) is what makes that name trusted, so
//! a MEET adds the sender under its real id directly instead of by a handshake.

use super::convert::{is_voting, parse_id};
use super::outgoing::{stat_index, PingKind};
use super::{Action, Event, Gossip};
use crate::cluster::flags::bit;
use crate::cluster::id::NodeId;
use crate::cluster::node::{ClusterNode, LinkState};
use crate::cluster::slots::NodeIndex;
use crate::cluster::topology::Topology;
use proto::bus::{Body, BusMessage, GossipEntry, Header};

impl Gossip {
    pub(super) fn receive(&mut self, now_ms: u64, from: &str, msg: BusMessage, t: &mut Topology) {
        let (Some(h), Some(body)) = (msg.header, msg.body) else {
            return;
        };
        let Some(sender_id) = parse_id(&h.sender) else {
            return;
        };
        t.stats.received[stat_index(&body)] += 1;
        if sender_id == t.myself().id {
            return;
        }
        let is_meet = matches!(body, Body::Meet(_));
        // Handshake nodes carry made-up ids, so a match here is always a member.
        let mut sender = t.index_of(&sender_id);
        if let Some(i) = sender {
            self.heard_from(now_ms, t, i, &h);
        }
        match body {
            Body::Ping(g) | Body::Meet(g) if is_meet || sender.is_some() => {
                if sender.is_none() {
                    sender = self.add_sender(now_ms, t, from, &h, sender_id);
                }
                if sender.is_some() {
                    self.stamps_from(now_ms, sender_id, &h, &g);
                }
                self.send_ping(now_ms, t, from, sender, PingKind::Pong);
                if let Some(i) = sender {
                    self.apply_header(t, i, from, &h);
                    self.process_gossip(now_ms, t, i, &g.entries);
                }
            }
            // A PING from a stranger is answered (that is how its handshake completes)
            // but changes nothing here.
            Body::Ping(_) | Body::Meet(_) => {
                self.send_ping(now_ms, t, from, None, PingKind::Pong);
            }
            Body::Pong(g) => {
                let i = match sender {
                    Some(_) => {
                        self.drop_duplicate_handshake(t, from, sender_id);
                        t.index_of(&sender_id)
                    }
                    None => self.complete_handshake(now_ms, t, from, &h, sender_id),
                };
                let Some(i) = i else { return };
                self.heard_from(now_ms, t, i, &h);
                self.stamps_from(now_ms, sender_id, &h, &g);
                self.pong_from(now_ms, t, i);
                self.apply_header(t, i, from, &h);
                self.process_gossip(now_ms, t, i, &g.entries);
            }
            Body::Fail(f) => {
                if sender.is_some() {
                    if let Some(failed) = parse_id(&f.node_id).and_then(|id| t.index_of(&id)) {
                        self.mark_failed_by_message(now_ms, t, failed);
                    }
                }
            }
            Body::Update(u) => {
                // In a topology group, slots move by the log only.
                if sender.is_some() && !self.consensus {
                    self.apply_update(t, &u);
                }
            }
            body @ (Body::Publish(_)
            | Body::PublishShard(_)
            | Body::Raft(_)
            | Body::RaftPropose(_)) => {
                if sender.is_some() {
                    self.out.push(Action::Deliver {
                        from: sender_id,
                        body,
                    });
                }
            }
        }
    }

    /// Any message from a member: it is alive and linked, and epochs only move forward.
    fn heard_from(&mut self, now_ms: u64, t: &mut Topology, i: NodeIndex, h: &Header) {
        let node = &mut t.nodes[i as usize];
        node.link = LinkState::Connected;
        let id = node.id;
        let is_primary_claim = h.flags & bit::MASTER as u32 != 0;
        let epoch_is_logged = self.consensus && t.consensus.nodes.contains(&node.id);
        if is_primary_claim && !epoch_is_logged && h.config_epoch > node.config_epoch {
            node.config_epoch = h.config_epoch;
            self.save = true;
        }
        if self.peers.get(&id).map(|p| p.topology_version) != Some(h.topology_version) {
            // Who is known at which version decides this node's own echo claim.
            self.old_echo_basis = None;
        }
        let peer = self.peer(id);
        peer.data_received_ms = now_ms;
        if peer.link_from_since_ms == 0 {
            peer.link_from_since_ms = now_ms;
        }
        peer.topology_version = h.topology_version;
        peer.saw_version(h.topology_version, now_ms);
        peer.claimed_slots.clear();
        peer.claimed_slots
            .extend(h.slots.iter().map(|r| (r.start as u16, r.end as u16)));
        peer.claimed_primary = if h.flags & bit::SLAVE as u32 != 0 {
            parse_id(&h.primary)
        } else {
            None
        };
        if h.current_epoch > t.current_epoch {
            t.current_epoch = h.current_epoch;
            self.save = true;
        }
    }

    /// The stamps of a member's PING, PONG or MEET: its own, to echo back, the echo of
    /// ours, which the serving lease counts from, and its word that its echoes below its
    /// version have run out (the fast hand-off, `quorum.rs`). An echo from this node's
    /// future is not one of its stamps (a clock stepped back since): ignored.
    fn stamps_from(&mut self, now_ms: u64, id: NodeId, h: &Header, g: &proto::bus::Gossip) {
        let lease = self.lease_ms();
        let peer = self.peer(id);
        peer.stamp_received_ms = g.stamp_ms;
        peer.stamp_arrived_ms = now_ms;
        if g.echo_ms <= now_ms && g.echo_ms > peer.echo_received_ms {
            peer.echo_received_ms = g.echo_ms;
        }
        if g.old_echo_age_ms >= lease {
            peer.echoes_expired_below = peer.echoes_expired_below.max(h.topology_version);
        }
    }

    /// A MEET from an unknown node: it joins with what its header says.
    fn add_sender(
        &mut self,
        now_ms: u64,
        t: &mut Topology,
        from: &str,
        h: &Header,
        id: NodeId,
    ) -> Option<NodeIndex> {
        let mut node = ClusterNode::new(id, id);
        node.bus_addr = from.to_string();
        node.link = LinkState::Connected;
        let i = t.add_node(node).ok()?;
        *self.peer(id) = super::peer::Peer {
            data_received_ms: now_ms,
            created_ms: now_ms,
            ..Default::default()
        };
        self.save = true;
        self.heard_from(now_ms, t, i, h);
        self.event(Event::NodeJoined {
            id,
            addr: from.to_string(),
        });
        Some(i)
    }

    /// A PONG from an address we are handshaking with: the node gets its real id.
    fn complete_handshake(
        &mut self,
        now_ms: u64,
        t: &mut Topology,
        from: &str,
        h: &Header,
        id: NodeId,
    ) -> Option<NodeIndex> {
        let i = handshake_at(t, from, h)?;
        let old = t.nodes[i as usize].id;
        let by_command = self.peers.get(&old).is_some_and(|p| p.met_by_command);
        if !by_command && self.blacklist.contains(&id, now_ms) {
            // Gossip that still named the node started this before FORGET reached us.
            t.remove_node(i);
            self.peers.remove(&old);
            self.event(Event::ForgottenNodeRefused { id });
            return None;
        }
        let node = &mut t.nodes[i as usize];
        node.id = id;
        node.flags.set(bit::HANDSHAKE, false);
        node.flags.set(bit::MEET, false);
        node.ping_sent = 0;
        node.link = LinkState::Connected;
        let addr = node.bus_addr.clone();
        let mut peer = self.peers.remove(&old).unwrap_or_default();
        peer.data_received_ms = now_ms;
        self.peers.insert(id, peer);
        self.save = true;
        self.event(Event::NodeJoined { id, addr });
        Some(i)
    }

    /// A member answered at an address we were also handshaking with: the handshake was
    /// for a node we know already.
    fn drop_duplicate_handshake(&mut self, t: &mut Topology, from: &str, id: NodeId) {
        let Some(i) = t.index_of(&id) else { return };
        let addr = t.nodes[i as usize].bus_addr.clone();
        let dups: Vec<NodeIndex> = t
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                n.flags.has(bit::HANDSHAKE) && (n.bus_addr == from || n.bus_addr == addr)
            })
            .map(|(j, _)| j as NodeIndex)
            .collect();
        for j in dups.into_iter().rev() {
            if let Some(n) = t.remove_node(j) {
                self.peers.remove(&n.id);
            }
        }
    }

    fn pong_from(&mut self, now_ms: u64, t: &mut Topology, i: NodeIndex) {
        let node = &mut t.nodes[i as usize];
        node.pong_received = now_ms;
        node.ping_sent = 0;
        let id = node.id;
        if node.flags.has(bit::PFAIL) {
            node.flags.set(bit::PFAIL, false);
            self.event(Event::PFailCleared { id });
        } else if node.flags.has(bit::FAIL) {
            self.clear_failure_if_needed(now_ms, t, i);
        }
    }

    /// What the header says about its sender: address, role, slots, epochs.
    fn apply_header(&mut self, t: &mut Topology, i: NodeIndex, from: &str, h: &Header) {
        let node = &mut t.nodes[i as usize];
        if let Some(r) = &h.record {
            let addr = std::str::from_utf8(&r.bus_addr).unwrap_or("");
            let addr = if addr.is_empty() { from } else { addr };
            let (port, cport) = (r.port as u16, r.cport as u16);
            if node.bus_addr != addr
                || node.port != port
                || node.cport != cport
                || (!r.ip.is_empty() && node.ip != r.ip)
                || node.hostname != r.hostname
            {
                node.bus_addr = addr.to_string();
                node.flags.set(bit::NOADDR, false);
                node.port = port;
                node.cport = cport;
                if !r.ip.is_empty() {
                    node.ip = r.ip.clone();
                }
                node.hostname = r.hostname.clone();
                self.save = true;
            }
            if let Some(shard) = parse_id(&r.shard_id) {
                if node.shard != shard {
                    node.shard = shard;
                    self.save = true;
                }
            }
            node.repl_offset = r.repl_offset;
            node.repl_id = parse_id(&r.repl_id);
            node.fenced = r.fenced;
            let id = node.id;
            self.saw_incarnation(id, r.incarnation);
        }
        if self.consensus {
            // Roles of the group's nodes come from the log; a node outside it is shown as it
            // says it is until the leader takes it in.
            if !t.consensus.nodes.contains(&t.nodes[i as usize].id) {
                self.apply_role(t, i, h);
            }
            return;
        }
        self.apply_role(t, i, h);
        self.apply_claims(t, i, from, h);
        self.handle_epoch_collision(t, i);
    }

    /// Records the incarnation a member's header named; a change from one it named before
    /// is a restart (logged; replication links read it from the peer view).
    fn saw_incarnation(&mut self, id: NodeId, incarnation: u64) {
        if incarnation == 0 {
            return;
        }
        let peer = self.peer(id);
        let before = std::mem::replace(&mut peer.incarnation, incarnation);
        if before != 0 && before != incarnation {
            self.event(Event::PeerRestarted { id, incarnation });
        }
    }

    fn apply_role(&mut self, t: &mut Topology, i: NodeIndex, h: &Header) {
        let says_replica = h.flags & bit::SLAVE as u32 != 0;
        let primary = parse_id(&h.primary);
        let node = &mut t.nodes[i as usize];
        let id = node.id;
        if says_replica {
            let Some(p) = primary else { return };
            if node.is_replica() && node.primary == Some(p) {
                return;
            }
            let was_primary = node.is_primary();
            node.flags.set(bit::MASTER, false);
            node.flags.set(bit::SLAVE, true);
            node.primary = Some(p);
            if was_primary {
                // A primary turned replica serves no slots of its own any more.
                for (start, end) in t.slots.ranges_of(i) {
                    for s in start..=end {
                        t.slots.set_owner(s, None);
                    }
                }
            }
        } else if h.flags & bit::MASTER as u32 != 0 && !node.is_primary() {
            node.flags.set(bit::SLAVE, false);
            node.flags.set(bit::MASTER, true);
            node.primary = None;
        } else {
            return;
        }
        self.save = true;
        self.event(Event::RoleChanged { id });
    }

    /// The gossip section: failure reports from voting primaries, and nodes to meet.
    fn process_gossip(
        &mut self,
        now_ms: u64,
        t: &mut Topology,
        sender: NodeIndex,
        entries: &[GossipEntry],
    ) {
        let voting = is_voting(t, sender);
        let sender_id = t.nodes[sender as usize].id;
        for e in entries {
            let Some(id) = parse_id(&e.node_id) else {
                continue;
            };
            let addr = String::from_utf8_lossy(&e.bus_addr).into_owned();
            match t.index_of(&id) {
                Some(n) => {
                    if voting && n != t.myself_index() {
                        if e.flags & (bit::PFAIL | bit::FAIL) as u32 != 0 {
                            self.peer(id).add_report(sender_id, now_ms);
                            self.mark_failing_if_needed(now_ms, t, n);
                        } else {
                            self.peer(id).remove_report(&sender_id);
                        }
                    }
                    // A failing node may have come back elsewhere (Redis updates the
                    // address of a node whose link is down).
                    let node = &mut t.nodes[n as usize];
                    if node.is_failing()
                        && !addr.is_empty()
                        && node.bus_addr != addr
                        && e.flags & bit::NOADDR as u32 == 0
                    {
                        node.bus_addr = addr;
                        node.flags.set(bit::NOADDR, false);
                        self.save = true;
                    }
                }
                None => {
                    // A node forgotten less than a minute ago stays out (Redis's
                    // blacklist), whoever still gossips about it.
                    if e.flags & bit::NOADDR as u32 == 0
                        && !addr.is_empty()
                        && !self.blacklist.contains(&id, now_ms)
                    {
                        self.start_handshake(now_ms, t, &addr);
                    }
                }
            }
        }
    }

    /// CLUSTER MEET: handshake with `addr` unless a node there is known or being met.
    pub(super) fn meet(&mut self, now_ms: u64, addr: &str, t: &mut Topology) {
        if let Some(id) = self.start_handshake(now_ms, t, addr) {
            self.peer(id).met_by_command = true;
        }
    }

    /// Starts a handshake with `addr`; returns the handshake node's made-up id.
    pub(super) fn start_handshake(
        &mut self,
        now_ms: u64,
        t: &mut Topology,
        addr: &str,
    ) -> Option<NodeId> {
        if addr.is_empty() || t.nodes.iter().any(|n| n.bus_addr == addr) {
            return None;
        }
        let id = NodeId::random(&mut self.rng);
        let mut node = ClusterNode::new(id, id);
        node.flags.set(bit::HANDSHAKE, true);
        node.flags.set(bit::MEET, true);
        node.bus_addr = addr.to_string();
        let i = t.add_node(node).ok()?;
        *self.peer(id) = super::peer::Peer {
            created_ms: now_ms,
            ..Default::default()
        };
        self.event(Event::HandshakeStarted {
            addr: addr.to_string(),
        });
        self.send_ping(now_ms, t, addr, Some(i), PingKind::Meet);
        Some(id)
    }
}

/// The handshake node at the address a PONG came from (or the one its header names).
fn handshake_at(t: &Topology, from: &str, h: &Header) -> Option<NodeIndex> {
    let named = h
        .record
        .as_ref()
        .map(|r| String::from_utf8_lossy(&r.bus_addr).into_owned())
        .unwrap_or_default();
    t.nodes
        .iter()
        .position(|n| {
            n.flags.has(bit::HANDSHAKE)
                && (n.bus_addr == from || (!named.is_empty() && n.bus_addr == named))
        })
        .map(|i| i as NodeIndex)
}
