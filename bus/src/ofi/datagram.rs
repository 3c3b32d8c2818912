//! Datagrams over an RDM endpoint. RDM is reliable, which is more than the contract promises.
//!
//! Each message carries the sender's address in a small header, so `try_recv` can say who sent
//! it without FI_SOURCE (which not every provider offers) and without the sender being in our
//! address vector:
//!
//! ```text
//! offset 0 version (1) | 1 address length n (1..=OFI_ADDR_MAX) | 2 address (n bytes) | payload
//! ```
//! The address is what the sender claims; the bus above authenticates its messages itself.
//!
//! Destinations are inserted into the address vector on first use and cached, at most
//! `AV_CACHE_MAX` of them; beyond that the oldest entry is removed from the AV.
//!
//! `send_to` queues the frame in a bounded outbox and hands it to the provider at once when it
//! can; otherwise (tcp;ofi_rxm while connecting to a new peer) on later `send_to`,
//! `try_recv` or `wait` calls. So keep calling one of those, as with every manual-progress
//! endpoint.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::addr::{EndpointAddr, OFI_ADDR_MAX};
use crate::config::EndpointConfig;
use crate::error::BusError;
use crate::provider::{DatagramEndpoint, DatagramMeta};

use super::domain::Domain;
use super::kind::OfiKind;
use super::open::{open_core, Bind};
use super::rdm::{CoreSizes, Event, RdmCore, BOUNCE_MAX};
use super::sys::FiAddr;

/// Largest datagram payload (bus messages are small; this also bounds every buffer).
pub const DATAGRAM_MTU: usize = 4096;
const VERSION: u8 = 1;
const HEADER_MAX: usize = 2 + OFI_ADDR_MAX;
const FRAME_MAX: usize = HEADER_MAX + DATAGRAM_MTU;
/// Peers kept in the address vector (a cluster bus talks to every node: thousands at most).
pub const AV_CACHE_MAX: usize = 4096;
/// Datagrams accepted by `send_to` but not yet taken by the provider (tcp;ofi_rxm refuses
/// sends to a new peer until its connection is up, which takes progress): beyond this,
/// `send_to` says `Full`.
pub const OUTBOX_MAX: usize = 256;
/// A frame the provider kept refusing this long is dropped: datagrams may be lost anyway, and
/// a peer that died (tcp;ofi_rxm retrying its connection) must not hold the outbox forever.
pub const OUTBOX_AGE_MAX: std::time::Duration = std::time::Duration::from_secs(2);
/// Received datagrams held between polls: the bounce buffers they sit in.
const RECV_HOLD_MAX: usize = BOUNCE_MAX;
const WAIT_SLEEP_MIN: Duration = Duration::from_micros(20);
const WAIT_SLEEP_MAX: Duration = Duration::from_millis(1);

pub struct OfiDatagram {
    core: RdmCore,
    local: EndpointAddr,
    tag: &'static str,
    av_max: usize,
    av: HashMap<Vec<u8>, FiAddr>,
    av_order: VecDeque<Vec<u8>>,
    /// Received frames not yet returned: (bounce buffer, frame length).
    held: VecDeque<(u32, usize)>,
    /// Frames waiting for the provider, with their destination's raw address.
    /// (destination, frame, when queued).
    outbox: VecDeque<(Vec<u8>, Vec<u8>, std::time::Instant)>,
    events: VecDeque<Event>,
}

impl std::fmt::Debug for OfiDatagram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfiDatagram")
            .field("local", &self.local)
            .finish()
    }
}

impl OfiDatagram {
    /// `ip`: the interface to bind on tcp (an ephemeral port there); other kinds and an
    /// unspecified or absent `ip` take the provider's first address.
    pub(crate) fn open(
        domain: &Arc<Domain>,
        config: &EndpointConfig,
        ip: Option<std::net::IpAddr>,
    ) -> Result<Self, BusError> {
        config.validate()?;
        let bind = match (domain.kind, ip) {
            (OfiKind::Tcp, Some(ip)) if !ip.is_unspecified() => {
                Bind::At(std::net::SocketAddr::new(ip, 0))
            }
            _ => Bind::Any,
        };
        let sizes = CoreSizes {
            tx_slots: config.send_wr as usize,
            bounce_count: (config.recv_wr as usize).min(RECV_HOLD_MAX),
            bounce_bytes: FRAME_MAX,
            staging_bytes: FRAME_MAX,
            cq_size: config.cq_size as usize,
            av_count: av_cache_max(domain),
        };
        let core = open_core(domain, bind, sizes)?;
        let tag = domain.kind.addr_tag();
        Ok(OfiDatagram {
            local: EndpointAddr::ofi(tag, &core.ep.name)?,
            core,
            tag,
            av_max: av_cache_max(domain),
            av: HashMap::new(),
            av_order: VecDeque::new(),
            held: VecDeque::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
        })
    }

    fn resolve(&mut self, raw: &[u8]) -> Result<FiAddr, BusError> {
        if let Some(&fi) = self.av.get(raw) {
            return Ok(fi);
        }
        if self.av.len() >= self.av_max {
            if let Some(old) = self.av_order.pop_front() {
                if let Some(fi) = self.av.remove(&old) {
                    self.core.ep.av_remove(fi);
                }
            }
        }
        let fi = self.core.ep.av_insert(raw)?;
        self.av.insert(raw.to_vec(), fi);
        self.av_order.push_back(raw.to_vec());
        Ok(fi)
    }

    /// Hands queued frames to the provider, oldest first. A destination the provider says
    /// "try again" for keeps its frames (in order) for the next round, without holding up the
    /// frames to other destinations behind them (a dead peer must not silence the live ones).
    fn flush_outbox(&mut self) -> Result<(), BusError> {
        // At most OUTBOX_MAX destinations, so a linear list is enough.
        let mut waiting: Vec<Vec<u8>> = Vec::new();
        // One pass in queue order; what stays is rotated to the back, so order is kept and the
        // deque keeps its allocation.
        for _ in 0..self.outbox.len() {
            let Some((to, frame, queued)) = self.outbox.pop_front() else {
                break;
            };
            if queued.elapsed() > OUTBOX_AGE_MAX {
                tracing::debug!("ofi datagram refused for too long; dropped");
                continue;
            }
            if waiting.contains(&to) {
                self.outbox.push_back((to, frame, queued));
                continue;
            }
            let fi = match self.resolve(&to) {
                Ok(fi) => fi,
                Err(e) => {
                    tracing::debug!(%e, "ofi datagram to a bad address dropped");
                    continue;
                }
            };
            match self.core.send_bytes(0, &frame, fi) {
                Ok(()) => {}
                Err(BusError::Full { .. }) => {
                    waiting.push(to.clone());
                    self.outbox.push_back((to, frame, queued));
                }
                Err(e) => tracing::debug!(%e, "ofi datagram send failed"),
            }
        }
        Ok(())
    }

    /// Reads the CQ once (keeps received frames, drops send completions), then sends what
    /// waits in the outbox.
    fn progress(&mut self) -> Result<(), BusError> {
        self.core.poll(&mut self.events, BOUNCE_MAX)?;
        while let Some(event) = self.events.pop_front() {
            match event {
                Event::Received { bounce, len, .. } => self.held.push_back((bounce, len)),
                Event::TxDone { status: Err(e), .. } => {
                    tracing::debug!(?e, "ofi datagram send failed")
                }
                Event::RecvFailed { error, .. } => {
                    tracing::debug!(?error, "ofi datagram receive failed")
                }
                Event::TxDone { .. } => {}
            }
        }
        self.flush_outbox()
    }
}

impl DatagramEndpoint for OfiDatagram {
    fn mtu(&self) -> usize {
        DATAGRAM_MTU
    }

    fn local(&self) -> &EndpointAddr {
        &self.local
    }

    fn send_to(&mut self, to: &EndpointAddr, payload: &[u8]) -> Result<(), BusError> {
        let EndpointAddr::Ofi { provider, raw } = to else {
            return Err(BusError::Invalid {
                what: "datagram destination",
                reason: format!("{to} is not an ofi address"),
            });
        };
        if provider != self.tag {
            return Err(BusError::Invalid {
                what: "datagram destination",
                reason: format!("{to} is not an ofi:{} address", self.tag),
            });
        }
        if payload.len() > DATAGRAM_MTU {
            return Err(BusError::Invalid {
                what: "datagram",
                reason: format!("{} bytes > mtu {DATAGRAM_MTU}", payload.len()),
            });
        }
        if self.outbox.len() >= OUTBOX_MAX {
            self.progress()?;
            if self.outbox.len() >= OUTBOX_MAX {
                return Err(BusError::Full {
                    what: "ofi datagram outbox",
                });
            }
        }
        let name = &self.core.ep.name;
        let mut frame = Vec::with_capacity(2 + name.len() + payload.len());
        frame.push(VERSION);
        frame.push(name.len() as u8);
        frame.extend_from_slice(name);
        frame.extend_from_slice(payload);
        self.outbox
            .push_back((raw.clone(), frame, std::time::Instant::now()));
        self.flush_outbox()
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<DatagramMeta>, BusError> {
        self.progress()?;
        while let Some((bounce, len)) = self.held.pop_front() {
            let mut frame = vec![0u8; len];
            let read = self.core.bounce_read(bounce, &mut frame);
            self.core.release_bounce(bounce)?;
            read?;
            match parse_frame(&frame) {
                Some((from, payload)) => {
                    if payload.len() > buf.len() {
                        tracing::debug!(
                            len = payload.len(),
                            buf = buf.len(),
                            "ofi datagram longer than the receive buffer dropped"
                        );
                        continue;
                    }
                    let Ok(from) = EndpointAddr::ofi(self.tag, from) else {
                        continue;
                    };
                    buf[..payload.len()].copy_from_slice(payload);
                    return Ok(Some(DatagramMeta {
                        from,
                        len: payload.len(),
                    }));
                }
                None => tracing::debug!(len, "malformed ofi datagram dropped"),
            }
        }
        Ok(None)
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), BusError> {
        let deadline = Instant::now() + timeout;
        let mut sleep = WAIT_SLEEP_MIN;
        loop {
            self.progress()?;
            if !self.held.is_empty() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            std::thread::sleep(sleep.min(deadline - now));
            sleep = (sleep * 2).min(WAIT_SLEEP_MAX);
        }
    }
}

fn av_cache_max(domain: &Domain) -> usize {
    domain
        .kind
        .av_count_max()
        .map_or(AV_CACHE_MAX, |m| m.min(AV_CACHE_MAX))
}

/// Splits a frame into (sender address, payload); `None` if malformed.
fn parse_frame(frame: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&version, rest) = frame.split_first()?;
    let (&n, rest) = rest.split_first()?;
    let n = n as usize;
    if version != VERSION || n == 0 || n > OFI_ADDR_MAX || rest.len() < n {
        return None;
    }
    Some(rest.split_at(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn frames_parse() {
        assert_eq!(
            parse_frame(&[1, 2, 7, 8, 9]),
            Some((&[7u8, 8][..], &[9u8][..]))
        );
        assert_eq!(parse_frame(&[1, 3, 7, 8]), None);
        assert_eq!(parse_frame(&[2, 1, 7]), None);
        assert_eq!(parse_frame(&[1, 0]), None);
        assert_eq!(parse_frame(&[]), None);
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_frame(&bytes);
        }
    }
}
