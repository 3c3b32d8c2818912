//! Reading one [`Frame`] of any RESP2 or RESP3 type from the front of a buffer.
//!
//! Made for input that may be hostile (a server's replies to a client, a fuzzer's bytes):
//! - no recursion: nested aggregates are tracked on an explicit stack of at most [`DEPTH_MAX`]
//!   open aggregates, so no input can exhaust the thread's stack (nor, later, the recursive
//!   `Drop` of the frame handed back);
//! - nothing is reserved from a length header: an aggregate announcing two billion elements
//!   starts with room for [`PREALLOC_MAX`] and grows only as elements arrive, and a bulk string
//!   is copied only once all of it is in the buffer;
//! - every length has a limit ([`BULK_LEN_MAX`], [`AGGREGATE_LEN_MAX`], [`HEADER_LINE_MAX`],
//!   [`TEXT_LINE_MAX`]), so a peer cannot keep the caller buffering forever without error.
//!
//! One call costs O(n) in the bytes it looks at: each byte is examined a bounded number of
//! times. The decoder keeps no state between calls: when the buffer ends inside a frame it
//! returns `Ok(None)`, and the next call, on the same buffer grown by newly read bytes, parses
//! the frame again from its start. A caller reading a large frame in many small reads should
//! therefore wait for a good share of it before calling again (the server's own request path,
//! [`super::RequestParser`], is resumable instead).
//!
//! Beyond the RESP grammar, it is strict where leniency would let two peers read the same
//! bytes differently: lines end in CRLF exactly (a bare CR or LF is an error), and bulk
//! payloads must be followed by CRLF. Doubles accept whatever Rust's `f64` parser accepts
//! (`1.5`, `-2e10`, `inf`, `-inf`, `nan`, ...).

use super::limits::{DEFAULT_MAX_BULK_LEN, MAX_INLINE_LEN};
use super::request::parse_i64;
use super::Frame;
use bytes::Bytes;

/// Deepest nesting of aggregates (arrays, maps, sets, pushes, attributes) accepted. Real
/// replies nest a few levels (COMMAND DOCS is among the deepest, at about six); 128 leaves
/// ample room while bounding the depth of the returned tree, whose `Drop`, `Clone`, `Debug`
/// and `PartialEq` recurse.
pub const DEPTH_MAX: usize = 128;

/// Longest bulk string, verbatim string or blob error: Redis's `proto-max-bulk-len` default.
pub const BULK_LEN_MAX: usize = DEFAULT_MAX_BULK_LEN;

/// Most elements (or key-value pairs) in one aggregate: Redis rejects counts above `INT_MAX`.
pub const AGGREGATE_LEN_MAX: usize = i32::MAX as usize;

/// Longest line holding a length, integer, double, boolean or null, CRLF excluded: Redis's
/// `PROTO_INLINE_MAX_SIZE`. Valid such lines are a few dozen bytes at most.
pub const HEADER_LINE_MAX: usize = MAX_INLINE_LEN;

/// Longest simple string, error or big number line, CRLF excluded. These have no length
/// header, so this is the only bound on how much a caller buffers waiting for the CRLF; it
/// is the bulk limit, since such a line is a bulk string without its length.
pub const TEXT_LINE_MAX: usize = BULK_LEN_MAX;

/// Most elements reserved up front for an aggregate, whatever its header announces.
pub const PREALLOC_MAX: usize = 16;

/// Why bytes are not RESP. `at` is the byte offset in the decoded buffer where the problem
/// was found. After any of these the stream cannot be resynchronised: close the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unknown RESP type byte {byte:#04x} at offset {at}")]
    UnknownType { byte: u8, at: usize },
    #[error("expected CRLF at offset {at}")]
    ExpectedCrlf { at: usize },
    #[error("line at offset {at} is longer than the limit of {max} bytes")]
    LineTooLong { at: usize, max: usize },
    #[error("invalid length at offset {at}")]
    InvalidLength { at: usize },
    #[error("length {len} at offset {at} is over the limit of {max} bytes")]
    BulkTooLong { len: i64, at: usize, max: usize },
    #[error("aggregate of {len} elements at offset {at} is over the limit of {max}")]
    AggregateTooLong { len: i64, at: usize, max: usize },
    #[error("aggregates nested deeper than {max} levels at offset {at}")]
    TooDeep { at: usize, max: usize },
    #[error("invalid integer at offset {at}")]
    InvalidInteger { at: usize },
    #[error("invalid double at offset {at}")]
    InvalidDouble { at: usize },
    #[error("invalid boolean at offset {at} (expected 't' or 'f')")]
    InvalidBoolean { at: usize },
    #[error("invalid null at offset {at} (expected nothing between '_' and CRLF)")]
    InvalidNull { at: usize },
    #[error("invalid big number at offset {at}")]
    InvalidBigNumber { at: usize },
    #[error("invalid verbatim string at offset {at} (expected a 3-byte format and ':')")]
    InvalidVerbatim { at: usize },
}

/// Decodes the frame at the start of `buf`.
///
/// Returns `Ok(Some((frame, consumed)))` for a whole frame taking `consumed` bytes (bytes after
/// it are left alone), `Ok(None)` if `buf` ends inside a frame (every proper prefix of a valid
/// frame gives `Ok(None)`), and an error if the bytes cannot be RESP. See the module comment
/// for limits and cost.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame, usize)>, DecodeError> {
    // The aggregates opened and not yet complete, innermost last.
    let mut open: Vec<Open> = Vec::new();
    let mut pos = 0;
    loop {
        let Some((item, next)) = item(buf, pos)? else {
            return Ok(None);
        };
        let mut done = match item {
            Item::Done(frame) => frame,
            Item::Open(aggregate) => {
                if open.len() >= DEPTH_MAX {
                    return Err(DecodeError::TooDeep {
                        at: pos,
                        max: DEPTH_MAX,
                    });
                }
                open.push(aggregate);
                pos = next;
                continue;
            }
        };
        pos = next;
        // Hand the finished frame to its parent; a parent it completes goes to its own parent.
        loop {
            let Some(parent) = open.last_mut() else {
                return Ok(Some((done, pos)));
            };
            match parent.add(done) {
                Some(complete) => {
                    open.pop();
                    done = complete;
                }
                None => break,
            }
        }
    }
}

/// What one type byte and its line (and payload) gave.
enum Item {
    Done(Frame),
    Open(Open),
}

/// An aggregate waiting for elements. `remaining` is never zero: empty aggregates are done as
/// soon as their header is read.
enum Open {
    Sequence {
        kind: SequenceKind,
        items: Vec<Frame>,
        remaining: usize,
    },
    Pairs {
        attribute: bool,
        pairs: Vec<(Frame, Frame)>,
        key: Option<Frame>,
        remaining: usize,
    },
    /// An attribute whose pairs are all in, waiting for the frame it describes.
    Annotated { attrs: Vec<(Frame, Frame)> },
}

#[derive(Clone, Copy)]
enum SequenceKind {
    Array,
    Set,
    Push,
}

impl SequenceKind {
    fn frame(self, items: Vec<Frame>) -> Frame {
        match self {
            SequenceKind::Array => Frame::Array(items),
            SequenceKind::Set => Frame::Set(items),
            SequenceKind::Push => Frame::Push(items),
        }
    }
}

impl Open {
    /// Adds a finished element; returns the aggregate itself once that element completes it.
    fn add(&mut self, element: Frame) -> Option<Frame> {
        match self {
            Open::Sequence {
                kind,
                items,
                remaining,
            } => {
                items.push(element);
                *remaining -= 1;
                (*remaining == 0).then(|| kind.frame(std::mem::take(items)))
            }
            Open::Pairs {
                attribute,
                pairs,
                key,
                remaining,
            } => {
                let Some(k) = key.take() else {
                    *key = Some(element);
                    return None;
                };
                pairs.push((k, element));
                *remaining -= 1;
                if *remaining > 0 {
                    return None;
                }
                let pairs = std::mem::take(pairs);
                if *attribute {
                    *self = Open::Annotated { attrs: pairs };
                    None
                } else {
                    Some(Frame::Map(pairs))
                }
            }
            Open::Annotated { attrs } => Some(Frame::Attribute {
                attrs: std::mem::take(attrs),
                data: Box::new(element),
            }),
        }
    }
}

/// Reads the element whose type byte is at `pos`: a whole frame for scalars, or an open
/// aggregate. Returns the position after what it read, or `None` if the buffer ends first.
fn item(buf: &[u8], pos: usize) -> Result<Option<(Item, usize)>, DecodeError> {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    let start = pos + 1;
    let max = match kind {
        b'+' | b'-' | b'(' => TEXT_LINE_MAX,
        b':' | b',' | b'#' | b'_' | b'$' | b'!' | b'=' | b'*' | b'~' | b'>' | b'%' | b'|' => {
            HEADER_LINE_MAX
        }
        byte => return Err(DecodeError::UnknownType { byte, at: pos }),
    };
    let Some(end) = line(buf, start, max)? else {
        return Ok(None);
    };
    let text = &buf[start..end];
    let next = end + 2;
    let frame = match kind {
        b'+' => Frame::Simple(Bytes::copy_from_slice(text)),
        b'-' => Frame::Error(Bytes::copy_from_slice(text)),
        b'(' => {
            if !is_big_number(text) {
                return Err(DecodeError::InvalidBigNumber { at: pos });
            }
            Frame::BigNumber(Bytes::copy_from_slice(text))
        }
        b':' => Frame::Integer(parse_i64(text).ok_or(DecodeError::InvalidInteger { at: pos })?),
        b',' => Frame::Double(parse_double(text).ok_or(DecodeError::InvalidDouble { at: pos })?),
        b'#' => match text {
            b"t" => Frame::Boolean(true),
            b"f" => Frame::Boolean(false),
            _ => return Err(DecodeError::InvalidBoolean { at: pos }),
        },
        b'_' => {
            if !text.is_empty() {
                return Err(DecodeError::InvalidNull { at: pos });
            }
            Frame::Null
        }
        b'$' | b'!' | b'=' => return blob(buf, pos, kind, text, next),
        _ => return aggregate(pos, kind, text, next),
    };
    Ok(Some((Item::Done(frame), next)))
}

/// A length-prefixed payload (`$`, `!`, `=`) whose header line `text` ends at `data`.
fn blob(
    buf: &[u8],
    pos: usize,
    kind: u8,
    text: &[u8],
    data: usize,
) -> Result<Option<(Item, usize)>, DecodeError> {
    let len = parse_i64(text).ok_or(DecodeError::InvalidLength { at: pos })?;
    if len == -1 && kind == b'$' {
        return Ok(Some((Item::Done(Frame::NullBulk), data)));
    }
    if len < 0 {
        return Err(DecodeError::InvalidLength { at: pos });
    }
    if len as u64 > BULK_LEN_MAX as u64 {
        return Err(DecodeError::BulkTooLong {
            len,
            at: pos,
            max: BULK_LEN_MAX,
        });
    }
    let end = data.saturating_add(len as usize);
    if buf.len() < end.saturating_add(2) {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(DecodeError::ExpectedCrlf { at: end });
    }
    let payload = &buf[data..end];
    let frame = match kind {
        b'$' => Frame::Bulk(Bytes::copy_from_slice(payload)),
        b'!' => Frame::BlobError(Bytes::copy_from_slice(payload)),
        _ => match payload {
            [a, b, c, b':', text @ ..] => Frame::Verbatim {
                format: [*a, *b, *c],
                text: Bytes::copy_from_slice(text),
            },
            _ => return Err(DecodeError::InvalidVerbatim { at: pos }),
        },
    };
    Ok(Some((Item::Done(frame), end + 2)))
}

/// An aggregate header (`*`, `~`, `>`, `%`, `|`) whose count line is `text`.
fn aggregate(
    pos: usize,
    kind: u8,
    text: &[u8],
    next: usize,
) -> Result<Option<(Item, usize)>, DecodeError> {
    let len = parse_i64(text).ok_or(DecodeError::InvalidLength { at: pos })?;
    if len == -1 && kind == b'*' {
        return Ok(Some((Item::Done(Frame::NullArray), next)));
    }
    if len < 0 {
        return Err(DecodeError::InvalidLength { at: pos });
    }
    if len as u64 > AGGREGATE_LEN_MAX as u64 {
        return Err(DecodeError::AggregateTooLong {
            len,
            at: pos,
            max: AGGREGATE_LEN_MAX,
        });
    }
    let remaining = len as usize;
    let capacity = remaining.min(PREALLOC_MAX);
    let item = match kind {
        b'*' | b'~' | b'>' => {
            let kind = match kind {
                b'*' => SequenceKind::Array,
                b'~' => SequenceKind::Set,
                _ => SequenceKind::Push,
            };
            if remaining == 0 {
                Item::Done(kind.frame(Vec::new()))
            } else {
                Item::Open(Open::Sequence {
                    kind,
                    items: Vec::with_capacity(capacity),
                    remaining,
                })
            }
        }
        _ => {
            let attribute = kind == b'|';
            match (remaining, attribute) {
                (0, false) => Item::Done(Frame::Map(Vec::new())),
                (0, true) => Item::Open(Open::Annotated { attrs: Vec::new() }),
                _ => Item::Open(Open::Pairs {
                    attribute,
                    pairs: Vec::with_capacity(capacity),
                    key: None,
                    remaining,
                }),
            }
        }
    };
    Ok(Some((item, next)))
}

/// Finds the CRLF ending the line that starts at `start`, looking at no more than `max` bytes
/// of content. Returns the offset of its CR, or `None` if the buffer ends first.
fn line(buf: &[u8], start: usize, max: usize) -> Result<Option<usize>, DecodeError> {
    let rest = buf.get(start..).unwrap_or_default();
    let window = &rest[..rest.len().min(max.saturating_add(1))];
    match window.iter().position(|&b| b == b'\r' || b == b'\n') {
        Some(i) => {
            let at = start + i;
            match (buf[at], buf.get(at + 1)) {
                (b'\r', Some(b'\n')) => Ok(Some(at)),
                (b'\r', None) => Ok(None),
                (b'\r', Some(_)) => Err(DecodeError::ExpectedCrlf { at: at + 1 }),
                _ => Err(DecodeError::ExpectedCrlf { at }),
            }
        }
        None if rest.len() > max => Err(DecodeError::LineTooLong { at: start - 1, max }),
        None => Ok(None),
    }
}

/// `[+-]?[0-9]+`.
fn is_big_number(text: &[u8]) -> bool {
    let digits = match text.first() {
        Some(b'-' | b'+') => &text[1..],
        _ => text,
    };
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

fn parse_double(text: &[u8]) -> Option<f64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &'static [u8]) -> Bytes {
        Bytes::from_static(s)
    }

    /// Decodes `wire`, which must hold exactly one frame, and checks that every proper prefix
    /// of it asks for more bytes.
    fn whole(wire: &[u8]) -> Frame {
        for end in 0..wire.len() {
            assert_eq!(
                decode(&wire[..end]),
                Ok(None),
                "prefix of {end} bytes of {:?}",
                String::from_utf8_lossy(wire)
            );
        }
        let (frame, used) = decode(wire).unwrap().unwrap();
        assert_eq!(used, wire.len());
        frame
    }

    fn error(wire: &[u8]) -> DecodeError {
        decode(wire).unwrap_err()
    }

    #[test]
    fn resp2_fixtures() {
        assert_eq!(whole(b"+OK\r\n"), Frame::Simple(b(b"OK")));
        assert_eq!(whole(b"+\r\n"), Frame::Simple(b(b"")));
        assert_eq!(
            whole(b"-ERR unknown command 'x'\r\n"),
            Frame::Error(b(b"ERR unknown command 'x'"))
        );
        assert_eq!(whole(b":1000\r\n"), Frame::Integer(1000));
        assert_eq!(whole(b":-1\r\n"), Frame::Integer(-1));
        assert_eq!(
            whole(b":-9223372036854775808\r\n"),
            Frame::Integer(i64::MIN)
        );
        assert_eq!(whole(b"$5\r\nhello\r\n"), Frame::Bulk(b(b"hello")));
        assert_eq!(whole(b"$0\r\n\r\n"), Frame::Bulk(b(b"")));
        assert_eq!(whole(b"$4\r\na\r\nb\r\n"), Frame::Bulk(b(b"a\r\nb")));
        assert_eq!(whole(b"$-1\r\n"), Frame::NullBulk);
        assert_eq!(whole(b"*-1\r\n"), Frame::NullArray);
        assert_eq!(whole(b"*0\r\n"), Frame::Array(vec![]));
        assert_eq!(
            whole(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"),
            Frame::command(&[b"SET", b"k", b"v"])
        );
        assert_eq!(
            whole(b"*2\r\n*1\r\n:1\r\n*0\r\n"),
            Frame::Array(vec![
                Frame::Array(vec![Frame::Integer(1)]),
                Frame::Array(vec![])
            ])
        );
    }

    #[test]
    fn resp3_fixtures() {
        assert_eq!(whole(b"_\r\n"), Frame::Null);
        assert_eq!(
            whole(b"%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n"),
            Frame::Map(vec![
                (Frame::Simple(b(b"a")), Frame::Integer(1)),
                (Frame::Simple(b(b"b")), Frame::Integer(2)),
            ])
        );
        assert_eq!(whole(b"%0\r\n"), Frame::Map(vec![]));
        assert_eq!(
            whole(b"~3\r\n+orange\r\n+apple\r\n#t\r\n"),
            Frame::Set(vec![
                Frame::Simple(b(b"orange")),
                Frame::Simple(b(b"apple")),
                Frame::Boolean(true),
            ])
        );
        assert_eq!(
            whole(b">3\r\n+message\r\n+channel\r\n$5\r\nhello\r\n"),
            Frame::Push(vec![
                Frame::Simple(b(b"message")),
                Frame::Simple(b(b"channel")),
                Frame::Bulk(b(b"hello")),
            ])
        );
        assert_eq!(
            whole(b"=15\r\ntxt:Some string\r\n"),
            Frame::Verbatim {
                format: *b"txt",
                text: b(b"Some string")
            }
        );
        assert_eq!(
            whole(b"=4\r\nmkd:\r\n"),
            Frame::Verbatim {
                format: *b"mkd",
                text: b(b"")
            }
        );
        assert_eq!(
            whole(b"(3492890328409238509324850943850943825024385\r\n"),
            Frame::BigNumber(b(b"3492890328409238509324850943850943825024385"))
        );
        assert_eq!(whole(b"(-12\r\n"), Frame::BigNumber(b(b"-12")));
        assert_eq!(whole(b",1.23\r\n"), Frame::Double(1.23));
        assert_eq!(whole(b",10\r\n"), Frame::Double(10.0));
        assert_eq!(whole(b",-1.5e-3\r\n"), Frame::Double(-0.0015));
        assert_eq!(whole(b",1E+21\r\n"), Frame::Double(1e21));
        assert_eq!(whole(b",inf\r\n"), Frame::Double(f64::INFINITY));
        assert_eq!(whole(b",-inf\r\n"), Frame::Double(f64::NEG_INFINITY));
        assert!(matches!(whole(b",nan\r\n"), Frame::Double(v) if v.is_nan()));
        assert_eq!(whole(b"#t\r\n"), Frame::Boolean(true));
        assert_eq!(whole(b"#f\r\n"), Frame::Boolean(false));
        assert_eq!(
            whole(b"!21\r\nSYNTAX invalid syntax\r\n"),
            Frame::BlobError(b(b"SYNTAX invalid syntax"))
        );
    }

    #[test]
    fn attributes_wrap_the_reply_they_precede() {
        // The example of the RESP3 specification.
        let wire = b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n\
                     *2\r\n:2039123\r\n:9543892\r\n";
        assert_eq!(
            whole(wire),
            Frame::Attribute {
                attrs: vec![(
                    Frame::Simple(b(b"key-popularity")),
                    Frame::Map(vec![
                        (Frame::Bulk(b(b"a")), Frame::Double(0.1923)),
                        (Frame::Bulk(b(b"b")), Frame::Double(0.0012)),
                    ]),
                )],
                data: Box::new(Frame::Array(vec![
                    Frame::Integer(2039123),
                    Frame::Integer(9543892)
                ])),
            }
        );
        // Inside an aggregate an attribute is not an element: the array holds two.
        assert_eq!(
            whole(b"*2\r\n:1\r\n|1\r\n+ttl\r\n:3600\r\n:2\r\n"),
            Frame::Array(vec![
                Frame::Integer(1),
                Frame::Attribute {
                    attrs: vec![(Frame::Simple(b(b"ttl")), Frame::Integer(3600))],
                    data: Box::new(Frame::Integer(2)),
                },
            ])
        );
        assert_eq!(
            whole(b"|0\r\n_\r\n"),
            Frame::Attribute {
                attrs: vec![],
                data: Box::new(Frame::Null),
            }
        );
    }

    #[test]
    fn trailing_bytes_are_left_alone() {
        let (frame, used) = decode(b"+OK\r\n:1\r\n").unwrap().unwrap();
        assert_eq!((frame, used), (Frame::Simple(b(b"OK")), 5));
        let (frame, used) = decode(b"*1\r\n:1\r\n*garbage").unwrap().unwrap();
        assert_eq!((frame, used), (Frame::Array(vec![Frame::Integer(1)]), 8));
    }

    #[test]
    fn malformed_input_is_a_typed_error() {
        use DecodeError::*;
        assert_eq!(error(b"x"), UnknownType { byte: b'x', at: 0 });
        assert_eq!(error(b"*1\r\n@"), UnknownType { byte: b'@', at: 4 });
        assert_eq!(error(b"+OK\n"), ExpectedCrlf { at: 3 });
        assert_eq!(error(b"+OK\rx"), ExpectedCrlf { at: 4 });
        assert_eq!(error(b"$3\r\nabcde"), ExpectedCrlf { at: 7 });
        assert_eq!(error(b":12a\r\n"), InvalidInteger { at: 0 });
        assert_eq!(error(b":\r\n"), InvalidInteger { at: 0 });
        assert_eq!(error(b":+1\r\n"), InvalidInteger { at: 0 });
        assert_eq!(
            error(b":99999999999999999999\r\n"),
            InvalidInteger { at: 0 }
        );
        assert_eq!(error(b",\r\n"), InvalidDouble { at: 0 });
        assert_eq!(error(b",1.2.3\r\n"), InvalidDouble { at: 0 });
        assert_eq!(error(b"#x\r\n"), InvalidBoolean { at: 0 });
        assert_eq!(error(b"#tt\r\n"), InvalidBoolean { at: 0 });
        assert_eq!(error(b"_x\r\n"), InvalidNull { at: 0 });
        assert_eq!(error(b"(12a\r\n"), InvalidBigNumber { at: 0 });
        assert_eq!(error(b"(\r\n"), InvalidBigNumber { at: 0 });
        assert_eq!(error(b"=3\r\ntxt\r\n"), InvalidVerbatim { at: 0 });
        assert_eq!(error(b"=5\r\ntxt;x\r\n"), InvalidVerbatim { at: 0 });
        assert_eq!(error(b"$-2\r\n"), InvalidLength { at: 0 });
        assert_eq!(error(b"!-1\r\n"), InvalidLength { at: 0 });
        assert_eq!(error(b"=-1\r\n"), InvalidLength { at: 0 });
        assert_eq!(error(b"%-1\r\n"), InvalidLength { at: 0 });
        assert_eq!(error(b"~-1\r\n"), InvalidLength { at: 0 });
        assert_eq!(error(b"*x\r\n"), InvalidLength { at: 0 });
        assert_eq!(error(b"*01\r\n"), InvalidLength { at: 0 });
        assert_eq!(
            error(b"$536870913\r\n"),
            BulkTooLong {
                len: 536870913,
                at: 0,
                max: BULK_LEN_MAX
            }
        );
        assert_eq!(
            error(b">2147483648\r\n"),
            AggregateTooLong {
                len: 2147483648,
                at: 0,
                max: AGGREGATE_LEN_MAX
            }
        );
        assert_eq!(
            error(b"*3\r\n$-1\r\n:1\r\n*1\r\n\r\n"),
            UnknownType {
                byte: b'\r',
                at: 17
            }
        );
        assert_eq!(
            error(b"*3\r\n$-1\r\n:1\r\n*1\r\n\r\n").to_string(),
            "unknown RESP type byte 0x0d at offset 17"
        );
    }

    #[test]
    fn limits_hold_before_the_bytes_arrive() {
        // A header announcing a huge aggregate reserves nothing and waits.
        assert_eq!(decode(b"*2147483647\r\n"), Ok(None));
        assert_eq!(decode(b"$536870912\r\n"), Ok(None));
        // A line with no end is refused once it is longer than its limit, not buffered forever.
        let mut long = b":".to_vec();
        long.extend(std::iter::repeat_n(b'1', HEADER_LINE_MAX));
        assert_eq!(decode(&long), Ok(None));
        long.push(b'1');
        assert_eq!(
            decode(&long),
            Err(DecodeError::LineTooLong {
                at: 0,
                max: HEADER_LINE_MAX
            })
        );
        // A simple string may be long: only TEXT_LINE_MAX bounds it.
        let mut simple = b"+".to_vec();
        simple.extend(std::iter::repeat_n(b'a', HEADER_LINE_MAX * 2));
        assert_eq!(decode(&simple), Ok(None));
        simple.extend_from_slice(b"\r\n");
        assert_eq!(decode(&simple).unwrap().unwrap().1, simple.len());
    }

    #[test]
    fn nesting_is_bounded_without_recursion() {
        let nested = |depth: usize, kind: &[u8]| {
            let mut wire = kind.repeat(depth);
            wire.extend_from_slice(b":1\r\n");
            wire
        };
        for kind in [&b"*1\r\n"[..], b"~1\r\n", b">1\r\n", b"|0\r\n", b"%1\r\n"] {
            let wire = nested(DEPTH_MAX, kind);
            if kind == b"%1\r\n" {
                // The innermost map still wants its value.
                assert_eq!(decode(&wire), Ok(None));
            } else {
                assert_eq!(decode(&wire).unwrap().unwrap().1, wire.len());
            }
            assert_eq!(
                decode(&nested(DEPTH_MAX + 1, kind)),
                Err(DecodeError::TooDeep {
                    at: DEPTH_MAX * 4,
                    max: DEPTH_MAX
                })
            );
        }
        // A million levels: an error, not a stack overflow.
        assert!(matches!(
            decode(&nested(1_000_000, b"*1\r\n")),
            Err(DecodeError::TooDeep { .. })
        ));
    }

    #[test]
    fn huge_counts_reserve_little() {
        // An aggregate announcing two billion elements starts with room for a few.
        let Some((Item::Open(Open::Sequence { items, .. }), _)) =
            item(b"*2147483647\r\n", 0).unwrap()
        else {
            panic!("expected an open array")
        };
        assert_eq!(items.capacity(), PREALLOC_MAX);
        // 100k elements of it are in: decoding still waits, without error.
        let mut wire = b"*2147483647\r\n".to_vec();
        wire.extend(b"_\r\n".repeat(100_000));
        assert_eq!(decode(&wire), Ok(None));
    }
}
