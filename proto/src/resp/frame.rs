//! One RESP value, any type of RESP2 or RESP3, as a tree: what [`super::decode`] returns and
//! [`super::encode`] writes.
//!
//! Wire forms, by variant (`\r\n` ends every line):
//!
//! | variant | wire |
//! |---|---|
//! | `Simple` | `+OK` |
//! | `Error` | `-ERR unknown command` |
//! | `Integer` | `:1000` |
//! | `Bulk` | `$5\r\nhello` |
//! | `Null` | `_` (RESP3) |
//! | `NullBulk` | `$-1` (RESP2) |
//! | `NullArray` | `*-1` (RESP2) |
//! | `Array` | `*2\r\n...` |
//! | `Map` | `%1\r\n<key><value>` |
//! | `Set` | `~2\r\n...` |
//! | `Push` | `>3\r\n...` |
//! | `Double` | `,1.23`, `,inf`, `,-inf`, `,nan` |
//! | `Boolean` | `#t`, `#f` |
//! | `BigNumber` | `(3492890328409238509324850943850943825024385` |
//! | `Verbatim` | `=15\r\ntxt:Some string` |
//! | `BlobError` | `!21\r\nSYNTAX invalid syntax` |
//! | `Attribute` | `\|1\r\n<key><value>` followed by the reply it annotates |
//!
//! Line-typed payloads (`Simple`, `Error`, `BigNumber`) are bytes, not `String`: RESP does not
//! promise UTF-8, and keeping bytes keeps decode-then-encode lossless.

use bytes::{Bytes, BytesMut};

/// A RESP2 or RESP3 value. See the module comment for each variant's wire form.
///
/// The three nulls are kept apart so that a decoded frame re-encodes to the same bytes; use
/// [`Frame::is_null`] to ask "is this any null".
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// `+<text>`: a status reply. Never holds CR or LF.
    Simple(Bytes),
    /// `-<text>`: an error reply, starting with its code (`ERR`, `WRONGTYPE`, ...). Never holds
    /// CR or LF.
    Error(Bytes),
    /// `:<n>`.
    Integer(i64),
    /// `$<len>\r\n<bytes>`: binary safe.
    Bulk(Bytes),
    /// `_`: RESP3's null.
    Null,
    /// `$-1`: RESP2's null bulk string (GET of a missing key).
    NullBulk,
    /// `*-1`: RESP2's null array (BLPOP timeout, EXEC aborted by WATCH).
    NullArray,
    /// `*<n>` followed by n frames.
    Array(Vec<Frame>),
    /// `%<n>` followed by n key-value pairs, in wire order (duplicates are kept as sent).
    Map(Vec<(Frame, Frame)>),
    /// `~<n>` followed by n frames, in wire order.
    Set(Vec<Frame>),
    /// `><n>` followed by n frames: out-of-band data (pub/sub messages, invalidations).
    Push(Vec<Frame>),
    /// `,<float>`: `inf`, `-inf` and `nan` included.
    Double(f64),
    /// `#t` or `#f`.
    Boolean(bool),
    /// `(<digits>`: an integer of any size, kept as its decimal text (`-` allowed in front).
    BigNumber(Bytes),
    /// `=<len>\r\n<fmt>:<text>`: text with a three-byte format (`txt`, `mkd`), which the length
    /// counts together with the colon.
    Verbatim { format: [u8; 3], text: Bytes },
    /// `!<len>\r\n<bytes>`: a binary-safe error.
    BlobError(Bytes),
    /// `|<n>` followed by n key-value pairs, then the frame they describe. On the wire an
    /// attribute is a prefix, not a value: it does not count as an element of an enclosing
    /// aggregate. Here it wraps the frame it precedes, so that frame keeps its place.
    Attribute {
        attrs: Vec<(Frame, Frame)>,
        data: Box<Frame>,
    },
}

impl Frame {
    /// A bulk string holding a copy of `data`.
    pub fn bulk(data: &[u8]) -> Frame {
        Frame::Bulk(Bytes::copy_from_slice(data))
    }

    /// A simple string (`+text`).
    pub fn simple(text: &str) -> Frame {
        Frame::Simple(Bytes::copy_from_slice(text.as_bytes()))
    }

    /// An error reply (`-text`); `text` starts with its code, as in `"ERR syntax error"`.
    pub fn error(text: &str) -> Frame {
        Frame::Error(Bytes::copy_from_slice(text.as_bytes()))
    }

    /// A client request: an array of bulk strings, as every client sends commands.
    ///
    /// `Frame::command(&[b"SET", b"k", b"v"])` encodes to
    /// `*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n`.
    pub fn command(args: &[&[u8]]) -> Frame {
        Frame::Array(args.iter().map(|arg| Frame::bulk(arg)).collect())
    }

    /// True for all three nulls: `_`, `$-1` and `*-1`.
    pub fn is_null(&self) -> bool {
        matches!(self, Frame::Null | Frame::NullBulk | Frame::NullArray)
    }

    /// True for `-` and `!` errors.
    pub fn is_error(&self) -> bool {
        matches!(self, Frame::Error(_) | Frame::BlobError(_))
    }

    /// The bytes of a string-like frame (simple, error, bulk, blob error, big number, verbatim
    /// text without its format), looking through an attribute; `None` for the other types.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Frame::Simple(b)
            | Frame::Error(b)
            | Frame::Bulk(b)
            | Frame::BlobError(b)
            | Frame::BigNumber(b) => Some(b),
            Frame::Verbatim { text, .. } => Some(text),
            Frame::Attribute { data, .. } => data.as_bytes(),
            _ => None,
        }
    }

    /// This frame's wire form, in a new buffer.
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::new();
        super::encode(self, &mut out);
        out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_build_what_they_say() {
        assert_eq!(
            Frame::command(&[b"GET", b"k"]),
            Frame::Array(vec![
                Frame::Bulk(Bytes::from_static(b"GET")),
                Frame::Bulk(Bytes::from_static(b"k")),
            ])
        );
        assert_eq!(
            Frame::simple("OK"),
            Frame::Simple(Bytes::from_static(b"OK"))
        );
        assert!(Frame::error("ERR x").is_error());
        assert!(Frame::BlobError(Bytes::new()).is_error());
        assert!(Frame::Null.is_null() && Frame::NullBulk.is_null() && Frame::NullArray.is_null());
        assert!(!Frame::Bulk(Bytes::new()).is_null());
        let attributed = Frame::Attribute {
            attrs: vec![],
            data: Box::new(Frame::bulk(b"v")),
        };
        assert_eq!(attributed.as_bytes(), Some(&b"v"[..]));
        assert_eq!(Frame::Integer(1).as_bytes(), None);
    }
}
