//! Counters the connections update and the progress line that reads them.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the progress line is redrawn.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// Shared by a test's connections.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests handed out to connections (may run past the total by one batch each).
    pub claimed: AtomicU64,
    /// Replies received.
    pub done: AtomicU64,
    /// Error replies received.
    pub errors: AtomicU64,
    /// Sum of latencies in microseconds, for the running average.
    pub latency_us_sum: AtomicU64,
    /// The first error reply's text, shown once.
    pub first_error: Mutex<Option<String>>,
}

impl Counters {
    /// Claims up to `batch` of `total` requests; returns how many were granted (0: all done).
    pub fn claim(&self, batch: u64, total: u64) -> u64 {
        let start = self.claimed.fetch_add(batch, Ordering::Relaxed);
        total.saturating_sub(start).min(batch)
    }

    pub fn record_reply(&self, latency_us: u64, error: Option<String>) {
        self.done.fetch_add(1, Ordering::Relaxed);
        self.latency_us_sum.fetch_add(latency_us, Ordering::Relaxed);
        if let Some(text) = error {
            self.errors.fetch_add(1, Ordering::Relaxed);
            let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert(text);
        }
    }
}

/// Draws `TITLE: rps=... (overall: ...) avg_msec=... (overall: ...)` on stderr, as
/// redis-benchmark does: redrawn in place on a terminal, one line per update otherwise (logs).
#[derive(Debug)]
pub struct ProgressLine {
    on_terminal: bool,
    title: String,
    started: Instant,
    last: Instant,
    last_done: u64,
    last_latency_sum: u64,
}

impl ProgressLine {
    pub fn new(title: &str) -> ProgressLine {
        let now = Instant::now();
        ProgressLine {
            on_terminal: std::io::stderr().is_terminal(),
            title: title.to_string(),
            started: now,
            last: now,
            last_done: 0,
            last_latency_sum: 0,
        }
    }

    /// Redraws the line from the counters.
    pub fn draw(&mut self, counters: &Counters) {
        let now = Instant::now();
        let done = counters.done.load(Ordering::Relaxed);
        let sum = counters.latency_us_sum.load(Ordering::Relaxed);
        let line = progress_text(
            &self.title,
            done - self.last_done,
            sum - self.last_latency_sum,
            now - self.last,
            done,
            sum,
            now - self.started,
        );
        self.last = now;
        self.last_done = done;
        self.last_latency_sum = sum;
        let mut stderr = std::io::stderr().lock();
        let _ = if self.on_terminal {
            write!(stderr, "\r\x1b[K{line}")
        } else {
            writeln!(stderr, "{line}")
        };
        let _ = stderr.flush();
    }

    /// Erases the line (on a terminal).
    pub fn clear(&self) {
        if !self.on_terminal {
            return;
        }
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[K");
        let _ = stderr.flush();
    }
}

/// The progress text for an interval and for the run so far.
pub fn progress_text(
    title: &str,
    interval_done: u64,
    interval_latency_us: u64,
    interval: Duration,
    done: u64,
    latency_us: u64,
    elapsed: Duration,
) -> String {
    let rate = |n: u64, d: Duration| {
        let secs = d.as_secs_f64();
        if secs > 0.0 {
            n as f64 / secs
        } else {
            0.0
        }
    };
    let avg_ms = |sum: u64, n: u64| {
        if n > 0 {
            sum as f64 / n as f64 / 1000.0
        } else {
            0.0
        }
    };
    format!(
        "{title}: rps={:.1} (overall: {:.1}) avg_msec={:.3} (overall: {:.3})",
        rate(interval_done, interval),
        rate(done, elapsed),
        avg_ms(interval_latency_us, interval_done),
        avg_ms(latency_us, done)
    )
}

#[cfg(test)]
mod tests {
    //! Goal: claims never hand out more than the total, and the progress text's rates are right.
    use super::*;

    #[test]
    fn claims_stop_at_the_total() {
        let c = Counters::default();
        assert_eq!(c.claim(16, 40), 16);
        assert_eq!(c.claim(16, 40), 16);
        assert_eq!(c.claim(16, 40), 8);
        assert_eq!(c.claim(16, 40), 0);
        assert_eq!(c.claim(16, 40), 0);
    }

    #[test]
    fn first_error_is_kept_and_all_are_counted() {
        let c = Counters::default();
        c.record_reply(10, None);
        c.record_reply(10, Some("ERR a".into()));
        c.record_reply(10, Some("ERR b".into()));
        assert_eq!(c.errors.load(Ordering::Relaxed), 2);
        assert_eq!(c.done.load(Ordering::Relaxed), 3);
        assert_eq!(c.first_error.lock().unwrap().as_deref(), Some("ERR a"));
    }

    #[test]
    fn progress_text_rates() {
        let text = progress_text(
            "SET",
            500,
            500_000,
            Duration::from_millis(250),
            1000,
            2_000_000,
            Duration::from_secs(1),
        );
        assert_eq!(
            text,
            "SET: rps=2000.0 (overall: 1000.0) avg_msec=1.000 (overall: 2.000)"
        );
    }
}
