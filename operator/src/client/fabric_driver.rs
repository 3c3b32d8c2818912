//! The driver threads of the fabric transport: a few process-wide OS threads, each polling every
//! fabric connection assigned to it, the way the node's fabric pollers serve their clients.
//!
//! Why shared: a bus Stream is synchronous and must be polled (DESIGN §4). A thread per
//! connection (as before) gives `operator bench -c 50` fifty polling threads, which on a
//! 2-core machine spend their time taking the cores from each other and from the node under
//! test. One thread polling fifty streams does the same work without the switches.
//!
//! Each connection ([`Driven`]) moves bytes between its stream and the async client's two
//! bounded channels; a full channel or a full stream window holds that connection back without
//! holding the others. A connection whose stream ended stays in its lane only to hand over the
//! replies it had received, without blocking.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use bus::select::ByteStream;
use bus::BusError;
use bytes::{Buf, Bytes};
use tokio::sync::mpsc;

use super::fabric::{Backoff, Idle, Liveness, CHUNK_BYTES_MAX, PEER_SILENCE_MAX};

/// How long a closed client's last requests may wait for the node's window before the stream
/// is dropped anyway (a node that stopped reading must not keep the connection alive).
const LINGER_MAX: Duration = Duration::from_secs(1);
/// Most driver threads a process starts, whatever its core count.
const LANES_MAX: usize = 4;

/// Why a connection's stream stopped, for the async side.
#[derive(Debug, Clone)]
pub enum End {
    /// The node closed the stream (or the stream saw the peer go away).
    Closed,
    /// Anything else: a protocol violation, a provider error.
    Failed(String),
}

/// Where the driver leaves why the stream stopped; the async side reads it once the from-wire
/// channel is closed.
pub type EndSlot = Arc<Mutex<Option<End>>>;

/// One fabric connection as its driver thread sees it.
pub struct Driven {
    /// `None` once the stream ended (dropping it closes it).
    stream: Option<Box<dyn ByteStream>>,
    outgoing: mpsc::Receiver<Bytes>,
    /// `None` once everything received was handed over (dropping it ends `read_some`).
    incoming: Option<mpsc::Sender<Bytes>>,
    end: EndSlot,
    /// The stream's clock origin (its keepalives count from here).
    started: Instant,
    /// A request chunk the stream's window has not taken whole yet.
    unsent: Option<Bytes>,
    /// Reply chunks the full from-wire channel has not taken yet: at most one while the stream
    /// lives, plus what it still held when it ended.
    undelivered: VecDeque<Bytes>,
    closed_at: Option<Instant>,
    /// Set once the goodbye is queued: when to drop the stream whether or not it went out.
    goodbye_until: Option<Instant>,
    liveness: Liveness,
}

impl Driven {
    pub fn new(
        stream: Box<dyn ByteStream>,
        outgoing: mpsc::Receiver<Bytes>,
        incoming: mpsc::Sender<Bytes>,
        end: EndSlot,
    ) -> Driven {
        let now = Instant::now();
        Driven {
            stream: Some(stream),
            outgoing,
            incoming: Some(incoming),
            end,
            started: now,
            unsent: None,
            undelivered: VecDeque::new(),
            closed_at: None,
            goodbye_until: None,
            liveness: Liveness::new(now),
        }
    }

    /// Whether the connection is over and may be dropped from its lane.
    fn is_done(&self) -> bool {
        self.stream.is_none() && self.incoming.is_none()
    }

    /// One non-blocking step; returns whether any byte moved.
    fn turn(&mut self, now: Instant) -> bool {
        let mut busy = self.deliver();
        if self.stream.is_some() {
            match self.pump(now) {
                Ok(moved) => busy |= moved,
                Err(why) => {
                    self.stop(why);
                    busy = true;
                }
            }
        }
        if self.stream.is_none() && self.undelivered.is_empty() {
            // Everything received is handed over: closing the channel ends `read_some`.
            self.incoming = None;
        }
        busy
    }

    /// Hands held-back reply chunks to the client while its channel has room.
    fn deliver(&mut self) -> bool {
        let Some(incoming) = self.incoming.as_ref() else {
            self.undelivered.clear();
            return false;
        };
        let mut moved = false;
        while let Some(chunk) = self.undelivered.pop_front() {
            match incoming.try_send(chunk) {
                Ok(()) => moved = true,
                Err(mpsc::error::TrySendError::Full(chunk)) => {
                    self.undelivered.push_front(chunk);
                    break;
                }
                // The client is gone: nobody reads replies any more.
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.undelivered.clear();
                    self.incoming = None;
                    self.stop(End::Closed);
                    break;
                }
            }
        }
        moved
    }

    /// Progress, replies in, requests out. `Err` carries why the stream is over.
    fn pump(&mut self, now: Instant) -> Result<bool, End> {
        let Some(stream) = self.stream.as_mut() else {
            return Ok(false);
        };
        let mut busy = false;
        stream.progress(self.started.elapsed()).map_err(end_of)?;
        let stats = stream.stats();
        if !self
            .liveness
            .heard(stats.control_received + stats.bytes_read, now)
        {
            return Err(End::Failed(format!(
                "the node sent nothing (not even a keepalive) for {PEER_SILENCE_MAX:?}: presumed gone"
            )));
        }
        // Replies: read while the channel took everything read before.
        if let Some(incoming) = self.incoming.as_ref() {
            while self.undelivered.is_empty() {
                let Some(chunk) = read_chunk(stream.as_mut()).map_err(end_of)? else {
                    break;
                };
                match incoming.try_send(chunk) {
                    Ok(()) => busy = true,
                    Err(mpsc::error::TrySendError::Full(chunk)) => {
                        self.undelivered.push_back(chunk)
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => return Err(End::Closed),
                }
            }
        }
        // Requests: as much as the node's window takes.
        let (wrote, all_sent_and_closed) =
            write_requests(stream.as_mut(), &mut self.outgoing, &mut self.unsent)
                .map_err(end_of)?;
        busy |= wrote;
        stream.flush().map_err(end_of)?;
        // The client may have closed while a chunk waits for the node's window: the linger
        // limit counts from then, not from when everything was sent.
        if all_sent_and_closed || self.outgoing.is_closed() {
            let since = *self.closed_at.get_or_insert(now);
            let lingered = now.saturating_duration_since(since);
            if all_sent_and_closed || lingered >= LINGER_MAX {
                // The node hears that we are leaving, behind our last writes (it closes its
                // end at once, not after its silence limit). Over the next turns, so that
                // the lane's other connections go on meanwhile; the stream is dropped once
                // the goodbye is delivered or GOODBYE_WAIT has passed.
                match self.goodbye_until {
                    None => match stream.begin_goodbye() {
                        Ok(()) => self.goodbye_until = Some(now + bus::stream::GOODBYE_WAIT),
                        // Written bytes wait for the node's window: try again next turn.
                        Err(BusError::Full { .. })
                            if lingered < LINGER_MAX + bus::stream::GOODBYE_WAIT => {}
                        Err(_) => return Err(End::Closed),
                    },
                    Some(until) if stream.goodbye_delivered() || now >= until => {
                        return Err(End::Closed)
                    }
                    Some(_) => {}
                }
                busy = true;
            }
        }
        Ok(busy)
    }

    /// Drops the connection after a failure inside its own turn, without touching the stream
    /// again: the client's next read or write fails with `reason`.
    fn abandon(&mut self, reason: &str) {
        *self.end.lock().unwrap_or_else(|p| p.into_inner()) = Some(End::Failed(reason.into()));
        self.outgoing.close();
        self.stream = None;
        self.undelivered.clear();
        self.incoming = None;
    }

    /// Ends the stream: keeps what it received for the client, records why, closes it.
    fn stop(&mut self, why: End) {
        let Some(mut stream) = self.stream.take() else {
            return;
        };
        if self.incoming.is_some() {
            while let Ok(Some(chunk)) = read_chunk(stream.as_mut()) {
                self.undelivered.push_back(chunk);
            }
        }
        // Before the channel closes, so that `read_some` finds the reason.
        *self.end.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        // Requests have nowhere to go now: `write_all` fails at once instead of filling the
        // queue and waiting on a client that may first want to read the replies held here.
        self.outgoing.close();
    }
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

/// One driver thread and the connections waiting to join it.
struct Lane {
    admitted: Mutex<Vec<Driven>>,
    /// Set with each admission, so the thread takes the lock only when there is something.
    pending: AtomicBool,
    /// Started with the lane's first connection.
    thread: Mutex<Option<Thread>>,
}

struct Drivers {
    lanes: Vec<Arc<Lane>>,
    next: AtomicUsize,
}

static DRIVERS: OnceLock<Drivers> = OnceLock::new();

/// Connections admitted to a lane and not yet over (see [`settle`]).
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Waits, at most `limit`, until every connection admitted so far is over: a process about
/// to exit calls it after dropping its clients, so their drivers get to say goodbye to the
/// node instead of vanishing with the process (the node would keep their ends, and send
/// keepalives into the void, until its silence limit).
pub fn settle(limit: Duration) {
    let deadline = Instant::now() + limit;
    while LIVE.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Driver threads for this process: half the cores (the other half is left to the async
/// runtime and, on a test machine, the node), at least 1, at most [`LANES_MAX`].
fn lane_count() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 2).clamp(1, LANES_MAX)
}

fn drivers() -> &'static Drivers {
    DRIVERS.get_or_init(|| Drivers {
        lanes: (0..lane_count())
            .map(|_| {
                Arc::new(Lane {
                    admitted: Mutex::new(Vec::new()),
                    pending: AtomicBool::new(false),
                    thread: Mutex::new(None),
                })
            })
            .collect(),
        next: AtomicUsize::new(0),
    })
}

/// The lane's thread, started if it is not yet.
fn thread_of(lane: &Arc<Lane>) -> std::io::Result<Thread> {
    let mut slot = lane.thread.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(t) = slot.as_ref() {
        return Ok(t.clone());
    }
    let runner = Arc::clone(lane);
    let handle = std::thread::Builder::new()
        .name("operator-fabric".into())
        .spawn(move || run(&runner))?;
    *slot = Some(handle.thread().clone());
    Ok(handle.thread().clone())
}

/// Hands a connection to a driver thread (round-robin). Returns that thread, to be unparked
/// when requests are queued for it.
pub fn admit(conn: Driven) -> std::io::Result<Thread> {
    let d = drivers();
    let lane = &d.lanes[d.next.fetch_add(1, Ordering::Relaxed) % d.lanes.len()];
    let thread = thread_of(lane)?;
    LIVE.fetch_add(1, Ordering::AcqRel);
    lane.admitted
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(conn);
    lane.pending.store(true, Ordering::Release);
    thread.unpark();
    Ok(thread)
}

/// A driver thread's loop; it lives as long as the process. With no connection it parks
/// until an admission unparks it.
fn run(lane: &Lane) {
    let mut conns: Vec<Driven> = Vec::new();
    let mut backoff = Backoff::new(Instant::now());
    loop {
        if lane.pending.swap(false, Ordering::AcqRel) {
            conns.append(&mut lane.admitted.lock().unwrap_or_else(|p| p.into_inner()));
        }
        if conns.is_empty() {
            std::thread::park();
            continue;
        }
        let now = Instant::now();
        let mut busy = false;
        conns.retain_mut(|c| {
            // A panic in one connection's turn (a provider or stream bug) ends that connection
            // with its reason, as it did when each had its own thread; the lane goes on.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.turn(now))) {
                Ok(moved) => busy |= moved,
                Err(_) => {
                    c.abandon("the fabric driver failed on this connection (a panic)");
                    busy = true;
                }
            }
            let done = c.is_done();
            if done {
                LIVE.fetch_sub(1, Ordering::AcqRel);
            }
            !done
        });
        match backoff.next(busy, now) {
            Idle::Spin => std::thread::yield_now(),
            Idle::Sleep(d) => std::thread::park_timeout(d),
        }
    }
}
