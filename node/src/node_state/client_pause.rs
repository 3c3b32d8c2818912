//! CLIENT PAUSE: clients' commands held (not answered) until a deadline or CLIENT UNPAUSE.
//!
//! As Redis 7.0 does: a WRITE pause holds the commands that write or may feed the
//! replication stream (`write` and `may_replicate` in the command table, and EXEC of a
//! transaction that queued a write); an ALL pause holds every command. Two pauses merge into
//! the stricter mode and the later end. While any pause lasts, active expiry and eviction
//! stop, so the dataset (and the replication stream) stays as it is: the point of a pause is
//! to let replicas catch up before a failover.
//!
//! A held client's request stays in its input buffer, unparsed into anything new: what it
//! sends meanwhile waits there within `client-query-buffer-limit`, as any unread input does,
//! so a paused client costs no memory beyond its ordinary bounds. Its connection waits like a
//! blocked one (`server::session`), with the pause's end as its timeout.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// What a pause holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum PauseMode {
    /// Commands that write or may replicate.
    Write = 1,
    /// Every command.
    All = 2,
}

/// The node's pause state. Every command reads one atomic while no pause is set.
#[derive(Default)]
pub struct ClientPause {
    /// 0 while no pause is set, else a [`PauseMode`]. Stored after `end_ms`.
    mode: AtomicU8,
    /// When the pause ends (unix ms); the pause holds while now is at or before it.
    end_ms: AtomicU64,
    /// Serialises setting and lifting (each reads the other atomic).
    update: Mutex<()>,
    /// Clients held now (INFO `blocked_clients` counts them, as Redis 7.0 does).
    held: AtomicUsize,
}

impl ClientPause {
    /// Pauses until `end_ms`, merged with a pause still in force: the stricter mode and the
    /// later end.
    pub fn pause(&self, mode: PauseMode, end_ms: u64, now_ms: u64) {
        let _update = self.update.lock();
        let (mode, end_ms) = match self.in_force(now_ms) {
            Some((old_mode, old_end)) => (mode.max(old_mode), end_ms.max(old_end)),
            None => (mode, end_ms),
        };
        self.end_ms.store(end_ms, Ordering::Release);
        self.mode.store(mode as u8, Ordering::Release);
    }

    /// Lifts the pause. True if one was set (its held clients must be woken).
    pub fn unpause(&self) -> bool {
        let _update = self.update.lock();
        let was = self.mode.swap(0, Ordering::AcqRel) != 0;
        self.end_ms.store(0, Ordering::Release);
        was
    }

    /// The pause in force at `now_ms`: its mode and end.
    #[inline]
    pub fn in_force(&self, now_ms: u64) -> Option<(PauseMode, u64)> {
        let mode = match self.mode.load(Ordering::Acquire) {
            0 => return None,
            1 => PauseMode::Write,
            _ => PauseMode::All,
        };
        let end = self.end_ms.load(Ordering::Acquire);
        (now_ms <= end).then_some((mode, end))
    }

    /// Clears a pause whose end has passed, so that commands go back to the one-load check
    /// ([`ClientPause::maybe_set`]) instead of reading the clock.
    pub fn lapse(&self, now_ms: u64) {
        let _update = self.update.lock();
        if self.maybe_set() && self.in_force(now_ms).is_none() {
            self.mode.store(0, Ordering::Release);
        }
    }

    /// Whether any pause may be set (one relaxed load: the per-command check).
    #[inline]
    pub fn maybe_set(&self) -> bool {
        self.mode.load(Ordering::Relaxed) != 0
    }

    /// Whether a command that writes (or may replicate) or not is held at `now_ms`.
    pub fn holds(&self, writes: bool, now_ms: u64) -> bool {
        match self.in_force(now_ms) {
            Some((PauseMode::All, _)) => true,
            Some((PauseMode::Write, _)) => writes,
            None => false,
        }
    }

    /// Active expiry and eviction wait while any pause is in force (Redis 7.0).
    pub fn suspends_key_removal(&self, now_ms: u64) -> bool {
        self.maybe_set() && self.in_force(now_ms).is_some()
    }

    pub fn note_held(&self) {
        self.held.fetch_add(1, Ordering::Relaxed);
    }

    pub fn note_released(&self) {
        self.held.fetch_sub(1, Ordering::Relaxed);
    }

    /// Clients whose command is held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: pauses merge into the stricter mode and the later end, hold what their mode
    /// says until their end, and UNPAUSE lifts them. Method: one state, readings at set times.
    #[test]
    fn pauses_merge_hold_and_end() {
        let p = ClientPause::default();
        assert!(!p.holds(true, 0), "no pause");
        p.pause(PauseMode::Write, 1_000, 0);
        assert!(p.holds(true, 500) && !p.holds(false, 500), "writes only");
        assert!(p.holds(true, 1_000), "held at its end");
        assert!(!p.holds(true, 1_001), "over after it");
        p.pause(PauseMode::All, 800, 0);
        assert_eq!(p.in_force(0), Some((PauseMode::All, 1_000)));
        p.pause(PauseMode::Write, 2_000, 0);
        assert_eq!(
            p.in_force(0),
            Some((PauseMode::All, 2_000)),
            "stricter mode, later end"
        );
        assert!(p.suspends_key_removal(1_500));
        assert!(p.unpause());
        assert!(!p.holds(false, 0) && !p.suspends_key_removal(0));
        assert!(!p.unpause(), "nothing left to lift");
        p.pause(PauseMode::Write, 100, 0);
        p.lapse(100);
        assert!(p.maybe_set(), "still in force at its end");
        p.lapse(101);
        assert!(!p.maybe_set(), "cleared once over");
        p.pause(PauseMode::All, 100, 0);
        p.pause(PauseMode::Write, 300, 200);
        assert_eq!(
            p.in_force(200),
            Some((PauseMode::Write, 300)),
            "an ended pause does not merge"
        );
    }
}
