//! The fabric transport: a bus Stream (Valkey-over-RDMA framing, any provider) behind the same
//! two async methods as TCP.
//!
//! The bus is synchronous and polled (DESIGN §4), so each connection gets a dedicated OS thread,
//! the *driver*, that owns the stream and exchanges bytes with the async client through two
//! bounded channels:
//!
//! - to the wire: chunks of requests. When it is full, `write_all` waits: the caller is held
//!   back, as by a full TCP send buffer.
//! - from the wire: chunks of replies. When it is full the driver stops reading the stream, so
//!   the node's writes stall on the stream's window: back-pressure reaches the server, as a full
//!   TCP receive buffer would.
//!
//! Both bounds keep the memory of a connection fixed ([`TO_WIRE_CHUNKS_MAX`] and
//! [`FROM_WIRE_CHUNKS_MAX`] chunks of at most [`CHUNK_BYTES_MAX`] bytes each way).
//!
//! Idle back-off ([`Backoff`]): after any activity the driver polls without sleeping for
//! [`SPIN`] (yielding the core between polls, since a 2-core machine may also run the node), then
//! sleeps in steps from [`IDLE_SLEEP_MIN`] doubling to [`IDLE_SLEEP_MAX`], so an idle client
//! does not burn a core. The sleeps are `park_timeout`: the async side unparks the driver when
//! it queues a request, so a request never waits for a sleep to end; only replies that arrive
//! during a sleep wait (at most [`IDLE_SLEEP_MAX`]).
//!
//! A node that stops sending keepalives for [`PEER_SILENCE_MAX`] is taken as gone
//! ([`Liveness`]).
//!
//! Close travels both ways: dropping the transport closes the to-wire channel, and the driver
//! then closes the stream (the node sees a disconnect); a stream the node closed, or one that
//! fails, ends the driver, which hands over the bytes still received and then closes the
//! from-wire channel (`read_some` returns 0, or the error that ended it).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

use bus::select::{connect_stream, ByteStream};
use bus::stream::RX_SIZE_DEFAULT;
use bus::BusError;
use bytes::{Buf, Bytes, BytesMut};
use tokio::sync::{mpsc, oneshot};

use super::error::ClientError;

/// Largest chunk through either channel, and the most the driver reads from the stream at once.
pub const CHUNK_BYTES_MAX: usize = 64 * 1024;
/// Request chunks queued for the driver: 1 MiB at most, the stream's default window
/// ([`RX_SIZE_DEFAULT`]); more would only wait in memory for the node's window to reopen.
pub const TO_WIRE_CHUNKS_MAX: usize = 16;
/// Reply chunks queued for the client: 1 MiB at most, same reasoning the other way.
pub const FROM_WIRE_CHUNKS_MAX: usize = 16;
/// How long the driver keeps polling without sleeping after the last activity: a little more
/// than a small request's round trip over shm or loopback tcp, so a pipeline keeps flowing.
pub const SPIN: Duration = Duration::from_micros(100);
/// First sleep of an idle driver, doubled at each idle round up to [`IDLE_SLEEP_MAX`].
pub const IDLE_SLEEP_MIN: Duration = Duration::from_micros(20);
/// Longest sleep of an idle driver: the most a reply that arrives while idle waits, and the
/// gap between progress calls the providers without a wait object (tcp, shm) must tolerate.
pub const IDLE_SLEEP_MAX: Duration = Duration::from_millis(1);
/// How long a closed client's last requests may wait for the node's window before the stream
/// is dropped anyway (a node that stopped reading must not keep the thread alive).
const LINGER_MAX: Duration = Duration::from_secs(1);
/// How long the node may stay silent (no keepalive, no control message, no reply byte) before
/// the driver declares it gone: three of its keepalive periods and a second of slack. The
/// fabric has no connection state to break (RDM on tcp and shm), so without this a client of a
/// node that closed or died would wait forever.
pub const PEER_SILENCE_MAX: Duration =
    Duration::from_secs(3 * bus::stream::KEEPALIVE_INTERVAL.as_secs() + 1);
/// Added to the connect timeout for opening the provider (loading libfabric takes ~0.4 s).
const PROVIDER_OPEN_GRACE: Duration = Duration::from_secs(5);

const _: () = assert!(TO_WIRE_CHUNKS_MAX * CHUNK_BYTES_MAX <= RX_SIZE_DEFAULT);
const _: () = assert!(FROM_WIRE_CHUNKS_MAX * CHUNK_BYTES_MAX <= RX_SIZE_DEFAULT);

/// Why the driver stopped, for the async side.
#[derive(Debug, Clone)]
enum End {
    /// The node closed the stream (or the stream saw the peer go away).
    Closed,
    /// Anything else: a protocol violation, a provider error.
    Failed(String),
}

/// An open fabric connection (see the module docs).
pub struct FabricTransport {
    provider: String,
    /// `None` once closed by `Drop`.
    outgoing: Option<mpsc::Sender<Bytes>>,
    incoming: mpsc::Receiver<Bytes>,
    driver: Thread,
    end: Arc<Mutex<Option<End>>>,
}

impl std::fmt::Debug for FabricTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FabricTransport")
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

impl FabricTransport {
    /// Opens `provider` and connects a client Stream to the node's fabric listener at
    /// `host:port`. A provider this host lacks fails with [`ClientError::Fabric`] carrying the
    /// provider's reason.
    pub async fn open(
        provider: &str,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<FabricTransport, ClientError> {
        let target = format!("{host}:{port}");
        let fabric_error = |source: BusError| ClientError::Fabric {
            target: target.clone(),
            provider: provider.to_string(),
            source: Box::new(source),
        };
        let (ready_tx, ready_rx) = oneshot::channel();
        let (out_tx, out_rx) = mpsc::channel(TO_WIRE_CHUNKS_MAX);
        let (in_tx, in_rx) = mpsc::channel(FROM_WIRE_CHUNKS_MAX);
        let end = Arc::new(Mutex::new(None));
        let driver_end = Arc::clone(&end);
        let (name, host_owned) = (provider.to_string(), host.to_string());
        let handle = std::thread::Builder::new()
            .name("operator-fabric".into())
            .spawn(move || {
                let stream = match connect(&name, &host_owned, port, timeout) {
                    Ok(stream) => stream,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                if ready_tx.send(Ok(())).is_err() {
                    return; // the caller gave up waiting
                }
                let why = drive(stream, out_rx, in_tx);
                *driver_end.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
            })?;
        match tokio::time::timeout(timeout + PROVIDER_OPEN_GRACE, ready_rx).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => return Err(fabric_error(e)),
            Ok(Err(_)) => {
                return Err(fabric_error(BusError::Closed(
                    "the fabric driver thread stopped while connecting".into(),
                )))
            }
            Err(_) => {
                return Err(ClientError::ConnectTimeout {
                    target,
                    after: timeout,
                })
            }
        }
        Ok(FabricTransport {
            provider: provider.to_string(),
            outgoing: Some(out_tx),
            incoming: in_rx,
            driver: handle.thread().clone(),
            end,
        })
    }

    /// The provider's name.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// Hands all of `bytes` to the driver, in chunks, waiting while its queue is full.
    pub async fn write_all(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        let Some(outgoing) = self.outgoing.as_ref() else {
            return Err(std::io::ErrorKind::NotConnected.into());
        };
        while !bytes.is_empty() {
            let n = bytes.len().min(CHUNK_BYTES_MAX);
            let chunk = Bytes::copy_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            let sent = outgoing.send(chunk).await;
            self.driver.unpark();
            if sent.is_err() {
                return Err(self.ended_error(std::io::ErrorKind::BrokenPipe));
            }
        }
        Ok(())
    }

    /// Appends the next chunk of received bytes to `buf`, waiting for one. Returns 0 once the
    /// node closed the stream and everything it sent was handed over.
    pub async fn read_some(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        match self.incoming.recv().await {
            Some(chunk) => {
                buf.extend_from_slice(&chunk);
                Ok(chunk.len())
            }
            None => match self.ended() {
                Some(End::Failed(_)) => Err(self.ended_error(std::io::ErrorKind::Other)),
                _ => Ok(0),
            },
        }
    }

    fn ended(&self) -> Option<End> {
        self.end.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn ended_error(&self, kind: std::io::ErrorKind) -> std::io::Error {
        let why = match self.ended() {
            Some(End::Failed(reason)) => reason,
            _ => "the fabric connection is closed".to_string(),
        };
        std::io::Error::new(kind, format!("fabric {}: {why}", self.provider))
    }
}

impl Drop for FabricTransport {
    fn drop(&mut self) {
        // Closing the channel tells the driver to close the stream; wake it to see that now.
        self.outgoing = None;
        self.driver.unpark();
    }
}

/// Resolves `host` and connects a client Stream (runs on the driver thread: both block).
fn connect(
    provider: &str,
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<Box<dyn ByteStream>, BusError> {
    let to: SocketAddr = (host, port)
        .to_socket_addrs()
        .map_err(|e| BusError::Invalid {
            what: "fabric host",
            reason: format!("{host}: {e}"),
        })?
        .next()
        .ok_or_else(|| BusError::Invalid {
            what: "fabric host",
            reason: format!("{host} has no address"),
        })?;
    connect_stream(provider, to, RX_SIZE_DEFAULT, timeout)
}

/// The driver's loop: moves bytes between the stream and the channels until either side
/// closes. Returns why it stopped.
fn drive(
    mut stream: Box<dyn ByteStream>,
    mut outgoing: mpsc::Receiver<Bytes>,
    incoming: mpsc::Sender<Bytes>,
) -> End {
    let started = Instant::now();
    let mut backoff = Backoff::new(started);
    // A request chunk the stream's window has not taken whole yet.
    let mut unsent: Option<Bytes> = None;
    // A reply chunk the full from-wire channel has not taken yet.
    let mut undelivered: Option<Bytes> = None;
    let mut closed_at: Option<Instant> = None;
    let mut liveness = Liveness::new(started);
    let why = loop {
        let mut busy = false;
        if let Err(e) = stream.progress(started.elapsed()) {
            break end_of(e);
        }
        let stats = stream.stats();
        if !liveness.heard(stats.control_received + stats.bytes_read, Instant::now()) {
            break End::Failed(format!(
                "the node sent nothing (not even a keepalive) for {PEER_SILENCE_MAX:?}: presumed gone"
            ));
        }
        // Replies: deliver the held-back chunk first, then read while the channel has room.
        loop {
            let chunk = match undelivered.take() {
                Some(chunk) => chunk,
                None => match read_chunk(stream.as_mut()) {
                    Ok(Some(chunk)) => chunk,
                    Ok(None) => break,
                    Err(e) => return end_of(e),
                },
            };
            match incoming.try_send(chunk) {
                Ok(()) => busy = true,
                Err(mpsc::error::TrySendError::Full(chunk)) => {
                    undelivered = Some(chunk);
                    break;
                }
                // The client is gone: nobody reads replies any more.
                Err(mpsc::error::TrySendError::Closed(_)) => return End::Closed,
            }
        }
        // Requests: as much as the node's window takes.
        let client_closed = match write_requests(stream.as_mut(), &mut outgoing, &mut unsent) {
            Ok((wrote, client_closed)) => {
                busy |= wrote;
                client_closed
            }
            Err(e) => break end_of(e),
        };
        if let Err(e) = stream.flush() {
            break end_of(e);
        }
        if client_closed {
            let since = *closed_at.get_or_insert_with(Instant::now);
            if unsent.is_none() || since.elapsed() >= LINGER_MAX {
                // One more round so the last writes are posted; dropping the stream closes it.
                let _ = stream.progress(started.elapsed());
                return End::Closed;
            }
        }
        match backoff.next(busy, Instant::now()) {
            Idle::Spin => std::thread::yield_now(),
            Idle::Sleep(d) => std::thread::park_timeout(d),
        }
    };
    // The stream is closed: what it received before that is still the client's.
    let mut pending = undelivered.into_iter().collect::<Vec<_>>();
    while let Ok(Some(chunk)) = read_chunk(stream.as_mut()) {
        pending.push(chunk);
    }
    for chunk in pending {
        if incoming.blocking_send(chunk).is_err() {
            break;
        }
    }
    why
}

/// Moves queued request chunks into the stream while its window takes them. Returns whether
/// any byte moved and whether the client closed its side.
fn write_requests(
    stream: &mut dyn ByteStream,
    outgoing: &mut mpsc::Receiver<Bytes>,
    unsent: &mut Option<Bytes>,
) -> Result<(bool, bool), BusError> {
    let mut wrote = false;
    loop {
        if unsent.is_none() {
            match outgoing.try_recv() {
                Ok(chunk) => *unsent = Some(chunk),
                Err(mpsc::error::TryRecvError::Empty) => return Ok((wrote, false)),
                Err(mpsc::error::TryRecvError::Disconnected) => return Ok((wrote, true)),
            }
        }
        let Some(chunk) = unsent.as_mut() else {
            return Ok((wrote, false));
        };
        let n = stream.write(chunk)?;
        if n == 0 {
            return Ok((wrote, false));
        }
        wrote = true;
        chunk.advance(n);
        if chunk.is_empty() {
            *unsent = None;
        }
    }
}

/// Reads up to [`CHUNK_BYTES_MAX`] received bytes, `None` when nothing is waiting.
fn read_chunk(stream: &mut dyn ByteStream) -> Result<Option<Bytes>, BusError> {
    let n = stream.readable().min(CHUNK_BYTES_MAX);
    if n == 0 {
        return Ok(None);
    }
    let mut buf = vec![0u8; n];
    let got = stream.read(&mut buf)?;
    buf.truncate(got);
    Ok((got > 0).then(|| Bytes::from(buf)))
}

fn end_of(e: BusError) -> End {
    match e {
        BusError::Closed(_) => End::Closed,
        other => {
            tracing::debug!(error = %other, "fabric stream failed");
            End::Failed(other.to_string())
        }
    }
}

/// Tells a live node from a gone one by whether anything arrived within [`PEER_SILENCE_MAX`].
#[derive(Debug)]
pub struct Liveness {
    seen: u64,
    last_heard: Instant,
}

impl Liveness {
    pub fn new(now: Instant) -> Liveness {
        Liveness {
            seen: 0,
            last_heard: now,
        }
    }

    /// Takes a counter of everything received so far; false once it has not moved for
    /// [`PEER_SILENCE_MAX`].
    pub fn heard(&mut self, received: u64, now: Instant) -> bool {
        if received != self.seen {
            self.seen = received;
            self.last_heard = now;
        }
        now.saturating_duration_since(self.last_heard) < PEER_SILENCE_MAX
    }
}

/// What an idle driver does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Poll again at once (yielding the core first).
    Spin,
    /// Sleep this long, unless woken.
    Sleep(Duration),
}

/// The driver's adaptive back-off: spin for [`SPIN`] after the last activity, then sleep in
/// steps doubling from [`IDLE_SLEEP_MIN`] to [`IDLE_SLEEP_MAX`].
#[derive(Debug)]
pub struct Backoff {
    last_activity: Instant,
    sleep: Duration,
}

impl Backoff {
    pub fn new(now: Instant) -> Backoff {
        Backoff {
            last_activity: now,
            sleep: IDLE_SLEEP_MIN,
        }
    }

    /// The step after a round that did (`busy`) or did not move bytes.
    pub fn next(&mut self, busy: bool, now: Instant) -> Idle {
        if busy {
            self.last_activity = now;
            self.sleep = IDLE_SLEEP_MIN;
            return Idle::Spin;
        }
        if now.saturating_duration_since(self.last_activity) < SPIN {
            return Idle::Spin;
        }
        let sleep = self.sleep;
        self.sleep = (self.sleep * 2).min(IDLE_SLEEP_MAX);
        Idle::Sleep(sleep)
    }
}
