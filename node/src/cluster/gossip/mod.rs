//! The cluster bus gossip and failure detection, as a state machine that does no I/O
//! (protocols.md §2.2-2.7, §2.9, §2.12): fed `(now_ms, input)` and the [`Topology`], it
//! changes the topology and returns [`Action`]s (messages to send, "save the config", events).
//! The node wires it to the fabric's Datagram endpoint: it seals and fragments the messages
//! of [`Action::Send`] and opens what arrives into [`Input::Receive`].
//!
//! - [`settings`] has the timeouts;
//! - [`peer`] keeps per-node liveness and failure reports;
//! - `outgoing` builds the header, the gossip section, PING/PONG/MEET/FAIL/UPDATE;
//! - `receive` says what each message does;
//! - `cron` is the timer (pings, handshake timeouts, PFAIL);
//! - `failure` turns failure reports into FAIL, and clears it;
//! - `quorum` says whether this node hears a majority of voting primaries (may serve);
//! - `echo_ledger` remembers what this node echoed to whom, for the lease's fast hand-off;
//! - `epochs` binds slots by config epoch, sends UPDATE, resolves epoch collisions;
//! - [`blacklist`] keeps forgotten nodes from coming back through gossip (`forget`);
//! - [`view`] is the copy of per-node state that commands read.

pub mod blacklist;
mod convert;
mod cron;
mod echo_ledger;
mod epochs;
mod failure;
mod forget;
mod outgoing;
pub mod peer;
mod quorum;
mod receive;
mod rediscover;
pub mod settings;
pub mod view;

#[cfg(test)]
mod tests;

use super::id::NodeId;
use super::topology::{Health, Topology};
use blacklist::Blacklist;
use peer::Peer;
use proto::bus::{Body, BusMessage};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::HashMap;

pub use settings::GossipSettings;

/// What a member's last header claimed: the slot ranges it (or its primary) serves, and
/// its primary if it says it is a replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claims<'a> {
    pub slots: &'a [(u16, u16)],
    pub primary: Option<NodeId>,
}

/// What the core is told.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// The timer fired; expected every [`settings::TICK_MS`].
    Tick,
    /// A message arrived (already opened: MAC checked, decoded, within limits) from this
    /// fabric address.
    Receive { from: String, msg: Box<BusMessage> },
    /// `CLUSTER MEET` of a fabric bus address.
    Meet { addr: String },
    /// `CLUSTER FORGET`: the node leaves the topology (if the command has not removed it
    /// already) and gossip may not add it back for [`blacklist::BLACKLIST_TTL_MS`]; `addr`
    /// is its bus address, where handshakes gossip started meanwhile are dropped.
    Forget { id: NodeId, addr: String },
    /// `CLUSTER RESET`: every other node is gone, and so is what was known about them.
    Reset,
    /// The answer to an [`Action::Lookup`]: the node's bus port says its bus address is
    /// `addr` now (it restarted on a new one).
    AddressFound { id: NodeId, addr: String },
}

/// Something that happened, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    HandshakeStarted {
        addr: String,
    },
    HandshakeTimedOut {
        addr: String,
    },
    /// A node became a member (its MEET arrived, or our handshake was answered).
    /// A silent node's bus port gave a new bus address for it.
    AddressFound {
        id: NodeId,
        addr: String,
    },
    NodeJoined {
        id: NodeId,
        addr: String,
    },
    PFail {
        id: NodeId,
    },
    PFailCleared {
        id: NodeId,
    },
    Fail {
        id: NodeId,
    },
    FailCleared {
        id: NodeId,
    },
    /// Slots were bound to `owner` by its claim or an UPDATE.
    SlotsMoved {
        owner: NodeId,
        count: usize,
    },
    UpdateSent {
        to: NodeId,
        about: NodeId,
    },
    ConfigEpochCollision {
        new_epoch: u64,
    },
    /// This primary lost its last slot and follows the node that took them (§2.9).
    BecameReplica {
        primary: NodeId,
    },
    RoleChanged {
        id: NodeId,
    },
    /// A member's header named a new process incarnation: it restarted.
    PeerRestarted {
        id: NodeId,
        incarnation: u64,
    },
    NodeForgotten {
        id: NodeId,
    },
    /// A handshake gossip started reached a node forgotten less than a minute ago.
    ForgottenNodeRefused {
        id: NodeId,
    },
    StateChanged(Health),
}

/// What the caller must do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Seal, fragment and send `msg` to this fabric address.
    Send {
        to: String,
        msg: Box<BusMessage>,
    },
    /// The topology changed in a way the config file keeps: save it.
    SaveConfig,
    Event(Event),
    /// PUBLISH, PUBLISHSHARD or RAFT from a member: for the subsystems that handle them.
    Deliver {
        from: NodeId,
        body: Body,
    },
    /// Ask the node's bus port (TCP, `ip:cport`) for its bus address: it has not answered
    /// at the one known (a restart moves it), and answer with [`Input::AddressFound`].
    Lookup {
        id: NodeId,
        ip: String,
        cport: u16,
    },
}

/// Mixed into the seed for the incarnation's own generator.
const INCARNATION_SALT: u64 = 0x1dca_7e0f_5eed_u64;

/// The gossip state of one node.
pub struct Gossip {
    settings: GossipSettings,
    rng: StdRng,
    peers: HashMap<NodeId, Peer>,
    blacklist: Blacklist,
    ticks: u64,
    /// The TICK_MS period of the last tick (`now / TICK_MS`).
    last_tick_period: Option<u64>,
    /// When `announce_version` last pinged everyone.
    last_announce_ms: u64,
    out: Vec<Action>,
    save: bool,
    last_state: Option<Health>,
    topology_version: u64,
    /// Set while this node is in a topology group: slot ownership, roles and config epochs
    /// of the group's nodes change only by the Raft log, never by what headers claim.
    consensus: bool,
    echoes: echo_ledger::EchoLedger,
    /// `old_echo_age`'s basis for (version) within one input: O(nodes) to compute, and the
    /// same for every PING/PONG of that input unless a peer's version moves (then cleared).
    old_echo_basis: Option<(u64, u64)>,
    /// This process's incarnation, advertised in every header: never 0, new at every start.
    incarnation: u64,
}

impl Gossip {
    /// A core whose randomness (gossip choices, handshake names) comes from `seed`.
    pub fn new(settings: GossipSettings, seed: u64) -> Self {
        // Drawn apart from `rng`, so the gossip choices of a seed stay what they were.
        let incarnation =
            rand::Rng::gen::<u64>(&mut StdRng::seed_from_u64(seed ^ INCARNATION_SALT)).max(1);
        Gossip {
            settings,
            rng: StdRng::seed_from_u64(seed),
            peers: HashMap::new(),
            blacklist: Blacklist::default(),
            ticks: 0,
            last_tick_period: None,
            last_announce_ms: 0,
            out: Vec::new(),
            save: false,
            last_state: None,
            topology_version: 0,
            consensus: false,
            echoes: echo_ledger::EchoLedger::default(),
            old_echo_basis: None,
            incarnation,
        }
    }

    /// This process's incarnation (see the field).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    pub fn settings(&self) -> &GossipSettings {
        &self.settings
    }

    /// The Raft topology version this node has applied, advertised in every header.
    pub fn set_topology_version(&mut self, version: u64) {
        self.topology_version = version;
    }

    /// Whether the Raft log owns the topology (see the `consensus` field).
    pub fn set_consensus_mode(&mut self, on: bool) {
        self.consensus = on;
    }

    /// What a member's last header claimed.
    pub fn claims_of(&self, id: &NodeId) -> Option<Claims<'_>> {
        self.peers
            .get(id)
            .filter(|p| p.data_received_ms != 0)
            .map(|p| Claims {
                slots: &p.claimed_slots,
                primary: p.claimed_primary,
            })
    }

    /// The Raft topology version a member last advertised (None: never heard from).
    pub fn topology_version_of(&self, id: &NodeId) -> Option<u64> {
        self.peers
            .get(id)
            .filter(|p| p.data_received_ms != 0)
            .map(|p| p.topology_version)
    }

    /// Feeds one input; returns what to do, in order.
    pub fn step(&mut self, now_ms: u64, input: Input, t: &mut Topology) -> Vec<Action> {
        self.echoes.start(now_ms);
        self.old_echo_basis = None;
        match input {
            Input::Tick => self.tick(now_ms, t),
            Input::Receive { from, msg } => self.receive(now_ms, &from, *msg, t),
            Input::Meet { addr } => self.meet(now_ms, &addr, t),
            Input::Forget { id, addr } => self.forget(now_ms, id, &addr, t),
            Input::Reset => self.peers.clear(),
            Input::AddressFound { id, addr } => self.address_found(now_ms, id, addr, t),
        }
        t.refresh_state();
        let state = t.state();
        if self.last_state != Some(state) {
            if self.last_state.is_some() {
                self.out.push(Action::Event(Event::StateChanged(state)));
            }
            self.last_state = Some(state);
        }
        if std::mem::take(&mut self.save) {
            self.out.push(Action::SaveConfig);
        }
        std::mem::take(&mut self.out)
    }

    /// A message of this node's with `body` (for PUBLISH and RAFT, which the core does not
    /// originate).
    pub fn message(&self, t: &Topology, body: Body) -> BusMessage {
        BusMessage {
            header: Some(self.header(t)),
            body: Some(body),
        }
    }

    fn peer(&mut self, id: NodeId) -> &mut Peer {
        self.peers.entry(id).or_default()
    }

    fn event(&mut self, e: Event) {
        self.out.push(Action::Event(e));
    }
}
