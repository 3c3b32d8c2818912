//! One Stream endpoint: the RX buffer the peer writes into, the command slots for control
//! messages, the TX staging ring, and the state machine that ties them together.

use std::collections::VecDeque;
use std::time::Duration;

use crate::access::Access;
use crate::error::{BusError, Result};
use crate::provider::{Completion, Connection, LocalSlice, Region, RemoteRegion, RemoteSlice};

use super::control::{ControlMsg, CONTROL_MSG_LEN};
use super::{
    CONTROL_SEND_SLOTS, DATA_WRITES_MAX, GRANTED_START_LEN, PREAUTH_RECV_SLOTS, PREAUTH_RX_LEN,
    PREAUTH_TX_LEN, RECV_SLOTS, RX_SIZE_MAX, RX_SIZE_MIN,
};

/// The top byte of a wr_id says what it was for; the rest is a slot index or a byte count.
pub(super) const KIND_SHIFT: u32 = 56;
pub(super) const KIND_RECV: u64 = 1;
pub(super) const KIND_CONTROL_SEND: u64 = 2;
pub(super) const KIND_DATA_WRITE: u64 = 3;
pub(super) const VALUE_MASK: u64 = (1 << KIND_SHIFT) - 1;

pub(super) fn wr_id(kind: u64, value: u64) -> u64 {
    (kind << KIND_SHIFT) | (value & VALUE_MASK)
}

/// Which end: only the server sends keepalives and answers feature requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Server,
    Client,
}

/// Counters for INFO and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub control_received: u64,
    /// Receive completions of any kind (control messages and data): proof the peer is alive.
    pub receives: u64,
    pub keepalives_received: u64,
    pub keepalives_sent: u64,
    /// Goodbyes received: 1 once a client said it was leaving (see `Stream::begin_goodbye`).
    pub goodbyes_received: u64,
    /// Times this side re-advertised its drained RX buffer.
    pub rx_readvertised: u64,
    /// Times `write` accepted less than asked because the peer's window or staging was full.
    pub window_stalls: u64,
    /// Times the RX buffer or TX staging grew (see `window.rs`).
    pub window_grows: u64,
    /// Times one could not grow (its registration failed) and kept its size.
    pub window_grow_failures: u64,
    pub protocol_errors: u64,
}

/// A RESP byte stream over a reliable connection with Valkey-over-RDMA framing (see the module
/// docs). Not thread-safe by design: one busy-polling thread drives it (DESIGN §5).
#[derive(Debug)]
pub struct Stream<C: Connection> {
    /// `None` once closed: dropping the connection is how the peer learns.
    pub(super) conn: Option<C>,
    pub(super) role: Role,
    /// `None` once closed and drained: the region is deregistered then, not when the Stream
    /// is dropped (see [`Stream::close`]).
    pub(super) rx: Option<C::Region>,
    pub(super) rx_len: usize,
    /// Bytes the peer has written into the RX buffer (sum of imm values since the advert).
    pub(super) rx_landed: usize,
    /// Bytes the application has read.
    pub(super) rx_read: usize,
    /// The first `cmd_slots` receive slots of 32 bytes: control messages from the peer.
    pub(super) cmd: Option<C::Region>,
    pub(super) cmd_slots: usize,
    /// Slots `cmd_slots..RECV_SLOTS`, once a pre-auth stream was granted its full window.
    pub(super) cmd_more: Option<C::Region>,
    /// Receive slots in use (posted or being handled): `cmd_slots`, or `RECV_SLOTS` with
    /// `cmd_more`.
    pub(super) recv_slots: usize,
    /// `CONTROL_SEND_SLOTS` send slots of 32 bytes: our control messages. A region of its
    /// own because a SEND source is remotely readable on `ofi:tcp` (see [`Access::SEND`]):
    /// only what the peer receives anyway sits in it.
    pub(super) cmd_send: Option<C::Region>,
    pub(super) free_send_slots: Vec<usize>,
    pub(super) pending_control: VecDeque<ControlMsg>,
    /// TX staging, used as a ring: bytes `[tx_done, tx_accepted)` are in it.
    pub(super) tx: Option<C::Region>,
    pub(super) tx_len: usize,
    /// What the buffers may grow to, and whether they may yet (see `window.rs`).
    pub(super) window: super::window::Window,
    pub(super) tx_accepted: u64,
    pub(super) tx_posted: u64,
    pub(super) tx_done: u64,
    pub(super) data_writes_in_flight: usize,
    /// The peer's RX buffer and how far into it we have written.
    pub(super) peer_rx: Option<RemoteRegion>,
    pub(super) peer_offset: u64,
    pub(super) last_keepalive: Option<Duration>,
    /// When set, a peer heard from neither data nor a control message for this long is taken
    /// for dead and the stream closes (see [`Stream::set_peer_silence_limit`]).
    pub(super) peer_silence_limit: Option<Duration>,
    pub(super) last_heard: Option<Duration>,
    /// Whether this client end sends keepalives too (servers always do).
    pub(super) client_keepalive: bool,
    pub(super) closed: Option<String>,
    pub(super) stats: StreamStats,
    pub(super) completions: Vec<Completion>,
}

impl<C: Connection> Stream<C> {
    /// The server end of an accepted connection, with an RX buffer and TX staging of
    /// [`GRANTED_START_LEN`] that grow by need up to `rx_size` bytes (`rdma-rx-size`,
    /// 64 KiB..16 MiB; see `window.rs`). Its regions are the connection's own
    /// ([`Connection::register`]).
    pub fn server(conn: C, rx_size: usize) -> Result<Self> {
        check_rx_size(rx_size)?;
        let start = Sizes {
            rx_len: GRANTED_START_LEN.min(rx_size),
            tx_len: GRANTED_START_LEN.min(rx_size),
            recv_slots: RECV_SLOTS,
        };
        Self::new(conn, start, Sizes::full(rx_size), true, Role::Server)
    }

    /// The server end of a connection whose peer has not proven who it is yet: a small
    /// window ([`PREAUTH_RX_LEN`] to receive, [`PREAUTH_TX_LEN`] of staging,
    /// [`PREAUTH_RECV_SLOTS`] command receives) until
    /// [`grant_full_window`](Self::grant_full_window), then as [`Stream::server`] (see
    /// `window.rs`).
    pub fn server_preauth(conn: C, rx_size: usize) -> Result<Self> {
        check_rx_size(rx_size)?;
        let small = Sizes {
            rx_len: PREAUTH_RX_LEN,
            tx_len: PREAUTH_TX_LEN,
            recv_slots: PREAUTH_RECV_SLOTS,
        };
        Self::new(conn, small, Sizes::full(rx_size), false, Role::Server)
    }

    /// The client end of a connection, with the whole `rx_size` from the start: a client
    /// opens a connection to use it.
    pub fn client(conn: C, rx_size: usize) -> Result<Self> {
        check_rx_size(rx_size)?;
        let full = Sizes::full(rx_size);
        Self::new(conn, full, full, true, Role::Client)
    }

    fn new(mut conn: C, start: Sizes, full: Sizes, granted: bool, role: Role) -> Result<Self> {
        let Sizes {
            rx_len,
            tx_len,
            recv_slots,
        } = start;
        let rx = register_rx(&conn, rx_len)?;
        // A listener may have posted our first command slots before it answered the peer
        // (`prepost_cmd_recvs`): adopted as the first region, the rest in a second one (as a
        // pre-auth stream grows).
        let (cmd, cmd_slots) = match conn.take_preposted_receives() {
            Some(first) => {
                // Checked in release builds too: a mismatch would post receives over slots the
                // connection already posted, and the device would write two messages into one.
                if first.len() != PREPOSTED_RECV_SLOTS * CONTROL_MSG_LEN
                    || recv_slots < PREPOSTED_RECV_SLOTS
                {
                    return Err(BusError::Invalid {
                        what: "preposted receives",
                        reason: format!(
                            "a region of {} bytes for a stream of {recv_slots} slots; expected \
                             {PREPOSTED_RECV_SLOTS} slots of {CONTROL_MSG_LEN} bytes",
                            first.len()
                        ),
                    });
                }
                (first, PREPOSTED_RECV_SLOTS)
            }
            None => {
                let cmd = conn.register(recv_slots * CONTROL_MSG_LEN, Access::LOCAL_WRITE)?;
                post_cmd_recvs(&mut conn, &cmd, 0..recv_slots)?;
                (cmd, recv_slots)
            }
        };
        let cmd_send = conn.register(CONTROL_SEND_SLOTS * CONTROL_MSG_LEN, Access::SEND)?;
        let tx = conn.register(tx_len, Access::NONE)?;
        let mut stream = Stream {
            conn: Some(conn),
            role,
            rx: Some(rx),
            rx_len,
            rx_landed: 0,
            rx_read: 0,
            cmd: Some(cmd),
            cmd_slots,
            cmd_more: None,
            recv_slots: cmd_slots,
            cmd_send: Some(cmd_send),
            free_send_slots: (0..CONTROL_SEND_SLOTS).rev().collect(),
            pending_control: VecDeque::new(),
            tx: Some(tx),
            tx_len,
            window: super::window::Window::new(full, granted),
            tx_accepted: 0,
            tx_posted: 0,
            tx_done: 0,
            data_writes_in_flight: 0,
            peer_rx: None,
            peer_offset: 0,
            last_keepalive: None,
            peer_silence_limit: None,
            last_heard: None,
            client_keepalive: false,
            closed: None,
            stats: StreamStats::default(),
            // Grown by the first reap that finds completions: an idle peer costs none.
            completions: Vec::new(),
        };
        if cmd_slots < recv_slots {
            // The rest of the starting slots, past the listener's.
            stream.window.post_more_recvs();
            stream.grow_recvs_if_granted()?;
        }
        stream.advertise_rx()?;
        Ok(stream)
    }

    /// Closes the stream when the peer sends nothing, not even a keepalive, for `limit`.
    /// Needed where the provider cannot report a dead peer: libfabric's RDM endpoints (tcp,
    /// shm) have no connection state, so a killed client would otherwise be served forever.
    /// Verbs RC needs none (the QP and rdma_cm report it), and Valkey clients send no
    /// keepalives, so it stays off there.
    pub fn set_peer_silence_limit(&mut self, limit: Option<Duration>) {
        self.peer_silence_limit = limit;
    }

    /// Makes a client end send a Keepalive every [`super::KEEPALIVE_INTERVAL`], as the server
    /// does, so a server with a silence limit keeps it. Valkey servers accept Keepalive from
    /// either side (a no-op).
    pub fn set_client_keepalive(&mut self, on: bool) {
        self.client_keepalive = on;
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn stats(&self) -> &StreamStats {
        &self.stats
    }

    pub fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// Why it closed, if it did.
    pub fn close_reason(&self) -> Option<&str> {
        self.closed.as_deref()
    }

    /// The connection, while open.
    pub fn conn(&self) -> Option<&C> {
        self.conn.as_ref()
    }

    /// Closes the stream: the connection is dropped, which the peer sees as a disconnect, and
    /// its regions are deregistered at once (the RX buffer once what landed in it was read),
    /// not whenever the Stream value is dropped.
    pub fn close(&mut self, why: &str) {
        if self.closed.is_none() {
            tracing::debug!(why, "stream closed");
            self.closed = Some(why.to_owned());
        }
        self.conn = None;
        self.cmd = None;
        self.cmd_more = None;
        self.cmd_send = None;
        self.tx = None;
        if self.readable() == 0 {
            self.rx = None;
        }
    }

    /// Whether any region of the stream is still registered (tests of `close`).
    pub fn holds_regions(&self) -> bool {
        self.rx.is_some()
            || self.cmd.is_some()
            || self.cmd_more.is_some()
            || self.cmd_send.is_some()
            || self.tx.is_some()
    }

    pub(super) fn fail(&mut self, err: BusError) -> BusError {
        if matches!(err, BusError::Protocol(_)) {
            self.stats.protocol_errors += 1;
            tracing::warn!(%err, "stream peer broke the protocol");
        }
        self.close(&err.to_string());
        err
    }

    pub(super) fn closed_error(&self) -> BusError {
        BusError::Closed(self.closed.clone().unwrap_or_default())
    }

    /// Bytes waiting to be read.
    pub fn readable(&self) -> usize {
        self.rx_landed - self.rx_read
    }

    /// Copies up to `buf.len()` received bytes into `buf`. `Ok(0)` means nothing yet; `Closed`
    /// once the stream is closed and everything received has been read.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let n = buf.len().min(self.readable());
        if n == 0 {
            return match self.closed {
                Some(_) if !buf.is_empty() => Err(self.closed_error()),
                _ => Ok(0),
            };
        }
        self.window.note_unread(self.readable());
        let rx = self.rx.as_ref().ok_or_else(|| self.closed_error())?;
        rx.read(self.rx_read, &mut buf[..n])?;
        self.rx_read += n;
        self.stats.bytes_read += n as u64;
        if self.closed.is_some() {
            if self.readable() == 0 {
                self.rx = None;
            }
        } else if self.rx_read == self.rx_len {
            // Drained the whole buffer: the peer may start over from its beginning (in a
            // fresh, larger buffer if the window grows: `window.rs`).
            self.rx_read = 0;
            self.rx_landed = 0;
            self.stats.rx_readvertised += 1;
            if let Err(e) = self.grow_rx_at_drain().and_then(|()| self.advertise_rx()) {
                return Err(self.fail(e));
            }
        }
        Ok(n)
    }

    /// Bytes accepted by `write` whose WRITE has not completed yet. A graceful close waits for
    /// 0: dropping the connection earlier may discard data still in flight.
    pub fn unacknowledged(&self) -> u64 {
        self.tx_accepted - self.tx_done
    }

    /// Bytes `write` would accept now: bounded by the peer's advertised window and by staging.
    pub fn writable(&self) -> usize {
        let staging = self.tx_len as u64 - (self.tx_accepted - self.tx_done);
        self.peer_room().min(staging as usize)
    }

    /// What remains of the peer's advertised window past the bytes accepted for it.
    fn peer_room(&self) -> usize {
        let Some(peer) = self.peer_rx else {
            return 0;
        };
        let unposted = self.tx_accepted - self.tx_posted;
        peer.len
            .saturating_sub(self.peer_offset)
            .saturating_sub(unposted) as usize
    }

    /// Copies as much of `data` as the peer's window and the staging buffer allow; returns how
    /// much. The bytes go out on [`flush`](Stream::flush) (or the next `progress`).
    pub fn write(&mut self, data: &[u8]) -> Result<usize> {
        if self.closed.is_some() {
            return Err(self.closed_error());
        }
        if let Err(e) = self.grow_tx_when_empty() {
            return Err(self.fail(e));
        }
        let n = data.len().min(self.writable());
        if n < data.len() {
            self.stats.window_stalls += 1;
            if n < self.peer_room() {
                self.window.note_tx_short();
            }
        }
        let start = (self.tx_accepted % self.tx_len as u64) as usize;
        let first = n.min(self.tx_len - start);
        let tx = self.tx.as_ref().ok_or_else(|| self.closed_error())?;
        tx.write(start, &data[..first])?;
        tx.write(0, &data[first..n])?;
        self.tx_accepted += n as u64;
        Ok(n)
    }

    /// Posts accepted bytes as WRITE WITH IMM (imm = byte count), each chunk contiguous in the
    /// staging ring and in the peer's window.
    pub fn flush(&mut self) -> Result<()> {
        if self.closed.is_some() {
            return Err(self.closed_error());
        }
        while self.tx_posted < self.tx_accepted && self.data_writes_in_flight < DATA_WRITES_MAX {
            let Some(peer) = self.peer_rx else {
                break;
            };
            let start = (self.tx_posted % self.tx_len as u64) as usize;
            let pending = (self.tx_accepted - self.tx_posted) as usize;
            let window = peer.len.saturating_sub(self.peer_offset) as usize;
            let len = pending.min(self.tx_len - start).min(window);
            if len == 0 {
                break;
            }
            let Some(tx) = self.tx.clone() else {
                return Err(self.closed_error());
            };
            let src = LocalSlice {
                region: tx,
                offset: start,
                len,
            };
            let dst = RemoteSlice {
                region: peer,
                offset: self.peer_offset,
                len: len as u64,
            };
            let id = wr_id(KIND_DATA_WRITE, len as u64);
            let Some(conn) = self.conn.as_mut() else {
                return Err(self.closed_error());
            };
            match conn.post_write(id, src, dst, Some(len as u32)) {
                Ok(()) => {}
                Err(BusError::Full { .. }) => break,
                Err(e) => return Err(self.fail(e)),
            }
            self.data_writes_in_flight += 1;
            self.tx_posted += len as u64;
            self.peer_offset += len as u64;
            self.stats.bytes_written += len as u64;
        }
        Ok(())
    }
}

fn check_rx_size(rx_size: usize) -> Result<()> {
    if !(RX_SIZE_MIN..=RX_SIZE_MAX).contains(&rx_size) {
        return Err(BusError::Invalid {
            what: "rdma-rx-size",
            reason: format!("{rx_size} is outside {RX_SIZE_MIN}..={RX_SIZE_MAX}"),
        });
    }
    Ok(())
}

/// Registers an RX buffer the peer may write (and nothing else), whose key fits the wire.
pub(super) fn register_rx<C: Connection>(conn: &C, len: usize) -> Result<C::Region> {
    let rx = conn.register(len, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    let remote = rx.remote()?;
    if u32::try_from(remote.rkey).is_err() {
        return Err(BusError::Invalid {
            what: "stream RX key",
            reason: format!(
                "key {:#x} does not fit the 32-bit rkey of the wire format",
                remote.rkey
            ),
        });
    }
    Ok(rx)
}

/// How big a stream's buffers are: at the start, or once its window is granted.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sizes {
    pub(super) rx_len: usize,
    pub(super) tx_len: usize,
    pub(super) recv_slots: usize,
}

impl Sizes {
    pub(super) fn full(rx_size: usize) -> Sizes {
        Sizes {
            rx_len: rx_size,
            tx_len: rx_size,
            recv_slots: RECV_SLOTS,
        }
    }
}

/// Command slots a listener posts before it answers a peer (`prepost_cmd_recvs`): a pre-auth
/// stream's, so that a stream of either kind adopts them whole.
pub const PREPOSTED_RECV_SLOTS: usize = PREAUTH_RECV_SLOTS;

/// Registers and posts a Stream's first [`PREPOSTED_RECV_SLOTS`] command receives on `conn`,
/// as `Stream::new` would, before the Stream exists; the connection keeps the region and
/// hands it to the Stream (`Connection::take_preposted_receives`). Why: a verbs listener
/// that answers a peer before any receive is posted makes the peer's first message (its RX
/// advert) meet an RNR NAK.
pub(crate) fn prepost_cmd_recvs<C: Connection>(conn: &mut C) -> Result<C::Region> {
    let cmd = conn.register(PREPOSTED_RECV_SLOTS * CONTROL_MSG_LEN, Access::LOCAL_WRITE)?;
    post_cmd_recvs(conn, &cmd, 0..PREPOSTED_RECV_SLOTS)?;
    Ok(cmd)
}

/// Posts the command receives of `slots`, which live in `region` from its start.
pub(super) fn post_cmd_recvs<C: Connection>(
    conn: &mut C,
    region: &C::Region,
    slots: std::ops::Range<usize>,
) -> Result<()> {
    let first = slots.start;
    for slot in slots {
        let dst = LocalSlice {
            region: region.clone(),
            offset: (slot - first) * CONTROL_MSG_LEN,
            len: CONTROL_MSG_LEN,
        };
        conn.post_recv(wr_id(KIND_RECV, slot as u64), dst)?;
    }
    Ok(())
}
