//! A completion queue with its completion channel: non-blocking polling with `ibv_poll_cq`, and
//! an idle wait that sleeps on the channel's file descriptor instead of spinning.
#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use rdma_mummy_sys::{
    ibv_ack_cq_events, ibv_cq, ibv_get_cq_event, ibv_poll_cq, ibv_req_notify_cq, ibv_wc,
};
use sideway::ibverbs::completion::{BasicCompletionQueue, CompletionChannel, CompletionQueue};
use sideway::ibverbs::device_context::DeviceContext;

use super::lib_error;
use crate::error::{BusError, Result};

/// Completions read per `ibv_poll_cq` call (a stack array of this many work completions).
pub(crate) const POLL_BATCH_MAX: usize = 32;
/// Channel events taken before re-arming (one per earlier arming is the most there can be).
const EVENTS_TAKEN_PER_ARM_MAX: usize = 4;

pub(crate) struct Cq {
    // Drop order: the CQ before its channel (sideway's CQ also holds the channel's Arc).
    cq: Arc<BasicCompletionQueue>,
    channel: Arc<CompletionChannel>,
    /// Completions read while arming the channel in `wait`, handed out first by `poll`. Bounded
    /// by the CQ size (they came out of it) and by `POLL_BATCH_MAX` per wait.
    stash: VecDeque<ibv_wc>,
}

impl Cq {
    pub(crate) fn new(ctx: &Arc<DeviceContext>, entries: u32) -> Result<Cq> {
        let channel = ctx
            .create_comp_channel()
            .map_err(|e| lib_error("ibv_create_comp_channel", &e))?;
        channel
            .set_nonblocking(true)
            .map_err(|e| lib_error("fcntl(completion channel)", &e))?;
        let cq = ctx
            .create_cq_builder()
            .setup_cqe(entries)
            .setup_comp_channel(&channel, 0)
            .build()
            .map_err(|e| lib_error("ibv_create_cq", &e))?;
        Ok(Cq {
            cq,
            channel,
            stash: VecDeque::new(),
        })
    }

    /// The handle for building QPs on this CQ.
    pub(crate) fn handle(&self) -> Arc<BasicCompletionQueue> {
        Arc::clone(&self.cq)
    }

    pub(crate) fn raw(&self) -> *mut ibv_cq {
        // SAFETY: the pointer is only used while `self.cq` (which owns the CQ) is alive.
        unsafe { self.cq.cq().as_ptr() }
    }

    /// Appends up to `max` work completions to `out`.
    pub(crate) fn poll(&mut self, out: &mut Vec<ibv_wc>, max: usize) -> Result<usize> {
        let mut got = 0;
        while got < max {
            match self.stash.pop_front() {
                Some(wc) => {
                    out.push(wc);
                    got += 1;
                }
                None => break,
            }
        }
        while got < max {
            let n = self.poll_raw(out, (max - got).min(POLL_BATCH_MAX))?;
            got += n;
            if n == 0 {
                break;
            }
        }
        Ok(got)
    }

    fn poll_raw(&self, out: &mut Vec<ibv_wc>, want: usize) -> Result<usize> {
        // SAFETY: ibv_wc is plain data (integers and a union of integers); all-zero is valid.
        let mut wcs: [ibv_wc; POLL_BATCH_MAX] = unsafe { std::mem::zeroed() };
        let want = want.min(POLL_BATCH_MAX);
        // SAFETY: the CQ is alive and `wcs` has room for `want` entries.
        let n = unsafe { ibv_poll_cq(self.raw(), want as i32, wcs.as_mut_ptr()) };
        if n < 0 {
            return Err(BusError::Provider {
                provider: super::PROVIDER,
                call: "ibv_poll_cq",
                reason: std::io::Error::from_raw_os_error(-n).to_string(),
            });
        }
        out.extend_from_slice(&wcs[..n as usize]);
        Ok(n as usize)
    }

    /// Blocks until a completion may be ready, `also` (another descriptor, e.g. an rdma_cm
    /// channel whose events matter to the caller) is readable, or `timeout` passes.
    pub(crate) fn wait(&mut self, timeout: Duration, also: Option<RawFd>) -> Result<()> {
        if !self.stash.is_empty() {
            return Ok(());
        }
        if self.arm_and_look()? {
            return Ok(());
        }
        let cq_fd = self.channel.as_raw_fd();
        let ready = match also {
            Some(fd) => wait_readable_any(&[cq_fd, fd], timeout)?,
            None => wait_readable_any(&[cq_fd], timeout)?,
        };
        if ready.first() == Some(&true) {
            let _ = self.consume_event();
        }
        Ok(())
    }

    /// Arms the channel for a poller that blocks on many connections at once: events left
    /// by an earlier arming are taken first (the channel would otherwise stay readable), then
    /// the CQ is armed and looked at once more (a completion before the arming raises no
    /// event). `None` when completions were found (stashed for `poll`): do not block.
    pub(crate) fn arm(&mut self) -> Result<Option<RawFd>> {
        if !self.stash.is_empty() {
            return Ok(None);
        }
        // One event per arming at most was raised; a few more tries cost nothing when empty.
        for _ in 0..EVENTS_TAKEN_PER_ARM_MAX {
            if !self.consume_event() {
                break;
            }
        }
        if self.arm_and_look()? {
            return Ok(None);
        }
        Ok(Some(self.channel.as_raw_fd()))
    }

    /// Arms the CQ's notification, then looks once more: a completion that arrived before
    /// the arming raises no event, so without this re-check a waiter would sleep past it.
    /// True when completions were found (stashed for `poll`).
    fn arm_and_look(&mut self) -> Result<bool> {
        // SAFETY: the CQ is alive; solicited_only = 0 asks for every completion.
        let rc = unsafe { ibv_req_notify_cq(self.raw(), 0) };
        if rc != 0 {
            return Err(BusError::Provider {
                provider: super::PROVIDER,
                call: "ibv_req_notify_cq",
                reason: std::io::Error::from_raw_os_error(rc).to_string(),
            });
        }
        let mut found = Vec::new();
        self.poll_raw(&mut found, POLL_BATCH_MAX)?;
        let any = !found.is_empty();
        self.stash.extend(found);
        Ok(any)
    }

    /// Takes and acknowledges one channel event (destroying a CQ waits for every event to be
    /// acknowledged, so none may be left behind).
    fn consume_event(&self) -> bool {
        let mut cq: *mut ibv_cq = std::ptr::null_mut();
        let mut ctx: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: the channel is alive and non-blocking; the out-pointers are valid locals.
        let rc =
            unsafe { ibv_get_cq_event(self.channel.comp_channel().as_ptr(), &mut cq, &mut ctx) };
        if rc == 0 && !cq.is_null() {
            // SAFETY: `cq` is the CQ the event was for (ours: the channel serves only it).
            unsafe { ibv_ack_cq_events(cq, 1) };
            return true;
        }
        false
    }
}

/// Waits until `fd` is readable or `timeout` passes. `Ok(false)` on timeout or a signal.
pub(crate) fn wait_readable(fd: RawFd, timeout: Duration) -> Result<bool> {
    Ok(wait_readable_any(&[fd], timeout)?[0])
}

/// Most descriptors one wait watches (a CQ channel and an rdma_cm channel).
const WAIT_FDS_MAX: usize = 2;

/// Waits until any of `fds` is readable or `timeout` passes; says which are. All false on a
/// timeout or a signal.
pub(crate) fn wait_readable_any(fds: &[RawFd], timeout: Duration) -> Result<Vec<bool>> {
    assert!(fds.len() <= WAIT_FDS_MAX, "internal: too many descriptors");
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `pfds` holds `pfds.len()` valid pollfds for the duration of the call.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() == std::io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(lib_error("poll", &err));
    }
    Ok(pfds.iter().map(|p| p.revents != 0).collect())
}
