//! One key's record: its value, its expiry and its last access time.

use super::value::Value;

/// Milliseconds since the Unix epoch; 0 means "no expiry".
pub type UnixMillis = u64;

#[derive(Debug, Clone)]
pub struct Entry {
    pub value: Value,
    /// When the key expires (ms since epoch), or 0 for never.
    pub expires_at: UnixMillis,
    /// Last access, in seconds of the node's LRU clock (for OBJECT IDLETIME and LRU eviction).
    pub lru: u32,
    /// Access-frequency counter under an LFU policy (OBJECT FREQ, LFU eviction; see
    /// [`super::frequency`]).
    pub freq: u8,
    /// The string was edited in place (SETRANGE, APPEND, SETBIT...): Redis keeps such strings
    /// in its `raw` encoding whatever their size, and OBJECT ENCODING says so.
    pub edited_in_place: bool,
}

impl Entry {
    pub fn new(value: Value, lru: u32) -> Self {
        Entry {
            value,
            expires_at: 0,
            lru,
            freq: super::frequency::LFU_INIT_VAL,
            edited_in_place: false,
        }
    }

    pub fn is_expired(&self, now: UnixMillis) -> bool {
        self.expires_at != 0 && self.expires_at <= now
    }
}
