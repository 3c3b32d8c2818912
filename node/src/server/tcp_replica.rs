//! SYNC and PSYNC on the client port (issue 18): the connection becomes a consumer of the
//! replication stream, as Redis answers them, so that tools that follow a primary over TCP
//! (the Redis test suite's `attach_to_replication_stream`, `redis-cli --replica`) can follow
//! this node. Fabric replicas do not use this path (they link with `REPLCONF RDMA-LINK`).
//!
//! What the consumer gets: for PSYNC a status line (`+FULLRESYNC <replid> <offset>`, or
//! `+CONTINUE` when it named a history the backlog still holds); for a full sync `$<len>\r\n`
//! and the node's snapshot, in the node's own snapshot format (the bytes SAVE writes and a
//! fabric full sync ships; **not an RDB**), taken with every shard held so that it is exactly
//! the dataset at `<offset>`; then every propagated command from `<offset> + 1` as RESP
//! arrays, as they are in the backlog: the first write after the snapshot selects its
//! database (`snapshot::take` makes the stream forget its database), as Redis's does.
//!
//! Bounds: at most [`TCP_REPLICAS_MAX`] such connections; one holds at most one chunk of
//! [`CHUNK_MAX`] bytes besides its socket's buffers; a consumer that falls behind by more than
//! [`TCP_REPLICA_LAG_MAX`] bytes (Redis's replica class hard limit, 256 MB), or out of the
//! backlog (`repl-backlog-size`), is disconnected, as Redis drops a replica over its output
//! limit. Such a consumer is shown as a replica, as Redis shows it (CLIENT LIST flag `S`,
//! INFO replication's `connected_slaves` and `slaveN`, ROLE: `node_state::stream_consumers`),
//! but it is not one for WAIT or `min-replicas-to-write`: it never acknowledges anything.
//!
//! Nothing here blocks the connection's runtime thread: the snapshot is built on the
//! blocking pool, new bytes are looked for on a timer.

use super::repl_link::snapshot;
use super::session::Session;
use super::Server;
use crate::clock::unix_millis;
use crate::command_framework::ctx::ReplicaStreamAsk;
use crate::node_state::client::ClientShared;
use crate::node_state::stats::Stats;
use crate::replication::psync::PsyncDecision;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Connections serving the stream at once; more are refused. Few, because each holds a
/// whole snapshot of the dataset while it is written (tools and test suites follow the
/// stream one at a time; replicas use the fabric).
pub const TCP_REPLICAS_MAX: usize = 4;
/// How far (bytes of stream) a consumer may fall behind before it is disconnected: Redis's
/// `client-output-buffer-limit replica` hard limit (256 MB). The backlog usually bounds it
/// first: bytes it no longer holds cannot be sent.
pub const TCP_REPLICA_LAG_MAX: u64 = 256 * 1024 * 1024;
/// Stream bytes copied out of the backlog per write.
pub const CHUNK_MAX: usize = 64 * 1024;
/// How often an idle consumer looks for new stream bytes.
const IDLE_POLL: Duration = Duration::from_millis(5);
/// How often a consumer whose write is stuck (it does not read) checks its lag.
const LAG_CHECK: Duration = Duration::from_millis(50);
/// Bytes read (and ignored: `REPLCONF ACK`, newlines) per read from the consumer.
const INPUT_SCRATCH: usize = 4 * 1024;

/// A consumer's place in the replicas INFO lists, given back when the connection ends.
struct Listed<'a> {
    server: &'a Server,
    client: u64,
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        self.server
            .replication
            .stream_consumer_detached(self.client);
    }
}

/// One slot of [`TCP_REPLICAS_MAX`], given back when the connection ends.
struct Slot<'a>(&'a Server);

impl<'a> Slot<'a> {
    fn take(server: &'a Server) -> Option<Self> {
        let taken = server.tcp_replicas.fetch_add(1, Relaxed);
        let slot = Slot(server);
        (taken < TCP_REPLICAS_MAX).then_some(slot)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.tcp_replicas.fetch_sub(1, Relaxed);
    }
}

/// Serves the replication stream on `stream` until the client leaves, is killed, falls too
/// far behind, or the node shuts down. The caller closes the connection afterwards.
pub fn serve<'a, S: AsyncRead + AsyncWrite + Unpin>(
    stream: &'a mut S,
    session: &Session,
    ask: ReplicaStreamAsk,
) -> impl std::future::Future<Output = ()> + 'a {
    // The session itself is not `Sync`: only what the stream needs crosses the awaits.
    let consumer = Consumer {
        server: session.server.clone(),
        shared: session.shared().clone(),
        id: session.client.id(),
    };
    serve_consumer(stream, consumer, ask)
}

/// The client a stream is served to.
struct Consumer {
    server: Arc<Server>,
    shared: Arc<ClientShared>,
    id: u64,
}

async fn serve_consumer<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    consumer: Consumer,
    ask: ReplicaStreamAsk,
) {
    let server = consumer.server.clone();
    let id = consumer.id;
    let Some(_slot) = Slot::take(&server) else {
        let _ = stream
            .write_all(b"-ERR too many replication stream consumers\r\n")
            .await;
        return;
    };
    if let Err(e) = server.replication.ensure_backlog() {
        let _ = stream.write_all(format!("-ERR {e}\r\n").as_bytes()).await;
        return;
    }
    consumer.shared.stream_consumer.store(true, Relaxed);
    let peer = consumer.shared.peer;
    server.replication.stream_consumer_attached(
        id,
        peer.ip().to_string(),
        peer.port(),
        unix_millis(),
    );
    let _listed = Listed {
        server: &server,
        client: id,
    };
    let from = match server.replication.psync(&ask.psync) {
        decision @ PsyncDecision::Continue { from, .. } => {
            Stats::add(&server.stats.sync_partial_ok, 1);
            let line = format!("{}\r\n", decision.reply_line());
            if stream.write_all(line.as_bytes()).await.is_err() {
                return;
            }
            tracing::info!(client = id, from, "TCP replica continues");
            from
        }
        PsyncDecision::FullResync { replid, .. } => {
            Stats::add(&server.stats.sync_full, 1);
            if ask.psync.history.is_some() {
                Stats::add(&server.stats.sync_partial_err, 1);
            }
            let Some(offset) = full_sync(stream, &server, &ask, replid).await else {
                return;
            };
            tracing::info!(client = id, offset, "TCP replica fully synced");
            offset + 1
        }
    };
    server
        .replication
        .stream_consumer_sent(id, from.saturating_sub(1), unix_millis());
    follow(stream, &consumer, from).await;
    tracing::info!(client = id, "TCP replica stream ended");
}

/// Writes the status line (PSYNC) and the snapshot; returns the snapshot's
/// offset, or `None` when the client is gone.
async fn full_sync<S: AsyncWrite + Unpin>(
    stream: &mut S,
    server: &Arc<Server>,
    ask: &ReplicaStreamAsk,
    replid: crate::replication::ids::ReplId,
) -> Option<u64> {
    // Every shard is held while it is built: not on this runtime thread.
    let for_snapshot = server.clone();
    let snap = tokio::task::spawn_blocking(move || snapshot::take(&for_snapshot))
        .await
        .ok()?;
    let mut head = Vec::new();
    if ask.status_line {
        head.extend_from_slice(format!("+FULLRESYNC {replid} {}\r\n", snap.offset).as_bytes());
    }
    head.extend_from_slice(format!("${}\r\n", snap.bytes.len()).as_bytes());
    stream.write_all(&head).await.ok()?;
    // Redis sends the payload without a trailing CRLF; so does this.
    stream.write_all(&snap.bytes).await.ok()?;
    stream.flush().await.ok()?;
    Some(snap.offset)
}

/// Why a consumer stops.
enum Stop {
    Gone,
    Behind,
}

/// Copies the stream from `next` (the first byte wanted) to the client until it stops.
async fn follow<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    consumer: &Consumer,
    mut next: u64,
) {
    let server = &consumer.server;
    let shared = consumer.shared.clone();
    let mut scratch = vec![0u8; INPUT_SCRATCH];
    let stop = loop {
        if shared.is_killed() || server.shutdown.is_triggered() {
            break Stop::Gone;
        }
        let Some(chunk) = copy_chunk(server, next) else {
            break Stop::Behind;
        };
        if chunk.is_empty() {
            // Idle: wait for bytes, a kill, or the client leaving (what it sends is ignored).
            tokio::select! {
                read = stream.read(&mut scratch) => match read {
                    Ok(0) | Err(_) => break Stop::Gone,
                    Ok(_) => {}
                },
                _ = shared.notified() => {}
                _ = tokio::time::sleep(IDLE_POLL) => {}
            }
            continue;
        }
        let after = next + chunk.len() as u64;
        match write_within_lag(stream, server, &shared, &chunk, after).await {
            Ok(()) => {
                next = after;
                server
                    .replication
                    .stream_consumer_sent(consumer.id, next - 1, unix_millis());
            }
            Err(stop) => break stop,
        }
    };
    if let Stop::Behind = stop {
        tracing::warn!(
            client = consumer.id,
            next,
            master_repl_offset = server.replication.master_repl_offset(),
            "TCP replica fell too far behind (or out of the backlog); disconnecting"
        );
    }
}

/// Up to [`CHUNK_MAX`] stream bytes from `next`; empty when there are none yet, `None` when
/// the backlog no longer holds them.
fn copy_chunk(server: &Server, next: u64) -> Option<Vec<u8>> {
    server.replication.read_backlog(next, |range| {
        range.map(|r| {
            let mut out = Vec::with_capacity(r.len().min(CHUNK_MAX));
            for chunk in r.chunks() {
                let take = chunk.len().min(CHUNK_MAX - out.len());
                out.extend_from_slice(&chunk[..take]);
                if out.len() == CHUNK_MAX {
                    break;
                }
            }
            out
        })
    })
}

/// Whether a consumer whose next byte is `next` is still within its bounds.
fn within_lag(server: &Server, next: u64) -> bool {
    let end = server.replication.master_repl_offset() + 1;
    end.saturating_sub(next) <= TCP_REPLICA_LAG_MAX
        && server
            .replication
            .read_backlog(next, |range| range.is_some())
}

/// Writes `chunk` (the bytes before `after`), giving up when the client is killed or, while
/// the write is stuck, falls out of its bounds.
async fn write_within_lag<S: AsyncWrite + Unpin>(
    stream: &mut S,
    server: &Server,
    shared: &Arc<ClientShared>,
    chunk: &[u8],
    after: u64,
) -> Result<(), Stop> {
    let write = stream.write_all(chunk);
    tokio::pin!(write);
    loop {
        tokio::select! {
            written = &mut write => return written.map_err(|_| Stop::Gone),
            _ = shared.notified() => {
                if shared.is_killed() {
                    return Err(Stop::Gone);
                }
            }
            _ = tokio::time::sleep(LAG_CHECK) => {
                if !within_lag(server, after) {
                    return Err(Stop::Behind);
                }
            }
        }
    }
}
