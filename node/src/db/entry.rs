//! One key's record beside its key: its value and its expiry. (How the key was last used
//! sits in the key's own bytes: [`super::stored_key::Access`].)

use super::value::Value;

/// Milliseconds since the Unix epoch; 0 means "no expiry".
pub type UnixMillis = u64;

#[derive(Debug, Clone)]
pub struct Entry {
    pub value: Value,
    /// When the key expires (ms since epoch), or 0 for never.
    pub expires_at: UnixMillis,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 32);

impl Entry {
    pub fn new(value: Value) -> Self {
        Entry {
            value,
            expires_at: 0,
        }
    }

    pub fn is_expired(&self, now: UnixMillis) -> bool {
        self.expires_at != 0 && self.expires_at <= now
    }
}
