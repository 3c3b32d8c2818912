//! The cluster core: the gossip core and the topology agent run as one state machine (no
//! I/O), the way a node's bus thread and the chaos simulator both drive them. Gossip hands
//! RAFT traffic from members to the agent; the agent's RAFT messages leave as bus messages
//! with this node's header, addressed by the recipient's bus address.

use super::agent::store::{GroupStore, StoreError};
use super::agent::{AgentAction, AgentInput, AgentSettings, ProposeError, TopologyAgent};
use super::consensus::TopologyCommand;
use super::gossip::{Action, Event, Gossip, GossipSettings, Input};
use super::id::{HexId, NodeId};
use super::topology::Topology;
use proto::bus::{Body, BusMessage, Raft, RaftPropose};

#[derive(Debug)]
pub enum CoreInput<W> {
    Gossip(Input),
    /// A topology change to commit through the group (see [`ClusterCore::in_group`]).
    Propose {
        command: TopologyCommand,
        waiter: W,
    },
}

#[derive(Debug)]
pub enum CoreAction<W> {
    /// Seal, fragment and send `msg` to this bus address.
    Send {
        to: String,
        msg: Box<BusMessage>,
    },
    SaveConfig,
    Event(Event),
    /// PUBLISH or PUBLISHSHARD from a member, for this node's subscribers.
    Deliver {
        from: NodeId,
        body: Body,
    },
    /// Answer a waiting topology change.
    Reply {
        waiter: W,
        result: Result<(), ProposeError>,
    },
    /// The group forgot this node (gossip keeps it out already): CLUSTER FORGET of it here
    /// answers OK once, as it would had it run here first.
    Forgotten {
        id: NodeId,
    },
    /// Ask node `id`'s bus port (`ip:cport`) for its bus address; feed the answer back as
    /// `Input::AddressFound`.
    Lookup {
        id: NodeId,
        ip: String,
        cport: u16,
    },
}

pub struct ClusterCore<W> {
    pub gossip: Gossip,
    pub agent: TopologyAgent<W>,
}

impl<W> ClusterCore<W> {
    pub fn new(me: NodeId, gossip: GossipSettings, agent: AgentSettings, seed: u64) -> Self {
        ClusterCore {
            gossip: Gossip::new(gossip, seed),
            agent: TopologyAgent::new(me, agent, seed.rotate_left(17) ^ 0x5eed),
        }
    }

    /// A core whose topology group survives restarts in `store` (see
    /// [`TopologyAgent::with_store`]).
    pub fn with_store(
        me: NodeId,
        gossip: GossipSettings,
        agent: AgentSettings,
        seed: u64,
        store: GroupStore,
        applied: u64,
    ) -> Result<Self, StoreError> {
        Ok(ClusterCore {
            gossip: Gossip::new(gossip, seed),
            agent: TopologyAgent::with_store(
                me,
                agent,
                seed.rotate_left(17) ^ 0x5eed,
                store,
                applied,
            )?,
        })
    }

    /// Whether topology changes go through the Raft group (else they apply locally, as
    /// Redis applies them).
    pub fn in_group(&self) -> bool {
        self.agent.in_group()
    }

    pub fn step(
        &mut self,
        now_ms: u64,
        input: CoreInput<W>,
        t: &mut Topology,
    ) -> Vec<CoreAction<W>> {
        let mut out = Vec::new();
        let mut agent_inputs = Vec::new();
        let version_before = t.consensus.version;
        match input {
            CoreInput::Gossip(input) => {
                let tick = matches!(input, Input::Tick);
                let reset = matches!(input, Input::Reset);
                self.sync_gossip(t);
                for action in self.gossip.step(now_ms, input, t) {
                    match action {
                        Action::Send { to, msg } => out.push(CoreAction::Send { to, msg }),
                        Action::SaveConfig => out.push(CoreAction::SaveConfig),
                        Action::Event(e) => out.push(CoreAction::Event(e)),
                        Action::Lookup { id, ip, cport } => {
                            out.push(CoreAction::Lookup { id, ip, cport })
                        }
                        Action::Deliver { from, body } => match body {
                            Body::Raft(r) => {
                                if let Some(group) = parse_group(&r.group) {
                                    agent_inputs.push(AgentInput::Raft {
                                        from,
                                        group,
                                        data: r.data,
                                    });
                                }
                            }
                            Body::RaftPropose(p) => {
                                if let Some(group) = parse_group(&p.group) {
                                    agent_inputs.push(AgentInput::Forwarded {
                                        from,
                                        group,
                                        seq: p.seq,
                                        command: p.command,
                                    });
                                }
                            }
                            body => out.push(CoreAction::Deliver { from, body }),
                        },
                    }
                }
                if tick {
                    agent_inputs.push(AgentInput::Tick);
                }
                if reset {
                    agent_inputs.push(AgentInput::Leave);
                }
            }
            CoreInput::Propose { command, waiter } => {
                agent_inputs.push(AgentInput::Propose { command, waiter })
            }
        }
        for input in agent_inputs {
            let actions = self.agent.step(now_ms, input, t, &self.gossip);
            for action in actions {
                if let AgentAction::Forgotten { id, addr } = action {
                    out.extend(self.gossip_forget(now_ms, id, addr, t));
                    continue;
                }
                self.agent_action(action, t, &mut out);
            }
        }
        self.sync_gossip(t);
        if t.consensus.version != version_before && self.agent.group().is_some() {
            for action in self.gossip.announce_version(now_ms, t) {
                match action {
                    Action::Send { to, msg } => out.push(CoreAction::Send { to, msg }),
                    Action::SaveConfig => out.push(CoreAction::SaveConfig),
                    Action::Event(e) => out.push(CoreAction::Event(e)),
                    Action::Lookup { id, ip, cport } => {
                        out.push(CoreAction::Lookup { id, ip, cport })
                    }
                    Action::Deliver { .. } => {}
                }
            }
        }
        out
    }

    /// A node the group forgot: gossip blacklists it as CLUSTER FORGET would.
    fn gossip_forget(
        &mut self,
        now_ms: u64,
        id: NodeId,
        addr: String,
        t: &mut Topology,
    ) -> Vec<CoreAction<W>> {
        let mut out = vec![CoreAction::Forgotten { id }];
        for action in self.gossip.step(now_ms, Input::Forget { id, addr }, t) {
            match action {
                Action::Send { to, msg } => out.push(CoreAction::Send { to, msg }),
                Action::SaveConfig => out.push(CoreAction::SaveConfig),
                Action::Event(e) => out.push(CoreAction::Event(e)),
                Action::Lookup { id, ip, cport } => out.push(CoreAction::Lookup { id, ip, cport }),
                Action::Deliver { .. } => {}
            }
        }
        out
    }

    /// What gossip advertises and whether headers may still move slots.
    fn sync_gossip(&mut self, t: &Topology) {
        let in_group = self.agent.in_group();
        self.gossip.set_consensus_mode(in_group);
        // A member still waiting for its first snapshot says 1, not 0: 0 means "in no
        // group", and such a node may be taken in by a leader or found a group itself.
        let version = if in_group {
            t.consensus.version.max(1)
        } else {
            t.consensus.version
        };
        self.gossip.set_topology_version(version);
    }

    fn agent_action(&mut self, action: AgentAction<W>, t: &Topology, out: &mut Vec<CoreAction<W>>) {
        let (to, body) = match action {
            AgentAction::Raft { to, group, data } => (
                to,
                Body::Raft(Raft {
                    data,
                    group: group.to_string(),
                }),
            ),
            AgentAction::Forward {
                to,
                group,
                seq,
                command,
            } => (
                to,
                Body::RaftPropose(RaftPropose {
                    group: group.to_string(),
                    seq,
                    command,
                }),
            ),
            AgentAction::Reply { waiter, result } => {
                return out.push(CoreAction::Reply { waiter, result })
            }
            AgentAction::SaveConfig => return out.push(CoreAction::SaveConfig),
            AgentAction::Forgotten { .. } => return,
        };
        let Some(addr) = t
            .index_of(&to)
            .map(|i| t.nodes[i as usize].bus_addr.clone())
            .filter(|a| !a.is_empty())
        else {
            tracing::debug!(%to, "raft message for a node without a bus address");
            return;
        };
        let msg = self.gossip.message(t, body);
        out.push(CoreAction::Send {
            to: addr,
            msg: Box::new(msg),
        });
    }
}

fn parse_group(text: &str) -> Option<NodeId> {
    HexId::parse(text.as_bytes())
}
