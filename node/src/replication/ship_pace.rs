//! The timing decisions of a primary's link loop, without a clock: after each
//! [`Shipper::pump`](super::ship::Shipper::pump) it says whether to post a ping (an idle link
//! must show the replica it is alive), whether the replica just came online (counts for WAIT
//! from now on), whether it fell silent past `repl-timeout` (drop the link), and whether to
//! pump again soon rather than sleep.
//!
//! `now` is the caller's monotonic time since any fixed origin: the node's ship thread passes
//! the time since it started, the chaos simulation its virtual clock.

use std::time::Duration;

use super::ship::ShipProgress;

/// Busy pumping lasts while something moved this recently; a replica that stopped moving
/// (stalled, paused) gets the idle cadence, so a stuck link does not spin a core.
pub const BUSY_WINDOW: Duration = Duration::from_millis(10);

/// The limits one link runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaceLimits {
    /// Post a ping after this long without posting anything.
    pub ping_every: Duration,
    /// Drop a replica that acknowledged nothing shipped for this long (`repl-timeout`).
    pub repl_timeout: Duration,
}

/// What to do after one pump.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PumpVerdict {
    /// Post a ping now; call [`ShipPace::pinged`] if the ring took it.
    pub ping_due: bool,
    /// The replica finished its sync and streams: it counts for WAIT from now on.
    pub went_online: bool,
    /// Bytes shipped but nothing acknowledged for `repl-timeout`: drop the link.
    pub timed_out: bool,
}

/// One link's pacing state.
#[derive(Debug, Clone)]
pub struct ShipPace {
    limits: PaceLimits,
    /// The acknowledged offset at which the replica counts as online (its sync's end).
    online_at: u64,
    online: bool,
    last_post: Duration,
    last_move: Duration,
    /// (acked offset, ring bytes in use) at the last pump: a change is movement.
    last_seen: (u64, u64),
    /// Since when the replica has had bytes shipped but not acknowledged.
    behind_since: Option<Duration>,
}

impl ShipPace {
    /// A link set up at `now` whose replica is online once it acknowledged `online_at`.
    pub fn new(limits: PaceLimits, online_at: u64, now: Duration) -> Self {
        ShipPace {
            limits,
            online_at,
            online: false,
            last_post: now,
            last_move: now,
            last_seen: (0, 0),
            behind_since: None,
        }
    }

    /// A new `repl-timeout` (CONFIG SET) for this link from now on.
    pub fn set_repl_timeout(&mut self, repl_timeout: Duration) {
        self.limits.repl_timeout = repl_timeout;
    }

    /// Whether the replica came online.
    pub fn online(&self) -> bool {
        self.online
    }

    /// Takes one pump's `progress` (and the ring bytes in use after it) at `now`.
    pub fn after_pump(
        &mut self,
        progress: &ShipProgress,
        ring_in_use: u64,
        now: Duration,
    ) -> PumpVerdict {
        let mut verdict = PumpVerdict::default();
        let seen = (progress.acked_offset, ring_in_use);
        if progress.shipped_bytes > 0 || seen != self.last_seen {
            self.last_move = now;
            self.last_seen = seen;
        }
        if progress.shipped_bytes > 0 || progress.snapshot_remaining > 0 {
            self.last_post = now;
        } else if now.saturating_sub(self.last_post) >= self.limits.ping_every {
            verdict.ping_due = true;
        }
        if !self.online
            && progress.snapshot_remaining == 0
            && progress.acked_offset >= self.online_at
        {
            self.online = true;
            verdict.went_online = true;
        }
        if progress.acked_offset + 1 >= progress.next_offset {
            self.behind_since = None;
        } else {
            let since = *self.behind_since.get_or_insert(now);
            verdict.timed_out = now.saturating_sub(since) > self.limits.repl_timeout;
        }
        verdict
    }

    /// A ping was posted at `now`.
    pub fn pinged(&mut self, now: Duration) {
        self.last_post = now;
    }

    /// After a pump that shipped nothing: pump again after a short pause (`true`: WRITEs in
    /// flight or bytes unacknowledged, `busy`, and something moved within [`BUSY_WINDOW`])
    /// rather than wait for new bytes.
    pub fn poll_soon(&self, busy: bool, now: Duration) -> bool {
        busy && now.saturating_sub(self.last_move) < BUSY_WINDOW
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: PaceLimits = PaceLimits {
        ping_every: Duration::from_secs(1),
        repl_timeout: Duration::from_secs(60),
    };

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn progress(shipped: u64, next: u64, acked: u64, snapshot: usize) -> ShipProgress {
        ShipProgress {
            shipped_bytes: shipped,
            next_offset: next,
            acked_offset: acked,
            ring_full: false,
            snapshot_remaining: snapshot,
        }
    }

    /// Goal: an idle link pings once per period, counted from its last post.
    #[test]
    fn an_idle_link_pings_once_per_period() {
        let mut pace = ShipPace::new(LIMITS, 0, ms(0));
        assert!(!pace.after_pump(&progress(0, 1, 0, 0), 0, ms(999)).ping_due);
        assert!(pace.after_pump(&progress(0, 1, 0, 0), 0, ms(1000)).ping_due);
        pace.pinged(ms(1000));
        assert!(!pace.after_pump(&progress(0, 1, 0, 0), 0, ms(1500)).ping_due);
        // Shipping counts as posting.
        assert!(
            !pace
                .after_pump(&progress(10, 11, 0, 0), 0, ms(2100))
                .ping_due
        );
        assert!(
            !pace
                .after_pump(&progress(0, 11, 10, 0), 0, ms(3000))
                .ping_due
        );
        assert!(
            pace.after_pump(&progress(0, 11, 10, 0), 0, ms(3100))
                .ping_due
        );
    }

    /// Goal: a replica is online once its snapshot is shipped and it acknowledged the sync's
    /// offset, reported once.
    #[test]
    fn online_after_the_snapshot_and_its_offset() {
        let mut pace = ShipPace::new(LIMITS, 50, ms(0));
        assert!(
            !pace
                .after_pump(&progress(0, 51, 0, 100), 0, ms(1))
                .went_online
        );
        assert!(
            !pace
                .after_pump(&progress(0, 51, 49, 0), 0, ms(2))
                .went_online
        );
        assert!(
            pace.after_pump(&progress(0, 51, 50, 0), 0, ms(3))
                .went_online
        );
        assert!(
            !pace
                .after_pump(&progress(0, 51, 50, 0), 0, ms(4))
                .went_online
        );
        assert!(pace.online());
    }

    /// Goal: a replica behind for longer than repl-timeout times out; one that catches up
    /// restarts the count.
    #[test]
    fn a_replica_behind_past_repl_timeout_times_out() {
        let limits = PaceLimits {
            repl_timeout: ms(100),
            ..LIMITS
        };
        let mut pace = ShipPace::new(limits, 0, ms(0));
        assert!(!pace.after_pump(&progress(5, 6, 0, 0), 0, ms(10)).timed_out);
        assert!(!pace.after_pump(&progress(0, 6, 0, 0), 0, ms(110)).timed_out);
        assert!(pace.after_pump(&progress(0, 6, 0, 0), 0, ms(111)).timed_out);
        // Caught up: the count starts again.
        let mut pace = ShipPace::new(limits, 0, ms(0));
        pace.after_pump(&progress(5, 6, 0, 0), 0, ms(10));
        pace.after_pump(&progress(0, 6, 5, 0), 0, ms(100));
        assert!(
            !pace
                .after_pump(&progress(5, 11, 5, 0), 0, ms(150))
                .timed_out
        );
        assert!(
            !pace
                .after_pump(&progress(0, 11, 5, 0), 0, ms(250))
                .timed_out
        );
        assert!(
            pace.after_pump(&progress(0, 11, 5, 0), 0, ms(251))
                .timed_out
        );
    }

    /// Goal: a busy link polls soon only while something moved within the busy window.
    #[test]
    fn busy_polling_stops_when_nothing_moves() {
        let mut pace = ShipPace::new(LIMITS, 0, ms(0));
        pace.after_pump(&progress(5, 6, 0, 0), 100, ms(100));
        assert!(pace.poll_soon(true, ms(105)));
        assert!(!pace.poll_soon(false, ms(105)));
        // The same acked offset and ring use: no movement.
        pace.after_pump(&progress(0, 6, 0, 0), 100, ms(111));
        assert!(!pace.poll_soon(true, ms(111)));
        // The ring drained: movement.
        pace.after_pump(&progress(0, 6, 0, 0), 0, ms(112));
        assert!(pace.poll_soon(true, ms(112)));
    }
}
