//! The LFU access counter of an entry, as Redis keeps it under an `*-lfu` maxmemory policy:
//! an 8-bit logarithmic counter that grows with probability 1 / ((counter - 5) *
//! lfu-log-factor + 1) on each access and loses one point per `lfu-decay-time` minutes the key
//! went untouched. The entry's LRU stamp (its last access, in seconds) is the decay's base,
//! as Redis's own "last decrement time" is reset on every access.

/// A new key's counter (Redis's LFU_INIT_VAL), so that a fresh key is not evicted at once.
pub const LFU_INIT_VAL: u8 = 5;

/// `lfu-log-factor` and `lfu-decay-time` (minutes; 0: the counter never decays).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LfuParams {
    pub log_factor: u32,
    pub decay_minutes: u32,
}

impl Default for LfuParams {
    fn default() -> Self {
        LfuParams {
            log_factor: 10,
            decay_minutes: 1,
        }
    }
}

/// `freq` after `idle_secs` untouched: one point less per full decay period, not below 0.
pub fn decayed(freq: u8, idle_secs: u32, params: LfuParams) -> u8 {
    if params.decay_minutes == 0 {
        return freq;
    }
    let periods = idle_secs / 60 / params.decay_minutes;
    freq.saturating_sub(u8::try_from(periods).unwrap_or(u8::MAX))
}

/// `freq` after one access; `draw` is uniform in [0, 1) (passed in so tests can pick it).
pub fn incremented(freq: u8, params: LfuParams, draw: f64) -> u8 {
    if freq == u8::MAX {
        return freq;
    }
    let base = f64::from(freq.saturating_sub(LFU_INIT_VAL));
    let p = 1.0 / (base * f64::from(params.log_factor) + 1.0);
    if draw < p {
        freq + 1
    } else {
        freq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: LfuParams = LfuParams {
        log_factor: 10,
        decay_minutes: 1,
    };

    #[test]
    fn counters_up_to_the_initial_value_always_grow() {
        assert_eq!(incremented(0, P, 0.999), 1);
        assert_eq!(incremented(LFU_INIT_VAL, P, 0.999), LFU_INIT_VAL + 1);
    }

    #[test]
    fn higher_counters_grow_with_falling_probability() {
        // base 10, factor 10: p = 1/101.
        assert_eq!(incremented(15, P, 0.5), 15);
        assert_eq!(incremented(15, P, 0.009), 16);
        assert_eq!(incremented(u8::MAX, P, 0.0), u8::MAX);
    }

    #[test]
    fn counters_lose_a_point_per_decay_period() {
        assert_eq!(decayed(100, 59, P), 100);
        assert_eq!(decayed(100, 60 * 3 + 5, P), 97);
        let slow = LfuParams {
            decay_minutes: 2,
            ..P
        };
        assert_eq!(decayed(100, 60 * 5, slow), 98);
        assert_eq!(decayed(3, 60 * 100, P), 0);
        let never = LfuParams {
            decay_minutes: 0,
            ..P
        };
        assert_eq!(decayed(100, u32::MAX, never), 100);
    }
}
