//! The pre-auth window (issue 15: "no region is reachable by a peer that has not proven who
//! it is"). A server that does not know its peer yet starts a Stream with a small RX buffer
//! and a small TX staging ring ([`PREAUTH_RX_LEN`], [`PREAUTH_TX_LEN`]), enough to carry AUTH
//! and its reply; memory per unproven peer stays small whatever it sends. Once the peer
//! proved itself, [`Stream::grant_full_window`] asks for the full size:
//! - RX grows at the next drain point (the peer has written the whole window and we read
//!   it, so no WRITE of its is in flight): a fresh region of the full size, with a new random
//!   key and address, replaces the small one (which is deregistered) and is advertised.
//!   Valkey clients accept an advert of another length and re-size their sending side.
//! - TX staging grows the next time it is empty (no WRITE of ours reads it).
//! - Command receives: the rest of [`RECV_SLOTS`] are posted at the next progress, in a
//!   second command region (the first, small one keeps its posted slots).
//!
//! [`PREAUTH_RX_LEN`]: super::PREAUTH_RX_LEN
//! [`PREAUTH_TX_LEN`]: super::PREAUTH_TX_LEN
//! [`RECV_SLOTS`]: super::RECV_SLOTS

use crate::access::Access;
use crate::error::{BusError, Result};
use crate::provider::{Connection, RemoteRegion};

use super::control::CONTROL_MSG_LEN;
use super::session::{post_cmd_recvs, register_rx, Sizes, Stream};

/// Where a stream's window stands.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window {
    /// The sizes once granted (`rdma-rx-size`, every receive slot).
    full: Sizes,
    granted: bool,
    grow_rx: bool,
    grow_tx: bool,
    grow_recvs: bool,
}

impl Window {
    /// A stream that adopted a listener's first command slots posts the rest of its starting
    /// ones as a granted pre-auth stream does (`grow_recvs_if_granted`).
    pub(super) fn post_more_recvs(&mut self) {
        self.grow_recvs = true;
    }

    pub(super) fn new(start: Sizes, full: Sizes) -> Window {
        Window {
            full,
            granted: start.rx_len >= full.rx_len
                && start.tx_len >= full.tx_len
                && start.recv_slots >= full.recv_slots,
            grow_rx: false,
            grow_tx: false,
            grow_recvs: false,
        }
    }
}

impl<C: Connection> Stream<C> {
    /// The peer proved who it is: grow to the full window (RX at the next drain, TX staging
    /// when next empty). Idempotent.
    pub fn grant_full_window(&mut self) {
        let w = &mut self.window;
        if !w.granted {
            w.granted = true;
            w.grow_rx = self.rx_len < w.full.rx_len;
            w.grow_tx = self.tx_len < w.full.tx_len;
            w.grow_recvs = self.recv_slots < w.full.recv_slots;
        }
    }

    /// Command receive slots in use (posted or being handled).
    pub fn recv_slots(&self) -> usize {
        self.recv_slots
    }

    /// Once granted: posts the receive slots a pre-auth stream went without, in a region of
    /// their own (slot indices go on from the first region's).
    pub(super) fn grow_recvs_if_granted(&mut self) -> Result<()> {
        if !self.window.grow_recvs {
            return Ok(());
        }
        let (from, to) = (self.recv_slots, self.window.full.recv_slots);
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| BusError::Closed(String::new()))?;
        let more = conn.register((to - from) * CONTROL_MSG_LEN, Access::LOCAL_WRITE)?;
        // Counted before posting, so that a completion of a slot posted here finds it.
        self.recv_slots = to;
        self.cmd_more = Some(more.clone());
        self.window.grow_recvs = false;
        post_cmd_recvs(conn, &more, from..to)
    }

    /// Whether the full window was granted (or the stream started with it).
    pub fn full_window_granted(&self) -> bool {
        self.window.granted
    }

    /// The size of the RX buffer advertised now.
    pub fn rx_window(&self) -> usize {
        self.rx_len
    }

    /// The peer's window as it last advertised it (what our WRITEs aim at).
    pub fn peer_window(&self) -> Option<RemoteRegion> {
        self.peer_rx
    }

    /// At a drain point: replaces the small RX with a full one if granted.
    pub(super) fn grow_rx_if_granted(&mut self) -> Result<()> {
        if !self.window.grow_rx {
            return Ok(());
        }
        let conn = self
            .conn
            .as_ref()
            .ok_or_else(|| BusError::Closed(String::new()))?;
        let rx = register_rx(conn, self.window.full.rx_len)?;
        self.rx = Some(rx);
        self.rx_len = self.window.full.rx_len;
        self.window.grow_rx = false;
        Ok(())
    }

    /// Replaces the small TX staging with a full one if granted and nothing is staged.
    pub(super) fn grow_tx_if_granted(&mut self) -> Result<()> {
        if !self.window.grow_tx || self.tx_accepted != self.tx_done {
            return Ok(());
        }
        let conn = self
            .conn
            .as_ref()
            .ok_or_else(|| BusError::Closed(String::new()))?;
        let tx = conn.register(self.window.full.tx_len, Access::NONE)?;
        self.tx = Some(tx);
        self.tx_len = self.window.full.tx_len;
        self.tx_accepted = 0;
        self.tx_posted = 0;
        self.tx_done = 0;
        self.window.grow_tx = false;
        Ok(())
    }
}
