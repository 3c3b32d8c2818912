//! When the cron starts a background save: Redis's `save <seconds> <changes>` rules and its
//! retry delay after a failed save, as a pure function of the state.

use crate::config::SaveRule;
pub use crate::node_state::snapshot_state::CronView;

/// After a failed background save, the next automatic one waits this long (Redis's
/// CONFIG_BGSAVE_RETRY_DELAY), so that a full disk is not hammered 10 times a second.
pub const RETRY_DELAY_SECS: u64 = 5;

/// Why the cron should start a background save now, or None.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Scheduled,
    Rule(SaveRule),
}

pub fn decide(rules: &[SaveRule], v: CronView) -> Option<Trigger> {
    let may_retry = v.last_ok || v.secs_since_attempt.is_none_or(|s| s > RETRY_DELAY_SECS);
    if !may_retry {
        return None;
    }
    if v.scheduled {
        return Some(Trigger::Scheduled);
    }
    // As Redis: enough changes, and strictly more seconds than the rule says.
    rules
        .iter()
        .find(|r| v.dirty >= r.changes && v.secs_since_save > r.seconds)
        .map(|r| Trigger::Rule(*r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(dirty: u64, since_save: u64) -> CronView {
        CronView {
            dirty,
            secs_since_save: since_save,
            secs_since_attempt: Some(since_save),
            last_ok: true,
            scheduled: false,
        }
    }

    const RULES: &[SaveRule] = &[
        SaveRule {
            seconds: 3600,
            changes: 1,
        },
        SaveRule {
            seconds: 60,
            changes: 100,
        },
    ];

    #[test]
    fn rules_need_both_changes_and_time() {
        assert_eq!(decide(RULES, view(0, 10_000)), None);
        assert_eq!(decide(RULES, view(1, 3600)), None);
        assert_eq!(decide(RULES, view(1, 3601)), Some(Trigger::Rule(RULES[0])));
        assert_eq!(decide(RULES, view(99, 61)), None);
        assert_eq!(decide(RULES, view(100, 61)), Some(Trigger::Rule(RULES[1])));
        assert_eq!(decide(&[], view(1_000_000, 1_000_000)), None);
    }

    #[test]
    fn failures_delay_retries_and_schedules() {
        let failed = |since_attempt| CronView {
            last_ok: false,
            secs_since_attempt: Some(since_attempt),
            ..view(1000, 10_000)
        };
        assert_eq!(decide(RULES, failed(5)), None);
        assert!(decide(RULES, failed(6)).is_some());
        let scheduled = CronView {
            scheduled: true,
            ..view(0, 0)
        };
        assert_eq!(decide(&[], scheduled), Some(Trigger::Scheduled));
        assert_eq!(
            decide(
                &[],
                CronView {
                    scheduled: true,
                    ..failed(1)
                }
            ),
            None
        );
    }
}
