//! The rogue's engine: connections of its own to a victim's listener, its own advert read off
//! the Stream framing, and every attempt (a guessed target, READ or WRITE) made through the
//! public bus API. Nothing here is privileged: it is what any local process may do.
//!
//! A refused attempt leaves its connection unusable on every provider (tcp;ofi_rxm drops the
//! transport and does not reconnect; verbs moves the QP to error; shm never answers, and its
//! responses complete in order, so nothing after it completes either). So each attempt gets a
//! fresh connection, proven live first by a "canary" (a legitimate WRITE into the own window
//! that must complete), and attempts run in waves of parallel connections. An attempt counts:
//! - completed OK: a breach (`succeeded`), whatever it read;
//! - failed with `RemoteAccess`: refused;
//! - no completion by the deadline on a provider that refuses silently (shm), after the
//!   canary proved the victim works this connection's queue: refused;
//! - anything else (a connection that broke, a stall where refusals are not silent): tried
//!   again on another connection, then counted `unevaluated` (tests demand 0: an attempt that
//!   never reached the victim proves nothing).
//!
//! Reading the own window with its right key is one of the attempts: stream RX buffers are
//! write-only.
//!
//! Two victims: a Stream server (a node's fabric port: the rogue gets its own window, and
//! its canary is a WRITE into it) and a bare listener that sends nothing (a node's
//! replication port, where an unproven connection waits for its REPLCONF: no own window;
//! the canary, needed only where refusals are silent, is a SEND, which completes once the
//! victim took it in).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bus::stream::control::{ControlMsg, CONTROL_MSG_LEN};
use bus::{
    Access, BusError, Completion, Connection, EndpointConfig, LocalSlice, Op, Provider, Region,
    RemoteRegion, RemoteSlice, WorkError,
};

use crate::guesses::Guess;

/// Control-message receives kept posted (the server sends its advert, then keepalives).
const RECV_SLOTS: usize = 16;
/// Wait for the own advert, and for the canary, after connecting.
const SETUP_WAIT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Times one attempt is tried (each on a fresh connection) before it counts as unevaluated.
/// Generous: on a loaded host a connection may break or stall for reasons of load alone, and
/// an unevaluated attempt fails the run.
const ATTEMPT_TRIES: usize = 8;
const WR_ATTEMPT: u64 = 1;

/// What the victim's listener is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Victim {
    /// A Stream server: it advertises a window to every connection.
    Stream,
    /// A listener that sends nothing (a node's replication port).
    Bare,
}

/// How the rogue works.
#[derive(Clone, Debug)]
pub struct ProbeOptions {
    pub victim: Victim,
    /// Bytes each attempt reads or writes (8 for an ack word, more for a window).
    pub len: u64,
    /// What each WRITE carries in its first 8 bytes (a forged acknowledged offset).
    pub value: u64,
    /// How long an attempt may go unanswered (a refusal on silent providers).
    pub op_deadline: Duration,
    /// Whether the provider refuses a bad key without answering (libfabric shm).
    pub silent_refusals: bool,
    /// Connections (threads) per wave.
    pub parallel: usize,
    /// Bytes that must never be read (other clients' passwords and data).
    pub secrets: Vec<Vec<u8>>,
}

impl ProbeOptions {
    /// A Stream victim, 64-byte attempts.
    pub fn stream(op_deadline: Duration, silent_refusals: bool, parallel: usize) -> Self {
        ProbeOptions {
            victim: Victim::Stream,
            len: crate::guesses::GUESS_LEN,
            value: u64::MAX,
            op_deadline,
            silent_refusals,
            parallel,
            secrets: Vec::new(),
        }
    }
}

/// What the rogue achieved.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub attempts: u64,
    pub succeeded: u64,
    pub refused: u64,
    pub unevaluated: u64,
    /// Reading the own window with its right key worked (a write-only region would refuse).
    pub own_read_ok: bool,
    /// Connections whose canary completed (the victim served them).
    pub canaries_ok: u64,
    /// Whether the victim needs canaries (silent refusals, or a window to prove).
    pub canaries_needed: bool,
    pub connections: u64,
    pub bytes_read: u64,
    /// FNV-1a of everything read.
    pub read_digest: u64,
    pub secret_seen: bool,
    /// The first breaches, for the log.
    pub breaches: Vec<String>,
    /// The first connection's own advert (its window in the victim; on shm a real virtual
    /// address there, which the CMA attempts aim at).
    pub own: Option<RemoteRegion>,
}

impl Report {
    pub fn line(&self) -> String {
        format!(
            "rogue: {} attempts, {} succeeded, {} refused, {} unevaluated, own-read {}, \
             canaries {}, connections {}, read {} bytes {:016x}, secret {}",
            self.attempts,
            self.succeeded,
            self.refused,
            self.unevaluated,
            if self.own_read_ok { "OK" } else { "refused" },
            self.canaries_ok,
            self.connections,
            self.bytes_read,
            self.read_digest,
            if self.secret_seen { "SEEN" } else { "unseen" }
        )
    }

    /// Whether the victim held: nothing succeeded, nothing secret read, the own window
    /// write-only, every attempt evaluated by a victim that served the connection.
    pub fn victim_held(&self) -> bool {
        self.succeeded == 0
            && !self.secret_seen
            && !self.own_read_ok
            && self.unevaluated == 0
            && (self.canaries_ok > 0 || !self.canaries_needed)
    }

    fn absorb_read(&mut self, bytes: &[u8], secrets: &[Vec<u8>]) {
        self.bytes_read += bytes.len() as u64;
        let mut h = if self.read_digest == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.read_digest
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.read_digest = h;
        if secrets
            .iter()
            .any(|s| !s.is_empty() && bytes.windows(s.len()).any(|w| w == s.as_slice()))
        {
            self.secret_seen = true;
        }
    }
}

/// What an attempt aims at.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    Guess(RemoteRegion),
    /// The attempt's own connection's window, with its right key.
    OwnWindow,
}

/// One attempt: a READ or a WRITE of a target.
#[derive(Clone, Copy, Debug)]
pub struct Attempt {
    pub target: Target,
    pub read: bool,
    pub why: &'static str,
}

/// Every guess as a READ and as a WRITE, and the own window's READ.
pub fn attempts_of(guesses: &[Guess]) -> Vec<Attempt> {
    let mut out: Vec<Attempt> = guesses
        .iter()
        .flat_map(|g| {
            [true, false].map(|read| Attempt {
                target: Target::Guess(g.region),
                read,
                why: g.why,
            })
        })
        .collect();
    out.push(Attempt {
        target: Target::OwnWindow,
        read: true,
        why: "own window read",
    });
    out
}

/// A connection to the victim with the rogue's own buffers and the victim's advert for it.
pub struct Session<P: Provider> {
    pub conn: P::Conn,
    /// The own window (a Stream victim's advert); `None` on a bare victim.
    pub own: Option<RemoteRegion>,
    /// Whether a canary proved the victim serves this connection (not needed where every
    /// refusal is an explicit `RemoteAccess`).
    pub proven: bool,
    len: u64,
    recv: P::Region,
    src: P::Region,
    dst: P::Region,
}

/// What an attempt came to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// Completed; the bytes a READ returned.
    Ok(Vec<u8>),
    Refused,
    NotEvaluated,
}

fn slice<R: Region>(region: &R, offset: usize, len: usize) -> LocalSlice<R> {
    LocalSlice {
        region: region.clone(),
        offset,
        len,
    }
}

impl<P: Provider> Session<P> {
    /// Connects and proves the victim serves this connection: on a Stream victim, waits for
    /// its RegisterXferMemory (the rogue's own window) and WRITEs a canary into it; on a bare
    /// one where refusals are silent, SENDs a canary. Either must complete.
    pub fn open(provider: &P, to: SocketAddr, opts: &ProbeOptions) -> Result<Self, BusError> {
        // Small queues: the rogue needs a few operations per connection, and its provider's
        // buffer pools are sized by them.
        let config = EndpointConfig {
            send_wr: 16,
            recv_wr: RECV_SLOTS as u32,
            cq_size: 16 + RECV_SLOTS as u32,
            ..EndpointConfig::default()
        };
        let mut conn = provider.connect(to, &config, CONNECT_TIMEOUT)?;
        // Through the connection: on verbs each has its own protection domain.
        let recv = conn.register(RECV_SLOTS * CONTROL_MSG_LEN, Access::LOCAL_WRITE)?;
        for slot in 0..RECV_SLOTS {
            conn.post_recv(
                slot as u64,
                slice(&recv, slot * CONTROL_MSG_LEN, CONTROL_MSG_LEN),
            )?;
        }
        let src = conn.register(4096, Access::SEND)?;
        src.write(0, &[0x52; 4096])?;
        src.store_u64(0, opts.value)?;
        let dst = conn.register(4096, Access::LOCAL_WRITE)?;
        let mut s = Session {
            conn,
            own: None,
            proven: false,
            len: opts.len,
            recv,
            src,
            dst,
        };
        let canary = match opts.victim {
            Victim::Stream => {
                let own = s.wait_advert()?;
                s.own = Some(own);
                Some(s.run(
                    Canary::Write(RemoteRegion { len: s.len, ..own }),
                    SETUP_WAIT,
                )?)
            }
            Victim::Bare if opts.silent_refusals => Some(s.run(Canary::Send, SETUP_WAIT)?),
            Victim::Bare => None,
        };
        s.proven = canary.is_some();
        match canary {
            None | Some(Some(Ok(()))) => Ok(s),
            Some(other) => Err(BusError::Closed(format!("the canary came back {other:?}"))),
        }
    }

    fn wait_advert(&mut self) -> Result<RemoteRegion, BusError> {
        let deadline = Instant::now() + SETUP_WAIT;
        let mut out = Vec::new();
        while Instant::now() < deadline {
            out.clear();
            self.conn.poll(&mut out, 16)?;
            for c in &out {
                if c.op != Op::Recv || c.status.is_err() {
                    continue;
                }
                let mut raw = [0u8; CONTROL_MSG_LEN];
                let at = c.wr_id as usize * CONTROL_MSG_LEN;
                self.recv.read(at, &mut raw)?;
                self.conn
                    .post_recv(c.wr_id, slice(&self.recv, at, CONTROL_MSG_LEN))?;
                if let Ok(ControlMsg::RegisterXferMemory { addr, length, rkey }) =
                    ControlMsg::decode(&raw)
                {
                    return Ok(RemoteRegion {
                        addr,
                        len: u64::from(length),
                        rkey: u64::from(rkey),
                    });
                }
            }
            self.conn.wait(Duration::from_millis(1))?;
        }
        Err(BusError::Timeout(SETUP_WAIT))
    }

    /// Posts one operation (retrying while the provider says Full) and waits up to `wait`
    /// for its completion: `None` if none came.
    fn run(
        &mut self,
        op: Canary,
        wait: Duration,
    ) -> Result<Option<Result<(), WorkError>>, BusError> {
        let deadline = Instant::now() + wait;
        let len = self.len as usize;
        let remote = |target: RemoteRegion| RemoteSlice {
            region: target,
            offset: 0,
            len: len as u64,
        };
        const WR: u64 = WR_ATTEMPT;
        let mut out: Vec<Completion> = Vec::new();
        loop {
            let posted = match op {
                Canary::Read(t) => self.conn.post_read(WR, slice(&self.dst, 0, len), remote(t)),
                Canary::Write(t) => {
                    self.conn
                        .post_write(WR, slice(&self.src, 0, len), remote(t), None)
                }
                Canary::Send => self
                    .conn
                    .post_send(WR, slice(&self.src, 0, CONTROL_MSG_LEN)),
            };
            match posted {
                Ok(()) => break,
                Err(BusError::Full { .. }) if Instant::now() < deadline => {
                    self.conn.poll(&mut out, 16)?;
                }
                Err(e) => return Err(e),
            }
        }
        loop {
            if let Some(c) = out
                .iter()
                .find(|c| c.wr_id == WR && matches!(c.op, Op::Read | Op::Write | Op::Send))
            {
                return Ok(Some(c.status.clone()));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            out.clear();
            self.conn.poll(&mut out, 64)?;
            if out.is_empty() {
                self.conn.wait(Duration::from_micros(200))?;
            }
        }
    }

    /// Makes `a` on this (fresh, canary-proven) connection.
    fn attempt(&mut self, a: &Attempt, opts: &ProbeOptions) -> Outcome {
        let target = match (a.target, self.own) {
            (Target::Guess(r), _) => r,
            (Target::OwnWindow, Some(own)) => RemoteRegion {
                len: self.len,
                ..own
            },
            // No own window on a bare victim: nothing to try.
            (Target::OwnWindow, None) => return Outcome::Refused,
        };
        let op = if a.read {
            Canary::Read(target)
        } else {
            Canary::Write(target)
        };
        match self.run(op, opts.op_deadline) {
            Ok(Some(Ok(()))) => {
                let mut got = vec![0u8; self.len as usize];
                if a.read {
                    let _ = self.dst.read(0, &mut got);
                }
                Outcome::Ok(if a.read { got } else { Vec::new() })
            }
            Ok(Some(Err(WorkError::RemoteAccess))) => Outcome::Refused,
            Ok(None) if opts.silent_refusals => Outcome::Refused,
            Ok(Some(Err(e))) => {
                debug(&format!("{a:?}: {e:?}"));
                Outcome::NotEvaluated
            }
            Ok(None) => Outcome::NotEvaluated,
            Err(e) => {
                debug(&format!("{a:?}: {e}"));
                Outcome::NotEvaluated
            }
        }
    }
}

/// One operation a session makes.
#[derive(Clone, Copy, Debug)]
enum Canary {
    Read(RemoteRegion),
    Write(RemoteRegion),
    Send,
}

fn debug(text: &str) {
    if std::env::var_os("ROGUE_DEBUG").is_some() {
        eprintln!("rogue-debug: {text}");
    }
}

/// One attempt on a fresh connection; `None` when no connection came up (the victim
/// did not serve us: counted like an unevaluated attempt).
fn on_fresh_connection<P: Provider>(
    provider: &P,
    to: SocketAddr,
    a: &Attempt,
    opts: &ProbeOptions,
) -> (Option<bool>, Outcome) {
    match Session::<P>::open(provider, to, opts) {
        Ok(mut s) => {
            let outcome = s.attempt(a, opts);
            (Some(s.proven), outcome)
        }
        Err(e) => {
            debug(&format!("connection: {e}"));
            (None, Outcome::NotEvaluated)
        }
    }
}

/// Makes every attempt `make_attempts` derives from the first connection's own advert (none
/// on a bare victim) against the victim at `to`.
pub fn probe<P: Provider>(
    provider: &P,
    to: SocketAddr,
    make_attempts: impl Fn(Option<&RemoteRegion>) -> Vec<Attempt>,
    opts: &ProbeOptions,
) -> Result<Report, BusError> {
    let mut report = Report::default();
    let first = Session::<P>::open(provider, to, opts)?;
    report.connections += 1;
    report.canaries_ok += u64::from(first.proven);
    report.canaries_needed = first.proven;
    let own = first.own;
    report.own = own;
    drop(first);
    let mut todo: Vec<(Attempt, usize)> = make_attempts(own.as_ref())
        .into_iter()
        .map(|a| (a, 0))
        .collect();
    todo.reverse();
    while !todo.is_empty() {
        let n = opts.parallel.max(1).min(todo.len());
        let wave = todo.split_off(todo.len() - n);
        let results: Vec<(Option<bool>, Outcome)> = std::thread::scope(|scope| {
            let handles: Vec<_> = wave
                .iter()
                .map(|(a, _)| scope.spawn(move || on_fresh_connection(provider, to, a, opts)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or((None, Outcome::NotEvaluated)))
                .collect()
        });
        for ((a, tries), (proven, outcome)) in wave.into_iter().zip(results) {
            if let Some(proven) = proven {
                report.connections += 1;
                report.canaries_ok += u64::from(proven);
            }
            match outcome {
                Outcome::Ok(bytes) => {
                    report.attempts += 1;
                    if a.read {
                        report.absorb_read(&bytes, &opts.secrets);
                    }
                    if matches!(a.target, Target::OwnWindow) && a.read {
                        report.own_read_ok = true;
                    } else {
                        report.succeeded += 1;
                    }
                    if report.breaches.len() < 8 {
                        let op = if a.read { "READ" } else { "WRITE" };
                        report
                            .breaches
                            .push(format!("{op} {:?} ({})", a.target, a.why));
                    }
                }
                Outcome::Refused => {
                    report.attempts += 1;
                    report.refused += 1;
                }
                Outcome::NotEvaluated if tries + 1 < ATTEMPT_TRIES => todo.push((a, tries + 1)),
                Outcome::NotEvaluated => {
                    report.attempts += 1;
                    report.unevaluated += 1;
                }
            }
        }
    }
    Ok(report)
}
