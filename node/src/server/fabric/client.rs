//! One client on a fabric Stream: the same [`Session`] as TCP, driven by a polling thread
//! instead of a task. Each `turn` does what the TCP connection's loop does, without waiting:
//! progress the stream, take wake-ups, read, execute, write what the peer's window allows.

use super::preauth::FABRIC_PREAUTH_INPUT_MAX;
use crate::command_framework::ctx::BlockRequest;
use crate::node_state::stats::Stats;
use crate::server::persistence::aof::log::Gate;
use crate::server::session::{Session, Step};
use bus::idle::{Doorbell, IdleWait};
use bus::stream::Stream;
use bus::Connection;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes copied out of the stream per read call (the poller's scratch buffer size).
pub const READ_CHUNK: usize = 64 * 1024;
/// Read calls per turn, so one busy client cannot starve the others on its thread.
const READS_PER_TURN_MAX: usize = 16;
/// How long a closing client may take to push its last replies out (the peer may have stopped
/// reading) before it is dropped anyway.
const CLOSING_GRACE: Duration = Duration::from_secs(2);

enum State {
    Running,
    /// Waiting for a key of a blocking command, until `deadline` if it has one.
    Blocked {
        block: BlockRequest,
        deadline: Option<Instant>,
    },
    /// QUIT, a protocol error or a kill: send what is in the output, then close.
    Closing {
        since: Instant,
    },
}

/// Rounds of read-and-execute for the requests a client sent before its goodbye: each round
/// consumes input or the loop ends, so this only bounds a pathological case.
const LAST_REQUESTS_ROUNDS_MAX: usize = 4096;

pub struct FabricClient<C: Connection> {
    stream: Stream<C>,
    session: Session,
    state: State,
    /// How much of `session.output` the stream has accepted.
    out_pos: usize,
    done: bool,
    /// Set while the client must still authenticate (its stream has the pre-auth window):
    /// raised once it has, which tells the accept thread's `PreAuth` list.
    awaiting_proof: Option<Arc<AtomicBool>>,
}

impl<C: Connection> FabricClient<C> {
    pub fn new(stream: Stream<C>, session: Session) -> Self {
        FabricClient {
            stream,
            session,
            state: State::Running,
            out_pos: 0,
            done: false,
            awaiting_proof: None,
        }
    }

    /// The client has not authenticated yet (its stream started with the pre-auth window):
    /// once it has, its stream gets the full window and `proven` is raised.
    pub fn await_proof(&mut self, proven: Arc<AtomicBool>) {
        self.awaiting_proof = Some(proven);
    }

    /// After requests ran: grants the full window to a client that just authenticated, and
    /// closes one still unauthenticated that holds more pending input than it may.
    fn check_proof(&mut self) {
        let Some(proven) = &self.awaiting_proof else {
            return;
        };
        if self.session.client.authenticated {
            self.stream.grant_full_window();
            proven.store(true, Relaxed);
            self.awaiting_proof = None;
        } else if self.session.input.len() > FABRIC_PREAUTH_INPUT_MAX
            && !matches!(self.state, State::Closing { .. })
        {
            tracing::info!(
                client = self.session.client.id(),
                bytes = self.session.input.len(),
                "unauthenticated fabric client pends too much input; closing"
            );
            Stats::add(&self.session.server.stats.fabric_unauthenticated_closed, 1);
            self.start_closing();
        }
    }

    /// Whether the client is gone and may be dropped (after [`FabricClient::finish`]).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Sends `text` and closes: a refused connection (maxclients).
    pub fn reject(&mut self, text: &[u8]) {
        self.session.output.extend_from_slice(text);
        self.state = State::Closing {
            since: Instant::now(),
        };
    }

    /// One non-blocking step. `now` drives the stream's keepalive; returns whether anything
    /// happened (for the poller's idle back-off).
    pub fn turn(&mut self, now: Duration, scratch: &mut [u8]) -> bool {
        if self.done {
            return false;
        }
        let before = (
            self.stream.stats().bytes_read,
            self.stream.stats().bytes_written,
        );
        if let Err(e) = self.stream.progress(now) {
            tracing::debug!(client = self.session.client.id(), error = %e, "fabric stream closed");
            if self.stream.stats().goodbyes_received > 0 {
                self.run_what_came_before_the_goodbye(scratch);
            }
            self.done = true;
            return true;
        }
        // No Arc clone here: this runs on every turn of a busy-polling loop.
        if self.session.shared().take_wakeup() {
            if self.session.shared().is_killed() {
                self.start_closing();
            } else {
                self.session.take_pushes();
                self.retry_if_blocked();
            }
        }
        self.check_block_timeout();
        self.read_input(scratch);
        if matches!(self.state, State::Running) && self.out_pos == 0 {
            self.execute();
        }
        self.check_proof();
        self.write_output();
        if let State::Closing { since } = &self.state {
            let drained = self.session.output.is_empty() && self.stream.unacknowledged() == 0;
            if drained || since.elapsed() > CLOSING_GRACE {
                let _ = self.stream.flush();
                self.stream.close("closed by the server");
                self.done = true;
            }
        }
        let after = (
            self.stream.stats().bytes_read,
            self.stream.stats().bytes_written,
        );
        before != after || self.done
    }

    /// Releases the client's server-side state. Call once, after `is_done`.
    pub fn finish(&mut self) {
        self.leave_block_if_any();
        let st = self.stream.stats();
        let server = &self.session.server.stats;
        Stats::add(&server.fabric_protocol_errors, st.protocol_errors);
        Stats::add(&server.fabric_rx_readvertised, st.rx_readvertised);
        Stats::add(&server.fabric_window_grows, st.window_grows);
        Stats::add(&server.fabric_window_grow_failures, st.window_grow_failures);
        Stats::add(&server.fabric_clients_said_goodbye, st.goodbyes_received);
        if st.protocol_errors > 0 {
            tracing::info!(
                client = self.session.client.id(),
                reason = self.stream.close_reason().unwrap_or(""),
                "fabric client closed for a protocol error"
            );
        }
        self.session.cleanup();
    }

    fn start_closing(&mut self) {
        self.leave_block_if_any();
        self.state = State::Closing {
            since: Instant::now(),
        };
    }

    fn leave_block_if_any(&mut self) {
        if let State::Blocked { block, .. } = std::mem::replace(&mut self.state, State::Running) {
            self.session.leave_blocked(&block);
        }
    }

    fn retry_if_blocked(&mut self) {
        match std::mem::replace(&mut self.state, State::Running) {
            State::Blocked { block, deadline } => {
                if self.session.retry_blocked(&block) {
                    self.session.leave_blocked(&block);
                } else {
                    self.state = State::Blocked { block, deadline };
                }
            }
            other => self.state = other,
        }
    }

    fn check_block_timeout(&mut self) {
        let expired = matches!(
            &self.state,
            State::Blocked { deadline: Some(d), .. } if Instant::now() >= *d
        );
        if !expired {
            return;
        }
        if let State::Blocked { block, .. } = std::mem::replace(&mut self.state, State::Running) {
            self.session.time_out_blocked(&block);
            self.session.leave_blocked(&block);
        }
    }

    /// Moves received bytes into the session's input, within the query buffer limit.
    /// The client said goodbye right behind its last requests (a pipeline it did not wait
    /// for): they run, as a TCP server runs what arrived before a FIN, and their replies,
    /// which have nowhere to go, are dropped. Stops at a command that would block or close.
    fn run_what_came_before_the_goodbye(&mut self, scratch: &mut [u8]) {
        for _ in 0..LAST_REQUESTS_ROUNDS_MAX {
            if !matches!(self.state, State::Running) || self.done {
                break;
            }
            let waiting = self.session.input.len() + self.stream.readable();
            self.read_input(scratch);
            self.execute();
            self.session.output.clear();
            self.out_pos = 0;
            let left = self.session.input.len() + self.stream.readable();
            if left == 0 || left >= waiting {
                break;
            }
        }
    }

    fn read_input(&mut self, scratch: &mut [u8]) {
        if matches!(self.state, State::Closing { .. }) {
            return;
        }
        for _ in 0..READS_PER_TURN_MAX {
            if self.stream.readable() == 0 {
                break;
            }
            match self.stream.read(scratch) {
                Ok(0) => break,
                Ok(n) => {
                    self.session.input.extend_from_slice(&scratch[..n]);
                    self.session.note_input(n);
                    if !self.session.input_within_limit() {
                        self.start_closing();
                        return;
                    }
                }
                Err(_) => {
                    self.done = true;
                    return;
                }
            }
        }
    }

    /// Runs complete requests until the input is drained, a command blocks or closes, or the
    /// output is over its threshold (then the rest waits until the output is written).
    fn execute(&mut self) {
        if self.session.input.is_empty() {
            return;
        }
        let (step, _more) = self.session.process_input();
        match step {
            Step::Continue => {}
            Step::Close => {
                self.state = State::Closing {
                    since: Instant::now(),
                }
            }
            // The stream is served on the TCP client port only (fabric replicas link with
            // REPLCONF RDMA-LINK); the request is refused and, as after SYNC anywhere, what
            // was pipelined behind it is not executed.
            Step::ReplicaStream(_) => {
                self.session
                    .output
                    .extend_from_slice(b"-ERR SYNC and PSYNC are served on the TCP port only\r\n");
                self.state = State::Closing {
                    since: Instant::now(),
                }
            }
            Step::Block(block) => {
                let deadline = block.timeout.map(|t| Instant::now() + t);
                let look_again = self.session.enter_blocked(&block);
                self.state = State::Blocked { block, deadline };
                if look_again {
                    self.retry_if_blocked();
                }
            }
        }
    }

    /// Hands as much output to the stream as the peer's window takes.
    fn write_output(&mut self) {
        // A synchronous write's reply leaves only once its acknowledgements are in.
        if matches!(&self.state, State::Blocked { block, .. } if block.holds_output()) {
            return;
        }
        let out = &self.session.output;
        // Replies leave once the AOF has what they answer: written (`everysec`, `no`), or
        // synced (`always`: the fsync is asked for, and the next turn looks again).
        if self.out_pos < out.len() {
            match self.session.log_gate() {
                Gate::Open => {}
                Gate::Write(offset) => self.session.server.aof.log.write_upto(offset),
                Gate::WaitSync(_) => return,
            }
        }
        if self.out_pos < out.len() {
            match self.stream.write(&out[self.out_pos..]) {
                Ok(n) => self.out_pos += n,
                Err(_) => {
                    self.done = true;
                    return;
                }
            }
        }
        if self.out_pos > 0 && self.out_pos == self.session.output.len() {
            self.out_pos = 0;
            self.session.output_written();
        }
        if self.stream.flush().is_err() {
            self.done = true;
        }
    }

    /// The poller that took the client in blocks while idle: the client's wake-ups (a key
    /// it waits on, a push, a kill) ring the poller's `bell`, and so does its connection when
    /// another poller's read of a shared endpoint hands it something (ofi hubs).
    pub fn attach_bell(&mut self, bell: &Arc<Doorbell>) {
        self.session.shared().attach_poller_bell(bell);
        self.stream.attach_idle_bell(bell);
    }

    /// Whether the poller may block on this client's connection (see `bus::idle`), pushing
    /// the descriptors to wait on: `Ready` if it has work now (a wake-up not yet taken,
    /// anything the stream holds), `Unsupported` if it needs a timed look (closing, output
    /// held by the AOF or the peer's window) or its provider has no descriptor.
    pub fn arm_idle_wait(&mut self, fds: &mut Vec<RawFd>) -> IdleWait {
        if self.done || self.session.shared().wake_pending() {
            return IdleWait::Ready;
        }
        let output_held_for_acks =
            matches!(&self.state, State::Blocked { block, .. } if block.holds_output());
        let output_pending = self.out_pos < self.session.output.len() && !output_held_for_acks;
        if matches!(self.state, State::Closing { .. }) || output_pending {
            return IdleWait::Unsupported;
        }
        // An error is the stream's to report (the next turn does); meanwhile the poller
        // sleeps in steps rather than spinning on it.
        self.stream
            .arm_idle_wait(fds)
            .unwrap_or(IdleWait::Unsupported)
    }

    /// When a blocked command of this client times out, if it does.
    pub fn block_deadline(&self) -> Option<Instant> {
        match &self.state {
            State::Blocked { deadline, .. } => *deadline,
            _ => None,
        }
    }

    pub fn client_id(&self) -> u64 {
        self.session.client.id()
    }

    pub fn is_blocked(&self) -> bool {
        self.session.shared().blocked.load(Relaxed)
    }
}
