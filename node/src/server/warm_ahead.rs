//! The session's look ahead over a pipeline: the keys of the next requests are warmed in one
//! pass before they run one by one (see `db::warm` for why).

use super::session::Session;
use crate::command_framework::warm_keys::key_positions;
use crate::db::warm::WARM_KEYS_MAX;
use proto::resp::request::Parsed;
use proto::resp::{RequestLimits, RequestParser};
use smallvec::SmallVec;
use std::ops::Range;

/// Requests one pass looks at.
pub const WARM_REQUESTS_MAX: usize = 16;
/// Bytes one pass parses at most: a large request (or a partial one, which the session's own
/// parser resumes incrementally) is not parsed again from its start here.
pub const WARM_SCAN_BYTES: usize = 64 * 1024;
/// Keys fewer than this are not worth a pass: one lookup has no other to overlap with.
const WARM_KEYS_MIN: usize = 2;

impl Session {
    /// Warms the keys of the complete requests from input offset `from` on. Returns the
    /// offset after the last request it looked at (the next pass starts there), or
    /// `usize::MAX` when it found none, so that the batch makes no further pass.
    pub(super) fn warm_ahead(&self, from: usize, limits: &RequestLimits) -> usize {
        let end = self.input.len().min(from.saturating_add(WARM_SCAN_BYTES));
        let window = &self.input[from..end];
        let mut scan = RequestParser::new();
        let mut at = 0;
        let mut requests = 0;
        let mut keys: SmallVec<[Range<usize>; WARM_KEYS_MAX]> = SmallVec::new();
        while requests < WARM_REQUESTS_MAX && keys.len() < WARM_KEYS_MAX {
            let len = match scan.parse(&window[at..], limits) {
                Ok(Parsed::Request { len }) => len,
                Ok(Parsed::Empty { len }) => {
                    at += len;
                    continue;
                }
                Ok(Parsed::Incomplete) | Err(_) => break,
            };
            let request = &window[at..at + len];
            let args: SmallVec<[&[u8]; 8]> = (0..scan.arg_count())
                .map(|i| scan.arg(request, i))
                .collect();
            for i in key_positions(&args) {
                if keys.len() == WARM_KEYS_MAX {
                    break;
                }
                if let Some(range) = scan.arg_range(i) {
                    keys.push(at + range.start..at + range.end);
                }
            }
            at += len;
            requests += 1;
        }
        if keys.len() >= WARM_KEYS_MIN {
            if let Some(keyspace) = self.server.db(self.client.db) {
                let keys: SmallVec<[&[u8]; WARM_KEYS_MAX]> =
                    keys.iter().map(|r| &window[r.clone()]).collect();
                keyspace.warm(&keys);
            }
        }
        if requests == 0 {
            usize::MAX
        } else {
            from + at
        }
    }
}
