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

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bus::stream::control::{ControlMsg, CONTROL_MSG_LEN};
use bus::{
    Access, BusError, Completion, Connection, EndpointConfig, LocalSlice, Op, Provider, Region,
    RemoteRegion, RemoteSlice, WorkError,
};

use crate::guesses::{Guess, GUESS_LEN};

/// Control-message receives kept posted (the server sends its advert, then keepalives).
const RECV_SLOTS: usize = 16;
/// Wait for the own advert, and for the canary, after connecting.
const SETUP_WAIT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Times one attempt is tried (each on a fresh connection) before it counts as unevaluated.
const ATTEMPT_TRIES: usize = 3;
const WR_ATTEMPT: u64 = 1;
const WR_CANARY: u64 = 2;

/// How the rogue works.
#[derive(Clone, Debug)]
pub struct ProbeOptions {
    /// How long an attempt may go unanswered (a refusal on silent providers).
    pub op_deadline: Duration,
    /// Whether the provider refuses a bad key without answering (libfabric shm).
    pub silent_refusals: bool,
    /// Connections (threads) per wave.
    pub parallel: usize,
    /// Bytes that must never be read (other clients' passwords and data).
    pub secrets: Vec<Vec<u8>>,
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
            && self.canaries_ok > 0
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
    pub own: RemoteRegion,
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
    /// Connects, waits for the victim's RegisterXferMemory (the rogue's own window), and
    /// proves with a canary WRITE into it that the victim serves this connection.
    pub fn open(provider: &P, to: SocketAddr) -> Result<Self, BusError> {
        // Small queues: the rogue needs a few operations per connection, and its provider's
        // buffer pools are sized by them.
        let config = EndpointConfig {
            send_wr: 16,
            recv_wr: RECV_SLOTS as u32,
            cq_size: 16 + RECV_SLOTS as u32,
            ..EndpointConfig::default()
        };
        let mut conn = provider.connect(to, &config, CONNECT_TIMEOUT)?;
        let recv = provider.register(RECV_SLOTS * CONTROL_MSG_LEN, Access::LOCAL_WRITE)?;
        for slot in 0..RECV_SLOTS {
            conn.post_recv(
                slot as u64,
                slice(&recv, slot * CONTROL_MSG_LEN, CONTROL_MSG_LEN),
            )?;
        }
        let src = provider.register(4096, Access::NONE)?;
        src.write(0, &[0x52; 4096])?;
        let dst = provider.register(4096, Access::LOCAL_WRITE)?;
        let mut s = Session {
            conn,
            own: RemoteRegion {
                addr: 0,
                len: 0,
                rkey: 0,
            },
            recv,
            src,
            dst,
        };
        s.own = s.wait_advert()?;
        let canary = RemoteRegion {
            len: GUESS_LEN,
            ..s.own
        };
        match s.run(canary, false, SETUP_WAIT)? {
            Some(Ok(())) => Ok(s),
            other => Err(BusError::Closed(format!(
                "the canary into the own window came back {other:?}"
            ))),
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

    /// Posts one READ or WRITE of `target` (retrying while the provider says Full) and waits
    /// up to `wait` for its completion: `None` if none came.
    fn run(
        &mut self,
        target: RemoteRegion,
        read: bool,
        wait: Duration,
    ) -> Result<Option<Result<(), WorkError>>, BusError> {
        let deadline = Instant::now() + wait;
        let len = GUESS_LEN as usize;
        let remote = RemoteSlice {
            region: target,
            offset: 0,
            len: GUESS_LEN,
        };
        let wr_id = if read { WR_ATTEMPT } else { WR_CANARY };
        let mut out: Vec<Completion> = Vec::new();
        loop {
            let posted = if read {
                self.conn.post_read(wr_id, slice(&self.dst, 0, len), remote)
            } else {
                self.conn
                    .post_write(wr_id, slice(&self.src, 0, len), remote, None)
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
                .find(|c| c.wr_id == wr_id && matches!(c.op, Op::Read | Op::Write))
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
        let target = match a.target {
            Target::Guess(r) => r,
            Target::OwnWindow => RemoteRegion {
                len: GUESS_LEN,
                ..self.own
            },
        };
        match self.run(target, a.read, opts.op_deadline) {
            Ok(Some(Ok(()))) => {
                let mut got = vec![0u8; GUESS_LEN as usize];
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
) -> (Option<RemoteRegion>, Outcome) {
    match Session::<P>::open(provider, to) {
        Ok(mut s) => {
            let outcome = s.attempt(a, opts);
            (Some(s.own), outcome)
        }
        Err(e) => {
            debug(&format!("connection: {e}"));
            (None, Outcome::NotEvaluated)
        }
    }
}

/// Makes every attempt `make_attempts` derives from the first connection's own advert
/// against the victim at `to`.
pub fn probe<P: Provider>(
    provider: &P,
    to: SocketAddr,
    make_attempts: impl Fn(&RemoteRegion) -> Vec<Attempt>,
    opts: &ProbeOptions,
) -> Result<Report, BusError> {
    let mut report = Report::default();
    let first = Session::<P>::open(provider, to)?;
    report.connections += 1;
    report.canaries_ok += 1;
    let own = first.own;
    report.own = Some(own);
    drop(first);
    let mut todo: Vec<(Attempt, usize)> = make_attempts(&own).into_iter().map(|a| (a, 0)).collect();
    todo.reverse();
    while !todo.is_empty() {
        let n = opts.parallel.max(1).min(todo.len());
        let wave = todo.split_off(todo.len() - n);
        let results: Vec<(Option<RemoteRegion>, Outcome)> = std::thread::scope(|scope| {
            let handles: Vec<_> = wave
                .iter()
                .map(|(a, _)| scope.spawn(move || on_fresh_connection(provider, to, a, opts)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or((None, Outcome::NotEvaluated)))
                .collect()
        });
        for ((a, tries), (conn_own, outcome)) in wave.into_iter().zip(results) {
            if conn_own.is_some() {
                report.connections += 1;
                report.canaries_ok += 1;
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
