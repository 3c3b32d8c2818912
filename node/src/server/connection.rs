//! One TCP client connection (plain or TLS): read, hand the bytes to the [`Session`], write its replies.
//! Pipelined requests are all executed from one read and answered with one write.

use super::session::{Session, Step};
use super::Server;
use crate::command_framework::ctx::BlockRequest;
use crate::node_state::client::ClientShared;
use crate::server::persistence::aof::log::Gate;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Free space guaranteed before each read, so a read takes what a pipeline sent in one call.
const READ_RESERVE: usize = 16 * 1024;

pub struct Connection<S> {
    stream: S,
    session: Session,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    pub fn new(server: Arc<Server>, stream: S, shared: Arc<ClientShared>) -> Self {
        Connection {
            stream,
            session: Session::new(server, shared),
        }
    }

    /// Serves the client until it leaves, is killed, or the node shuts down.
    pub async fn run(mut self) {
        let shared = self.session.shared().clone();
        // Shutdown reaches connections as a kill through the client registry, so no
        // connection polls a channel shared by all of them.
        loop {
            tokio::select! {
                biased;
                read = self.stream.read(self.session.input.spare_mut(READ_RESERVE)) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        self.note_read(n);
                        if !self.serve_input().await { break; }
                    }
                },
                _ = shared.notified() => {
                    if shared.is_killed() { break; }
                }
            }
            if shared.is_killed() {
                break;
            }
            self.session.take_pushes();
            if self.flush().await.is_err() {
                break;
            }
        }
        self.session.cleanup();
    }

    /// `n` bytes arrived in the input buffer: count them and keep the event loop polling.
    fn note_read(&mut self, n: usize) {
        self.session.input.commit(n);
        self.session.note_input(n);
        let server = self.session.server();
        server.busy_poll.note_activity(&server.hot);
    }

    /// Executes what the input holds, writing replies in bounded batches. Returns false when
    /// the connection must close.
    async fn serve_input(&mut self) -> bool {
        loop {
            let (step, more) = self.session.process_input();
            match step {
                Step::Continue => {}
                Step::Close => {
                    let _ = self.flush().await;
                    return false;
                }
                Step::ReplicaStream(ask) => {
                    // What was pipelined before SYNC is answered first; what follows it
                    // is never executed (the connection is a stream consumer from here).
                    if self.flush().await.is_ok() {
                        super::tcp_replica::serve(&mut self.stream, &self.session, ask).await;
                    }
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

    /// Waits for a blocked command's keys, its timeout, a kill, or the client leaving.
    /// Returns false when the connection must close.
    async fn wait_blocked(&mut self, block: BlockRequest) -> bool {
        // A synchronous write's reply (and what the pipeline answered before it) leaves
        // only once its acknowledgements are in.
        if !block.holds_output() && self.flush().await.is_err() {
            return false;
        }
        let shared = self.session.shared().clone();
        if self.session.enter_blocked(&block) {
            shared.wake();
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
                _ = shared.notified() => {
                    if shared.is_killed() { break false; }
                    if self.session.retry_blocked(&block) {
                        break true;
                    }
                    // Still nothing: the reply buffer holds nothing new; keep waiting.
                }
                _ = sleep => {
                    self.session.time_out_blocked(&block);
                    break true;
                }
                read = self.stream.read(self.session.input.spare_mut(READ_RESERVE)) => match read {
                    // Bytes sent while blocked wait their turn; a close ends the wait.
                    Ok(0) | Err(_) => break false,
                    Ok(n) => {
                        self.note_read(n);
                        // They wait within the same bound as any unparsed input.
                        if !self.session.input_within_limit() {
                            break false;
                        }
                    }
                },
            }
        };
        self.session.leave_blocked(&block);
        outcome
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        if self.session.output.is_empty() {
            return Ok(());
        }
        // A client that stops reading fills its socket and parks this write; a kill (CLIENT
        // KILL, an overflowing push queue, shutdown) must still end the connection.
        let shared = self.session.shared().clone();
        // The replies leave once the AOF has what they answer: written (`everysec`, `no`;
        // after a yield, so that the clients served meanwhile share the `write`), or on
        // disk (`always`; other connections' writes are synced by the same round).
        let log_wait = match self.session.log_gate() {
            Gate::Open => {
                if self.session.batch_requests > 1 {
                    // A pipeline's replies wait for the connections this round found
                    // readable to run theirs, as Redis writes every client's replies after
                    // serving them all: one wake-up of a client's CPU then finds several
                    // replies (SET -P 16, 50 clients: +5-8% requests/s; BENCHMARKS.md). A lone
                    // request is answered at once: the yield costs it an event-loop turn
                    // (single-client GET: -6%).
                    tokio::task::yield_now().await;
                }
                None
            }
            Gate::Write(offset) => {
                tokio::task::yield_now().await;
                self.session.server.aof.log.write_upto(offset);
                None
            }
            Gate::WaitSync(offset) => Some(offset),
        };
        let mut consumed_wakeup = false;
        let result = {
            let killed = async {
                while !shared.is_killed() {
                    shared.notified().await;
                    consumed_wakeup = true;
                }
            };
            let log = &self.session.server.aof.log;
            let write = async {
                if let Some(offset) = log_wait {
                    log.wait_synced(offset).await;
                }
                self.stream.write_all(&self.session.output).await?;
                // A TLS stream may keep encrypted bytes back until flushed; a plain socket's
                // flush does nothing.
                self.stream.flush().await
            };
            tokio::select! {
                biased;
                written = write => written,
                _ = killed => Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "client killed")),
            }
        };
        if consumed_wakeup {
            // The wake-up was meant for the loops (pushes, a ready key): hand it back.
            shared.wake();
        }
        self.session.output_written();
        result
    }
}
