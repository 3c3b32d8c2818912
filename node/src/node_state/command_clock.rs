//! The clock readings a command needs (its "now" for expiry, its duration for SLOWLOG), taken
//! once per command instead of three times.
//!
//! Why: perf of pipelined GETs put `clock_gettime` at 9.5% of the node's CPU with three
//! readings per command (wall clock for "now", monotonic start and end). Inside a batch (the
//! requests one read delivered, run back to back) the end of one command is the start of the
//! next, so one monotonic reading per command does both, and "now" is derived from it.
//!
//! The wall clock is read at most every [`WALL_REREAD`] per client and the monotonic clock
//! carries it between readings, with microsecond precision: the derived time differs from
//! the wall clock only by the clocks' drift over that window (NTP slews at most 0.05% : 25 us),
//! or by a step of the wall clock, which is seen within the window. Redis too caches its
//! command time (once per event-loop iteration).
//!
//! Outside a batch (a blocked command's retry, tests) each command reads both clocks itself.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a client's wall-clock reading is carried by the monotonic clock.
pub const WALL_REREAD: Duration = Duration::from_millis(50);

#[derive(Default)]
pub struct CommandClock {
    /// A wall-clock reading (unix microseconds) and the monotonic instant it was taken at.
    wall: Option<(u64, Instant)>,
    /// While a batch runs: the end of the previous command (the start of the next).
    mark: Option<Instant>,
}

/// Where a command started: its unix milliseconds for expiry and the instant its duration is
/// measured from.
#[derive(Clone, Copy)]
pub struct CommandStart {
    pub unix_ms: u64,
    pub at: Instant,
}

impl CommandClock {
    /// A transport is about to run the requests one read delivered.
    pub fn begin_batch(&mut self) {
        let at = Instant::now();
        self.refresh_wall(at);
        self.mark = Some(at);
    }

    /// The batch is over (its transport may now wait). Returns when its last command ended.
    pub fn end_batch(&mut self) -> Option<Instant> {
        self.mark.take()
    }

    /// A command starts now.
    pub fn start(&mut self) -> CommandStart {
        let at = match self.mark {
            Some(mark) => mark,
            None => {
                let at = Instant::now();
                self.refresh_wall(at);
                at
            }
        };
        CommandStart {
            unix_ms: self.unix_micros_at(at) / 1000,
            at,
        }
    }

    /// Time passed outside any command's duration (a request refused, queued or redirected,
    /// a wait for the serving lease): the next command of the batch starts now, not at the
    /// end of the last one that ran, and its "now" is current.
    pub fn touch(&mut self) {
        if self.mark.is_some() {
            self.mark = Some(Instant::now());
        }
    }

    /// The command that started at `start` ended now: its duration in nanoseconds.
    pub fn finish(&mut self, start: CommandStart) -> u64 {
        let now = Instant::now();
        if self.mark.is_some() {
            self.mark = Some(now);
        }
        now.saturating_duration_since(start.at).as_nanos() as u64
    }

    fn refresh_wall(&mut self, at: Instant) {
        let fresh = self
            .wall
            .is_some_and(|(_, taken)| at.saturating_duration_since(taken) < WALL_REREAD);
        if !fresh {
            self.wall = Some((unix_micros(), at));
        }
    }

    fn unix_micros_at(&self, at: Instant) -> u64 {
        match self.wall {
            Some((micros, taken)) => {
                // Whole seconds and sub-second micros: `as_micros` is a u128 division.
                let since = at.saturating_duration_since(taken);
                let since_micros = since
                    .as_secs()
                    .saturating_mul(1_000_000)
                    .saturating_add(u64::from(since.subsec_micros()));
                micros.saturating_add(since_micros)
            }
            None => unix_micros(),
        }
    }
}

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wall_ms() -> u64 {
        unix_micros() / 1000
    }

    #[test]
    fn outside_a_batch_each_command_reads_the_clocks() {
        let mut clock = CommandClock::default();
        let before = wall_ms();
        let start = clock.start();
        assert!(start.unix_ms >= before && start.unix_ms <= wall_ms());
        std::thread::sleep(Duration::from_millis(3));
        assert!(clock.finish(start) >= 3_000_000);
    }

    #[test]
    fn in_a_batch_a_command_starts_where_the_previous_one_ended() {
        let mut clock = CommandClock::default();
        clock.begin_batch();
        let first = clock.start();
        std::thread::sleep(Duration::from_millis(2));
        assert!(clock.finish(first) >= 2_000_000);
        let second = clock.start();
        assert!(second.at > first.at, "the second starts at the first's end");
        assert!(clock.finish(second) < 1_000_000_000);
        assert!(clock.end_batch().is_some());
        // After the batch, the transport may wait: the next command reads the clock anew.
        std::thread::sleep(Duration::from_millis(2));
        let later = clock.start();
        assert!(later.at.duration_since(second.at) >= Duration::from_millis(2));
    }

    #[test]
    fn a_touch_moves_the_next_start_past_time_spent_outside_commands() {
        let mut clock = CommandClock::default();
        clock.begin_batch();
        let first = clock.start();
        std::thread::sleep(Duration::from_millis(5));
        clock.touch();
        let second = clock.start();
        assert!(second.at.duration_since(first.at) >= Duration::from_millis(5));
        assert!(clock.finish(second) < 5_000_000);
        clock.end_batch();
        // Outside a batch there is no mark to move: every start reads the clock.
        clock.touch();
        assert!(clock.end_batch().is_none());
    }

    #[test]
    fn the_derived_wall_time_follows_the_wall_clock() {
        let mut clock = CommandClock::default();
        // Every 20 ms: some batches carry the wall reading, others take a fresh one.
        for _ in 0..6 {
            let before = wall_ms();
            clock.begin_batch();
            let start = clock.start();
            let after = wall_ms();
            // 1 ms of slack: the carried time is truncated to microseconds twice.
            assert!(start.unix_ms + 1 >= before && start.unix_ms <= after + 1);
            clock.finish(start);
            clock.end_batch();
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
