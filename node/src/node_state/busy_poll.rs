//! Busy polling of the single io-thread's sockets for a short while after each read
//! (`io-busy-poll-us`), instead of going to sleep in `epoll_wait` as soon as nothing is ready.
//!
//! Why: a request that arrives while the event loop sleeps costs its sender a wake-up of the
//! sleeping thread. Measured with `perf record -g` on redis-benchmark (GET, `-P 1`, 50
//! clients, client and server pinned to different CPUs of this VM), 10% of the client's CPU
//! was `sock_def_readable` waking the server inside its `sendto`, against redis-server and the
//! node alike; the server slept about once per 8 requests. When the loop is still polling, the
//! wake-up finds no sleeper and the request is picked up without a context switch. The price
//! is CPU: the thread stays busy up to `io-busy-poll-us` after the last read, so a server that
//! sees a request every few microseconds keeps its core; an idle one sleeps as before.
//!
//! How: one task on the event loop yields in a loop. tokio's scheduler, with only yielded
//! tasks left on its worker, polls the I/O driver without blocking before running them again
//! (a zero-timeout park), so every turn of this loop is one non-blocking `epoll_wait`. Each
//! turn also offers the CPU to other runnable threads (`sched_yield`), so that on a crowded
//! machine the polling thread does not hold a core another process needs. Connections mark
//! activity on every read; when the loop has been idle for longer than the setting, the task
//! sleeps until the next read wakes it.
//!
//! Only a single io-thread (`io-threads 1`) polls: with several workers one sleeps inside the
//! I/O driver and a yielding task on another worker cannot poll it.

use super::hot::HotConfig;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

pub use crate::config::params::IO_BUSY_POLL_US_MAX as MAX_BUSY_POLL_US;

#[derive(Default)]
pub struct BusyPoll {
    /// Set by every read; cleared by the polling task when it looks.
    activity: AtomicBool,
    /// The polling task is (about to be) asleep: the next read wakes it.
    asleep: AtomicBool,
    wake: Notify,
    /// Times the polling task went to sleep (INFO stats `io_busy_poll_sleeps`).
    sleeps: AtomicU64,
    /// CPU nanoseconds of this thread between consecutive turns that found no read: CPU
    /// spent waiting rather than serving (INFO stats `io_busy_poll_usec`; the benchmark
    /// report takes it out of the node's CPU per request). Thread CPU time, not wall time:
    /// each turn offers the core away (`sched_yield`), and on a crowded machine the wall time
    /// of a turn is mostly other processes' running, which once made this exceed the
    /// process's whole CPU time.
    idle_ns: AtomicU64,
}

impl BusyPoll {
    /// Called by a connection after each read that delivered bytes.
    pub fn note_activity(&self, hot: &HotConfig) {
        self.activity.store(true, Relaxed);
        // Wake the poller only if polling is on; with 0 it stays asleep and reads cost two
        // relaxed atomics.
        if self.asleep.load(Relaxed) && hot.io_busy_poll_us.load(Relaxed) > 0 {
            self.asleep.store(false, Relaxed);
            self.wake.notify_one();
        }
    }

    pub fn sleeps(&self) -> u64 {
        self.sleeps.load(Relaxed)
    }

    pub fn idle_usec(&self) -> u64 {
        self.idle_ns.load(Relaxed) / 1000
    }

    pub fn is_asleep(&self) -> bool {
        self.asleep.load(Relaxed)
    }

    /// The polling task: runs on the single io-thread's event loop until the process ends.
    pub async fn run(&self, hot: &HotConfig) {
        loop {
            self.poll_until_idle(hot).await;
            self.sleeps.fetch_add(1, Relaxed);
            self.asleep.store(true, Relaxed);
            // A read between the last look and this store is not lost: it finds `asleep`
            // set and wakes us (Notify keeps one permit), or it came before and we merely
            // sleep until the next read.
            self.wake.notified().await;
            self.asleep.store(false, Relaxed);
        }
    }

    /// Yields (each turn one non-blocking poll of the sockets) until no read has happened
    /// for the configured time.
    async fn poll_until_idle(&self, hot: &HotConfig) {
        let mut last_activity = Instant::now();
        // The thread's CPU clock at the previous turn if that turn found no read. Only the
        // time between two idle turns counts: the interval before a turn that found a read
        // held serving, and the first idle turn after one ends such an interval. Idle turns
        // alone pay for the clock reading (a system call).
        let mut cpu_at_idle_turn: Option<Duration> = None;
        loop {
            let window = Duration::from_micros(hot.io_busy_poll_us.load(Relaxed));
            let now = Instant::now();
            if self.activity.swap(false, Relaxed) {
                last_activity = now;
                cpu_at_idle_turn = None;
            } else {
                let cpu = thread_cpu_time();
                if let Some(before) = cpu_at_idle_turn {
                    let idle = cpu.saturating_sub(before).as_nanos();
                    self.idle_ns.fetch_add(idle as u64, Relaxed);
                }
                cpu_at_idle_turn = Some(cpu);
                if !still_polling(last_activity, now, window) {
                    return;
                }
            }
            std::thread::yield_now();
            tokio::task::yield_now().await;
        }
    }
}

/// CPU time this thread has run so far.
fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Whether the loop keeps polling at `now` when the last read was at `last_activity`.
fn still_polling(last_activity: Instant, now: Instant, window: Duration) -> bool {
    now.saturating_duration_since(last_activity) < window
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::server::Server;
    use std::sync::Arc;

    #[test]
    fn polling_stops_once_the_window_has_passed_since_the_last_read() {
        let t0 = Instant::now();
        let w = Duration::from_micros(50);
        assert!(still_polling(t0, t0, w));
        assert!(still_polling(t0, t0 + Duration::from_micros(49), w));
        assert!(!still_polling(t0, t0 + w, w));
        // A zero window never polls; a clock reading before the read counts as no time.
        assert!(!still_polling(t0, t0, Duration::ZERO));
        assert!(still_polling(t0 + w, t0, w));
    }

    async fn until(what: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !what() {
            assert!(Instant::now() < deadline, "condition not reached in 10 s");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The poller goes to sleep when reads stop, a read wakes it, and with polling off
    /// (0) reads leave it asleep.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn reads_wake_the_poller_and_idleness_puts_it_to_sleep() {
        crate::commands::install_table();
        let server = Arc::new(Server::new(Config::default()));
        server.hot.io_busy_poll_us.store(200, Relaxed);
        let poller = server.clone();
        tokio::spawn(async move { poller.busy_poll.run(&poller.hot).await });
        let (poll, hot) = (&server.busy_poll, &server.hot);
        until(|| poll.is_asleep()).await;
        let slept = poll.sleeps();
        poll.note_activity(hot);
        assert!(!poll.is_asleep());
        until(|| poll.sleeps() == slept + 1 && poll.is_asleep()).await;
        // It spent CPU polling its 200 us window with nothing to read (less than 200 us of
        // it when the machine gave the core to others meanwhile).
        assert!(poll.idle_usec() > 0, "{}", poll.idle_usec());

        hot.io_busy_poll_us.store(0, Relaxed);
        poll.note_activity(hot);
        assert!(
            poll.is_asleep(),
            "polling off: a read must not wake the poller"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(poll.sleeps(), slept + 1);
    }
}
