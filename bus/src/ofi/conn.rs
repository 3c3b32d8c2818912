//! A connection over RDM: one endpoint of our own (own CQ, own AV) talking to exactly one peer
//! endpoint. Each accepted connection gets a fresh endpoint rather than sharing the listener's:
//! completions then belong to one connection (no demultiplexing by source address, no
//! head-of-line blocking between peers, and dropping a connection closes exactly its own
//! operations), at the price of one endpoint (and on tcp one socket) per connection.
//!
//! Receives follow verbs: `post_recv` queues the caller's buffer, and every SEND or WRITE WITH
//! IMM from the peer consumes the oldest queued buffer (a SEND's bytes are copied into it from
//! our bounce buffer; see `rdm.rs`).
//!
//! `byte_len` of a `RecvWriteImm` is the length libfabric reports for the remote write: shm
//! reports it, tcp;ofi_rxm 1.17 reports 0. Protocols that need the length carry it in the
//! immediate (as Valkey-over-RDMA does).
//!
//! Progress: on tcp and shm data moves only inside libfabric calls, so both sides must keep
//! calling `poll` (or `wait`), including a target that only receives one-sided writes: a WRITE
//! to a process that never polls does not complete.
//!
//! Liveness: RDM has no connection state to break; a dead peer shows up as failed or stalled
//! operations. The stream protocol's keepalives are what detect it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::access::Access;
use crate::addr::EndpointAddr;
use crate::error::BusError;
use crate::provider::{Completion, Connection, LocalSlice, Op, Region, RemoteSlice, WorkError};

use super::open::OFI_SEND_MAX;
use super::rdm::{Event, RdmCore};
use super::region::OfiRegion;
use super::sys::FiAddr;

/// Shortest and longest sleep of the idle back-off in `wait` (no wait object on tcp/shm: a
/// sleeping process makes no progress, so sleeps stay short).
const WAIT_SLEEP_MIN: Duration = Duration::from_micros(20);
const WAIT_SLEEP_MAX: Duration = Duration::from_millis(1);

struct PostedRecv {
    wr_id: u64,
    region: OfiRegion,
    offset: usize,
    len: usize,
}

/// Something the peer sent that consumes one posted receive.
enum Arrival {
    Send { bounce: u32, len: usize },
    Imm { imm: u32, len: usize },
    Failed(WorkError),
}

pub struct OfiConnection {
    core: RdmCore,
    peer_fi: FiAddr,
    peer: EndpointAddr,
    local: EndpointAddr,
    max_inline: usize,
    recv_max: usize,
    recvs: VecDeque<PostedRecv>,
    arrivals: VecDeque<Arrival>,
    /// Completions found but not yet returned (by `wait`, or beyond `max`). Bounded: at most
    /// one per send slot plus one per posted receive.
    done: VecDeque<Completion>,
    events: VecDeque<Event>,
}

impl std::fmt::Debug for OfiConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfiConnection")
            .field("local", &self.local)
            .field("peer", &self.peer)
            .finish()
    }
}

impl OfiConnection {
    pub(crate) fn new(
        core: RdmCore,
        peer_fi: FiAddr,
        peer_raw: &[u8],
        max_inline: usize,
        recv_max: usize,
        early: VecDeque<Event>,
    ) -> Result<Self, BusError> {
        let tag = core.domain().kind.addr_tag();
        Ok(OfiConnection {
            peer: EndpointAddr::ofi(tag, peer_raw)?,
            local: EndpointAddr::ofi(tag, &core.ep.name)?,
            core,
            peer_fi,
            max_inline,
            recv_max,
            recvs: VecDeque::new(),
            arrivals: VecDeque::new(),
            done: VecDeque::new(),
            // What arrived in the handshake's last poll after the ACCEPT: the peer's first
            // messages, handled before anything newer.
            events: early,
        })
    }

    /// Reads the CQ once and turns what it found into completions in `self.done`.
    fn progress(&mut self, max: usize) -> Result<(), BusError> {
        self.core.poll(&mut self.events, max.max(1))?;
        while let Some(event) = self.events.pop_front() {
            match event {
                Event::TxDone {
                    internal: true,
                    status,
                    ..
                } => {
                    if let Err(e) = status {
                        tracing::warn!(peer = %self.peer, ?e, "ofi handshake send failed");
                    }
                }
                Event::TxDone {
                    wr_id, op, status, ..
                } => self.done.push_back(Completion {
                    wr_id,
                    op,
                    status,
                    byte_len: 0,
                    imm: None,
                }),
                Event::Received { bounce, len } => {
                    self.arrivals.push_back(Arrival::Send { bounce, len })
                }
                Event::RemoteWriteImm { imm, len } => {
                    self.arrivals.push_back(Arrival::Imm { imm, len })
                }
                Event::RecvFailed { error } => self.arrivals.push_back(Arrival::Failed(error)),
            }
        }
        // IMMs that find no posted receive wait here; bounded like a receive queue (on verbs
        // the peer would get RNR errors instead).
        if self.arrivals.len() > self.recv_max + super::rdm::BOUNCE_MAX {
            return Err(BusError::Protocol(format!(
                "peer {} sent {} messages beyond the posted receives",
                self.peer,
                self.arrivals.len()
            )));
        }
        self.match_arrivals()
    }

    /// Pairs arrivals with posted receives, oldest first, as a verbs receive queue does.
    fn match_arrivals(&mut self) -> Result<(), BusError> {
        while !self.arrivals.is_empty() && !self.recvs.is_empty() {
            let (Some(arrival), Some(recv)) = (self.arrivals.pop_front(), self.recvs.pop_front())
            else {
                break;
            };
            let completion = match arrival {
                Arrival::Send { bounce, len } => {
                    let status = if len > recv.len {
                        Err(WorkError::Other(format!(
                            "message of {len} bytes exceeds the {}-byte receive buffer",
                            recv.len
                        )))
                    } else {
                        self.core
                            .bounce_copy_to(bounce, len, &recv.region, recv.offset)
                            .map_err(|e| WorkError::Other(e.to_string()))
                    };
                    self.core.release_bounce(bounce)?;
                    Completion {
                        wr_id: recv.wr_id,
                        op: Op::Recv,
                        byte_len: if status.is_ok() { len as u32 } else { 0 },
                        status,
                        imm: None,
                    }
                }
                Arrival::Imm { imm, len } => Completion {
                    wr_id: recv.wr_id,
                    op: Op::RecvWriteImm,
                    status: Ok(()),
                    byte_len: len.min(u32::MAX as usize) as u32,
                    imm: Some(imm),
                },
                Arrival::Failed(error) => Completion {
                    wr_id: recv.wr_id,
                    op: Op::Recv,
                    status: Err(error),
                    byte_len: 0,
                    imm: None,
                },
            };
            self.done.push_back(completion);
        }
        Ok(())
    }

    /// The (address, key) libfabric needs for `dst`, after checking it against the length of
    /// the local side and of the advert (the target checks its own range again).
    fn remote_target(&self, dst: &RemoteSlice, len: usize) -> Result<(u64, u64), BusError> {
        if dst.len != len as u64 {
            return Err(BusError::Invalid {
                what: "remote slice",
                reason: format!("length {} differs from the local {len}", dst.len),
            });
        }
        match dst.offset.checked_add(dst.len) {
            Some(end) if end <= dst.region.len => {}
            _ => {
                return Err(BusError::OutOfBounds {
                    offset: dst.offset,
                    len: dst.len,
                    region_len: dst.region.len,
                })
            }
        }
        Ok(self
            .core
            .domain()
            .addressing()
            .target(&dst.region, dst.offset))
    }
}

impl Connection for OfiConnection {
    type Region = OfiRegion;

    /// On the shared domain (libfabric checks keys per domain): the region's own random key
    /// and address are what keep other peers out.
    fn register(&self, len: usize, access: Access) -> Result<OfiRegion, BusError> {
        OfiRegion::register(self.core.domain(), len, access)
    }

    fn post_send(&mut self, wr_id: u64, src: LocalSlice<OfiRegion>) -> Result<(), BusError> {
        if !src.region.access().contains(Access::SEND) {
            return Err(BusError::Invalid {
                what: "ofi send",
                reason: "the source region was registered without Access::SEND".into(),
            });
        }
        if src.len > OFI_SEND_MAX {
            return Err(BusError::Invalid {
                what: "ofi send",
                reason: format!("{} bytes > OFI_SEND_MAX {OFI_SEND_MAX}", src.len),
            });
        }
        self.core.send_region(
            wr_id,
            &src.region,
            src.offset,
            src.len,
            self.peer_fi,
            self.max_inline,
        )
    }

    fn post_recv(&mut self, wr_id: u64, dst: LocalSlice<OfiRegion>) -> Result<(), BusError> {
        if self.recvs.len() >= self.recv_max {
            return Err(BusError::Full {
                what: "ofi receive queue (rdma-recv-wr)",
            });
        }
        dst.region.ptr_at(dst.offset, dst.len)?;
        self.recvs.push_back(PostedRecv {
            wr_id,
            region: dst.region,
            offset: dst.offset,
            len: dst.len,
        });
        // Messages that arrived before this receive complete at the next poll.
        self.match_arrivals()
    }

    fn post_write(
        &mut self,
        wr_id: u64,
        src: LocalSlice<OfiRegion>,
        dst: RemoteSlice,
        imm: Option<u32>,
    ) -> Result<(), BusError> {
        let (addr, key) = self.remote_target(&dst, src.len)?;
        self.core.write(
            wr_id,
            &src.region,
            src.offset,
            src.len,
            self.peer_fi,
            addr,
            key,
            imm,
        )
    }

    fn post_read(
        &mut self,
        wr_id: u64,
        dst: LocalSlice<OfiRegion>,
        src: RemoteSlice,
    ) -> Result<(), BusError> {
        let (addr, key) = self.remote_target(&src, dst.len)?;
        self.core.read(
            wr_id,
            &dst.region,
            dst.offset,
            dst.len,
            self.peer_fi,
            addr,
            key,
        )
    }

    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<usize, BusError> {
        // Always read the CQ: it is what drives progress on tcp and shm.
        self.progress(max)?;
        let n = max.min(self.done.len());
        out.extend(self.done.drain(..n));
        Ok(n)
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), BusError> {
        let deadline = Instant::now() + timeout;
        let mut sleep = WAIT_SLEEP_MIN;
        loop {
            self.progress(1)?;
            if !self.done.is_empty() {
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

    fn peer(&self) -> &EndpointAddr {
        &self.peer
    }

    fn local(&self) -> &EndpointAddr {
        &self.local
    }
}
