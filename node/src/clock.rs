//! The wall clock as the layers read it: milliseconds since the epoch and the LRU stamp.
//! The lowest layer, so every other may take its time from here or as an argument.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Seconds clock for LRU stamps (24 bits would wrap like Redis's; 32 bits is simpler).
pub fn lru_clock(now_ms: u64) -> u32 {
    (now_ms / 1000) as u32
}
