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
//!
//! [`PREAUTH_RX_LEN`]: super::PREAUTH_RX_LEN
//! [`PREAUTH_TX_LEN`]: super::PREAUTH_TX_LEN

use crate::access::Access;
use crate::error::{BusError, Result};
use crate::provider::{Connection, RemoteRegion};

use super::session::{register_rx, Stream};

/// Where a stream's window stands.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window {
    /// The size both buffers have once granted (`rdma-rx-size`).
    full: usize,
    granted: bool,
    grow_rx: bool,
    grow_tx: bool,
}

impl Window {
    pub(super) fn new(rx_len: usize, tx_len: usize, full: usize) -> Window {
        Window {
            full,
            granted: rx_len >= full && tx_len >= full,
            grow_rx: false,
            grow_tx: false,
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
            w.grow_rx = self.rx_len < w.full;
            w.grow_tx = self.tx_len < w.full;
        }
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
        let rx = register_rx(conn, self.window.full)?;
        self.rx = Some(rx);
        self.rx_len = self.window.full;
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
        let tx = conn.register(self.window.full, Access::NONE)?;
        self.tx = Some(tx);
        self.tx_len = self.window.full;
        self.tx_accepted = 0;
        self.tx_posted = 0;
        self.tx_done = 0;
        self.window.grow_tx = false;
        Ok(())
    }
}
