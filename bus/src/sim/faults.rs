//! What the simulated network does wrong, configured per network and changeable while it runs.

use std::time::Duration;

use crate::error::BusError;

/// The most RNR retries a configuration may ask for. verbs' `rnr_retry = 7` means "forever"; a
/// simulation must end, so the sim always gives up eventually and reports `RetryExceeded`.
pub const RNR_RETRY_LIMIT_MAX: u32 = 1 << 16;

/// The longest one-way delay a configuration may ask for: longer is a config mistake (it would
/// also make RNR and keepalive timing meaningless).
pub const DELAY_MAX: Duration = Duration::from_secs(10);

/// Fault injection settings of one [`super::SimFabric`].
///
/// Reliable connected traffic (SEND/RECV, WRITE WITH IMM, READ) is never lost, duplicated or
/// reordered: RC guarantees that, and the sim keeps it. Only datagrams are lost or duplicated,
/// and only plain WRITEs are placed out of order or placed twice (as EFA's SRD allows: it
/// delivers out of order, and some instances may place a WRITE's payload a second time).
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    /// Probability in 0..=1 that a datagram is dropped in flight.
    pub datagram_loss: f64,
    /// Probability in 0..=1 that a datagram is delivered twice.
    pub datagram_dup: f64,
    /// One-way delay of every operation, drawn uniformly from this range (inclusive).
    pub delay_min: Duration,
    pub delay_max: Duration,
    /// When set, plain WRITEs (without immediate data) are placed independently of every other
    /// operation on the connection: a later WRITE, a WRITE WITH IMM or a SEND may land first.
    pub reorder_writes: bool,
    /// When set (with `reorder_writes`), a plain WRITE spanning more than one aligned 8-byte
    /// word lands in two fragments at different times, split at a word boundary, as verbs
    /// allows placement within one message in any order: a reader can see half a record. An
    /// aligned 8-byte word is never torn. The later fragment carries the completion.
    pub tear_writes: bool,
    /// Probability in 0..=1 (with `reorder_writes`) that a plain WRITE's payload is placed a
    /// second time, `duplicate_delay_max` at most after the first: the bytes it had at post
    /// time land again, possibly over newer data the sender wrote there since. The copy is
    /// silent (its request completes once) and is never torn.
    pub duplicate_writes: f64,
    /// How late a duplicated WRITE may land after the original, drawn uniformly from
    /// `0..=duplicate_delay_max`.
    pub duplicate_delay_max: Duration,
    /// How long a SEND or WRITE WITH IMM that found no posted receive waits before it retries.
    pub rnr_delay: Duration,
    /// How many such retries before the sender's work request fails with `RetryExceeded`.
    pub rnr_retry_limit: u32,
}

impl Default for Faults {
    /// A well-behaved fabric: no loss, a fixed small delay, ordered writes.
    fn default() -> Self {
        Faults {
            datagram_loss: 0.0,
            datagram_dup: 0.0,
            delay_min: Duration::from_micros(2),
            delay_max: Duration::from_micros(2),
            reorder_writes: false,
            tear_writes: false,
            duplicate_writes: 0.0,
            duplicate_delay_max: Duration::ZERO,
            rnr_delay: Duration::from_micros(100),
            rnr_retry_limit: 1000,
        }
    }
}

impl Faults {
    /// A hostile fabric for property tests: datagram loss and duplication, jittered delay and
    /// out-of-order WRITE placement.
    pub fn chaotic() -> Self {
        Faults {
            datagram_loss: 0.1,
            datagram_dup: 0.05,
            delay_min: Duration::from_micros(1),
            delay_max: Duration::from_micros(50),
            reorder_writes: true,
            tear_writes: true,
            ..Faults::default()
        }
    }

    /// Checks every field against its limit.
    pub fn validate(&self) -> Result<(), BusError> {
        let bad = |reason: String| {
            Err(BusError::Invalid {
                what: "sim faults",
                reason,
            })
        };
        for (name, p) in [
            ("datagram_loss", self.datagram_loss),
            ("datagram_dup", self.datagram_dup),
            ("duplicate_writes", self.duplicate_writes),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return bad(format!("{name} {p} is not a probability"));
            }
        }
        if self.delay_min > self.delay_max || self.delay_max > DELAY_MAX {
            return bad(format!(
                "delay range {:?}..={:?} is empty or exceeds {DELAY_MAX:?}",
                self.delay_min, self.delay_max
            ));
        }
        if self.tear_writes && !self.reorder_writes {
            return bad("tear_writes needs reorder_writes".into());
        }
        if self.duplicate_writes > 0.0 && !self.reorder_writes {
            return bad("duplicate_writes needs reorder_writes".into());
        }
        if self.duplicate_delay_max > DELAY_MAX {
            return bad(format!(
                "duplicate_delay_max {:?} exceeds {DELAY_MAX:?}",
                self.duplicate_delay_max
            ));
        }
        if self.rnr_delay > DELAY_MAX || self.rnr_delay.is_zero() {
            return bad(format!(
                "rnr_delay {:?} is zero or too long",
                self.rnr_delay
            ));
        }
        if self.rnr_retry_limit > RNR_RETRY_LIMIT_MAX {
            return bad(format!(
                "rnr_retry_limit {} exceeds {RNR_RETRY_LIMIT_MAX}",
                self.rnr_retry_limit
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_refused() {
        Faults::default().validate().unwrap();
        Faults::chaotic().validate().unwrap();
        let f = Faults {
            datagram_loss: 1.5,
            ..Faults::default()
        };
        assert!(f.validate().is_err());
        let f = Faults {
            delay_min: Duration::from_millis(2),
            delay_max: Duration::from_millis(1),
            ..Faults::default()
        };
        assert!(f.validate().is_err());
        let f = Faults {
            rnr_delay: Duration::ZERO,
            ..Faults::default()
        };
        assert!(f.validate().is_err());
        let duplicating = Faults {
            duplicate_writes: 0.5,
            duplicate_delay_max: Duration::from_millis(1),
            ..Faults::chaotic()
        };
        duplicating.validate().unwrap();
        for f in [
            Faults {
                reorder_writes: false,
                tear_writes: false,
                ..duplicating.clone()
            },
            Faults {
                duplicate_writes: 1.5,
                ..duplicating.clone()
            },
            Faults {
                duplicate_delay_max: DELAY_MAX * 2,
                ..duplicating.clone()
            },
        ] {
            assert!(f.validate().is_err(), "{f:?}");
        }
    }
}
