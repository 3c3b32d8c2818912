//! A connection over RDM: one peer of a [`Hub`] endpoint. An accepted connection shares its
//! listener's hub with every other connection the listener accepted (see `hub.rs` for why and
//! how completions find their connection); a connector's connection has a private hub.
//! Dropping the connection detaches its peer from the hub: its regions are its own (registered
//! through it) and go with their last handle, as before.
//!
//! Receives follow verbs: `post_recv` queues the caller's buffer, and every SEND or WRITE WITH
//! IMM from the peer consumes the oldest queued buffer (a SEND's bytes are copied into it from
//! the hub's bounce buffer; see `rdm.rs`).
//!
//! `byte_len` of a `RecvWriteImm` is the length of the peer's WRITE, carried by its IMM note
//! (`rdm.rs`: `RdmCore::write`).
//!
//! Progress: on tcp and shm data moves only inside libfabric calls, so both sides must keep
//! calling `poll` (or `wait`), including a target that only receives one-sided writes: a WRITE
//! to a process that never polls does not complete.
//!
//! Liveness: RDM has no connection state to break; a dead peer shows up as failed or stalled
//! operations. The stream protocol's keepalives are what detect it.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::access::Access;
use crate::addr::EndpointAddr;
use crate::error::BusError;
use crate::idle::{Doorbell, IdleWait};
use crate::provider::{Completion, Connection, LocalSlice, Op, Region, RemoteSlice, WorkError};

use super::hub::{Attached, Delivery, Hub, ARRIVALS_BEYOND_RECEIVES, ARRIVAL_BYTES_MAX};
use super::open::OFI_SEND_MAX;
use super::region::OfiRegion;
use super::sys::FiAddr;

/// Shortest and longest sleep of the idle back-off in `wait` (shm has no wait object, and
/// tcp's descriptor serves threads that block on many connections, `arm_idle_wait`; a
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
    Send(Vec<u8>),
    Imm { imm: u32, len: usize },
    Failed(WorkError),
}

pub struct OfiConnection {
    hub: Arc<Hub>,
    /// This connection's id in the hub (carried by its operations' completions).
    owner: u64,
    peer_fi: FiAddr,
    peer: EndpointAddr,
    local: EndpointAddr,
    max_inline: usize,
    recv_max: usize,
    recvs: VecDeque<PostedRecv>,
    /// The most receives posted at once (shared with the hub, which bounds our inbox by it,
    /// plus its slack, between two polls).
    receives_high: Arc<AtomicUsize>,
    arrivals: VecDeque<Arrival>,
    /// Bytes of SEND payload in `arrivals` (bounded by `ARRIVAL_BYTES_MAX`).
    arrival_bytes: usize,
    /// Completions found but not yet returned (by `wait`, or beyond `max`). Bounded: at most
    /// one per send slot plus one per posted receive.
    done: VecDeque<Completion>,
    deliveries: VecDeque<Delivery>,
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
    /// The connection of the peer at raw address `peer_raw`, attached to `hub` (see
    /// [`Hub::attach`]).
    pub(crate) fn new(
        hub: Arc<Hub>,
        attached: Attached,
        peer_raw: &[u8],
        max_inline: usize,
        recv_max: usize,
    ) -> Result<Self, BusError> {
        let Attached {
            owner,
            peer_fi,
            receives,
        } = attached;
        let tag = hub.domain().kind.addr_tag();
        let peer = EndpointAddr::ofi(tag, peer_raw);
        let local = EndpointAddr::ofi(tag, hub.name());
        let (peer, local) = match (peer, local) {
            (Ok(p), Ok(l)) => (p, l),
            (Err(e), _) | (_, Err(e)) => {
                hub.detach(owner, peer_fi);
                return Err(e);
            }
        };
        Ok(OfiConnection {
            hub,
            owner,
            peer_fi,
            peer,
            local,
            max_inline,
            recv_max,
            recvs: VecDeque::new(),
            receives_high: receives,
            arrivals: VecDeque::new(),
            arrival_bytes: 0,
            done: VecDeque::new(),
            deliveries: VecDeque::new(),
        })
    }

    /// The peer's entry in the hub's address vector.
    pub(crate) fn peer_fi(&self) -> FiAddr {
        self.peer_fi
    }

    /// The endpoint this connection is a peer of (shared with the other connections its
    /// listener accepted).
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// This connection's id in its hub (see [`Hub::in_flight_of`]).
    pub fn owner(&self) -> u64 {
        self.owner
    }

    /// Reads the hub once and turns what it has for us into completions in `self.done`.
    fn progress(&mut self) -> Result<(), BusError> {
        self.hub.poll(self.owner, &mut self.deliveries)?;
        while let Some(delivery) = self.deliveries.pop_front() {
            match delivery {
                Delivery::Done { wr_id, op, status } => self.done.push_back(Completion {
                    wr_id,
                    op,
                    status,
                    byte_len: 0,
                    imm: None,
                    covers: 0,
                }),
                Delivery::Send(bytes) => {
                    self.arrival_bytes += bytes.len();
                    self.arrivals.push_back(Arrival::Send(bytes));
                }
                Delivery::Imm { imm, len } => self.arrivals.push_back(Arrival::Imm { imm, len }),
                Delivery::RecvFailed(error) => self.arrivals.push_back(Arrival::Failed(error)),
            }
        }
        self.match_arrivals()?;
        // Arrivals that find no posted receive wait here, a few (on verbs the peer would get
        // RNR errors instead): a peer that sends past our posted receives is cut off.
        if self.arrivals.len() > ARRIVALS_BEYOND_RECEIVES || self.arrival_bytes > ARRIVAL_BYTES_MAX
        {
            return Err(BusError::Protocol(format!(
                "peer {} sent {} messages ({} bytes) beyond the posted receives",
                self.peer,
                self.arrivals.len(),
                self.arrival_bytes
            )));
        }
        Ok(())
    }

    /// Pairs arrivals with posted receives, oldest first, as a verbs receive queue does.
    fn match_arrivals(&mut self) -> Result<(), BusError> {
        while !self.arrivals.is_empty() && !self.recvs.is_empty() {
            let (Some(arrival), Some(recv)) = (self.arrivals.pop_front(), self.recvs.pop_front())
            else {
                break;
            };
            let completion = match arrival {
                Arrival::Send(bytes) => {
                    self.arrival_bytes -= bytes.len();
                    let len = bytes.len();
                    let status = if len > recv.len {
                        Err(WorkError::Other(format!(
                            "message of {len} bytes exceeds the {}-byte receive buffer",
                            recv.len
                        )))
                    } else {
                        recv.region
                            .write(recv.offset, &bytes)
                            .map_err(|e| WorkError::Other(e.to_string()))
                    };
                    Completion {
                        wr_id: recv.wr_id,
                        op: Op::Recv,
                        byte_len: if status.is_ok() { len as u32 } else { 0 },
                        status,
                        imm: None,
                        covers: 0,
                    }
                }
                Arrival::Imm { imm, len } => Completion {
                    wr_id: recv.wr_id,
                    op: Op::RecvWriteImm,
                    status: Ok(()),
                    byte_len: len.min(u32::MAX as usize) as u32,
                    imm: Some(imm),
                    covers: 0,
                },
                Arrival::Failed(error) => Completion {
                    wr_id: recv.wr_id,
                    op: Op::Recv,
                    status: Err(error),
                    byte_len: 0,
                    imm: None,
                    covers: 0,
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
            .hub
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
        OfiRegion::register(self.hub.domain(), len, access)
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
        let (owner, to, inline) = (self.owner, self.peer_fi, self.max_inline);
        self.hub.lock()?.post(owner, |core| {
            core.send_region(owner, wr_id, &src.region, src.offset, src.len, to, inline)
        })
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
        self.receives_high.fetch_max(self.recvs.len(), Relaxed);
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
        let (owner, to) = (self.owner, self.peer_fi);
        self.hub.lock()?.post(owner, |core| {
            core.write(
                owner,
                wr_id,
                &src.region,
                src.offset,
                src.len,
                to,
                addr,
                key,
                imm,
            )
        })
    }

    fn post_read(
        &mut self,
        wr_id: u64,
        dst: LocalSlice<OfiRegion>,
        src: RemoteSlice,
    ) -> Result<(), BusError> {
        let (addr, key) = self.remote_target(&src, dst.len)?;
        let (owner, from) = (self.owner, self.peer_fi);
        self.hub.lock()?.post(owner, |core| {
            core.read(
                owner,
                wr_id,
                &dst.region,
                dst.offset,
                dst.len,
                from,
                addr,
                key,
            )
        })
    }

    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<usize, BusError> {
        // Always read the CQ: it is what drives progress on tcp and shm.
        self.progress()?;
        let n = max.min(self.done.len());
        out.extend(self.done.drain(..n));
        Ok(n)
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), BusError> {
        let deadline = Instant::now() + timeout;
        let mut sleep = WAIT_SLEEP_MIN;
        loop {
            self.progress()?;
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

    /// On tcp, the hub's CQ descriptor (see `Hub::arm_idle_wait`); shm has none.
    fn arm_idle_wait(&mut self, fds: &mut Vec<RawFd>) -> Result<IdleWait, BusError> {
        if !self.done.is_empty() || !self.deliveries.is_empty() {
            return Ok(IdleWait::Ready);
        }
        self.hub.arm_idle_wait(self.owner, fds)
    }

    fn attach_idle_bell(&mut self, bell: &Arc<Doorbell>) {
        self.hub.set_bell(self.owner, bell.clone());
    }

    fn peer(&self) -> &EndpointAddr {
        &self.peer
    }

    fn local(&self) -> &EndpointAddr {
        &self.local
    }
}

impl Drop for OfiConnection {
    fn drop(&mut self) {
        self.hub.detach(self.owner, self.peer_fi);
    }
}
