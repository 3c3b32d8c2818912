//! Limits on what a client may send, with Redis's defaults.

/// Longest bulk string a client may send (`proto-max-bulk-len`, Redis default 512 MB).
pub const DEFAULT_MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Most elements in one request array. Redis rejects counts above `INT_MAX`; memory is never
/// reserved from this header, only as arguments actually arrive.
pub const DEFAULT_MAX_MULTIBULK_LEN: usize = i32::MAX as usize;
/// Longest inline command line, and longest `*`/`$` header line (`PROTO_INLINE_MAX_SIZE`).
pub const MAX_INLINE_LEN: usize = 64 * 1024;
/// Before AUTH, Redis accepts at most this many arguments (`Protocol error: unauthenticated
/// multibulk length`) and bulk strings of at most this many bytes.
pub const UNAUTHENTICATED_MAX_MULTIBULK_LEN: usize = 10;
pub const UNAUTHENTICATED_MAX_BULK_LEN: usize = 16384;

/// The limits in force for one client while parsing its next request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    pub max_bulk_len: usize,
    pub max_multibulk_len: usize,
    /// True while the client still has to authenticate: the tighter Redis limits apply.
    pub unauthenticated: bool,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_bulk_len: DEFAULT_MAX_BULK_LEN,
            max_multibulk_len: DEFAULT_MAX_MULTIBULK_LEN,
            unauthenticated: false,
        }
    }
}
