//! The timing decisions of a replica's link loop, without a clock: after each
//! [`ReplicaLink::poll`](super::link::ReplicaLink::poll) it says whether the primary has been
//! silent too long (no record, not even a ping, for the silence limit: drop the link and
//! reconnect) and whether to poll again soon rather than idle.
//!
//! `now` is the caller's monotonic time since any fixed origin: the node's replica thread
//! passes the time since it started, the chaos simulation its virtual clock.

use std::time::Duration;

/// How long after the last record the link counts as busy (poll again soon).
pub const BUSY_WINDOW: Duration = Duration::from_millis(10);

/// The primary sent nothing for longer than the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the primary sent nothing for over {limit_ms} ms")]
pub struct PrimarySilent {
    pub limit_ms: u64,
}

/// One replica link's pacing state.
#[derive(Debug, Clone)]
pub struct LinkPace {
    silence_limit: Duration,
    last_heard: Duration,
}

impl LinkPace {
    /// A link that starts (counts as heard from) at `now`.
    pub fn new(silence_limit: Duration, now: Duration) -> Self {
        LinkPace {
            silence_limit,
            last_heard: now,
        }
    }

    /// Takes one poll that read `records` ring records (pings included) at `now`.
    pub fn after_poll(&mut self, records: u64, now: Duration) -> Result<(), PrimarySilent> {
        if records > 0 {
            self.last_heard = now;
        } else if now.saturating_sub(self.last_heard) > self.silence_limit {
            return Err(PrimarySilent {
                limit_ms: self.silence_limit.as_millis() as u64,
            });
        }
        Ok(())
    }

    /// Time this side spent (loading a full sync) is not the primary's silence.
    pub fn heard(&mut self, now: Duration) {
        self.last_heard = now;
    }

    /// After a poll that read nothing: poll again after a short pause when acks are in
    /// flight (`busy`) or a record came within [`BUSY_WINDOW`].
    pub fn poll_soon(&self, busy: bool, now: Duration) -> bool {
        busy || now.saturating_sub(self.last_heard) < BUSY_WINDOW
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Goal: silence is counted from the last record (or from a load), and past the limit
    /// is an error; polling stays busy shortly after a record.
    #[test]
    fn silence_counts_from_the_last_record() {
        let mut pace = LinkPace::new(ms(100), ms(0));
        assert_eq!(pace.after_poll(0, ms(100)), Ok(()));
        assert_eq!(
            pace.after_poll(0, ms(101)),
            Err(PrimarySilent { limit_ms: 100 })
        );
        let mut pace = LinkPace::new(ms(100), ms(0));
        pace.after_poll(3, ms(50)).unwrap();
        assert!(pace.poll_soon(false, ms(59)));
        assert!(!pace.poll_soon(false, ms(60)));
        assert!(pace.poll_soon(true, ms(60)));
        assert_eq!(pace.after_poll(0, ms(150)), Ok(()));
        pace.heard(ms(140));
        assert_eq!(pace.after_poll(0, ms(240)), Ok(()));
        assert!(pace.after_poll(0, ms(241)).is_err());
    }
}
