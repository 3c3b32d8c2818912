//! The clock readings a command needs (its "now" for expiry, its duration for SLOWLOG), taken
//! once per command instead of three times, from the CPU's time-stamp counter.
//!
//! Why: perf of pipelined GETs put `clock_gettime` at 9.5% of the node's CPU with three
//! readings per command (wall clock for "now", monotonic start and end). Inside a batch (the
//! requests one read delivered, run back to back) the end of one command is the start of the
//! next, so one reading per command does both, and "now" is derived from it. That one reading
//! was still 2.6% of pipelined PINGs' CPU through `Instant::now` (25 ns here); the counter
//! (`quanta`, calibrated against the monotonic clock once per process) costs 9 ns, as Redis's
//! own command timer reads the TSC. Where the counter is not invariant, quanta reads the
//! monotonic clock instead.
//!
//! An `Instant` is carried from the counter: each client's clock keeps an anchor (an
//! `Instant` and the counter's reading at it), taken anew every [`ANCHOR_REREAD`], so a
//! calibration error of even 100 ppm moves a derived instant by at most 5 us. Durations are
//! differences of counter readings, independent of the anchor.
//!
//! The wall clock is read at most every [`WALL_REREAD`] per client and the counter carries it
//! between readings, with microsecond precision: the derived time differs from
//! the wall clock only by the clocks' drift over that window (NTP slews at most 0.05% : 25 us),
//! or by a step of the wall clock, which is seen within the window. Redis too caches its
//! command time (once per event-loop iteration).
//!
//! Outside a batch (a blocked command's retry, tests) each command reads the clock itself.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a client's wall-clock reading is carried by the monotonic clock.
pub const WALL_REREAD: Duration = Duration::from_millis(50);

/// How long a client's anchor carries the counter onto `Instant`s before it is taken anew.
pub const ANCHOR_REREAD: Duration = Duration::from_millis(50);

/// The process's calibrated counter. Calibrating takes a few milliseconds: [`calibrate`] at
/// startup keeps that off the first command.
fn counter() -> &'static quanta::Clock {
    static COUNTER: OnceLock<quanta::Clock> = OnceLock::new();
    COUNTER.get_or_init(quanta::Clock::new)
}

/// Calibrates the counter now (the node calls it before it serves).
pub fn calibrate() {
    counter();
}

/// An OS `Instant` and the counter's reading at the same moment (`anchor_reading`).
#[derive(Clone, Copy)]
struct Reading {
    at: Instant,
    raw: u64,
}

#[derive(Default)]
pub struct CommandClock {
    /// A wall-clock reading (unix microseconds) and the counter's value when it was taken.
    wall: Option<(u64, u64)>,
    /// The anchor that carries counter readings onto `Instant`s, and bounds how long one
    /// counter reading stands (see `read`).
    anchor: Option<Reading>,
    /// While a batch runs: the counter at the end of the previous command (the start of the
    /// next).
    mark: Option<u64>,
}

/// Where a command started: its unix milliseconds for expiry, and the counter its duration
/// is measured from. Integers only: the per-command path does no `Instant` arithmetic
/// (`Timespec` subtraction was 0.8% of pipelined INCRs' CPU); an `Instant` is derived only
/// where one is wanted ([`CommandClock::instant`]).
#[derive(Clone, Copy)]
pub struct CommandStart {
    pub unix_ms: u64,
    raw: u64,
}

impl CommandClock {
    /// A transport is about to run the requests one read delivered.
    pub fn begin_batch(&mut self) {
        let now = self.read();
        self.refresh_wall(now);
        self.mark = Some(now);
    }

    /// The batch is over (its transport may now wait). Returns when its last command ended.
    pub fn end_batch(&mut self) -> Option<Instant> {
        let mark = self.mark.take()?;
        Some(self.instant_of(mark))
    }

    /// A command starts now.
    pub fn start(&mut self) -> CommandStart {
        let raw = match self.mark {
            Some(mark) => mark,
            None => {
                let now = self.read();
                self.refresh_wall(now);
                now
            }
        };
        CommandStart {
            unix_ms: self.unix_micros_of(raw) / 1000,
            raw,
        }
    }

    /// The instant a command starting now would start at (eviction's clock).
    pub fn instant(&mut self) -> Instant {
        let raw = match self.mark {
            Some(mark) => mark,
            None => self.read(),
        };
        self.instant_of(raw)
    }

    /// Time passed outside any command's duration (a request refused, queued or redirected,
    /// a wait for the serving lease): the next command of the batch starts now, not at the
    /// end of the last one that ran, and its "now" is current.
    pub fn touch(&mut self) {
        if self.mark.is_some() {
            self.mark = Some(self.read());
        }
    }

    /// The command that started at `start` ended now: its duration in nanoseconds.
    pub fn finish(&mut self, start: CommandStart) -> u64 {
        let now = self.read();
        if self.mark.is_some() {
            self.mark = Some(now);
        }
        counter().delta_as_nanos(start.raw, now)
    }

    /// The counter now. The anchor is taken anew when it is older than [`ANCHOR_REREAD`] or
    /// the counter went backwards from it (as a counter read on another socket might), so
    /// that instants derived from it stay within a calibration error of 50 ms.
    fn read(&mut self) -> u64 {
        let clock = counter();
        let raw = clock.raw();
        if let Some(anchor) = self.anchor {
            if within(anchor.raw, raw, ANCHOR_REREAD_NANOS) {
                return raw;
            }
        }
        let fresh = anchor_reading(clock);
        self.anchor = Some(fresh);
        fresh.raw
    }

    /// The `Instant` a counter reading stands for (from the anchor it was read under).
    fn instant_of(&self, raw: u64) -> Instant {
        match self.anchor {
            Some(anchor) if raw >= anchor.raw => {
                anchor.at + Duration::from_nanos(counter().delta_as_nanos(anchor.raw, raw))
            }
            _ => Instant::now(),
        }
    }

    fn refresh_wall(&mut self, raw: u64) {
        let fresh = self
            .wall
            .is_some_and(|(_, taken)| within(taken, raw, WALL_REREAD_NANOS));
        if !fresh {
            self.wall = Some((unix_micros(), counter().raw()));
        }
    }

    fn unix_micros_of(&self, raw: u64) -> u64 {
        match self.wall {
            Some((micros, taken)) if raw >= taken => {
                micros.saturating_add(counter().delta_as_nanos(taken, raw) / 1000)
            }
            // A mark read before the wall reading (refreshed later in the same batch start)
            // is at most a few nanoseconds earlier.
            Some((micros, _)) => micros,
            None => unix_micros(),
        }
    }
}

/// Whether counter reading `raw` is at or after `since` and less than `nanos` past it (a
/// counter read on another socket may be behind: then it is not).
fn within(since: u64, raw: u64, nanos: u64) -> bool {
    raw >= since && counter().delta_as_nanos(since, raw) < nanos
}

const ANCHOR_REREAD_NANOS: u64 = ANCHOR_REREAD.as_nanos() as u64;
const WALL_REREAD_NANOS: u64 = WALL_REREAD.as_nanos() as u64;

/// Most counter time an anchor's OS reading may take (between the counter readings around
/// it): a thread preempted in between would shift every instant derived from the anchor.
const ANCHOR_SPREAD_MAX_NANOS: u64 = 10_000;
/// Readings an anchor takes at most to get within [`ANCHOR_SPREAD_MAX_NANOS`] (else the
/// narrowest is kept).
const ANCHOR_TRIES: usize = 4;

/// An OS `Instant` and the counter at the same moment: the counter is read before and after
/// the OS clock and the midpoint kept, retried (a few times) when the two counter readings
/// are far apart.
fn anchor_reading(clock: &quanta::Clock) -> Reading {
    let take = || {
        let before = clock.raw();
        let at = Instant::now();
        let after = clock.raw();
        let reading = Reading {
            at,
            raw: before + after.saturating_sub(before) / 2,
        };
        (clock.delta_as_nanos(before, after), reading)
    };
    let mut best = take();
    for _ in 1..ANCHOR_TRIES {
        if best.0 <= ANCHOR_SPREAD_MAX_NANOS {
            break;
        }
        let next = take();
        if next.0 < best.0 {
            best = next;
        }
    }
    best.1
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
        assert!(
            second.raw > first.raw,
            "the second starts at the first's end"
        );
        assert!(clock.finish(second) < 1_000_000_000);
        let ended = clock.end_batch().expect("a batch ran");
        // After the batch, the transport may wait: the next command reads the clock anew.
        std::thread::sleep(Duration::from_millis(2));
        assert!(clock.instant().duration_since(ended) >= Duration::from_millis(2));
        let later = clock.start();
        assert!(counter().delta_as_nanos(second.raw, later.raw) >= 2_000_000);
    }

    #[test]
    fn a_touch_moves_the_next_start_past_time_spent_outside_commands() {
        let mut clock = CommandClock::default();
        clock.begin_batch();
        let first = clock.start();
        std::thread::sleep(Duration::from_millis(5));
        clock.touch();
        let second = clock.start();
        assert!(counter().delta_as_nanos(first.raw, second.raw) >= 5_000_000);
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

    #[test]
    fn counter_instants_follow_the_os_clock_across_anchors() {
        let mut clock = CommandClock::default();
        // Long enough to take several anchors; each derived instant lies between OS readings
        // taken around it (the slack covers a calibration error far above quanta's).
        let until = Instant::now() + ANCHOR_REREAD * 4;
        while Instant::now() < until {
            let before = Instant::now();
            let now = clock.instant();
            let after = Instant::now();
            // Far above the anchor's error (calibration, the spread bound), below any
            // mistake of units or anchors.
            let slack = Duration::from_millis(2);
            assert!(now + slack >= before && now <= after + slack);
            std::thread::sleep(Duration::from_millis(3));
        }
        let start = clock.start();
        std::thread::sleep(Duration::from_millis(4));
        let nanos = clock.finish(start);
        assert!((4_000_000..2_000_000_000).contains(&nanos), "{nanos}");
    }
}
