//! SLOWLOG: the most recent commands slower than `slowlog-log-slower-than` microseconds.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Arguments kept per entry, and bytes kept per argument, as Redis does.
pub const MAX_ARGS: usize = 32;
pub const MAX_ARG_BYTES: usize = 128;

pub struct SlowEntry {
    pub id: u64,
    pub unix_secs: u64,
    pub micros: u64,
    pub args: Vec<Vec<u8>>,
    pub peer: String,
    pub name: String,
}

#[derive(Default)]
pub struct SlowLog {
    next_id: AtomicU64,
    entries: Mutex<VecDeque<SlowEntry>>,
}

impl SlowLog {
    pub fn record(&self, micros: u64, args: &[&[u8]], peer: String, name: String, max_len: usize) {
        if max_len == 0 {
            return;
        }
        let mut kept: Vec<Vec<u8>> = Vec::with_capacity(args.len().min(MAX_ARGS));
        for (i, a) in args.iter().enumerate() {
            if i == MAX_ARGS - 1 && args.len() > MAX_ARGS {
                kept.push(
                    format!("... ({} more arguments)", args.len() - MAX_ARGS + 1).into_bytes(),
                );
                break;
            }
            if a.len() > MAX_ARG_BYTES {
                let mut v = a[..MAX_ARG_BYTES].to_vec();
                v.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_ARG_BYTES).as_bytes(),
                );
                kept.push(v);
            } else {
                kept.push(a.to_vec());
            }
        }
        let entry = SlowEntry {
            id: self.next_id.fetch_add(1, Relaxed),
            unix_secs: super::unix_millis() / 1000,
            micros,
            args: kept,
            peer,
            name,
        };
        let mut entries = self.entries.lock();
        entries.push_front(entry);
        entries.truncate(max_len);
    }

    pub fn with_entries<R>(&self, f: impl FnOnce(&VecDeque<SlowEntry>) -> R) -> R {
        f(&self.entries.lock())
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }
}
