//! Datagram: MTU-bounded messages for the cluster bus over any [`DatagramEndpoint`] (UD on
//! verbs, RDM on ofi, the sim). Each datagram carries a small checked header ([`frame`]); a
//! corrupt, truncated or foreign one is dropped and counted, never handed up and never a panic.
//! Loss, duplication and reordering are the caller's business (the bus protocol tolerates them).

pub mod frame;

#[cfg(test)]
mod tests;

use std::time::Duration;

use crate::addr::EndpointAddr;
use crate::error::{BusError, Result};
use crate::provider::DatagramEndpoint;

use frame::{Reject, FRAME_HEADER_LEN, FRAME_PAYLOAD_MAX};

/// Datagrams examined per `recv` call: rejected ones are skipped, but one call's work is
/// bounded even when a peer floods us with garbage.
pub const RECV_SCAN_MAX: usize = 64;

/// What was sent, received and dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatagramStats {
    pub sent: u64,
    pub received: u64,
    pub dropped_short: u64,
    pub dropped_magic: u64,
    pub dropped_version: u64,
    pub dropped_length: u64,
    pub dropped_checksum: u64,
}

impl DatagramStats {
    pub fn dropped(&self) -> u64 {
        self.dropped_short
            + self.dropped_magic
            + self.dropped_version
            + self.dropped_length
            + self.dropped_checksum
    }
}

/// A datagram endpoint with framing and counters.
#[derive(Debug)]
pub struct DatagramSocket<D: DatagramEndpoint> {
    ep: D,
    frame: Vec<u8>,
    stats: DatagramStats,
}

impl<D: DatagramEndpoint> DatagramSocket<D> {
    pub fn new(ep: D) -> Result<Self> {
        if ep.mtu() <= FRAME_HEADER_LEN {
            return Err(BusError::Invalid {
                what: "datagram MTU",
                reason: format!(
                    "{} leaves no room after the {FRAME_HEADER_LEN}-byte header",
                    ep.mtu()
                ),
            });
        }
        let frame = Vec::with_capacity(ep.mtu());
        Ok(DatagramSocket {
            ep,
            frame,
            stats: DatagramStats::default(),
        })
    }

    /// Largest payload `send_to` accepts.
    pub fn max_payload(&self) -> usize {
        (self.ep.mtu() - FRAME_HEADER_LEN).min(FRAME_PAYLOAD_MAX)
    }

    pub fn local(&self) -> &EndpointAddr {
        self.ep.local()
    }

    pub fn stats(&self) -> &DatagramStats {
        &self.stats
    }

    /// Sends one message. `Invalid` if it exceeds `max_payload`; `Full` means retry later.
    pub fn send_to(&mut self, to: &EndpointAddr, payload: &[u8]) -> Result<()> {
        if payload.len() > self.max_payload() {
            return Err(BusError::Invalid {
                what: "datagram payload",
                reason: format!("{} bytes exceed {}", payload.len(), self.max_payload()),
            });
        }
        frame::encode(payload, &mut self.frame);
        self.ep.send_to(to, &self.frame)?;
        self.stats.sent += 1;
        Ok(())
    }

    /// Copies the next valid message into `out` (at least `max_payload` bytes long) and returns
    /// its sender and length; `None` when nothing valid is waiting.
    pub fn recv(&mut self, out: &mut [u8]) -> Result<Option<(EndpointAddr, usize)>> {
        if out.len() < self.max_payload() {
            return Err(BusError::Invalid {
                what: "datagram receive buffer",
                reason: format!("{} bytes < max payload {}", out.len(), self.max_payload()),
            });
        }
        self.frame.resize(self.ep.mtu(), 0);
        for _ in 0..RECV_SCAN_MAX {
            let Some(meta) = self.ep.try_recv(&mut self.frame)? else {
                return Ok(None);
            };
            match frame::decode(&self.frame[..meta.len]) {
                Ok(payload) => {
                    out[..payload.len()].copy_from_slice(payload);
                    self.stats.received += 1;
                    return Ok(Some((meta.from, payload.len())));
                }
                Err(why) => {
                    tracing::debug!(from = %meta.from, ?why, "dropped a bad datagram");
                    let counter = match why {
                        Reject::Short => &mut self.stats.dropped_short,
                        Reject::Magic => &mut self.stats.dropped_magic,
                        Reject::Version => &mut self.stats.dropped_version,
                        Reject::Length => &mut self.stats.dropped_length,
                        Reject::Checksum => &mut self.stats.dropped_checksum,
                    };
                    *counter += 1;
                }
            }
        }
        Ok(None)
    }

    /// Blocks until a datagram may be waiting or `timeout` passes.
    pub fn wait(&mut self, timeout: Duration) -> Result<()> {
        self.ep.wait(timeout)
    }

    /// The endpoint underneath (to send raw bytes in tests, or to read its address).
    pub fn endpoint_mut(&mut self) -> &mut D {
        &mut self.ep
    }
}
