//! The bus thread: owns the fabric datagram socket, feeds the cluster core what arrives and
//! what the node asks (MEET, FORGET, RESET), ticks it, and sends what it says. The core does no I/O
//! (DESIGN §3.1); this loop is its only contact with the fabric and the clock.

use crate::cluster::agent::ProposeError;
use crate::cluster::consensus::TopologyCommand;
use crate::cluster::id::NodeId;
use bus::datagram::DatagramSocket;
use bus::{DatagramEndpoint, EndpointAddr};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

/// How often the core is ticked (its timers have this resolution).
pub const TICK: Duration = Duration::from_millis(100);
/// Requests from the node taken per loop, so a flood of MEETs cannot starve the bus.
const REQUESTS_PER_LOOP_MAX: usize = 64;
/// Longest wait for datagrams before the request queue is looked at again: the fabric wait
/// cannot be woken from another thread, and a command waiting on its topology change (a
/// reshard sends one SETSLOT per slot, serially) should not wait for a tick.
const REQUEST_PICKUP_MAX: Duration = Duration::from_millis(5);
/// Datagrams read per loop before the timers are looked at again.
const RECV_PER_LOOP_MAX: usize = 256;

/// What the node asks of the bus thread.
#[derive(Debug)]
pub enum Request {
    /// CLUSTER MEET: greet the node at this bus address.
    Meet(EndpointAddr),
    /// CLUSTER FORGET: the command removed the node; the core blacklists it (and drops
    /// handshakes toward `addr`, its bus address).
    Forget { id: NodeId, addr: String },
    /// CLUSTER RESET: the command dropped every other node; the core forgets their state.
    Reset,
    /// PUBLISH (`shard` false: every node) or SPUBLISH (`shard` true: this node's shard),
    /// for the other nodes' subscribers.
    Publish {
        shard: bool,
        channel: Vec<u8>,
        message: Vec<u8>,
        /// Its share of the publish budget, given back when the request is dropped.
        ticket: super::publish_budget::PublishTicket,
    },
    /// A lookup at a silent node's bus port found its bus address (see `gossip::rediscover`).
    AddressFound { id: NodeId, addr: String },
    /// A topology change for the Raft group; the outcome goes to `reply`.
    Propose {
        command: TopologyCommand,
        reply: ProposalReply,
    },
    /// Stop the thread.
    Stop,
}

/// Where a proposal's outcome goes: a channel with room for the one answer (so the bus
/// thread never waits), and what to run once it is there (wake the connection whose command
/// waits for it without holding its thread).
pub struct ProposalReply {
    /// Taken when answered or dropped, so that the receiver sees the answer or the
    /// disconnection before `then` wakes it.
    outcome: Option<std::sync::mpsc::SyncSender<Result<(), ProposeError>>>,
    then: Option<Box<dyn FnOnce() + Send>>,
}

impl ProposalReply {
    pub fn new(
        outcome: std::sync::mpsc::SyncSender<Result<(), ProposeError>>,
        then: Option<Box<dyn FnOnce() + Send>>,
    ) -> Self {
        ProposalReply {
            outcome: Some(outcome),
            then,
        }
    }

    /// Delivers the outcome (nobody may read it: the command gave up waiting).
    pub fn answer(mut self, result: Result<(), ProposeError>) {
        if let Some(outcome) = self.outcome.take() {
            let _ = outcome.try_send(result);
        }
        if let Some(then) = self.then.take() {
            then();
        }
    }
}

impl Drop for ProposalReply {
    /// Dropped unanswered (the bus thread stopped with it queued): the channel is now
    /// disconnected, which the waiting command reads as "no answer"; wake it to read it
    /// now rather than at its timeout.
    fn drop(&mut self) {
        drop(self.outcome.take());
        if let Some(then) = self.then.take() {
            then();
        }
    }
}

impl std::fmt::Debug for ProposalReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProposalReply")
            .field("then", &self.then.is_some())
            .finish()
    }
}

/// Messages the core wants sent.
#[derive(Debug, Default)]
pub struct Outbox {
    pub sends: Vec<(EndpointAddr, Vec<u8>)>,
}

/// The cluster logic as the bus thread drives it.
pub trait BusCore: Send + 'static {
    /// Largest message the core may hand the outbox for one datagram (set once at start).
    fn set_datagram_max(&mut self, max: usize);
    fn tick(&mut self, now_ms: u64, out: &mut Outbox);
    /// How often to tick: [`TICK`] unless the core's timers want finer steps.
    fn tick_interval(&self) -> Duration {
        TICK
    }
    fn receive(&mut self, now_ms: u64, from: &EndpointAddr, message: &[u8], out: &mut Outbox);
    fn meet(&mut self, now_ms: u64, to: EndpointAddr, out: &mut Outbox);
    /// CLUSTER FORGET; cores without a node table ignore it.
    fn forget(&mut self, _now_ms: u64, _id: NodeId, _addr: String, _out: &mut Outbox) {}
    /// CLUSTER RESET; cores without a node table ignore it.
    fn reset(&mut self, _now_ms: u64, _out: &mut Outbox) {}
    /// A node's bus address found at its bus port; cores without a node table ignore it.
    fn address_found(&mut self, _now_ms: u64, _id: NodeId, _addr: String, _out: &mut Outbox) {}
    fn publish(&mut self, shard: bool, channel: Vec<u8>, message: Vec<u8>, out: &mut Outbox);
    /// A topology change; cores without a topology group answer that they have none.
    fn propose(
        &mut self,
        _now_ms: u64,
        _command: TopologyCommand,
        reply: ProposalReply,
        _out: &mut Outbox,
    ) {
        reply.answer(Err(ProposeError::NotInGroup));
    }
}

/// Counters the loop keeps (INFO / tests).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LoopStats {
    pub sent: u64,
    pub send_errors: u64,
    pub received: u64,
}

/// Runs until `Request::Stop` or the request channel closes.
pub fn run<D: DatagramEndpoint, C: BusCore>(
    mut socket: DatagramSocket<D>,
    mut core: C,
    requests: Receiver<Request>,
) -> LoopStats {
    // Wall-clock ms, as Redis's mstime(): CLUSTER NODES prints ping and pong times as unix ms.
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    };
    core.set_datagram_max(socket.max_payload());
    let mut buf = vec![0u8; socket.max_payload()];
    let mut out = Outbox::default();
    let mut stats = LoopStats::default();
    let mut next_tick = Instant::now();
    loop {
        for _ in 0..REQUESTS_PER_LOOP_MAX {
            match requests.try_recv() {
                Ok(Request::Meet(to)) => core.meet(now_ms(), to, &mut out),
                Ok(Request::Forget { id, addr }) => core.forget(now_ms(), id, addr, &mut out),
                Ok(Request::Reset) => core.reset(now_ms(), &mut out),
                Ok(Request::AddressFound { id, addr }) => {
                    core.address_found(now_ms(), id, addr, &mut out)
                }
                Ok(Request::Publish {
                    shard,
                    channel,
                    message,
                    ticket: _ticket,
                }) => core.publish(shard, channel, message, &mut out),
                Ok(Request::Propose { command, reply }) => {
                    core.propose(now_ms(), command, reply, &mut out)
                }
                Ok(Request::Stop) | Err(TryRecvError::Disconnected) => return stats,
                Err(TryRecvError::Empty) => break,
            }
        }
        for _ in 0..RECV_PER_LOOP_MAX {
            match socket.recv(&mut buf) {
                Ok(Some((from, len))) => {
                    stats.received += 1;
                    core.receive(now_ms(), &from, &buf[..len], &mut out);
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "cluster bus receive failed");
                    break;
                }
            }
        }
        if Instant::now() >= next_tick {
            core.tick(now_ms(), &mut out);
            next_tick = Instant::now() + core.tick_interval();
        }
        for (to, message) in out.sends.drain(..) {
            match socket.send_to(&to, &message) {
                Ok(()) => stats.sent += 1,
                Err(e) => {
                    // Datagrams may be lost anyway; the core's timers resend.
                    stats.send_errors += 1;
                    tracing::debug!(%to, error = %e, "cluster bus send failed");
                }
            }
        }
        let wait = next_tick.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            let wait = wait.min(REQUEST_PICKUP_MAX);
            if let Err(e) = socket.wait(wait) {
                tracing::warn!(error = %e, "cluster bus wait failed");
                std::thread::sleep(wait);
            }
        }
    }
}

#[cfg(test)]
mod proposal_reply_tests {
    use super::*;
    use std::sync::mpsc::{sync_channel, TryRecvError};
    use std::sync::{Arc, Mutex};

    /// A reply whose hook records what the waiting side reads when it is woken.
    fn reply_seen_by_hook() -> (ProposalReply, Arc<Mutex<Option<String>>>) {
        let (tx, rx) = sync_channel(1);
        let seen = Arc::new(Mutex::new(None));
        let hook_seen = seen.clone();
        let hook = move || {
            let read = match rx.try_recv() {
                Ok(Ok(())) => "committed".to_string(),
                Ok(Err(e)) => format!("failed: {e}"),
                Err(TryRecvError::Empty) => "empty".to_string(),
                Err(TryRecvError::Disconnected) => "disconnected".to_string(),
            };
            *hook_seen.lock().unwrap() = Some(read);
        };
        (ProposalReply::new(tx, Some(Box::new(hook))), seen)
    }

    #[test]
    fn the_woken_waiter_finds_the_answer() {
        let (reply, seen) = reply_seen_by_hook();
        reply.answer(Ok(()));
        assert_eq!(seen.lock().unwrap().as_deref(), Some("committed"));
    }

    #[test]
    fn a_reply_dropped_unanswered_wakes_its_waiter_to_a_closed_channel() {
        let (reply, seen) = reply_seen_by_hook();
        drop(reply);
        assert_eq!(seen.lock().unwrap().as_deref(), Some("disconnected"));
    }
}
