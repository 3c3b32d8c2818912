//! A server stream's window: how big its RX buffer, TX staging and command receives are,
//! and when they grow. Memory per client follows what the client does, not what it might do.
//!
//! - Pre-auth (issue 15: "no region is reachable by a peer that has not proven who it is"): a
//!   server that does not know its peer yet starts with a small RX buffer and a small TX
//!   staging ring ([`PREAUTH_RX_LEN`], [`PREAUTH_TX_LEN`]) and [`PREAUTH_RECV_SLOTS`] command
//!   receives, enough to carry AUTH and its reply; memory per unproven peer stays small
//!   whatever it sends. Once the peer proved itself, [`Stream::grant_full_window`] lets it grow.
//! - Granted, RX and TX grow by need (issue 19: "buffers sized per client by named limits
//!   ... grown on demand"), from [`GRANTED_START_LEN`] by doubling up to `rdma-rx-size`:
//!   - RX at a drain point (the peer has written the whole window and we read it, so no WRITE
//!     of its is in flight) if the peer had filled at least half of it before we read: it
//!     writes faster than one buffer carries. A fresh region with a new random key and address
//!     replaces the old one (deregistered) and is advertised. Valkey clients accept an advert
//!     of another length and re-size their sending side.
//!   - TX staging the next time it is empty (no WRITE of ours reads it) after a `write` was
//!     cut short by staging while the peer's window had room.
//!
//!   A client that sends small requests one at a time never grows: 128 KiB of buffers.
//! - Command receives: the rest of [`RECV_SLOTS`] are posted at the next progress once
//!   granted, in a second command region (the first, small one keeps its posted slots).
//!
//! [`PREAUTH_RX_LEN`]: super::PREAUTH_RX_LEN
//! [`PREAUTH_TX_LEN`]: super::PREAUTH_TX_LEN
//! [`PREAUTH_RECV_SLOTS`]: super::PREAUTH_RECV_SLOTS
//! [`GRANTED_START_LEN`]: super::GRANTED_START_LEN
//! [`RECV_SLOTS`]: super::RECV_SLOTS

use crate::access::Access;
use crate::error::{BusError, Result};
use crate::provider::{Connection, RemoteRegion};

use super::control::CONTROL_MSG_LEN;
use super::session::{post_cmd_recvs, register_rx, Sizes, Stream};
use super::GRANTED_START_LEN;

/// Where a stream's window stands.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window {
    /// The most it may grow to (`rdma-rx-size`, every receive slot).
    full: Sizes,
    granted: bool,
    /// The most the peer had written and we had not read, since the last advert.
    peak_unread: usize,
    /// A `write` was cut short by staging while the peer's window had room.
    tx_short: bool,
    grow_recvs: bool,
}

impl Window {
    /// A stream that adopted a listener's first command slots posts the rest of its starting
    /// ones as a granted pre-auth stream does (`grow_recvs_if_granted`).
    pub(super) fn post_more_recvs(&mut self) {
        self.grow_recvs = true;
    }

    pub(super) fn new(full: Sizes, granted: bool) -> Window {
        Window {
            full,
            granted,
            peak_unread: 0,
            tx_short: false,
            grow_recvs: false,
        }
    }

    /// Notes how much landed and was not read yet (at each read).
    pub(super) fn note_unread(&mut self, unread: usize) {
        self.peak_unread = self.peak_unread.max(unread);
    }

    /// Notes a `write` that staging cut short while the peer's window had room.
    pub(super) fn note_tx_short(&mut self) {
        self.tx_short = true;
    }

    /// The RX length to re-advertise at a drain point of a `current`-byte buffer.
    fn next_rx_len(&mut self, current: usize) -> usize {
        let filled = std::mem::take(&mut self.peak_unread);
        grown_len(
            self.granted,
            current,
            self.full.rx_len,
            filled * 2 >= current,
        )
    }

    /// The staging length to use once staging is empty.
    fn next_tx_len(&mut self, current: usize) -> usize {
        let short = std::mem::take(&mut self.tx_short);
        grown_len(self.granted, current, self.full.tx_len, short)
    }
}

/// A buffer's next length: unchanged until granted; then at least [`GRANTED_START_LEN`],
/// doubled while `wanted`, never past `full`.
fn grown_len(granted: bool, current: usize, full: usize, wanted: bool) -> usize {
    if !granted || current >= full {
        return current;
    }
    let start = GRANTED_START_LEN.min(full);
    if current < start {
        start
    } else if wanted {
        (current * 2).min(full)
    } else {
        current
    }
}

impl<C: Connection> Stream<C> {
    /// The peer proved who it is: let the window grow (RX at the next drain, TX staging
    /// when next empty, the command receives at the next progress). Idempotent.
    pub fn grant_full_window(&mut self) {
        let w = &mut self.window;
        if !w.granted {
            w.granted = true;
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

    /// The size of the TX staging ring now.
    pub fn tx_staging(&self) -> usize {
        self.tx_len
    }

    /// The peer's window as it last advertised it (what our WRITEs aim at).
    pub fn peer_window(&self) -> Option<RemoteRegion> {
        self.peer_rx
    }

    /// At a drain point: replaces RX with a larger one if the window grows. A registration
    /// that fails (the memlock limit, the device's MR table) leaves the stream at its size,
    /// counted in `window_grow_failures`: a working client is not closed for it.
    pub(super) fn grow_rx_at_drain(&mut self) -> Result<()> {
        let len = self.window.next_rx_len(self.rx_len);
        if len == self.rx_len {
            return Ok(());
        }
        let conn = self
            .conn
            .as_ref()
            .ok_or_else(|| BusError::Closed(String::new()))?;
        let rx = match register_rx(conn, len) {
            Ok(rx) => rx,
            Err(e) => {
                tracing::warn!(error = %e, len, "stream RX could not grow; it keeps its size");
                self.stats.window_grow_failures += 1;
                return Ok(());
            }
        };
        self.rx = Some(rx);
        self.rx_len = len;
        self.stats.window_grows += 1;
        Ok(())
    }

    /// Replaces TX staging with a larger one if the window grows and nothing is staged (a
    /// failed registration keeps the current one, as for RX).
    pub(super) fn grow_tx_when_empty(&mut self) -> Result<()> {
        if self.tx_accepted != self.tx_done {
            return Ok(());
        }
        let len = self.window.next_tx_len(self.tx_len);
        if len == self.tx_len {
            return Ok(());
        }
        let conn = self
            .conn
            .as_ref()
            .ok_or_else(|| BusError::Closed(String::new()))?;
        let tx = match conn.register(len, Access::NONE) {
            Ok(tx) => tx,
            Err(e) => {
                tracing::warn!(error = %e, len, "stream staging could not grow; it keeps its size");
                self.stats.window_grow_failures += 1;
                return Ok(());
            }
        };
        self.tx = Some(tx);
        self.tx_len = len;
        self.tx_accepted = 0;
        self.tx_posted = 0;
        self.tx_done = 0;
        self.stats.window_grows += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::grown_len;
    use crate::stream::GRANTED_START_LEN as START;

    #[test]
    fn buffers_grow_only_once_granted_and_by_need_up_to_the_full_size() {
        let full = 16 * START;
        // Not granted: stays whatever is wanted.
        assert_eq!(grown_len(false, 8192, full, true), 8192);
        // Granted: a pre-auth buffer goes to the start size at once, wanted or not.
        assert_eq!(grown_len(true, 8192, full, false), START);
        assert_eq!(grown_len(true, 8192, full, true), START);
        // From there only by need, doubling.
        assert_eq!(grown_len(true, START, full, false), START);
        assert_eq!(grown_len(true, START, full, true), 2 * START);
        assert_eq!(grown_len(true, 8 * START, full, true), full);
        assert_eq!(grown_len(true, full, full, true), full);
        // A full size below the start size (never configured so, but bounded anyway).
        assert_eq!(grown_len(true, 4096, 6000, true), 6000);
        assert_eq!(grown_len(true, 6000, 6000, true), 6000);
    }
}
