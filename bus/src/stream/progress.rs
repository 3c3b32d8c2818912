//! Driving a Stream: reaping completions, handling control messages, keepalives and the
//! control-message send slots.

use std::time::Duration;

use crate::error::{BusError, Result};
use crate::idle::IdleWait;
use crate::provider::{Completion, Connection, LocalSlice, Op, Region, RemoteRegion, WorkError};

use super::control::{ControlMsg, CONTROL_MSG_LEN};
use super::session::{
    wr_id, Role, Stream, KIND_CONTROL_SEND, KIND_DATA_WRITE, KIND_RECV, KIND_SHIFT, VALUE_MASK,
};
use super::{
    CONTROL_SEND_SLOTS, KEEPALIVE_INTERVAL, PEER_SAID_GOODBYE, PENDING_CONTROL_MAX, POLL_BATCH,
    POLL_ROUNDS_MAX,
};

impl<C: Connection> Stream<C> {
    /// Drives the stream: reaps completions, handles control messages, re-posts receives, sends
    /// queued control messages, keepalives every 3 s (the server's; a client's when enabled),
    /// closes a peer silent past its limit (when set), and flushes. `now` is any
    /// monotonic clock (virtual in the simulator). A protocol violation by the peer returns
    /// `Protocol` and closes the stream; afterwards every call returns `Closed`.
    pub fn progress(&mut self, now: Duration) -> Result<()> {
        if self.closed.is_some() {
            return Err(self.closed_error());
        }
        let heard_before = self.stats.receives;
        if let Err(e) = self.reap().and_then(|()| self.grow_recvs_if_granted()) {
            return Err(self.fail(e));
        }
        if let Some(limit) = self.peer_silence_limit {
            let heard = self.stats.receives;
            let last = self.last_heard.get_or_insert(now);
            if heard != heard_before {
                *last = now;
            } else if now.saturating_sub(*last) > limit {
                let why = format!("peer silent for more than {limit:?} (no keepalive, no data)");
                return Err(self.fail(BusError::Closed(why)));
            }
        }
        if self.role == Role::Server || self.client_keepalive {
            let last = *self.last_keepalive.get_or_insert(now);
            if now.saturating_sub(last) >= KEEPALIVE_INTERVAL {
                self.last_keepalive = Some(now);
                self.stats.keepalives_sent += 1;
                if let Err(e) = self.queue_control(ControlMsg::Keepalive) {
                    return Err(self.fail(e));
                }
            }
        }
        if let Err(e) = self.send_pending_control() {
            return Err(self.fail(e));
        }
        self.flush()
    }

    /// Blocks until a completion may be waiting or `timeout` passes: the idle back-off of a
    /// polling thread (call `progress` after it).
    pub fn wait(&mut self, timeout: Duration) -> Result<()> {
        match self.conn.as_mut() {
            Some(conn) => conn.wait(timeout),
            None => Err(self.closed_error()),
        }
    }

    /// Prepares a thread that polls many streams to block on all of them (see
    /// [`crate::idle`]): `Ready` when this stream has work without waiting (it is closed or
    /// holds unread bytes), otherwise its connection's answer. Control messages still
    /// pending after `progress` wait for a send slot or queue room, which a completion
    /// brings. Timers are the caller's: it blocks for a bounded time and calls `progress`
    /// after, which sends a keepalive late by at most that bound.
    pub fn arm_idle_wait(&mut self, fds: &mut Vec<std::os::fd::RawFd>) -> Result<IdleWait> {
        if self.closed.is_some() || self.readable() > 0 {
            return Ok(IdleWait::Ready);
        }
        match self.conn.as_mut() {
            Some(conn) => conn.arm_idle_wait(fds),
            None => Ok(IdleWait::Ready),
        }
    }

    /// See [`crate::Connection::attach_idle_bell`].
    pub fn attach_idle_bell(&mut self, bell: &std::sync::Arc<crate::idle::Doorbell>) {
        if let Some(conn) = self.conn.as_mut() {
            conn.attach_idle_bell(bell);
        }
    }

    /// A client's orderly close, first step: queues [`ControlMsg::Goodbye`] behind everything
    /// written so far (a client's only); `Full` while written bytes still wait for the peer's
    /// window (call again after `progress`). The caller then drives the stream until
    /// [`goodbye_delivered`](Self::goodbye_delivered), or [`super::GOODBYE_WAIT`] has passed, and
    /// drops it: the server closes its end at once instead of after its silence limit, and
    /// posts nothing more to an endpoint about to vanish.
    pub fn begin_goodbye(&mut self) -> Result<()> {
        if self.role != Role::Client {
            return Err(BusError::Invalid {
                what: "stream goodbye",
                reason: "only a client says goodbye".into(),
            });
        }
        // Behind every byte written so far: a SEND that overtook our last WRITEs would close
        // the server's end before they landed.
        self.flush()?;
        if self.tx_posted < self.tx_accepted {
            return Err(BusError::Full {
                what: "stream goodbye (written bytes wait for the peer's window)",
            });
        }
        self.queue_control(ControlMsg::Goodbye)?;
        self.send_pending_control()
    }

    /// Whether every control message and data WRITE posted so far has completed: after
    /// [`begin_goodbye`](Self::begin_goodbye), the server has our last bytes and the goodbye.
    pub fn goodbye_delivered(&self) -> bool {
        self.pending_control.is_empty()
            && self.free_send_slots.len() == CONTROL_SEND_SLOTS
            && self.data_writes_in_flight == 0
    }

    fn reap(&mut self) -> Result<()> {
        for _ in 0..POLL_ROUNDS_MAX {
            let mut batch = std::mem::take(&mut self.completions);
            batch.clear();
            let conn = self
                .conn
                .as_mut()
                .ok_or_else(|| BusError::Closed(String::new()))?;
            let n = conn.poll(&mut batch, POLL_BATCH)?;
            let result = batch.iter().try_for_each(|c| self.on_completion(c));
            self.completions = batch;
            result?;
            if n < POLL_BATCH {
                break;
            }
        }
        Ok(())
    }

    fn on_completion(&mut self, c: &Completion) -> Result<()> {
        match &c.status {
            Ok(()) => {}
            // Only the peer's advert names the memory we write: a refused write is its fault.
            Err(WorkError::RemoteAccess) => {
                return Err(BusError::Protocol(
                    "the peer's advertised buffer refused our write (bad rkey or range)".into(),
                ))
            }
            // A receive fails (other than by a flush) only when what arrived does not fit a
            // 32-byte command slot (verbs: local length error): the peer's fault as well.
            Err(e)
                if matches!(c.op, Op::Recv | Op::RecvWriteImm)
                    && !matches!(e, WorkError::Flushed) =>
            {
                return Err(BusError::Protocol(format!(
                    "a receive failed ({e:?}): the peer sent more than a control slot holds"
                )))
            }
            Err(e) => {
                return Err(BusError::Closed(format!(
                    "{:?} work request failed: {e:?}",
                    c.op
                )))
            }
        }
        let value = c.wr_id & VALUE_MASK;
        match (c.wr_id >> KIND_SHIFT, c.op) {
            (KIND_RECV, Op::Recv) => {
                let slot = value as usize;
                if c.byte_len as usize != CONTROL_MSG_LEN {
                    return Err(BusError::Protocol(format!(
                        "control message of {} bytes (must be {CONTROL_MSG_LEN})",
                        c.byte_len
                    )));
                }
                let mut raw = [0u8; CONTROL_MSG_LEN];
                let (cmd, offset) = self.cmd_slot(slot)?;
                cmd.read(offset, &mut raw)?;
                self.on_control(ControlMsg::decode(&raw)?)?;
                self.repost_recv(slot)
            }
            (KIND_RECV, Op::RecvWriteImm) => {
                let n = c.imm.ok_or_else(|| {
                    BusError::Protocol("WRITE WITH IMM without immediate data".into())
                })? as usize;
                if n > self.rx_len - self.rx_landed {
                    return Err(BusError::Protocol(format!(
                        "peer wrote {n} bytes at {} of a {}-byte buffer",
                        self.rx_landed, self.rx_len
                    )));
                }
                self.rx_landed += n;
                self.stats.receives += 1;
                self.repost_recv(value as usize)
            }
            (KIND_CONTROL_SEND, Op::Send) => {
                self.free_send_slots.push(value as usize);
                Ok(())
            }
            (KIND_DATA_WRITE, Op::Write) => {
                self.data_writes_in_flight = self.data_writes_in_flight.saturating_sub(1);
                self.tx_done += value;
                Ok(())
            }
            (kind, op) => Err(BusError::Protocol(format!(
                "unexpected completion {op:?} for work request kind {kind}"
            ))),
        }
    }

    /// The region and offset of command receive slot `slot`.
    fn cmd_slot(&self, slot: usize) -> Result<(&C::Region, usize)> {
        if slot >= self.recv_slots {
            return Err(BusError::Protocol(format!(
                "receive slot {slot} out of range"
            )));
        }
        let (region, index) = if slot < self.cmd_slots {
            (self.cmd.as_ref(), slot)
        } else {
            (self.cmd_more.as_ref(), slot - self.cmd_slots)
        };
        let region = region.ok_or_else(|| self.closed_error())?;
        Ok((region, index * CONTROL_MSG_LEN))
    }

    fn repost_recv(&mut self, slot: usize) -> Result<()> {
        let (cmd, offset) = self.cmd_slot(slot)?;
        let dst = LocalSlice {
            region: cmd.clone(),
            offset,
            len: CONTROL_MSG_LEN,
        };
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| BusError::Closed(String::new()))?;
        conn.post_recv(wr_id(KIND_RECV, slot as u64), dst)
    }

    fn on_control(&mut self, msg: ControlMsg) -> Result<()> {
        self.stats.control_received += 1;
        self.stats.receives += 1;
        match (msg, self.role) {
            (ControlMsg::RegisterXferMemory { addr, length, rkey }, _) => {
                // A fresh window: start writing at its beginning (Valkey resets tx.offset).
                self.peer_rx = Some(RemoteRegion {
                    addr,
                    len: u64::from(length),
                    rkey: u64::from(rkey),
                });
                self.peer_offset = 0;
                Ok(())
            }
            (ControlMsg::Keepalive, _) => {
                self.stats.keepalives_received += 1;
                Ok(())
            }
            (ControlMsg::GetServerFeature { select, .. }, Role::Server) => {
                self.queue_control(ControlMsg::GetServerFeature {
                    select,
                    features: 0,
                })
            }
            // The server's answer to a request; no features are defined, so nothing to record.
            (ControlMsg::GetServerFeature { .. }, Role::Client) => Ok(()),
            (ControlMsg::SetClientFeature { features, .. }, Role::Server) => {
                if features != 0 {
                    // Valkey ignores the failed check and sends nothing; so do we.
                    tracing::debug!(features, "client asked for unknown stream features");
                }
                Ok(())
            }
            (ControlMsg::SetClientFeature { .. }, Role::Client) => Err(BusError::Protocol(
                "SetClientFeature sent to a client".into(),
            )),
            (ControlMsg::Goodbye, Role::Server) => {
                self.stats.goodbyes_received += 1;
                Err(BusError::Closed(PEER_SAID_GOODBYE.into()))
            }
            (ControlMsg::Goodbye, Role::Client) => {
                Err(BusError::Protocol("Goodbye sent to a client".into()))
            }
        }
    }

    pub(super) fn advertise_rx(&mut self) -> Result<()> {
        let remote = self
            .rx
            .as_ref()
            .ok_or_else(|| self.closed_error())?
            .remote()?;
        self.queue_control(ControlMsg::RegisterXferMemory {
            addr: remote.addr,
            length: self.rx_len as u32,
            rkey: remote.rkey as u32,
        })?;
        self.send_pending_control()
    }

    fn queue_control(&mut self, msg: ControlMsg) -> Result<()> {
        if self.pending_control.len() >= PENDING_CONTROL_MAX {
            return Err(BusError::Protocol(format!(
                "more than {PENDING_CONTROL_MAX} control messages waiting: the peer floods us"
            )));
        }
        self.pending_control.push_back(msg);
        Ok(())
    }

    fn send_pending_control(&mut self) -> Result<()> {
        while let Some(msg) = self.pending_control.front().copied() {
            let Some(slot) = self.free_send_slots.pop() else {
                return Ok(());
            };
            let offset = slot * CONTROL_MSG_LEN;
            let Some(cmd_send) = self.cmd_send.clone() else {
                return Err(self.closed_error());
            };
            cmd_send.write(offset, &msg.encode())?;
            let src = LocalSlice {
                region: cmd_send,
                offset,
                len: CONTROL_MSG_LEN,
            };
            let conn = self
                .conn
                .as_mut()
                .ok_or_else(|| BusError::Closed(String::new()))?;
            match conn.post_send(wr_id(KIND_CONTROL_SEND, slot as u64), src) {
                Ok(()) => {
                    self.pending_control.pop_front();
                }
                Err(BusError::Full { .. }) => {
                    self.free_send_slots.push(slot);
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
