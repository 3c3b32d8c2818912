//! Reliable connections: RC QPs set up with rdma_cm (`RDMA_PS_TCP`), the way Valkey-over-RDMA
//! and rping do, so a verbs Stream is wire-compatible with them.
//!
//! The QP is ours (created in a protection domain of its own: it can name only regions the
//! connection registered, `Connection::register`, and a peer reaches nothing else through
//! it) and rdma_cm only drives the connection: we move the QP through INIT/RTR/RTS with the attributes
//! rdma_cm computes (`rdma_init_qp_attr`) and hand its number to `rdma_connect`/`rdma_accept`.
//! A QP attached to a shared receive queue lives in the device's PD instead: its peer reaches
//! its regions through memory windows bound to it (`window.rs`), and locally it can name any
//! region of that PD (other such connections' and the pool's), which only our own code does.
//!
//! Because the QP is ours, rdma_cm does not move it to the error state when the peer
//! disconnects; we do, on the DISCONNECTED event, so outstanding work completes as
//! [`Flushed`](crate::provider::WorkError::Flushed) and later posts fail with
//! [`BusError::Closed`]. A connecting side reads its own event channel (in `poll` when idle,
//! and `wait` wakes for it); an accepted connection's events arrive on its listener's channel,
//! which `accept` reads: keep calling it.
#![allow(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use rdma_mummy_sys::ibv_wc;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::QueuePairState;
use sideway::rdmacm::communication_manager::{
    ConnectionParameter, EventChannel, EventType, Identifier, PortSpace,
};

use super::cm;
use super::cq::Cq;
use super::device::Device;
use super::lib_error;
use super::peer_gone::PeerGone;
use super::qp::{check_srq_fits, RcQp};
use super::receive_pool::{PoolLink, ReceivePool};
use super::region::{VerbsRegion, WindowRef};
use super::srq::SrqShared;
use super::srq_slots::is_srq_id;
use super::window;
use super::wr::{self, Outstanding, SendKind, Sge};
use crate::access::Access;
use crate::addr::EndpointAddr;
use crate::config::EndpointConfig;
use crate::error::{BusError, Result};
use crate::idle::{Doorbell, IdleWait};
use crate::provider::{Completion, Connection, LocalSlice, Op, Region, RemoteSlice, WorkError};

/// Whether an rdma_cm event on an established connection means the peer is gone.
pub(super) fn ends_connection(kind: &EventType) -> bool {
    matches!(
        kind,
        EventType::Disconnected
            | EventType::DeviceRemoval
            | EventType::ConnectError
            | EventType::Unreachable
            | EventType::Rejected
    )
}

/// An RC connection of the `verbs` provider.
pub struct VerbsConnection {
    // Field order is drop order: the QP first (flushing its work), then the table that holds the
    // regions its requests named, then its CQ, then the rdma_cm identifier and channel. An
    // SRQ-attached QP holds its SRQ and destroys itself first.
    qp: RcQp,
    outstanding: Outstanding,
    cq: Cq,
    /// The QP's protection domain: its own (or the SRQ's, for an SRQ-attached one). Every
    /// region a work request names must be in it.
    pd: Arc<ProtectionDomain>,
    id: Arc<Identifier>,
    channel: Arc<EventChannel>,
    /// True when `channel` carries only this connection's events (the connecting side).
    own_channel: bool,
    /// Set when rdma_cm reports the peer gone (by us, or by the listener for accepted ones).
    closed: Arc<PeerGone>,
    /// Whether the QP has been moved to the error state after `closed`.
    flushed: bool,
    /// A Stream's first command receives, posted before the handshake ended (by the listener
    /// before it answered the peer, or by `connect` for a Stream), taken by the Stream built
    /// on this connection.
    preposted: Option<VerbsRegion>,
    /// Where this connection's receives come from when its listener keeps a receive pool
    /// (`receive_pool.rs`); `None` for a receive queue of its own or a raw SRQ's.
    pool: Option<PoolLink>,
    /// Regions registered (in a shared PD) whose windows are not bound yet: bound by the next
    /// post, before anything that could hand their key to the peer (`window.rs`).
    binds: Mutex<Vec<VerbsRegion>>,
    binds_waiting: AtomicBool,
    /// Every windowed region registered through this connection, to close their windows
    /// before the QP is destroyed (`WindowRef::close`).
    windows: Mutex<Vec<WindowRef>>,
    /// Keeps the device open as long as the connection (its regions hold only their PD).
    _dev: Arc<Device>,
    max_inline: usize,
    wcs: Vec<ibv_wc>,
    local: EndpointAddr,
    peer: EndpointAddr,
}

impl std::fmt::Debug for VerbsConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsConnection")
            .field("local", &self.local)
            .field("peer", &self.peer)
            .finish()
    }
}

impl Drop for VerbsConnection {
    fn drop(&mut self) {
        // Tell the peer (its QP goes to error and flushes) before our QP is destroyed.
        if let Err(e) = self.id.disconnect() {
            tracing::debug!(error = %e, "rdma_disconnect on drop");
        }
        self.release_srq_receives();
        for window in self.windows.get_mut().drain(..) {
            window.close();
        }
    }
}

fn gid_of_ip(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// Most completions `Drop` reads to hand an SRQ-attached connection's consumed receives back to
/// the SRQ: the whole CQ (it cannot hold more).
const DRAIN_ON_DROP_MAX: usize = crate::config::CQ_MAX as usize;

pub(super) fn conn_param(qp: &RcQp) -> ConnectionParameter {
    // Defaults: one outstanding READ each way, retry 7, RNR retry 7 ("forever"): a peer that is
    // slow to post receives is back-pressure, not an error.
    let mut param = ConnectionParameter::default();
    param.setup_qp_number(qp.qp_number());
    param
}

/// A connection's rdma_cm side: its identifier, the channel its events arrive on and the flag
/// that says the peer is gone.
pub(super) struct CmLink {
    pub(super) id: Arc<Identifier>,
    pub(super) channel: Arc<EventChannel>,
    /// True when `channel` carries only this connection's events (the connecting side).
    pub(super) own_channel: bool,
    pub(super) closed: Arc<PeerGone>,
}

impl VerbsConnection {
    pub(super) fn new(
        dev: &Arc<Device>,
        (qp, cq, pd): (RcQp, Cq, Arc<ProtectionDomain>),
        link: CmLink,
        config: &EndpointConfig,
        peer: EndpointAddr,
    ) -> Self {
        let CmLink {
            id,
            channel,
            own_channel,
            closed,
        } = link;
        let local = EndpointAddr::Verbs {
            gid: dev.gid,
            qpn: qp.qp_number(),
            qkey: 0,
            lid: dev.lid,
        };
        VerbsConnection {
            // An SRQ-attached QP has no receive queue of its own.
            outstanding: Outstanding::new(
                config.send_wr,
                if qp.srq().is_some() {
                    0
                } else {
                    config.recv_wr
                },
            ),
            qp,
            cq,
            pd,
            id,
            channel,
            own_channel,
            closed,
            flushed: false,
            preposted: None,
            pool: None,
            binds: Mutex::new(Vec::new()),
            binds_waiting: AtomicBool::new(false),
            windows: Mutex::new(Vec::new()),
            _dev: Arc::clone(dev),
            max_inline: config.max_inline,
            wcs: Vec::new(),
            local,
            peer,
        }
    }

    fn local_sge(&self, slice: &LocalSlice<VerbsRegion>) -> Result<Sge> {
        if !slice.region.in_pd(&self.pd) {
            return Err(BusError::Invalid {
                what: "region",
                reason: "registered for another connection (each has its own protection \
                         domain: register through Connection::register)"
                    .to_owned(),
            });
        }
        slice.region.check(slice.offset, slice.len)?;
        let len = u32::try_from(slice.len).map_err(|_| BusError::Invalid {
            what: "work request length",
            reason: format!("{} exceeds 4 GiB", slice.len),
        })?;
        Ok(Sge {
            addr: slice.region.io_addr_of(slice.offset),
            ptr: slice.region.addr_of(slice.offset),
            len,
            lkey: slice.region.lkey(),
        })
    }

    /// The rdma_cm identifier, for the listener's table of handed-out connections.
    pub(super) fn cm_id(&self) -> std::sync::Weak<Identifier> {
        Arc::downgrade(&self.id)
    }

    /// The flag its listener's thread marks when rdma_cm reports the peer gone.
    pub(super) fn peer_gone(&self) -> Arc<PeerGone> {
        Arc::clone(&self.closed)
    }

    /// Whether `id` is this connection's rdma_cm identifier.
    pub(super) fn is_for(&self, id: &Arc<Identifier>) -> bool {
        Arc::ptr_eq(&self.id, id)
    }

    /// Posts a Stream's first command receives (`stream::prepost_cmd_recvs`) and keeps their
    /// region for the Stream to take.
    pub(super) fn prepost_stream_receives(&mut self) -> Result<()> {
        let region = crate::stream::prepost_cmd_recvs(self)?;
        self.preposted = Some(region);
        Ok(())
    }

    /// Takes this connection's receives from its listener's pool (`recv_wr` of them at most).
    pub(super) fn attach_pool(&mut self, pool: Arc<ReceivePool>, recv_wr: u32) {
        debug_assert!(
            self.qp
                .srq()
                .is_some_and(|srq| Arc::ptr_eq(srq, pool.srq())),
            "a pooled connection's QP takes its receives from the pool's SRQ"
        );
        self.pool = Some(PoolLink::new(pool, recv_wr));
    }

    /// Binds the windows of regions registered since the last post, ahead of that post on the
    /// send queue. A full send queue leaves the rest waiting (the post reports `Full`).
    fn post_binds(&mut self) -> Result<()> {
        if !self.binds_waiting.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut regions = std::mem::take(&mut *self.binds.lock());
        self.binds_waiting.store(false, Ordering::Release);
        while let Some(region) = regions.first() {
            let Some(target) = region.bind_target() else {
                regions.remove(0);
                continue;
            };
            let internal = match self.outstanding.insert_bind(region.clone()) {
                Ok(internal) => internal,
                Err(e) => {
                    self.binds.lock().splice(0..0, regions);
                    self.binds_waiting.store(true, Ordering::Release);
                    return Err(e);
                }
            };
            // SAFETY: the QP is live (owned by self); the window and MR are in its PD (both
            // registered through `register`, in the QP's PD) and the region that owns them is
            // held by `outstanding` until the bind's completion.
            if let Err(e) = unsafe { window::post_bind(self.qp.raw(), internal, &target) } {
                self.outstanding.cancel(internal);
                self.binds.lock().splice(0..0, regions);
                self.binds_waiting.store(true, Ordering::Release);
                return Err(e);
            }
            regions.remove(0);
        }
        Ok(())
    }

    /// Notices a peer disconnect (reading our own channel if we have one) and, once, moves the
    /// QP to the error state so every outstanding request completes as flushed.
    fn check_closed(&mut self) -> Result<()> {
        if self.own_channel && !self.closed.is_gone() {
            while let Some(event) = cm::next_event(&self.channel, Instant::now())? {
                if cm::is_for(&event, &self.id) && ends_connection(&event.event_type()) {
                    let kind = event.event_type();
                    tracing::debug!(peer = %self.peer, ?kind, "verbs peer gone");
                    self.closed.mark();
                }
            }
        }
        if self.closed.is_gone() && !self.flushed {
            self.flushed = true;
            self.qp.enter_error_state()?;
        }
        Ok(())
    }

    /// Maps one work completion to the caller's: pool receives through the pool (matched to
    /// a posted receive, or waiting for one), raw SRQ receives through the SRQ's table, the
    /// rest through this connection's; window binds are reported to no one (a failed one
    /// fails the connection: its peer could not reach the region).
    fn complete(&mut self, wc: &ibv_wc) -> Result<Option<Completion>> {
        if is_srq_id(wc.wr_id) {
            if let Some(link) = &mut self.pool {
                return link.arrive(wc);
            }
            if let Some(srq) = self.qp.srq() {
                return Ok(srq.complete(wc));
            }
        }
        if self.outstanding.is_bind(wc.wr_id) {
            return match self.outstanding.complete_bind(wc) {
                Ok(()) | Err(WorkError::Flushed) => Ok(None),
                Err(e) => Err(BusError::Provider {
                    provider: super::PROVIDER,
                    call: "BIND_MW",
                    reason: format!("binding a memory window failed: {e:?}"),
                }),
            };
        }
        Ok(self.outstanding.complete(wc))
    }

    /// On drop of an SRQ-attached connection: stop the QP and read its CQ, so receives it took
    /// from the SRQ (completed or in progress, which the error state flushes) free their SRQ
    /// slots instead of holding them until the SRQ ends.
    fn release_srq_receives(&mut self) {
        let Some(srq) = self.qp.srq().cloned() else {
            return;
        };
        if let Err(e) = self.qp.enter_error_state() {
            tracing::debug!(error = %e, "moving an SRQ-attached QP to error on drop");
        }
        let mut wcs = Vec::new();
        let mut read = 0usize;
        while read < DRAIN_ON_DROP_MAX {
            wcs.clear();
            match self.cq.poll(&mut wcs, super::cq::POLL_BATCH_MAX) {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
            for wc in wcs.iter().filter(|wc| is_srq_id(wc.wr_id)) {
                match &self.pool {
                    Some(link) => link.release(wc),
                    None => {
                        let _ = srq.complete(wc);
                    }
                }
            }
        }
    }

    /// Whether this connection takes its receives from a shared receive queue.
    pub fn uses_srq(&self) -> bool {
        self.qp.srq().is_some()
    }

    fn ensure_open(&self) -> Result<()> {
        if self.closed.is_gone() {
            return Err(BusError::Closed(format!("peer {} disconnected", self.peer)));
        }
        Ok(())
    }

    /// An RDMA WRITE (WITH IMM when `imm` is set), `covered` as in `post_write_covered`.
    fn write(
        &mut self,
        wr_id: u64,
        src: LocalSlice<VerbsRegion>,
        dst: RemoteSlice,
        imm: Option<u32>,
        covered: bool,
    ) -> Result<()> {
        let (remote_addr, rkey) = remote_target(src.len, &dst)?;
        let inline = src.len <= self.max_inline;
        let kind = SendKind::Write {
            remote_addr,
            rkey,
            imm,
        };
        self.post(wr_id, Op::Write, src, kind, inline, covered)
    }

    fn post(
        &mut self,
        wr_id: u64,
        op: Op,
        slice: LocalSlice<VerbsRegion>,
        kind: SendKind,
        inline: bool,
        covered: bool,
    ) -> Result<()> {
        self.ensure_open()?;
        let sge = self.local_sge(&slice)?;
        self.post_binds()?;
        let internal = self.outstanding.insert(wr_id, op, slice.region)?;
        let signaled = self.outstanding.signal(covered);
        // SAFETY: the QP is alive (owned by self); the SGE names memory registered in the QP's PD
        // (checked above) that `outstanding` keeps alive until the completion (its own, or
        // the later one that reports it: see `covered`).
        let posted = unsafe { wr::post_send(self.qp.raw(), internal, kind, sge, inline, signaled) };
        match posted {
            Ok(()) => self.outstanding.posted_send(internal, signaled),
            Err(_) => self.outstanding.cancel(internal),
        }
        posted
    }
}

fn remote_target(src_len: usize, remote: &RemoteSlice) -> Result<(u64, u32)> {
    if remote.len != src_len as u64 {
        return Err(BusError::Invalid {
            what: "remote slice",
            reason: format!("length {} differs from the local {src_len}", remote.len),
        });
    }
    match remote.offset.checked_add(remote.len) {
        Some(end) if end <= remote.region.len => {}
        _ => {
            return Err(BusError::OutOfBounds {
                offset: remote.offset,
                len: remote.len,
                region_len: remote.region.len,
            })
        }
    }
    let rkey = u32::try_from(remote.region.rkey).map_err(|_| BusError::Invalid {
        what: "rkey",
        reason: format!("{:#x} is not a 32-bit verbs rkey", remote.region.rkey),
    })?;
    let addr = remote
        .region
        .addr
        .checked_add(remote.offset)
        .ok_or(BusError::Invalid {
            what: "remote slice",
            reason: "address overflows".to_owned(),
        })?;
    Ok((addr, rkey))
}

impl Connection for VerbsConnection {
    type Region = VerbsRegion;

    /// In this connection's own protection domain: no other QP can reach it. On an
    /// SRQ-attached connection (whose PD is shared) a remotely reachable region is reached
    /// through a memory window bound to this QP by the next post (`window.rs`).
    fn register(&self, len: usize, access: Access) -> Result<VerbsRegion> {
        if self.qp.srq().is_none() {
            return super::region::register_in(&self.pd, len, access);
        }
        let region = super::region::register_windowed(&self.pd, len, access)?;
        if region.bind_target().is_some() {
            let mut windows = self.windows.lock();
            windows.retain(|w| !w.is_gone());
            windows.push(region.window_ref());
            drop(windows);
            self.binds.lock().push(region.clone());
            self.binds_waiting.store(true, Ordering::Release);
        }
        Ok(region)
    }

    fn post_send(&mut self, wr_id: u64, src: LocalSlice<VerbsRegion>) -> Result<()> {
        // Verbs itself needs no right for a SEND source; the contract asks for one so that a
        // protocol written once never sends from memory ofi would expose (see Access::SEND).
        if !src.region.access().contains(Access::SEND) {
            return Err(BusError::Invalid {
                what: "send",
                reason: "the source region was registered without Access::SEND".to_owned(),
            });
        }
        let inline = src.len <= self.max_inline;
        self.post(wr_id, Op::Send, src, SendKind::Send, inline, false)
    }

    /// On an SRQ-attached connection this is an error (`Invalid`, "receive"): its receives come
    /// from the shared pool, so post them to the `VerbsSrq` (forwarding would hide that one
    /// connection's receive may serve another's message).
    fn post_recv(&mut self, wr_id: u64, dst: LocalSlice<VerbsRegion>) -> Result<()> {
        if self.pool.is_some() {
            self.ensure_open()?;
            self.local_sge(&dst)?;
            if let Some(link) = &mut self.pool {
                link.post(wr_id, dst)?;
            }
            return Ok(());
        }
        if self.qp.srq().is_some() {
            return Err(BusError::Invalid {
                what: "receive",
                reason: "this connection takes its receives from a shared receive queue; post \
                         them to the VerbsSrq"
                    .to_owned(),
            });
        }
        self.ensure_open()?;
        let sge = self.local_sge(&dst)?;
        let internal = self.outstanding.insert(wr_id, Op::Recv, dst.region)?;
        // SAFETY: as in `post`: live QP, registered memory kept alive by `outstanding`.
        let posted = unsafe { wr::post_recv(self.qp.raw(), internal, sge) };
        if posted.is_err() {
            self.outstanding.cancel(internal);
        }
        posted
    }

    fn post_write(
        &mut self,
        wr_id: u64,
        src: LocalSlice<VerbsRegion>,
        dst: RemoteSlice,
        imm: Option<u32>,
    ) -> Result<()> {
        self.write(wr_id, src, dst, imm, false)
    }

    /// Unsignaled unless it ends a run of `COVERED_RUN_MAX` or fills the send queue: its
    /// completion is reported in a later one's `covers` (see `covered`).
    fn post_write_covered(
        &mut self,
        wr_id: u64,
        src: LocalSlice<VerbsRegion>,
        dst: RemoteSlice,
    ) -> Result<()> {
        self.write(wr_id, src, dst, None, true)
    }

    fn post_read(
        &mut self,
        wr_id: u64,
        dst: LocalSlice<VerbsRegion>,
        src: RemoteSlice,
    ) -> Result<()> {
        let (remote_addr, rkey) = remote_target(dst.len, &src)?;
        self.post(
            wr_id,
            Op::Read,
            dst,
            SendKind::Read { remote_addr, rkey },
            false,
            false,
        )
    }

    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<usize> {
        let before = out.len();
        let mut room = max;
        if let Some(link) = &mut self.pool {
            room -= link.take_ready(out, max);
        }
        self.wcs.clear();
        if self.cq.poll(&mut self.wcs, room)? == 0 && room > 0 {
            // Idle: the moment to look for a disconnect (a syscall we skip while busy).
            let was_flushed = self.flushed;
            self.check_closed()?;
            if self.flushed && !was_flushed {
                self.cq.poll(&mut self.wcs, room)?;
            }
        }
        let wcs = std::mem::take(&mut self.wcs);
        let mut failed = None;
        for wc in &wcs {
            match self.complete(wc) {
                Ok(Some(c)) => out.push(c),
                Ok(None) => {}
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        self.wcs = wcs;
        if let Some(e) = failed {
            return Err(e);
        }
        if self.flushed {
            // A receive queue of its own would flush its posted receives: so do pooled ones.
            if let Some(link) = &mut self.pool {
                while out.len() - before < max {
                    let Some(c) = link.flush_one() else { break };
                    out.push(c);
                }
            }
        }
        Ok(out.len() - before)
    }

    fn wait(&mut self, timeout: Duration) -> Result<()> {
        self.check_closed()?;
        if self.pool.as_ref().is_some_and(PoolLink::has_ready) {
            // Receives matched when they were posted: poll reports them without the device.
            return Ok(());
        }
        if self.flushed {
            // Nothing more will arrive but flushed completions, which poll returns at once.
            return Ok(());
        }
        let cm_fd = self.own_channel.then(|| self.channel.as_raw_fd());
        self.cq.wait(timeout, cm_fd)
    }

    fn arm_idle_wait(&mut self, fds: &mut Vec<RawFd>) -> Result<IdleWait> {
        self.check_closed()?;
        if self.flushed || self.pool.as_ref().is_some_and(PoolLink::has_ready) {
            return Ok(IdleWait::Ready);
        }
        let Some(cq_fd) = self.cq.arm()? else {
            return Ok(IdleWait::Ready);
        };
        fds.push(cq_fd);
        // Its own rdma_cm channel reports the peer's disconnect (an accepted connection's
        // events come to its listener, whose thread marks it closed).
        if self.own_channel {
            fds.push(self.channel.as_raw_fd());
        }
        Ok(IdleWait::Armed)
    }

    fn take_preposted_receives(&mut self) -> Option<VerbsRegion> {
        self.preposted.take()
    }

    /// An accepted connection's disconnect is read by its listener's thread, which rings
    /// `bell` (see `peer_gone.rs`).
    fn attach_idle_bell(&mut self, bell: &Arc<Doorbell>) {
        self.closed.attach_bell(Arc::clone(bell));
    }

    fn peer(&self) -> &EndpointAddr {
        &self.peer
    }

    fn local(&self) -> &EndpointAddr {
        &self.local
    }
}

/// What a new connection is for: a Stream's connection posts the Stream's first command
/// receives before it completes the handshake (see [`Provider::connect_for_stream`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectFor {
    Any,
    Stream,
}

pub(crate) fn connect(
    dev: &Arc<Device>,
    to: SocketAddr,
    config: &EndpointConfig,
    timeout: Duration,
    srq: Option<&Arc<SrqShared>>,
    purpose: ConnectFor,
) -> Result<VerbsConnection> {
    config.validate()?;
    if let Some(srq) = srq {
        check_srq_fits(dev, config, srq)?;
    }
    let deadline = cm::deadline_after(timeout);
    let channel = cm::channel()?;
    let id = channel
        .create_id(PortSpace::Tcp)
        .map_err(|e| lib_error("rdma_create_id", &e))?;
    id.resolve_addr(None, to, cm::cm_timeout(timeout))
        .map_err(|e| lib_error("rdma_resolve_addr", &e))?;
    cm::expect(&channel, &id, EventType::AddressResolved, deadline, timeout)?;
    let left = deadline.saturating_duration_since(Instant::now());
    id.resolve_route(cm::cm_timeout(left))
        .map_err(|e| lib_error("rdma_resolve_route", &e))?;
    cm::expect(&channel, &id, EventType::RouteResolved, deadline, timeout)?;
    let (mut qp, cq, pd) = RcQp::create(dev, config, srq)?;
    id.connect(conn_param(&qp))
        .map_err(|e| lib_error("rdma_connect", &e))?;
    // With our own QP, rdma_cm stops at CONNECT_RESPONSE: we bring the QP up and establish.
    cm::expect(&channel, &id, EventType::ConnectResponse, deadline, timeout)?;
    qp.bring_up(dev, &cq, &id)?;
    let peer_qpn = id
        .get_qp_attr(QueuePairState::ReadyToReceive)
        .map(|a| a.dest_qp_num())
        .unwrap_or(0);
    let peer = EndpointAddr::Verbs {
        gid: gid_of_ip(to.ip()),
        qpn: peer_qpn,
        qkey: 0,
        lid: 0,
    };
    let closed = Arc::new(PeerGone::default());
    let link = CmLink {
        id,
        channel,
        own_channel: true,
        closed,
    };
    let mut conn = VerbsConnection::new(dev, (qp, cq, pd), link, config, peer);
    if purpose == ConnectFor::Stream && srq.is_none() {
        // Before the handshake ends: the listener's Stream sends its RX advert as soon as it
        // has the connection, and it then finds a receive posted instead of an RNR NAK.
        conn.prepost_stream_receives()?;
    }
    conn.id
        .establish()
        .map_err(|e| lib_error("rdma_establish", &e))?;
    tracing::debug!(%to, peer = %conn.peer, "verbs connection established");
    Ok(conn)
}
