//! One client connection: read, parse, execute, reply — pipelined requests are all executed
//! from one read and answered with one write.

use super::client::{Client, ClientShared};
use super::stats::LocalStats;
use super::Server;
use crate::command::ctx::{BlockRequest, Effects};
use crate::command::dispatch;
use bytes::{Buf, BytesMut};
use proto::resp::request::Parsed;
use proto::resp::{RequestLimits, RequestParser};
use smallvec::SmallVec;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Initial size of the read and write buffers; they grow with demand.
const INITIAL_BUFFER: usize = 16 * 1024;
/// Replies buffered before they are written mid-batch, so a long pipeline of large replies
/// does not hold them all in memory.
const OUTPUT_FLUSH_THRESHOLD: usize = 1024 * 1024;
/// Buffers larger than this are released after use instead of being kept for the next batch.
const BUFFER_KEEP_MAX: usize = 256 * 1024;
/// Free space guaranteed before each read: without it a full BytesMut would be read into in
/// 64-byte steps.
const READ_RESERVE: usize = 16 * 1024;

pub struct Connection<S> {
    server: Arc<Server>,
    stream: S,
    client: Client,
    parser: RequestParser,
    input: BytesMut,
    output: BytesMut,
    stats: LocalStats,
}

enum Step {
    Continue,
    Close,
    Block(BlockRequest),
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    pub fn new(server: Arc<Server>, stream: S, shared: Arc<ClientShared>) -> Self {
        let authenticated = !server.hot.requirepass_set.load(Relaxed);
        Connection {
            server,
            stream,
            client: Client::new(shared, authenticated),
            parser: RequestParser::new(),
            input: BytesMut::with_capacity(INITIAL_BUFFER),
            output: BytesMut::with_capacity(INITIAL_BUFFER),
            stats: LocalStats::default(),
        }
    }

    /// Serves the client until it leaves, is killed, or the node shuts down.
    pub async fn run(mut self) {
        let shared = self.client.shared.clone();
        // Shutdown reaches connections as a kill through the client registry, so no
        // connection polls a channel shared by all of them.
        loop {
            self.input.reserve(READ_RESERVE);
            tokio::select! {
                biased;
                read = self.stream.read_buf(&mut self.input) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        self.stats.input_bytes += n as u64;
                        if !self.serve_input().await { break; }
                    }
                },
                _ = shared.wakeup.notified() => {
                    if shared.is_killed() { break; }
                }
            }
            if shared.is_killed() {
                break;
            }
            self.take_pushes();
            if self.flush().await.is_err() {
                break;
            }
        }
        self.stats.flush(&self.server.stats);
        self.cleanup();
    }

    /// Executes what the input holds, writing replies in bounded batches. Returns false when
    /// the connection must close.
    async fn serve_input(&mut self) -> bool {
        loop {
            let (step, more) = self.process_input();
            match step {
                Step::Continue => {}
                Step::Close => {
                    let _ = self.flush().await;
                    return false;
                }
                Step::Block(block) => {
                    if !self.wait_blocked(block).await {
                        return false;
                    }
                    // Requests pipelined behind the blocked one, or sent while it waited,
                    // run now: in this loop, not by recursion, so that a long pipeline of
                    // blocking commands cannot nest futures until the stack overflows.
                    continue;
                }
            }
            if !more {
                return true;
            }
            // The output filled up with complete requests still waiting: write, then go on.
            if self.flush().await.is_err() {
                return false;
            }
        }
    }

    /// Executes complete requests from the input buffer until it is drained, a request
    /// blocks or closes, or the output is over its flush threshold. The flag says whether
    /// complete requests may remain.
    fn process_input(&mut self) -> (Step, bool) {
        let limits = RequestLimits {
            max_bulk_len: self.server.hot.proto_max_bulk_len.load(Relaxed) as usize,
            unauthenticated: !self.client.authenticated,
            ..RequestLimits::default()
        };
        let mut consumed = 0;
        let mut step = Step::Continue;
        let mut more = false;
        while consumed < self.input.len() {
            match self.parser.parse(&self.input[consumed..], &limits) {
                Ok(Parsed::Request { len }) => {
                    let buf = &self.input[consumed..consumed + len];
                    let args: SmallVec<[&[u8]; 8]> = (0..self.parser.arg_count())
                        .map(|i| self.parser.arg(buf, i))
                        .collect();
                    let effects = dispatch::execute(
                        &self.server,
                        &mut self.client,
                        &mut self.output,
                        &args,
                        &mut self.stats,
                    );
                    drop(args);
                    consumed += len;
                    if let Some(next) = self.after_command(effects) {
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
        self.input.advance(consumed);
        let pending = self.input.len();
        self.client.shared.query_buffer.store(pending, Relaxed);
        if pending as u64 > self.server.hot.query_buffer_limit.load(Relaxed) {
            tracing::warn!(
                client = self.client.id(),
                bytes = pending,
                "client-query-buffer-limit exceeded; closing"
            );
            return (Step::Close, false);
        }
        if self.input.is_empty() && self.input.capacity() > BUFFER_KEEP_MAX {
            self.input = BytesMut::with_capacity(INITIAL_BUFFER);
        }
        self.client.shared.last_active_ms.store(
            self.client.shared.created.elapsed().as_millis() as u64,
            Relaxed,
        );
        (step, more)
    }

    fn after_command(&mut self, effects: Effects) -> Option<Step> {
        if effects.close {
            return Some(Step::Close);
        }
        effects.block.map(Step::Block)
    }

    /// Waits for a blocked command's keys, its timeout, a kill, or the client leaving.
    /// Returns false when the connection must close.
    async fn wait_blocked(&mut self, block: BlockRequest) -> bool {
        if self.flush().await.is_err() {
            return false;
        }
        let shared = self.client.shared.clone();
        let server = self.server.clone();
        shared.blocked.store(true, Relaxed);
        if server.blocking.register(&block.keys, &shared) {
            // A push may have landed between the command finding nothing and the
            // registration above, with nobody in line to wake: look once more straight away
            // rather than miss it. A client behind others in every line does not, so that
            // it cannot take elements ahead of them (first blocked, first served).
            shared.wakeup.notify_one();
        }
        let deadline = block.timeout.map(|t| tokio::time::Instant::now() + t);
        let outcome = loop {
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = shared.wakeup.notified() => {
                    if shared.is_killed() { break false; }
                    self.take_pushes();
                    let args: SmallVec<[&[u8]; 8]> = block.retry.iter().map(|a| a.as_slice()).collect();
                    let mut effects = dispatch::execute(&server, &mut self.client, &mut self.output, &args, &mut self.stats);
                    if effects.block.take().is_none() {
                        break true;
                    }
                    // Still nothing: the reply buffer holds nothing new; keep waiting.
                }
                _ = sleep => {
                    let mut reply = proto::resp::Reply::new(&mut self.output, self.client.protocol);
                    block.timeout_reply.write(&mut reply);
                    break true;
                }
                read = self.stream.read_buf(&mut self.input) => match read {
                    // Bytes sent while blocked wait their turn; a close ends the wait.
                    Ok(0) | Err(_) => break false,
                    Ok(n) => {
                        self.stats.input_bytes += n as u64;
                        // They wait within the same bound as any unparsed input.
                        let pending = self.input.len();
                        self.client.shared.query_buffer.store(pending, Relaxed);
                        if pending as u64 > server.hot.query_buffer_limit.load(Relaxed) {
                            tracing::warn!(
                                client = self.client.id(),
                                bytes = pending,
                                "client-query-buffer-limit exceeded while blocked; closing"
                            );
                            break false;
                        }
                        self.input.reserve(READ_RESERVE);
                    }
                },
            }
        };
        shared.blocked.store(false, Relaxed);
        server.blocking.unregister(&block.keys, &shared);
        outcome
    }

    fn take_pushes(&mut self) {
        let mut pushes = self.client.shared.pushes.lock();
        if !pushes.is_empty() {
            self.output.extend_from_slice(&pushes);
            pushes.clear();
        }
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        if self.output.is_empty() {
            return Ok(());
        }
        self.stats.output_bytes += self.output.len() as u64;
        // A client that stops reading fills its socket and parks this write; a kill (CLIENT
        // KILL, an overflowing push queue, shutdown) must still end the connection.
        let shared = self.client.shared.clone();
        let mut consumed_wakeup = false;
        let result = {
            let killed = async {
                while !shared.is_killed() {
                    shared.wakeup.notified().await;
                    consumed_wakeup = true;
                }
            };
            tokio::select! {
                biased;
                written = self.stream.write_all(&self.output) => written,
                _ = killed => Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "client killed")),
            }
        };
        if consumed_wakeup {
            // The wake-up was meant for the loops (pushes, a ready key): hand it back.
            shared.wakeup.notify_one();
        }
        self.output.clear();
        if self.output.capacity() > BUFFER_KEEP_MAX {
            self.output = BytesMut::with_capacity(INITIAL_BUFFER);
        }
        self.stats.flush(&self.server.stats);
        result
    }

    fn cleanup(&mut self) {
        let server = &self.server;
        if let Some(handle) = self.client.watch.take() {
            server.watches.unwatch_all(handle);
        }
        crate::commands::pubsub::unsubscribe_all(server, &mut self.client);
        server.clients.remove(self.client.id());
    }
}
