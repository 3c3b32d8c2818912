//! The cluster core (gossip and the topology agent) on the bus thread: opens and reassembles
//! what arrives, feeds the core under the topology's write lock, seals and fragments what it
//! sends, saves the config when it says so (after the lock is released), answers proposals,
//! and publishes the node's standing in the topology group for commands to read.

use crate::cluster::agent::restart_fence::{self, Fence, Lifted, Verdict};
use crate::cluster::consensus::TopologyCommand;
use crate::cluster::core::{ClusterCore, CoreAction, CoreInput};
use crate::cluster::gossip::{Event, Input};
use crate::cluster::shared::GroupView;
use crate::cluster::topology::Topology;
use crate::cluster::transport::runtime::{BusCore, Outbox, ProposalReply};
use crate::cluster::{Cluster, NodeId};
use crate::node_state::pubsub::Kind;
use crate::server::Server;
use bus::EndpointAddr;
use proto::bus::fragment::{Reassembler, ReassemblyLimits};
use proto::bus::{from_datagram, to_datagrams, Body, BusMessage, Publish};
use std::sync::Arc;

/// The bus is started only for a node in cluster mode (node_bus.rs), so `server.cluster` is set.
const IN_CLUSTER_MODE: &str = "the bus runs only in cluster mode";

pub struct GossipDriver {
    server: Arc<Server>,
    core: ClusterCore<ProposalReply>,
    secret: Vec<u8>,
    /// The cluster's secret generation `secret` was read at.
    secret_seen: u64,
    reassembler: Reassembler<String>,
    datagram_max: usize,
    /// Messages sent so far: each send's fragments carry a distinct id.
    sends: u64,
    lookups: crate::cluster::transport::lookups::Lookups,
    hidden: super::hidden_sync::HiddenSync,
}

impl GossipDriver {
    pub fn new(server: Arc<Server>, core: ClusterCore<ProposalReply>, secret: Vec<u8>) -> Self {
        if let Some(cluster) = &server.cluster {
            // What commands wait at most for a lapsed lease (`redirect`).
            cluster.set_lease_ms(core.gossip.lease_ms());
            cluster.set_incarnation(core.gossip.incarnation());
        }
        // Slots a restart finds mid-import (or aborted and not yet dropped) hide before the
        // first step, not at it.
        let mut hidden = super::hidden_sync::HiddenSync::default();
        if let Some(cluster) = &server.cluster {
            hidden.after_step(&cluster.topology.read(), &server.keyspace);
        }
        GossipDriver {
            server,
            core,
            secret,
            secret_seen: 0,
            reassembler: Reassembler::new(ReassemblyLimits::default()),
            datagram_max: 0,
            sends: 0,
            lookups: Default::default(),
            hidden,
        }
    }

    /// Re-reads the secret when CLUSTER SET-SECRET replaced it.
    fn refresh_secret(&mut self) {
        let generation = self.cluster().secret_generation();
        if generation != self.secret_seen {
            self.secret = self
                .server
                .config
                .read()
                .cluster
                .secret
                .clone()
                .into_bytes();
            self.secret_seen = generation;
        }
    }

    fn cluster(&self) -> &Cluster {
        self.server.cluster.as_ref().expect(IN_CLUSTER_MODE)
    }

    fn step(&mut self, now_ms: u64, input: Input, out: &mut Outbox) {
        self.run(now_ms, CoreInput::Gossip(input), out);
    }

    fn run(&mut self, now_ms: u64, input: CoreInput<ProposalReply>, out: &mut Outbox) {
        let (actions, view, serving_until, lifted) = {
            // Field by field, so the topology guard and the core borrow apart.
            let cluster = self.server.cluster.as_ref().expect(IN_CLUSTER_MODE);
            let mut t = cluster.topology.write();
            // Gossip headers carry it: the leader promotes the replica that holds the most.
            // A fenced node says the history it acknowledged and how much of it it loaded.
            let fence = cluster.restart_fence();
            let (replid, offset) = match fence {
                Some(f) => (f.replid, f.offset),
                None => self.server.replication.history(),
            };
            let me = t.myself_mut();
            me.repl_offset = offset;
            me.repl_id = Some(replid);
            me.fenced = fence.is_some();
            // Read every step (one atomic load), so CONFIG SET repl-sync-acks reaches the
            // failover rule without a restart.
            let acks = self
                .server
                .hot
                .repl_sync_acks
                .load(std::sync::atomic::Ordering::Relaxed);
            self.core.agent.set_failover_sync_acks(acks as usize);
            let actions = self.core.step(now_ms, input, &mut t);
            self.hidden.after_step(&t, &self.server.keyspace);
            let lifted = fence.and_then(|f| self.fence_verdict(&f, &t, acks as usize));
            let agent = &self.core.agent;
            let (voters, learners) = agent.members();
            // Outside a group nothing fails over, so nothing needs the lease.
            let serving_until = if fence.is_some() && lifted.is_none() {
                // Fenced: nothing keyed is served (the lapsed lease's path).
                0
            } else if agent.group().is_none() {
                u64::MAX
            } else {
                self.core.gossip.serving_until(now_ms, &t)
            };
            let view = GroupView {
                group: agent.group(),
                leader: agent.leader(),
                voters: voters.len(),
                learners: learners.len(),
                version: t.consensus.version,
            };
            (actions, view, serving_until, lifted.zip(fence))
        };
        if let Some((why, fence)) = lifted {
            self.lift_fence(&fence, why);
        }
        self.cluster().set_group_view(view);
        self.cluster().set_serving_until(serving_until, now_ms);
        let mut save = false;
        let mut replies = Vec::new();
        for action in actions {
            match action {
                CoreAction::Send { to, msg } => self.send(&to, &msg, out),
                CoreAction::SaveConfig => save = true,
                CoreAction::Event(e) => log_event(&e),
                CoreAction::Deliver { from, body } => self.deliver(from, body),
                CoreAction::Forgotten { id } => {
                    self.cluster().note_forgotten(id, std::time::Instant::now())
                }
                CoreAction::Reply { waiter, result } => replies.push((waiter, result)),
                CoreAction::Lookup { id, ip, cport } => {
                    // Set once the bus is up, before any tick can ask.
                    if let Some(bus) = self.cluster().bus.get() {
                        self.lookups.start(id, &ip, cport, bus.requester());
                    }
                }
            }
        }
        if save {
            // Failures are logged by save(); the next change saves again.
            let _ = self.cluster().save();
        }
        // After the save: a command is answered once its change is in the config file, as
        // Redis answers topology commands. The command waits on the other end, or gave up
        // (then nobody reads this).
        for (waiter, result) in replies {
            waiter.answer(result);
        }
        crate::server::repl_link::cluster_role::follow_topology(&self.server);
    }

    /// Whether this fenced node may serve again, and why (`restart_fence::verdict` for
    /// myself, counting replicas heard since the restart; outside a group, at once).
    fn fence_verdict(&self, fence: &Fence, t: &Topology, sync_acks: usize) -> Option<Lifted> {
        if self.core.agent.group().is_none() {
            return Some(Lifted::NoGroup);
        }
        let gossip = &self.core.gossip;
        let heard = |id: &NodeId| {
            gossip
                .last_heard_ms(id)
                .is_some_and(|at| at >= fence.since_ms)
        };
        match restart_fence::verdict(t, &t.myself().id, fence, sync_acks, heard) {
            Verdict::Serve(why) => Some(why),
            Verdict::HandOver(_) | Verdict::Wait => None,
        }
    }

    /// The topology decided: the node serves (or follows) again. If it serves the fenced
    /// history itself it continues it under a new id (a replica that holds more of the old
    /// one, unheard now, must not continue into what this node writes next), and the
    /// identity file follows this run's ids again.
    fn lift_fence(&self, fence: &Fence, why: Lifted) {
        let cluster = self.cluster();
        cluster.set_restart_fence(None);
        let replication = &self.server.replication;
        let serves = cluster.topology.read().myself().is_primary();
        if serves && replication.ids().replid() == fence.replid {
            replication.shift_id(&mut rand::thread_rng());
        }
        replication.release_identity();
        if why.unproven() {
            tracing::warn!(%why, "restart fence lifted: serving what was loaded, acknowledged writes past it may be lost");
        } else {
            tracing::info!(%why, "restart fence lifted");
        }
    }

    /// A message for this node's subscribers from another node (its PUBLISH/SPUBLISH).
    fn deliver(&self, from: crate::cluster::NodeId, body: Body) {
        let (kind, p) = match body {
            Body::Publish(p) => (Kind::Channel, p),
            Body::PublishShard(p) => (Kind::Shard, p),
            other => {
                tracing::debug!(%from, kind = body_kind(&other), "bus delivery not handled yet");
                return;
            }
        };
        self.server
            .pubsub
            .publish(kind, &p.channel, &p.message, &mut |sub, bytes| {
                if !sub.client.is_killed() {
                    sub.deliver(bytes);
                }
            });
    }

    fn send(&mut self, to: &str, msg: &BusMessage, out: &mut Outbox) {
        if let Some(datagrams) = self.datagrams(msg) {
            fan_out(&[to.to_string()], datagrams, out);
        }
    }

    /// `msg` sealed and cut to the datagram size, once however many nodes it goes to.
    fn datagrams(&mut self, msg: &BusMessage) -> Option<Vec<Vec<u8>>> {
        self.sends += 1;
        self.refresh_secret();
        to_datagrams(msg, &self.secret, self.datagram_max, self.sends)
            .map_err(|e| tracing::warn!(error = %e, "bus message not sent"))
            .ok()
    }
}

/// Queues the same datagrams for each target address.
fn fan_out(targets: &[String], datagrams: Vec<Vec<u8>>, out: &mut Outbox) {
    for to in targets {
        let Ok(addr) = to.parse::<EndpointAddr>() else {
            tracing::warn!(to, "a bad bus address");
            continue;
        };
        out.sends
            .extend(datagrams.iter().map(|d| (addr.clone(), d.clone())));
    }
}

impl BusCore for GossipDriver {
    fn set_datagram_max(&mut self, max: usize) {
        self.datagram_max = max;
    }

    fn tick_interval(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.core.gossip.settings().tick_interval_ms())
    }

    fn tick(&mut self, now_ms: u64, out: &mut Outbox) {
        self.reassembler.expire(now_ms);
        self.step(now_ms, Input::Tick, out);
        // Once per tick, not per message: the copy is O(nodes).
        let view = {
            let t = self.cluster().topology.read();
            self.core.gossip.peer_view(now_ms, &t)
        };
        *self.cluster().peer_view.write() = view;
    }

    fn forget(&mut self, now_ms: u64, id: NodeId, addr: String, out: &mut Outbox) {
        self.step(now_ms, Input::Forget { id, addr }, out);
    }

    fn reset(&mut self, now_ms: u64, out: &mut Outbox) {
        self.step(now_ms, Input::Reset, out);
    }

    fn address_found(&mut self, now_ms: u64, id: NodeId, addr: String, out: &mut Outbox) {
        self.step(now_ms, Input::AddressFound { id, addr }, out);
    }

    fn receive(&mut self, now_ms: u64, from: &EndpointAddr, datagram: &[u8], out: &mut Outbox) {
        let from = from.to_string();
        self.refresh_secret();
        match from_datagram(&mut self.reassembler, &from, datagram, &self.secret, now_ms) {
            Ok(Some(msg)) => self.step(
                now_ms,
                Input::Receive {
                    from,
                    msg: Box::new(msg),
                },
                out,
            ),
            Ok(None) => {}
            // A stray or forged sender, or a torn fragment: dropped, as Redis drops bad packets.
            Err(e) => tracing::debug!(%from, error = %e, "dropped a bus datagram"),
        }
    }

    fn publish(&mut self, shard: bool, channel: Vec<u8>, message: Vec<u8>, out: &mut Outbox) {
        let (msg, targets) = {
            let t = self.cluster().topology.read();
            let my_shard = t.myself().shard;
            let targets: Vec<String> = t
                .nodes
                .iter()
                .filter(|n| !n.is_myself() && !n.bus_addr.is_empty())
                .filter(|n| !n.flags.has(crate::cluster::flags::bit::HANDSHAKE))
                .filter(|n| !shard || n.shard == my_shard)
                .map(|n| n.bus_addr.clone())
                .collect();
            let p = Publish { channel, message };
            let body = if shard {
                Body::PublishShard(p)
            } else {
                Body::Publish(p)
            };
            (self.core.gossip.message(&t, body), targets)
        };
        if let Some(datagrams) = self.datagrams(&msg) {
            fan_out(&targets, datagrams, out);
        }
    }

    fn propose(
        &mut self,
        now_ms: u64,
        command: TopologyCommand,
        reply: ProposalReply,
        out: &mut Outbox,
    ) {
        self.run(
            now_ms,
            CoreInput::Propose {
                command,
                waiter: reply,
            },
            out,
        );
    }

    fn meet(&mut self, now_ms: u64, to: EndpointAddr, out: &mut Outbox) {
        self.step(
            now_ms,
            Input::Meet {
                addr: to.to_string(),
            },
            out,
        );
    }
}

fn body_kind(body: &Body) -> &'static str {
    match body {
        Body::Publish(_) => "publish",
        Body::PublishShard(_) => "publishshard",
        Body::Raft(_) | Body::RaftPropose(_) => "raft",
        _ => "other",
    }
}

fn log_event(e: &Event) {
    match e {
        Event::Fail { .. } | Event::PFail { .. } | Event::StateChanged(_) => {
            tracing::warn!(event = ?e, "cluster")
        }
        _ => tracing::info!(event = ?e, "cluster"),
    }
}
