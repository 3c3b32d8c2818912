//! The transport-free half of a client connection: input buffer, parser, client state and the
//! reply buffer. A transport (the TCP connection task, a fabric stream's polling thread) moves
//! bytes in and out and decides how to wait; the session parses, executes and replies, so both
//! transports run exactly the same command code.

use super::input_buffer::InputBuffer;
use super::Server;
use crate::command_framework::ctx::{BlockRequest, Effects, ReplicaStreamAsk, TimeoutReply};
use crate::command_framework::dispatch;
use crate::command_framework::pause_hold::pause_hold;
use crate::node_state::client::{Client, ClientShared};
use crate::node_state::client_unblock::{UnblockHow, UNBLOCKED_ERROR};
use crate::node_state::reply_mode::{keep_reply, ReplyMode};
use crate::node_state::stats::LocalStats;
use bytes::BytesMut;
use proto::resp::request::Parsed;
use proto::resp::{RequestLimits, RequestParser};
use smallvec::SmallVec;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Initial size of the read and write buffers; they grow with demand.
pub const INITIAL_BUFFER: usize = 16 * 1024;
/// Replies buffered before they are written mid-batch, so a long pipeline of large replies
/// does not hold them all in memory.
pub const OUTPUT_FLUSH_THRESHOLD: usize = 1024 * 1024;
/// Buffers larger than this are released after use instead of being kept for the next batch.
const BUFFER_KEEP_MAX: usize = 256 * 1024;

/// What the transport must do after the session processed input.
pub enum Step {
    /// Write the output (if any) and read more.
    Continue,
    /// Write the output (it may hold a final error) and close.
    Close,
    /// Write the output, then wait for the command's keys (see [`Session::retry_blocked`]).
    Block(BlockRequest),
    /// Write the output, then serve the replication stream until the client leaves
    /// (SYNC, PSYNC: [`super::tcp_replica`]).
    ReplicaStream(ReplicaStreamAsk),
}

/// One client's protocol state, independent of the transport.
pub struct Session {
    pub server: Arc<Server>,
    pub client: Client,
    parser: RequestParser,
    /// Bytes received and not yet executed. Transports append to it.
    pub input: InputBuffer,
    /// Replies not yet written. Transports drain it with [`Session::output_written`].
    pub output: BytesMut,
    pub stats: LocalStats,
    /// Requests the last [`Session::process_input`] ran: more than one is a pipeline.
    pub batch_requests: usize,
}

impl Session {
    pub fn new(server: Arc<Server>, shared: Arc<ClientShared>) -> Self {
        Self::with_buffers(server, shared, INITIAL_BUFFER)
    }

    /// A session whose read and write buffers start at `capacity` bytes (they grow with
    /// demand either way): small for a peer that has not authenticated yet.
    pub fn with_buffers(server: Arc<Server>, shared: Arc<ClientShared>, capacity: usize) -> Self {
        let authenticated = !server.acl.default_needs_auth();
        Session {
            server,
            client: Client::new(shared, authenticated),
            parser: RequestParser::new(),
            input: InputBuffer::with_capacity(capacity),
            output: BytesMut::with_capacity(capacity),
            stats: LocalStats::default(),
            batch_requests: 0,
        }
    }

    pub fn server(&self) -> &Arc<Server> {
        &self.server
    }

    pub fn shared(&self) -> &Arc<ClientShared> {
        &self.client.shared
    }

    /// Counts bytes a transport appended to `input`.
    pub fn note_input(&mut self, n: usize) {
        self.stats.input_bytes += n as u64;
    }

    /// Executes complete requests from the input buffer until it is drained, a request
    /// blocks or closes, or the output is over its flush threshold. The flag says whether
    /// complete requests may remain.
    pub fn process_input(&mut self) -> (Step, bool) {
        let limits = RequestLimits {
            max_bulk_len: self.server.hot.proto_max_bulk_len.load(Relaxed) as usize,
            unauthenticated: !self.client.authenticated,
            ..RequestLimits::default()
        };
        self.client.clock.begin_batch();
        let mut consumed = 0;
        let mut step = Step::Continue;
        let mut more = false;
        // Where the keys of the pipeline were looked ahead to (see `warm_ahead`): from its
        // second request on (a lone request, as without pipelining, costs no look ahead);
        // only over a keyspace large enough for lookups to miss the cache; never for a client
        // that has not authenticated, nor while a request is half parsed.
        let warm = self.client.authenticated
            && self
                .server
                .db(self.client.db)
                .is_some_and(|keyspace| keyspace.worth_warming());
        let mut warmed_until = if warm { 1 } else { usize::MAX };
        self.batch_requests = 0;
        while consumed < self.input.len() {
            if consumed >= warmed_until && !self.parser.in_progress() {
                warmed_until = self.warm_ahead(consumed, &limits);
            }
            match self.parser.parse(&self.input[consumed..], &limits) {
                Ok(Parsed::Request { len }) => {
                    let buf = &self.input[consumed..consumed + len];
                    let args: SmallVec<[&[u8]; 8]> = (0..self.parser.arg_count())
                        .map(|i| self.parser.arg(buf, i))
                        .collect();
                    // A request CLIENT PAUSE holds stays in the input, unconsumed: it
                    // runs when the pause lets it, in its place in the pipeline.
                    if let Some(held) = pause_hold(&self.server, &self.client, &args) {
                        step = Step::Block(held);
                        break;
                    }
                    self.batch_requests += 1;
                    let offset_before = self.client.repl_offset;
                    let held_from = self.output.len();
                    self.client.input_from_command = self.input.len() - consumed;
                    let mut effects = Effects::default();
                    dispatch::execute_into(
                        &*self.server,
                        &mut self.client,
                        &mut self.output,
                        &args,
                        &mut self.stats,
                        &mut effects,
                    );
                    if self.client.reply_mode != ReplyMode::On
                        || self.client.reply_mode_set.is_some()
                    {
                        let set_now = self.client.reply_mode_set.take();
                        if !keep_reply(&mut self.client.reply_mode, set_now, args[0]) {
                            // Invalidations placed ahead of the reply stay.
                            self.output
                                .truncate(held_from + self.client.tracking.pushed_ahead);
                        }
                    }
                    drop(args);
                    consumed += len;
                    if effects.block.is_none() && !effects.close {
                        effects.block = super::sync_acks::hold_for_acks(
                            &self.server,
                            &self.client,
                            offset_before,
                            held_from,
                        );
                    }
                    if let Some(next) = after_command(&mut effects) {
                        step = next;
                        break;
                    }
                    if self.output.len() >= OUTPUT_FLUSH_THRESHOLD {
                        more = true;
                        break;
                    }
                }
                Ok(Parsed::Empty { len }) => consumed += len,
                Ok(Parsed::Incomplete) => break,
                Err(e) => {
                    tracing::debug!(client = self.client.id(), error = %e, "protocol error; closing");
                    let mut reply = proto::resp::Reply::new(&mut self.output, self.client.protocol);
                    reply.error(&format!("ERR {e}"));
                    step = Step::Close;
                    break;
                }
            }
        }
        if let Some(last) = self.client.clock.end_batch() {
            let shared = &self.client.shared;
            let active = last.saturating_duration_since(shared.created).as_millis() as u64;
            shared.last_active_ms.store(active, Relaxed);
        }
        self.input.advance(consumed);
        if !self.input_within_limit() {
            return (Step::Close, false);
        }
        self.input
            .shrink_when_empty(BUFFER_KEEP_MAX, INITIAL_BUFFER);
        (step, more)
    }

    /// Records the unparsed input size for CLIENT LIST and checks it against
    /// `client-query-buffer-limit`. False means the client must be closed.
    pub fn input_within_limit(&mut self) -> bool {
        let pending = self.input.len();
        self.client.shared.query_buffer.store(pending, Relaxed);
        if pending as u64 > self.server.hot.query_buffer_limit.load(Relaxed) {
            tracing::warn!(
                client = self.client.id(),
                bytes = pending,
                "client-query-buffer-limit exceeded; closing"
            );
            return false;
        }
        true
    }

    /// Marks the client blocked on `block`'s keys. True means it should look again at once (a
    /// push may have landed between the command finding nothing and the registration, with
    /// nobody in line to wake it).
    pub fn enter_blocked(&mut self, block: &BlockRequest) -> bool {
        let shared = &self.client.shared;
        shared.blocked.store(true, Relaxed);
        if let TimeoutReply::Paused { .. } = block.timeout_reply {
            shared.paused.store(true, Relaxed);
            self.server.client_pause.note_held();
            // CLIENT UNPAUSE may have woken paused clients before this one was marked.
            return true;
        }
        if block.timeout_reply.client_unblock_may_end() {
            shared.unblock.enter();
        }
        let every_signal = block.timeout_reply == TimeoutReply::StreamRead;
        self.server
            .blocking
            .register(self.client.db, &block.keys, shared, every_signal)
    }

    /// Runs the blocked command again after a wake-up. True means it completed (its reply is
    /// in `output`); false means it still finds nothing and keeps waiting.
    pub fn retry_blocked(&mut self, block: &BlockRequest) -> bool {
        if let TimeoutReply::Paused { writes } = block.timeout_reply {
            // Over: the session runs the held request from its input (or holds it again).
            return !self
                .server
                .client_pause
                .holds(writes, crate::clock::unix_millis());
        }
        if block.timeout_reply.client_unblock_may_end() {
            // Held while the command looks again, so CLIENT UNBLOCK either finds the
            // client still waiting afterwards or has already asked it to stop.
            let shared = self.client.shared.clone();
            let slot = shared.unblock.hold();
            if let Some(how) = slot.requested() {
                self.answer_unblocked(block, how);
                slot.leave();
                return true;
            }
            let served = self.retry_on_keys(block);
            if served {
                slot.leave();
            }
            return served;
        }
        self.retry_on_keys(block)
    }

    /// Ends a wait as CLIENT UNBLOCK asked: the command's timeout reply, or an error.
    fn answer_unblocked(&mut self, block: &BlockRequest, how: UnblockHow) {
        match how {
            UnblockHow::Timeout => self.answer_timeout(block),
            UnblockHow::Error => {
                self.count_timed_out_call(block);
                self.stats.error_reply(&self.server.stats, UNBLOCKED_ERROR);
                let mut reply = proto::resp::Reply::new(&mut self.output, self.client.protocol);
                reply.error(UNBLOCKED_ERROR);
            }
        }
    }

    /// Runs the blocked command again (see [`Session::retry_blocked`]).
    fn retry_on_keys(&mut self, block: &BlockRequest) -> bool {
        if let TimeoutReply::SyncAcks { offset, wanted, .. } = block.timeout_reply {
            return super::sync_acks::acknowledged(&self.server, offset, wanted);
        }
        if block.timeout_reply == TimeoutReply::TopologyChange {
            return self.answer_topology_change();
        }
        self.take_pushes();
        let args: SmallVec<[&[u8]; 8]> = block.retry.iter().map(|a| a.as_slice()).collect();
        let mut effects = dispatch::execute(
            &*self.server,
            &mut self.client,
            &mut self.output,
            &args,
            &mut self.stats,
        );
        effects.block.take().is_none()
    }

    /// Answers a CLUSTER command waiting for its topology change once the outcome is in.
    /// False while it is not.
    fn answer_topology_change(&mut self) -> bool {
        use std::sync::mpsc::TryRecvError;
        let outcome = match self
            .client
            .pending_topology
            .as_ref()
            .map(|p| p.outcome.try_recv())
        {
            Some(Err(TryRecvError::Empty)) => return false,
            Some(Ok(outcome)) => outcome.map_err(|e| e.to_string()),
            Some(Err(TryRecvError::Disconnected)) | None => {
                Err(crate::cluster::shared::PROPOSAL_NO_ANSWER.to_string())
            }
        };
        let on_commit = self
            .client
            .pending_topology
            .take()
            .and_then(|p| p.on_commit);
        if outcome.is_ok() {
            if let (Some(then), Some(cluster)) = (on_commit, self.server.cluster.as_ref()) {
                then(cluster);
            }
        }
        let mut reply = proto::resp::Reply::new(&mut self.output, self.client.protocol);
        match outcome {
            Ok(()) => reply.ok(),
            Err(why) => {
                let text = crate::command_framework::ctx::topology_not_made(&why);
                self.stats.error_reply(&self.server.stats, &text);
                reply.error(&text);
            }
        }
        true
    }

    /// Answers a blocked command whose timeout passed.
    pub fn time_out_blocked(&mut self, block: &BlockRequest) {
        if block.timeout_reply.client_unblock_may_end() {
            let shared = self.client.shared.clone();
            let slot = shared.unblock.hold();
            // A CLIENT UNBLOCK that came with the deadline answered 1: its way wins.
            let how = slot.requested().unwrap_or(UnblockHow::Timeout);
            self.answer_unblocked(block, how);
            slot.leave();
            return;
        }
        self.answer_timeout(block);
    }

    /// The reply of a wait whose timeout passed. A held request (CLIENT PAUSE) gets none:
    /// the session runs it from its input next.
    fn answer_timeout(&mut self, block: &BlockRequest) {
        if let TimeoutReply::Paused { .. } = block.timeout_reply {
            return;
        }
        if block.timeout_reply == TimeoutReply::TopologyChange {
            // An outcome that came with the deadline is still the answer.
            if self.answer_topology_change() {
                return;
            }
            // A later one goes nowhere; the next change gets a channel of its own.
            self.client.pending_topology = None;
        }
        if let Some(text) = block.timeout_reply.error_text() {
            self.stats.error_reply(&self.server.stats, &text);
        }
        if matches!(
            block.timeout_reply,
            TimeoutReply::LapsedLease | TimeoutReply::MigrationPause
        ) {
            self.refuse_in_transaction(block);
        }
        self.count_timed_out_call(block);
        if let TimeoutReply::SyncAcks { held_from, .. } = block.timeout_reply {
            super::sync_acks::time_out(&mut self.output, self.client.protocol, held_from);
            return;
        }
        let mut reply = proto::resp::Reply::new(&mut self.output, self.client.protocol);
        match block.timeout_reply {
            // WAIT answers how many replicas acknowledged by now.
            TimeoutReply::ReplicaAcks { offset } => {
                reply.integer(self.server.replication.count_acked(offset) as i64)
            }
            other => other.write(&mut reply),
        }
    }

    /// A transaction meets a lease that did not come back as it meets any routing refusal
    /// (`redirect::reject`): a refused EXEC discards it, a command refused while being
    /// queued dooms it.
    fn refuse_in_transaction(&mut self, block: &BlockRequest) {
        let exec = block
            .retry
            .first()
            .is_some_and(|name| name.eq_ignore_ascii_case(b"exec"));
        if exec {
            crate::command_framework::transaction::discard(&self.server, &mut self.client);
        } else if let Some(multi) = self.client.multi.as_mut() {
            multi.errored = true;
        }
    }

    /// A blocking command that times out counts as one call (INFO commandstats), as one that
    /// is served does when it runs again.
    fn count_timed_out_call(&self, block: &BlockRequest) {
        if !matches!(
            block.timeout_reply,
            TimeoutReply::NullArray
                | TimeoutReply::NullBulk
                | TimeoutReply::ReplicaAcks { .. }
                | TimeoutReply::StreamRead
        ) || block.retry.is_empty()
        {
            return;
        }
        let args: SmallVec<[&[u8]; 8]> = block.retry.iter().map(|a| a.as_slice()).collect();
        if let Ok(spec) = dispatch::resolve(&args) {
            self.server.command_stats.record(spec, 0, false);
        }
    }

    /// Leaves the blocked state.
    pub fn leave_blocked(&mut self, block: &BlockRequest) {
        let shared = &self.client.shared;
        shared.blocked.store(false, Relaxed);
        if let TimeoutReply::Paused { .. } = block.timeout_reply {
            shared.paused.store(false, Relaxed);
            self.server.client_pause.note_released();
            return;
        }
        shared.unblock.leave();
        self.server
            .blocking
            .unregister(self.client.db, &block.keys, shared);
        if matches!(
            block.timeout_reply,
            TimeoutReply::ReplicaAcks { .. } | TimeoutReply::SyncAcks { .. }
        ) {
            self.server.replication.cancel_wait(shared);
        }
    }

    /// Moves queued pub/sub pushes into the output.
    pub fn take_pushes(&mut self) {
        let mut pushes = self.client.shared.pushes.lock();
        if !pushes.is_empty() {
            self.output.extend_from_slice(&pushes);
            pushes.clear();
        }
    }

    /// What the replies in `output` wait for: the AOF must hold what they answer
    /// (`appendfsync always`: synced; `everysec`/`no`: written).
    pub fn log_gate(&self) -> crate::server::persistence::aof::log::Gate {
        self.server.aof.log.gate(self.client.log_offset)
    }

    /// The transport wrote all of `output`: count it and recycle the buffer.
    pub fn output_written(&mut self) {
        self.stats.output_bytes += self.output.len() as u64;
        self.output.clear();
        if self.output.capacity() > BUFFER_KEEP_MAX {
            self.output = BytesMut::with_capacity(INITIAL_BUFFER);
        }
        self.stats.flush(&self.server.stats);
    }

    /// Releases the client's server-side state (watches, subscriptions, registry entry).
    pub fn cleanup(&mut self) {
        self.stats.flush(&self.server.stats);
        let server = &self.server;
        if let Some(handle) = self.client.watch.take() {
            server.watches.unwatch_all(handle);
        }
        crate::commands::pubsub::unsubscribe_all(server, &mut self.client);
        server
            .tracking
            .disable(&self.client.shared, &mut self.client.tracking);
        server.monitors.remove(self.client.id());
        server.clients.remove(self.client.id());
    }
}

/// Borrows the effects: taking them by value copied the whole struct (~600 bytes) per
/// command.
fn after_command(effects: &mut Effects) -> Option<Step> {
    if effects.close {
        return Some(Step::Close);
    }
    if let Some(ask) = effects.replica_stream {
        return Some(Step::ReplicaStream(ask));
    }
    effects.block.take().map(Step::Block)
}
