//! Blocking an idle polling thread instead of sleeping it: a thread that polls many
//! connections asks each to arm its completion notification ([`crate::Connection::arm_idle_wait`]),
//! then sleeps in one `poll(2)` over their descriptors and a [`Doorbell`] that other threads
//! ring when they hand it work (a new client, a wake-up of a blocked command).
//!
//! Why: a poller that backs off by sleeping wakes up to a thousand times a second per thread
//! while idle and adds up to its longest sleep to the first request after a quiet period; one
//! blocked on completion channels costs nothing while idle and wakes when the completion
//! comes. Providers without a descriptor to wait on (libfabric's shm, whose CQ takes no wait
//! object; the simulated fabric, which runs on virtual time) say so, and their pollers keep
//! the sleeping back-off. libfabric's tcp gives its CQ a descriptor (`ofi/endpoint.rs`).
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::Duration;

use crate::error::{BusError, Result};

/// Most descriptors one [`wait_readable`] call watches: a poller's connections (each may add
/// a completion channel and a connection-manager channel) and its doorbell. A poller with more
/// clients than fit sleeps instead of blocking.
pub const WAIT_FDS_MAX: usize = 4096;

/// What [`crate::Connection::arm_idle_wait`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleWait {
    /// Something is already waiting: poll again instead of blocking.
    Ready,
    /// Armed: the descriptors pushed become readable when a completion (or a connection
    /// event) arrives.
    Armed,
    /// The provider has no descriptor to wait on: back off by sleeping.
    Unsupported,
}

/// An eventfd that wakes a thread blocked in [`wait_readable`]: level-triggered (readable
/// from the first ring until [`Doorbell::drain`]), so a ring between the waiter's last look
/// and its `poll` is never lost.
///
/// Ringers on a busy path (a shared endpoint routing one connection's arrival to another
/// poller's) call [`Doorbell::ring_if_waiting`], which costs an atomic load unless the owner
/// is between [`Doorbell::begin_wait`] and [`Doorbell::end_wait`]: a write per arrival would
/// be a system call per request.
#[derive(Debug)]
pub struct Doorbell {
    fd: OwnedFd,
    /// The owner is looking at its connections to block, or blocked.
    waiting: AtomicBool,
    /// Waits begun so far: tells one wait of the owner's from the next.
    waits: AtomicU64,
}

impl Doorbell {
    pub fn new() -> Result<Doorbell> {
        // SAFETY: eventfd takes no pointers; a negative return is handled below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(os_error("eventfd", std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Doorbell {
            fd,
            waiting: AtomicBool::new(false),
            waits: AtomicU64::new(0),
        })
    }

    /// The owner is about to look at its connections and then block: from here on
    /// [`Doorbell::ring_if_waiting`] rings. Set before the looks, so that work handed over
    /// after a look found nothing rings (a ringer that hands work under a lock the look also
    /// takes either is seen by the look or sees this flag).
    pub fn begin_wait(&self) {
        self.waits.fetch_add(1, SeqCst);
        self.waiting.store(true, SeqCst);
    }

    /// Which wait the owner is in (or last was): see [`Doorbell::waiting_in`].
    pub fn wait_number(&self) -> u64 {
        self.waits.load(SeqCst)
    }

    /// Whether the owner is still in wait number `wait` (between its `begin_wait` and
    /// `end_wait`).
    pub fn waiting_in(&self, wait: u64) -> bool {
        self.waiting.load(SeqCst) && self.waits.load(SeqCst) == wait
    }

    /// The owner is polling again.
    pub fn end_wait(&self) {
        self.waiting.store(false, SeqCst);
    }

    /// Rings only if the owner is waiting (see [`Doorbell::begin_wait`]).
    pub fn ring_if_waiting(&self) {
        if self.waiting.load(SeqCst) {
            self.ring();
        }
    }

    /// Wakes the waiter (now, or at its next wait if it is not waiting yet).
    pub fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live local to our own eventfd. A full counter
        // (EAGAIN, after 2^64-2 rings) already wakes the waiter, so the result is not needed.
        let _ = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }

    /// Clears the rings so far; returns whether there were any.
    pub fn drain(&self) -> bool {
        let mut count: u64 = 0;
        // SAFETY: reads 8 bytes into a live local from our own non-blocking eventfd.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        n == std::mem::size_of::<u64>() as isize && count > 0
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Blocks until one of `fds` is readable (or has hung up) or `timeout` passes. Returns whether
/// any was; `false` on timeout or a signal.
pub fn wait_readable(fds: &[RawFd], timeout: Duration) -> Result<bool> {
    if fds.len() > WAIT_FDS_MAX {
        return Err(BusError::Invalid {
            what: "idle wait",
            reason: format!("{} descriptors; at most {WAIT_FDS_MAX}", fds.len()),
        });
    }
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // Rounded up: a timeout under a millisecond must not become a busy `poll(0)`.
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: `pfds` holds `pfds.len()` valid pollfds for the duration of the call.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() == std::io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(os_error("poll", err));
    }
    Ok(rc > 0)
}

fn os_error(call: &'static str, err: std::io::Error) -> BusError {
    BusError::Provider {
        provider: "os",
        call,
        reason: err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_ring_before_the_wait_is_not_lost_and_drain_clears_it() {
        let bell = Doorbell::new().unwrap();
        assert!(!bell.drain(), "a new bell has no rings");
        bell.ring();
        bell.ring();
        assert!(wait_readable(&[bell.fd()], Duration::from_secs(5)).unwrap());
        assert!(bell.drain());
        assert!(!bell.drain(), "drained once for both rings");
        assert!(!wait_readable(&[bell.fd()], Duration::from_millis(1)).unwrap());
    }

    #[test]
    fn a_ring_from_another_thread_ends_the_wait() {
        let bell = Arc::new(Doorbell::new().unwrap());
        let ringer = Arc::clone(&bell);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            ringer.ring();
        });
        // Bounded far above the ring's delay: a lost ring fails the assertion, not a timer.
        assert!(wait_readable(&[bell.fd()], Duration::from_secs(30)).unwrap());
        t.join().unwrap();
    }

    #[test]
    fn ring_if_waiting_rings_only_between_begin_and_end() {
        let bell = Doorbell::new().unwrap();
        bell.ring_if_waiting();
        assert!(!bell.drain(), "not waiting: no ring");
        bell.begin_wait();
        bell.ring_if_waiting();
        assert!(bell.drain(), "waiting: rung");
        bell.end_wait();
        bell.ring_if_waiting();
        assert!(!bell.drain());
    }

    #[test]
    fn waiting_in_names_one_wait_only() {
        let bell = Doorbell::new().unwrap();
        bell.begin_wait();
        let first = bell.wait_number();
        assert!(bell.waiting_in(first));
        bell.end_wait();
        assert!(!bell.waiting_in(first), "that wait ended");
        bell.begin_wait();
        assert!(!bell.waiting_in(first), "a later wait is another one");
        assert!(bell.waiting_in(bell.wait_number()));
    }

    #[test]
    fn too_many_descriptors_are_refused() {
        let fds = vec![0; WAIT_FDS_MAX + 1];
        assert!(wait_readable(&fds, Duration::ZERO).is_err());
    }
}
