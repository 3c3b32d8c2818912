//! The latency monitor (LATENCY LATEST | HISTORY | RESET | DOCTOR): with
//! `latency-monitor-threshold` above 0, every command that takes at least that many
//! milliseconds is logged as an event (`command`, or `fast-command` for O(1) commands), one
//! sample per second per event (the highest), the last `SAMPLES_PER_EVENT` kept, as Redis's
//! latency.c does. Events are rare (slow calls only), so one mutex is enough.

use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};

/// Samples kept per event (Redis's `LATENCY_TS_LEN`).
pub const SAMPLES_PER_EVENT: usize = 160;
/// Distinct events kept; names come from the server, never from clients, so this is a guard.
pub const EVENTS_MAX: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Unix seconds.
    pub time: u64,
    pub latency_ms: u64,
}

#[derive(Default)]
pub struct EventHistory {
    pub samples: VecDeque<Sample>,
    /// The highest latency ever logged for the event (since its last reset).
    pub max_ms: u64,
}

#[derive(Default)]
pub struct LatencyMonitor {
    events: Mutex<BTreeMap<&'static str, EventHistory>>,
}

impl LatencyMonitor {
    /// Logs `latency_ms` for `event` at `time` (unix seconds): a sample in the same second as
    /// the event's last one raises it instead of adding one.
    pub fn add(&self, event: &'static str, time: u64, latency_ms: u64) {
        let mut events = self.events.lock();
        if !events.contains_key(event) && events.len() >= EVENTS_MAX {
            return;
        }
        let history = events.entry(event).or_default();
        history.max_ms = history.max_ms.max(latency_ms);
        if let Some(last) = history.samples.back_mut() {
            if last.time == time {
                last.latency_ms = last.latency_ms.max(latency_ms);
                return;
            }
        }
        if history.samples.len() == SAMPLES_PER_EVENT {
            history.samples.pop_front();
        }
        history.samples.push_back(Sample { time, latency_ms });
    }

    /// `(event, latest sample, max)` for every event with samples, by name.
    pub fn latest(&self) -> Vec<(&'static str, Sample, u64)> {
        self.events
            .lock()
            .iter()
            .filter_map(|(name, h)| h.samples.back().map(|s| (*name, *s, h.max_ms)))
            .collect()
    }

    pub fn history(&self, event: &str) -> Vec<Sample> {
        self.events
            .lock()
            .get(event)
            .map(|h| h.samples.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Forgets the named events (every event if `names` is empty); returns how many it had.
    pub fn reset(&self, names: &[String]) -> usize {
        let mut events = self.events.lock();
        if names.is_empty() {
            let n = events.len();
            events.clear();
            return n;
        }
        names
            .iter()
            .filter(|n| events.remove(n.as_str()).is_some())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_merge_per_second_and_are_bounded() {
        let m = LatencyMonitor::default();
        m.add("command", 100, 250);
        m.add("command", 100, 300);
        m.add("command", 101, 120);
        assert_eq!(
            m.history("command"),
            [
                Sample {
                    time: 100,
                    latency_ms: 300
                },
                Sample {
                    time: 101,
                    latency_ms: 120
                }
            ]
        );
        assert_eq!(
            m.latest(),
            [(
                "command",
                Sample {
                    time: 101,
                    latency_ms: 120
                },
                300
            )]
        );
        for t in 0..1000 {
            m.add("fast-command", 1000 + t, 1);
        }
        assert_eq!(m.history("fast-command").len(), SAMPLES_PER_EVENT);
        assert_eq!(m.reset(&["nosuch".to_string()]), 0);
        assert_eq!(m.reset(&["command".to_string()]), 1);
        assert_eq!(m.reset(&[]), 1);
        assert!(m.latest().is_empty());
    }
}
