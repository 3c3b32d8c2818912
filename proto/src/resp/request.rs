//! The server's request parser: finds a command's arguments in the client's read buffer.
//!
//! It is resumable: given a buffer that holds the start of a request, it parses what is there,
//! remembers where it stopped, and continues from that point when called again with the same
//! buffer grown by newly read bytes. A request of a million arguments arriving in small reads
//! is therefore parsed once, not once per read. Nothing is reserved from a length header:
//! memory grows only with bytes that actually arrived.
//!
//! Errors carry Redis's texts; the server answers `-ERR <text>` and closes the connection.

use super::limits::{
    RequestLimits, MAX_INLINE_LEN, UNAUTHENTICATED_MAX_BULK_LEN, UNAUTHENTICATED_MAX_MULTIBULK_LEN,
};
use super::splitargs::split_args;
use smallvec::SmallVec;

/// A malformed request. `Display` gives the exact text Redis sends after `ERR `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("Protocol error: too big mbulk count string")]
    TooBigMultibulkCountString,
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    #[error("Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCountString,
    #[error("Protocol error: expected '$', got '{}'", *.0 as char)]
    ExpectedDollar(u8),
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    #[error("Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
    #[error("Protocol error: too big inline request")]
    TooBigInlineRequest,
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
}

/// Where an argument lives: a byte range of the request buffer (multibulk), or an index into
/// the parser's own list (inline arguments are unquoted, so they are copies).
#[derive(Clone, Copy, Debug)]
enum ArgAt {
    Buf(u32, u32),
    Owned(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing of the current request parsed yet.
    Start,
    /// Inside `*<count>`: `remaining` bulk strings still to come.
    Multibulk { remaining: usize },
    /// Inside an inline line; `scanned` bytes are known to hold no newline.
    Inline { scanned: usize },
}

/// What one call of [`RequestParser::parse`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole request of `len` bytes (from the start of the buffer) is ready; its arguments
    /// are available through [`RequestParser::arg`] until the next call.
    Request { len: usize },
    /// `len` bytes held an empty request (`*0`, `*-1`, a blank inline line): skip them.
    Empty { len: usize },
    /// The buffer ends inside a request; call again once more bytes are in.
    Incomplete,
}

/// A resumable parser for one client connection. See the module comment.
#[derive(Debug)]
pub struct RequestParser {
    state: State,
    pos: usize,
    args: SmallVec<[ArgAt; 8]>,
    owned: Vec<Vec<u8>>,
}

impl Default for RequestParser {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestParser {
    pub fn new() -> Self {
        RequestParser {
            state: State::Start,
            pos: 0,
            args: SmallVec::new(),
            owned: Vec::new(),
        }
    }

    /// True when part of a request has been parsed and the rest is awaited.
    pub fn in_progress(&self) -> bool {
        self.state != State::Start || self.pos != 0
    }

    /// Parses from the start of `buf`, which must begin where the current request begins and
    /// hold at least the bytes seen by earlier calls for this request. Buffers longer than
    /// `u32::MAX` are the caller's to refuse (`client-query-buffer-limit`).
    pub fn parse(&mut self, buf: &[u8], limits: &RequestLimits) -> Result<Parsed, ProtocolError> {
        debug_assert!(self.pos <= buf.len());
        if self.state == State::Start {
            self.args.clear();
            self.owned.clear();
            self.pos = 0;
            match buf.first() {
                None => return Ok(Parsed::Incomplete),
                Some(b'*') => match self.parse_multibulk_header(buf, limits)? {
                    None => return Ok(Parsed::Incomplete),
                    Some(0) => {
                        let len = self.finish();
                        return Ok(Parsed::Empty { len });
                    }
                    Some(count) => self.state = State::Multibulk { remaining: count },
                },
                Some(_) => self.state = State::Inline { scanned: 0 },
            }
        }
        match self.state {
            State::Multibulk { .. } => self.parse_bulks(buf, limits),
            State::Inline { scanned } => self.parse_inline(buf, scanned),
            State::Start => unreachable!("state set above"),
        }
    }

    /// Number of arguments of the request last returned as [`Parsed::Request`].
    pub fn arg_count(&self) -> usize {
        self.args.len()
    }

    /// Where argument `i` of the request last returned lies in its buffer: a multibulk
    /// request's arguments do; an inline request's are the parser's own copies (its quotes
    /// undone), and have none. Lets a caller keep an argument while the parser moves on.
    pub fn arg_range(&self, i: usize) -> Option<std::ops::Range<usize>> {
        match self.args.get(i)? {
            ArgAt::Buf(start, end) => Some(*start as usize..*end as usize),
            ArgAt::Owned(_) => None,
        }
    }

    /// Argument `i` of the request last returned, given the same buffer.
    pub fn arg<'a>(&'a self, buf: &'a [u8], i: usize) -> &'a [u8] {
        match self.args[i] {
            ArgAt::Buf(start, end) => &buf[start as usize..end as usize],
            ArgAt::Owned(idx) => &self.owned[idx as usize],
        }
    }

    fn finish(&mut self) -> usize {
        let len = self.pos;
        self.state = State::Start;
        self.pos = 0;
        len
    }

    /// `*<count>\r\n`. Returns the count, or None if the line is not complete yet.
    fn parse_multibulk_header(
        &mut self,
        buf: &[u8],
        limits: &RequestLimits,
    ) -> Result<Option<usize>, ProtocolError> {
        let (count, cr) = match header_count(buf, 1) {
            HeaderLine::Count { count, cr } => (count, cr),
            HeaderLine::Incomplete => return Ok(None),
            HeaderLine::TooLong => return Err(ProtocolError::TooBigMultibulkCountString),
            HeaderLine::NotACount => return Err(ProtocolError::InvalidMultibulkLength),
        };
        if count > limits.max_multibulk_len as i64 || count > i32::MAX as i64 {
            return Err(ProtocolError::InvalidMultibulkLength);
        }
        if limits.unauthenticated && count > UNAUTHENTICATED_MAX_MULTIBULK_LEN as i64 {
            return Err(ProtocolError::UnauthenticatedMultibulkLength);
        }
        self.pos = cr + 2;
        Ok(Some(count.max(0) as usize))
    }

    fn parse_bulks(&mut self, buf: &[u8], limits: &RequestLimits) -> Result<Parsed, ProtocolError> {
        let State::Multibulk { mut remaining } = self.state else {
            unreachable!()
        };
        while remaining > 0 {
            let start = self.pos;
            if start >= buf.len() {
                break;
            }
            if buf[start] != b'$' {
                return Err(ProtocolError::ExpectedDollar(printable(buf[start])));
            }
            let (len, cr) = match header_count(buf, start + 1) {
                HeaderLine::Count { count, cr } => (count, cr),
                HeaderLine::Incomplete => break,
                HeaderLine::TooLong => return Err(ProtocolError::TooBigBulkCountString),
                HeaderLine::NotACount => return Err(ProtocolError::InvalidBulkLength),
            };
            if len < 0 || len as u64 > limits.max_bulk_len as u64 {
                return Err(ProtocolError::InvalidBulkLength);
            }
            if limits.unauthenticated && len as usize > UNAUTHENTICATED_MAX_BULK_LEN {
                return Err(ProtocolError::UnauthenticatedBulkLength);
            }
            let data = cr + 2;
            let end = data + len as usize;
            // Like Redis, the two bytes after the payload are skipped, not checked.
            if end + 2 > buf.len() {
                break;
            }
            self.args.push(ArgAt::Buf(data as u32, end as u32));
            self.pos = end + 2;
            remaining -= 1;
        }
        if remaining > 0 {
            self.state = State::Multibulk { remaining };
            return Ok(Parsed::Incomplete);
        }
        let len = self.finish();
        Ok(Parsed::Request { len })
    }

    fn parse_inline(&mut self, buf: &[u8], scanned: usize) -> Result<Parsed, ProtocolError> {
        let Some(nl) = buf[scanned..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|p| p + scanned)
        else {
            if buf.len() > MAX_INLINE_LEN {
                return Err(ProtocolError::TooBigInlineRequest);
            }
            self.state = State::Inline { scanned: buf.len() };
            return Ok(Parsed::Incomplete);
        };
        let line_end = if nl > 0 && buf[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        if !split_args(&buf[..line_end], &mut self.owned) {
            return Err(ProtocolError::UnbalancedQuotes);
        }
        self.args
            .extend((0..self.owned.len() as u32).map(ArgAt::Owned));
        self.pos = nl + 1;
        let len = self.finish();
        if self.args.is_empty() {
            Ok(Parsed::Empty { len })
        } else {
            Ok(Parsed::Request { len })
        }
    }
}

/// What the line of a `*` or `$` header holds.
enum HeaderLine {
    /// The count, and where the line's `\r` is (its `\n` follows).
    Count { count: i64, cr: usize },
    /// The line, through its `\n`, has not all arrived.
    Incomplete,
    /// No `\r` within [`MAX_INLINE_LEN`] bytes of the header's start.
    TooLong,
    /// A whole line that is not a count as Redis's `string2ll` reads one.
    NotACount,
}

/// The count of the header whose sign is at `from - 1`: the short form in one pass
/// ([`short_count`]), anything else by finding the `\r` and parsing what is before it. The
/// line must be whole (its `\n` in) before it is judged, as Redis waits for it. Inlined into
/// both headers' parsing: called, it cost a SET ~100 instructions more (callgrind).
#[inline(always)]
fn header_count(buf: &[u8], from: usize) -> HeaderLine {
    let (short, cr) = match short_count(buf, from) {
        Some((count, cr)) => (Some(count as i64), cr),
        None => match find_cr(buf, from) {
            Some(cr) => (None, cr),
            None if buf.len() - (from - 1) > MAX_INLINE_LEN => return HeaderLine::TooLong,
            None => return HeaderLine::Incomplete,
        },
    };
    if cr + 1 >= buf.len() {
        return HeaderLine::Incomplete;
    }
    match short.or_else(|| parse_i64(&buf[from..cr])) {
        Some(count) => HeaderLine::Count { count, cr },
        None => HeaderLine::NotACount,
    }
}

/// Digits of a short count at most.
const SHORT_COUNT_DIGITS: usize = 5;

/// The common header's count in one pass: one to [`SHORT_COUNT_DIGITS`] digits without a
/// leading zero, from `from` to a `\r` (returned with its index). None for anything else (a
/// zero, a sign, a longer number, garbage, a header not all arrived), which the general path
/// (`find_cr`, then `parse_i64`) then decides exactly as before.
///
/// Why: every argument of every request has such a header, and scanning it for the `\r` and
/// then again for its digits was about a third of the parser's ~500 instructions for a
/// pipelined SET (callgrind).
fn short_count(buf: &[u8], from: usize) -> Option<(u64, usize)> {
    let first = *buf.get(from)?;
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    let mut value = u64::from(first - b'0');
    for at in from + 1..from + SHORT_COUNT_DIGITS + 1 {
        match *buf.get(at)? {
            b'\r' => return Some((value, at)),
            digit @ b'0'..=b'9' => value = value * 10 + u64::from(digit - b'0'),
            _ => return None,
        }
    }
    None
}

fn find_cr(buf: &[u8], from: usize) -> Option<usize> {
    // Header lines are short; a bounded scan keeps garbage from costing more than the limit.
    let end = buf.len().min(from.saturating_add(MAX_INLINE_LEN + 1));
    buf.get(from..end)?
        .iter()
        .position(|&b| b == b'\r')
        .map(|p| p + from)
}

/// Redis's `string2ll`: optional '-', digits, no leading '+', no spaces, no leading zero,
/// no "-0", no overflow. Only the canonical form parses, so a string stored as the integer
/// it spells reads back byte for byte ("-0" stays the string "-0").
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let leading_zero = digits.first() == Some(&b'0') && (digits.len() > 1 || neg);
    if digits.is_empty() || digits.len() > 20 || leading_zero {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

fn printable(b: u8) -> u8 {
    if b.is_ascii_graphic() || b == b' ' {
        b
    } else {
        b' '
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut parser = RequestParser::new();
        let limits = RequestLimits::default();
        let mut out = Vec::new();
        let mut at = 0;
        loop {
            match parser.parse(&input[at..], &limits)? {
                Parsed::Request { len } => {
                    out.push(
                        (0..parser.arg_count())
                            .map(|i| parser.arg(&input[at..], i).to_vec())
                            .collect(),
                    );
                    at += len;
                }
                Parsed::Empty { len } => at += len,
                Parsed::Incomplete => return Ok(out),
            }
        }
    }

    proptest::proptest! {
        /// Wherever the one-pass count answers, it answers what the general path does.
        #[test]
        fn short_count_agrees_with_the_general_path(
            picks in proptest::collection::vec(0usize..15, 0..9),
        ) {
            const ALPHABET: &[u8; 15] = b"0123456789\r\n-+x";
            let buf: Vec<u8> = picks.iter().map(|&i| ALPHABET[i]).collect();
            if let Some((value, cr)) = short_count(&buf, 0) {
                proptest::prop_assert_eq!(find_cr(&buf, 0), Some(cr));
                proptest::prop_assert_eq!(parse_i64(&buf[..cr]), Some(value as i64));
            }
        }
    }

    /// Counts the one-pass path leaves to the general one (zero, six digits and more, a
    /// leading zero, a sign) still parse, or fail, as before.
    #[test]
    fn counts_outside_the_short_form() {
        let got = parse_all(b"*2\r\n$0\r\n\r\n$000001\r\nx\r\n");
        assert_eq!(
            got.unwrap_err().to_string(),
            "Protocol error: invalid bulk length"
        );
        let value = vec![b'v'; 123_456];
        let mut input = b"*02\r\n".to_vec();
        assert_eq!(
            parse_all(&input).unwrap_err().to_string(),
            "Protocol error: invalid multibulk length"
        );
        input = b"*2\r\n$3\r\nSET\r\n$123456\r\n".to_vec();
        input.extend_from_slice(&value);
        input.extend_from_slice(b"\r\n");
        let got = parse_all(&input).unwrap();
        assert_eq!(got, vec![vec![b"SET".to_vec(), value]]);
        assert_eq!(
            parse_all(b"*1\r\n$+1\r\nx\r\n").unwrap_err().to_string(),
            "Protocol error: invalid bulk length"
        );
        // A header whose `\n` has not come is waited for, not judged.
        assert_eq!(
            parse_all(b"*1\r\n$x\r").unwrap(),
            Vec::<Vec<Vec<u8>>>::new()
        );
        assert_eq!(
            parse_all(b"*1\r\n$12\r").unwrap(),
            Vec::<Vec<Vec<u8>>>::new()
        );
    }

    #[test]
    fn multibulk_and_inline_requests() {
        let got =
            parse_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\nPING\r\n*0\r\nget  k\n").unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], vec![b"SET".to_vec(), b"k".to_vec(), b"".to_vec()]);
        assert_eq!(got[1], vec![b"PING".to_vec()]);
        assert_eq!(got[2], vec![b"get".to_vec(), b"k".to_vec()]);
    }

    /// Goal: `arg_range` locates a multibulk argument in the buffer, so a caller can keep it
    /// past the next parse. Method: parse a request, compare each range's bytes with `arg`.
    #[test]
    fn arg_range_locates_buffer_arguments() {
        let input = b"*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n";
        let mut parser = RequestParser::new();
        let limits = RequestLimits::default();
        assert!(matches!(
            parser.parse(input, &limits),
            Ok(Parsed::Request { .. })
        ));
        for i in 0..2 {
            let range = parser
                .arg_range(i)
                .expect("a multibulk argument is in the buffer");
            assert_eq!(&input[range], parser.arg(input, i));
        }
        assert_eq!(parser.arg_range(2), None, "no third argument");
    }

    #[test]
    fn resumes_byte_by_byte() {
        let input = b"*2\r\n$4\r\nECHO\r\n$11\r\nhello world\r\n";
        let limits = RequestLimits::default();
        let mut parser = RequestParser::new();
        for end in 0..input.len() {
            assert_eq!(
                parser.parse(&input[..end], &limits).unwrap(),
                Parsed::Incomplete,
                "at {end}"
            );
        }
        assert_eq!(
            parser.parse(input, &limits).unwrap(),
            Parsed::Request { len: input.len() }
        );
        assert_eq!(parser.arg(input, 1), b"hello world");
    }

    #[test]
    fn errors_carry_redis_texts() {
        let e = |input: &[u8]| parse_all(input).unwrap_err().to_string();
        assert_eq!(e(b"*x\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(
            e(b"*3000000000\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            e(b"*1\r\n$2147483648\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(e(b"*1\r\n$-1\r\n"), "Protocol error: invalid bulk length");
        assert_eq!(e(b"*1\r\n:1\r\n"), "Protocol error: expected '$', got ':'");
        assert_eq!(
            e(b"echo \"x\r\n"),
            "Protocol error: unbalanced quotes in request"
        );
        let long = vec![b'a'; MAX_INLINE_LEN + 1];
        assert_eq!(e(&long), "Protocol error: too big inline request");
        let mut star = b"*".to_vec();
        star.extend(vec![b'1'; MAX_INLINE_LEN + 1]);
        assert_eq!(e(&star), "Protocol error: too big mbulk count string");
    }

    #[test]
    fn huge_headers_reserve_nothing() {
        // Ten million arguments announced, none sent: the parser waits with nothing reserved.
        let mut parser = RequestParser::new();
        let limits = RequestLimits::default();
        assert_eq!(
            parser.parse(b"*10000000\r\n", &limits).unwrap(),
            Parsed::Incomplete
        );
        assert!(parser.args.capacity() <= 8);
        // A 2 GB bulk is over proto-max-bulk-len.
        let mut parser = RequestParser::new();
        assert_eq!(
            parser.parse(b"*1\r\n$2000000000\r\n", &limits),
            Err(ProtocolError::InvalidBulkLength)
        );
    }

    #[test]
    fn unauthenticated_limits() {
        let limits = RequestLimits {
            unauthenticated: true,
            ..RequestLimits::default()
        };
        let mut parser = RequestParser::new();
        assert_eq!(
            parser.parse(b"*11\r\n", &limits),
            Err(ProtocolError::UnauthenticatedMultibulkLength)
        );
        let mut parser = RequestParser::new();
        assert_eq!(
            parser.parse(b"*1\r\n$16385\r\n", &limits),
            Err(ProtocolError::UnauthenticatedBulkLength)
        );
    }

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"01"), None);
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"-01"), None);
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b""), None);
        assert_eq!(parse_i64(b"-"), None);
    }
}
