//! The fabric transport: a bus Stream (Valkey-over-RDMA framing, any provider) behind the same
//! two async methods as TCP.
//!
//! The bus is synchronous and polled (DESIGN §4), so the stream is owned by a *driver* thread
//! (shared by many connections: see [`super::fabric_driver`]) that exchanges bytes with the async
//! client through two bounded channels:
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
//! Idle back-off ([`Backoff`]): after any activity on any of its connections a driver polls
//! without sleeping for [`SPIN`] (yielding the core between polls, since a 2-core machine may
//! also run the node), then sleeps in steps from [`IDLE_SLEEP_MIN`] doubling to
//! [`IDLE_SLEEP_MAX`], so an idle client does not burn a core. The sleeps are `park_timeout`:
//! the async side unparks the driver when it queues a request, so a request never waits for a
//! sleep to end; only replies that arrive during a sleep wait (at most [`IDLE_SLEEP_MAX`]).
//!
//! A node that stops sending keepalives for [`PEER_SILENCE_MAX`] is taken as gone
//! ([`Liveness`]).
//!
//! Close travels both ways: dropping the transport closes the to-wire channel, and the driver
//! then closes the stream (the node sees a disconnect); a stream the node closed, or one that
//! fails, is dropped by the driver, which hands over the bytes still received and then closes
//! the from-wire channel (`read_some` returns 0, or the error that ended it).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

use bus::select::{connect_stream, ByteStream};
use bus::stream::RX_SIZE_DEFAULT;
use bus::BusError;
use bytes::{Bytes, BytesMut};
use tokio::sync::{mpsc, oneshot};

use super::error::ClientError;
use super::fabric_driver::{self, Driven, End, EndSlot};

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
/// How long the node may stay silent (no keepalive, no control message, no reply byte) before
/// the driver declares it gone: the bus's limit, which the node judges its clients by too.
/// The fabric has no connection state to break (RDM on tcp and shm), so without this a client
/// of a node that closed or died would wait forever.
pub use bus::stream::PEER_SILENCE_MAX;
/// Added to the connect timeout for opening the provider (loading libfabric takes ~0.4 s).
const PROVIDER_OPEN_GRACE: Duration = Duration::from_secs(5);

const _: () = assert!(TO_WIRE_CHUNKS_MAX * CHUNK_BYTES_MAX <= RX_SIZE_DEFAULT);
const _: () = assert!(FROM_WIRE_CHUNKS_MAX * CHUNK_BYTES_MAX <= RX_SIZE_DEFAULT);

/// An open fabric connection (see the module docs).
pub struct FabricTransport {
    provider: String,
    /// `None` once closed by `Drop`.
    outgoing: Option<mpsc::Sender<Bytes>>,
    incoming: mpsc::Receiver<Bytes>,
    driver: Thread,
    end: EndSlot,
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
        let (name, host_owned) = (provider.to_string(), host.to_string());
        // Connecting blocks (resolution, the provider's handshake): a short-lived thread of its
        // own, so neither the async runtime nor a driver's other connections wait for it.
        std::thread::Builder::new()
            .name("operator-fabric-connect".into())
            .spawn(move || {
                // If the caller gave up waiting, the stream comes back and is dropped (closed).
                let _ = ready_tx.send(connect(&name, &host_owned, port, timeout));
            })?;
        let stream = match tokio::time::timeout(timeout + PROVIDER_OPEN_GRACE, ready_rx).await {
            Ok(Ok(Ok(stream))) => stream,
            Ok(Ok(Err(e))) => return Err(fabric_error(e)),
            Ok(Err(_)) => {
                return Err(fabric_error(BusError::Closed(
                    "the fabric connect thread stopped while connecting".into(),
                )))
            }
            Err(_) => {
                return Err(ClientError::ConnectTimeout {
                    target,
                    after: timeout,
                })
            }
        };
        let (out_tx, out_rx) = mpsc::channel(TO_WIRE_CHUNKS_MAX);
        let (in_tx, in_rx) = mpsc::channel(FROM_WIRE_CHUNKS_MAX);
        let end: EndSlot = Arc::new(Mutex::new(None));
        let driver = fabric_driver::admit(Driven::new(stream, out_rx, in_tx, Arc::clone(&end)))?;
        Ok(FabricTransport {
            provider: provider.to_string(),
            outgoing: Some(out_tx),
            incoming: in_rx,
            driver,
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

/// Resolves `host` and connects a client Stream (runs on a short-lived thread: both block).
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
