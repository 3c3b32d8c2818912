//! A migration link carried by the fabric: a client Stream to the target's fabric listener
//! (where Valkey-over-RDMA clients reach it), set up with the same calls as over TCP
//! ([`FabricCaller`]), then one pump thread that moves the batch's queue into the stream and
//! counts the target's replies out of it. One thread rather than a sender and a receiver: a
//! Stream is driven by whoever owns it (DESIGN §5).

use super::link::LinkShared;
use super::link_replies::Replies;
use crate::cluster::migration::LinkQueue;
use crate::server::repl_link::control::{encode_command, Caller, ControlError, CONTROL_REPLY_MAX};
use bus::select::{connect_stream, ByteStream};
use bus::stream::PEER_SILENCE_MAX;
use bus::BusError;
use proto::resp::{decode, Frame};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The stream's receive ring: the bus default (1 MiB); the target's replies are small, the
/// target's own ring bounds what is in flight towards it.
const RX_SIZE: usize = bus::stream::RX_SIZE_DEFAULT;
/// How long the pump (or a setup call) blocks when nothing moved before looking again: the
/// longest a reply waits to be counted while the queue is empty.
const IDLE_WAIT: Duration = Duration::from_micros(200);
/// Most bytes read from the stream in one go.
const READ_CHUNK: usize = 64 * 1024;

/// A fabric connection to the target while the link is set up.
pub struct FabricCaller {
    stream: Box<dyn ByteStream>,
    started: Instant,
    timeout: Duration,
    undecoded: Vec<u8>,
}

impl FabricCaller {
    /// Connects to the target's fabric listener at `host:port` with `provider`.
    pub fn connect(
        provider: &str,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<FabricCaller, String> {
        let to: SocketAddr = (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("resolving {host}: {e}"))?
            .next()
            .ok_or_else(|| format!("{host} has no address"))?;
        let stream = connect_stream(provider, to, RX_SIZE, timeout)
            .map_err(|e| format!("fabric connect to {to} ({provider}): {e}"))?;
        Ok(FabricCaller {
            stream,
            started: Instant::now(),
            timeout,
            undecoded: Vec::new(),
        })
    }

    pub fn provider(&self) -> String {
        self.stream.provider().to_string()
    }

    fn progress(&mut self) -> Result<(), BusError> {
        self.stream.progress(self.started.elapsed())
    }

    /// Writes all of `bytes`, driving the stream while the target's window is full.
    fn write_all(&mut self, mut bytes: &[u8], deadline: Instant) -> Result<(), ControlError> {
        while !bytes.is_empty() {
            self.progress().map_err(io)?;
            let n = self.stream.write(bytes).map_err(io)?;
            bytes = &bytes[n..];
            if n == 0 {
                if Instant::now() >= deadline {
                    return Err(ControlError::Timeout);
                }
                self.stream.wait(IDLE_WAIT).map_err(io)?;
            }
        }
        self.stream.flush().map_err(io)
    }

    /// The link is set up: a thread drives it from here on.
    pub fn into_pump(
        self,
        queue: Arc<LinkQueue>,
        shared: Arc<LinkShared>,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        debug_assert!(self.undecoded.is_empty());
        std::thread::Builder::new()
            .name("migration-fabric".into())
            .spawn(move || {
                let mut pump = Pump {
                    stream: self.stream,
                    started: self.started,
                    queue,
                    shared,
                    replies: Replies::default(),
                    unsent: Vec::new(),
                    sent: 0,
                    heard: 0,
                    last_heard: Instant::now(),
                };
                pump.run();
            })
    }
}

impl Caller for FabricCaller {
    fn call(&mut self, args: &[&[u8]]) -> Result<Frame, ControlError> {
        let deadline = Instant::now() + self.timeout;
        self.write_all(&encode_command(args), deadline)?;
        let mut chunk = [0u8; 4096];
        loop {
            match decode(&self.undecoded).map_err(|e| ControlError::Decode(e.to_string()))? {
                Some((frame, used)) => {
                    self.undecoded.drain(..used);
                    if let Frame::Error(e) = &frame {
                        return Err(ControlError::Refused(
                            String::from_utf8_lossy(e).into_owned(),
                        ));
                    }
                    return Ok(frame);
                }
                None if self.undecoded.len() > CONTROL_REPLY_MAX => {
                    return Err(ControlError::TooLong)
                }
                None => {}
            }
            self.progress().map_err(io)?;
            let n = self.stream.read(&mut chunk).map_err(io)?;
            if n > 0 {
                self.undecoded.extend_from_slice(&chunk[..n]);
                continue;
            }
            if Instant::now() >= deadline {
                return Err(ControlError::Timeout);
            }
            self.stream.wait(IDLE_WAIT).map_err(io)?;
        }
    }
}

fn io(e: BusError) -> ControlError {
    ControlError::Io(std::io::Error::other(e.to_string()))
}

/// The link's thread: queue → stream, stream → reply count, until stopped or failed.
struct Pump {
    stream: Box<dyn ByteStream>,
    started: Instant,
    queue: Arc<LinkQueue>,
    shared: Arc<LinkShared>,
    replies: Replies,
    /// Taken from the queue; `sent` of it are in the stream.
    unsent: Vec<u8>,
    sent: usize,
    /// What the stream had received when the target was last heard, and when.
    heard: u64,
    last_heard: Instant,
}

/// Why the pump stopped turning.
enum Stop {
    /// The link is closing (the driver closed the queue or asked the link to stop).
    Closing,
    Failed(String),
}

impl Pump {
    fn run(&mut self) {
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            if self.shared.stop.load(Relaxed) {
                break;
            }
            match self.turn(&mut chunk) {
                Ok(true) => {}
                Ok(false) => {
                    if let Err(stop) = self.idle() {
                        self.stopped(stop);
                        break;
                    }
                }
                Err(stop) => {
                    self.stopped(stop);
                    break;
                }
            }
        }
        self.goodbye();
    }

    fn stopped(&self, stop: Stop) {
        if let Stop::Failed(why) = stop {
            self.shared.fail(why);
        }
    }

    /// One pass: progress, replies in, queued bytes out. Whether anything moved.
    fn turn(&mut self, chunk: &mut [u8]) -> Result<bool, Stop> {
        let mut moved = false;
        self.stream
            .progress(self.started.elapsed())
            .map_err(broken)?;
        let stats = self.stream.stats();
        let now = Instant::now();
        let heard = stats.receives;
        if heard != self.heard {
            self.heard = heard;
            self.last_heard = now;
        } else if now.saturating_duration_since(self.last_heard) >= PEER_SILENCE_MAX {
            // Not even the keepalive every server stream sends: ofi providers do not tell a
            // dead peer from a quiet one.
            return Err(Stop::Failed(format!(
                "the target sent nothing (not even a keepalive) for {PEER_SILENCE_MAX:?}"
            )));
        }
        loop {
            let n = self.stream.read(chunk).map_err(broken)?;
            if n == 0 {
                break;
            }
            moved = true;
            let answered = self.replies.feed(&chunk[..n]).map_err(Stop::Failed)?;
            if answered > 0 {
                self.shared
                    .answered
                    .store(self.queue.answered(answered), Relaxed);
            }
        }
        if self.sent == self.unsent.len() {
            self.take(Duration::ZERO)?;
        }
        while self.sent < self.unsent.len() {
            let n = self
                .stream
                .write(&self.unsent[self.sent..])
                .map_err(broken)?;
            if n == 0 {
                break;
            }
            self.sent += n;
            moved = true;
        }
        self.stream.flush().map_err(broken)?;
        Ok(moved)
    }

    /// Nothing moved: wait for the target's window when bytes wait for it, else for the
    /// queue (either way at most [`IDLE_WAIT`], then the next turn reads replies).
    fn idle(&mut self) -> Result<(), Stop> {
        if self.sent < self.unsent.len() {
            self.stream.wait(IDLE_WAIT).map_err(broken)
        } else {
            self.take(IDLE_WAIT)
        }
    }

    /// Takes what the queue holds (waiting up to `wait` for something).
    fn take(&mut self, wait: Duration) -> Result<(), Stop> {
        match self.queue.take(wait) {
            Some(bytes) => {
                if !bytes.is_empty() {
                    self.unsent = bytes;
                    self.sent = 0;
                }
                Ok(())
            }
            None => Err(Stop::Closing),
        }
    }

    /// Tells the target we are leaving, behind what was written, and drops the stream once
    /// that is delivered or [`bus::stream::GOODBYE_WAIT`] has passed: its session ends at
    /// once instead of after its silence limit.
    fn goodbye(&mut self) {
        let until = Instant::now() + bus::stream::GOODBYE_WAIT;
        while Instant::now() < until {
            if self.stream.progress(self.started.elapsed()).is_err() {
                return;
            }
            match self.stream.begin_goodbye() {
                Ok(()) => break,
                Err(BusError::Full { .. }) => {
                    let _ = self.stream.wait(IDLE_WAIT);
                }
                Err(_) => return,
            }
        }
        while Instant::now() < until && !self.stream.goodbye_delivered() {
            if self.stream.progress(self.started.elapsed()).is_err() {
                return;
            }
            let _ = self.stream.wait(IDLE_WAIT);
        }
    }
}

fn broken(e: BusError) -> Stop {
    match e {
        BusError::Closed(_) => Stop::Failed("the target closed the link".into()),
        other => Stop::Failed(format!("the fabric link to the target: {other}")),
    }
}
