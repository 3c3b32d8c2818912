//! The gossip core on the bus thread: opens and reassembles what arrives, feeds the core under
//! the topology's write lock, seals and fragments what it sends, saves the config when it
//! says so (after the lock is released).

use super::runtime::{BusCore, Outbox};
use crate::cluster::gossip::{Action, Event, Gossip, GossipSettings, Input};
use crate::cluster::{Cluster, NodeId};
use crate::server::pubsub::Kind;
use crate::server::Server;
use bus::EndpointAddr;
use proto::bus::fragment::{fragment, Reassembler, ReassemblyLimits};
use proto::bus::{envelope, Body, Publish};
use std::sync::Arc;

pub struct GossipDriver {
    server: Arc<Server>,
    gossip: Gossip,
    secret: Vec<u8>,
    reassembler: Reassembler<String>,
    datagram_max: usize,
    /// Messages dropped for a bad fragment, envelope or MAC (a stray or forged sender).
    pub rejected: u64,
}

impl GossipDriver {
    pub fn new(server: Arc<Server>, settings: GossipSettings, secret: Vec<u8>, seed: u64) -> Self {
        GossipDriver {
            server,
            gossip: Gossip::new(settings, seed),
            secret,
            reassembler: Reassembler::new(ReassemblyLimits::default()),
            datagram_max: 0,
            rejected: 0,
        }
    }

    fn cluster(&self) -> &Cluster {
        self.server
            .cluster
            .as_ref()
            .expect("the bus runs only in cluster mode")
    }

    fn step(&mut self, now_ms: u64, input: Input, out: &mut Outbox) {
        let actions = {
            let server = self.server.clone();
            let cluster = server
                .cluster
                .as_ref()
                .expect("the bus runs only in cluster mode");
            let mut t = cluster.topology.write();
            self.gossip.step(now_ms, input, &mut t)
        };
        let mut save = false;
        for action in actions {
            match action {
                Action::Send { to, msg } => self.send(&to, &msg, out),
                Action::SaveConfig => save = true,
                Action::Event(e) => log_event(&e),
                Action::Deliver { from, body } => self.deliver(from, body),
            }
        }
        if save {
            // Failures are logged by save(); the next change saves again.
            let _ = self.cluster().save();
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

    fn send(&mut self, to: &str, msg: &proto::bus::BusMessage, out: &mut Outbox) {
        let Ok(addr) = to.parse::<EndpointAddr>() else {
            tracing::warn!(to, "gossip named a bad bus address");
            return;
        };
        let sealed = match envelope::seal(msg, &self.secret) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "bus message not sealed");
                return;
            }
        };
        match fragment(&sealed, self.datagram_max) {
            Ok(parts) => out
                .sends
                .extend(parts.into_iter().map(|p| (addr.clone(), p))),
            Err(e) => tracing::warn!(error = %e, "bus message not fragmented"),
        }
    }
}

impl BusCore for GossipDriver {
    fn set_datagram_max(&mut self, max: usize) {
        self.datagram_max = max;
    }

    fn tick(&mut self, now_ms: u64, out: &mut Outbox) {
        self.reassembler.expire(now_ms);
        self.step(now_ms, Input::Tick, out);
        // Once per tick, not per message: the copy is O(nodes).
        let view = {
            let t = self.cluster().topology.read();
            self.gossip.peer_view(now_ms, &t)
        };
        *self.cluster().peer_view.write() = view;
    }

    fn forget(&mut self, now_ms: u64, id: NodeId, addr: String, out: &mut Outbox) {
        self.step(now_ms, Input::Forget { id, addr }, out);
    }

    fn reset(&mut self, now_ms: u64, out: &mut Outbox) {
        self.step(now_ms, Input::Reset, out);
    }

    fn receive(&mut self, now_ms: u64, from: &EndpointAddr, datagram: &[u8], out: &mut Outbox) {
        let from = from.to_string();
        let whole = match self.reassembler.push(&from, datagram, now_ms) {
            Ok(Some(m)) => m,
            Ok(None) => return,
            Err(e) => {
                self.rejected += 1;
                tracing::debug!(%from, error = %e, "dropped a bad bus fragment");
                return;
            }
        };
        match envelope::open(&whole, &self.secret) {
            Ok(msg) => self.step(
                now_ms,
                Input::Receive {
                    from,
                    msg: Box::new(msg),
                },
                out,
            ),
            Err(e) => {
                self.rejected += 1;
                tracing::debug!(%from, error = %e, "dropped a bus message");
            }
        }
    }

    fn publish(&mut self, shard: bool, channel: Vec<u8>, message: Vec<u8>, out: &mut Outbox) {
        let (msg, targets) = {
            let server = self.server.clone();
            let cluster = server
                .cluster
                .as_ref()
                .expect("the bus runs only in cluster mode");
            let t = cluster.topology.read();
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
            (self.gossip.message(&t, body), targets)
        };
        for to in targets {
            self.send(&to, &msg, out);
        }
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
        Body::Raft(_) => "raft",
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
