//! The byte layout shared by topology commands and topology images: big-endian fixed-width
//! integers, length-prefixed text, 40-byte node ids. Explicit and serde-free so every node
//! encodes a value to the same bytes, and bounded so a hostile length cannot make us allocate.

use crate::cluster::id::{HexId, ID_LEN};
use crate::cluster::slots::SLOT_MAX;

/// What went wrong reading bytes that claim to be a command, an image or a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("input of {len} bytes is over the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("truncated: needed {needed} more bytes at offset {at}")]
    Truncated { at: usize, needed: usize },
    #[error("unknown format version {0}")]
    UnknownVersion(u8),
    #[error("unknown tag {0}")]
    UnknownTag(u8),
    #[error("bad node id at offset {0}")]
    BadNodeId(usize),
    #[error("slot {0} out of range")]
    BadSlot(u16),
    #[error("slot range {0}-{1} is reversed")]
    RangeReversed(u16, u16),
    #[error("{what}: {count} entries, at most {max}")]
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error("{what}: {len} bytes, at most {max}")]
    FieldTooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
    #[error("{0} is not UTF-8")]
    NotUtf8(&'static str),
    #[error("{0} trailing bytes")]
    TrailingBytes(usize),
    #[error("bad value {value} for {what}")]
    BadValue { what: &'static str, value: u64 },
}

/// Appends fields to a buffer. Writing never fails: callers bound what they write (the
/// command and image types check their own limits before encoding).
#[derive(Debug, Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub fn id(&mut self, id: &HexId) {
        self.buf.extend_from_slice(id.as_bytes());
    }

    /// Text up to u16::MAX bytes; longer text is cut (the types' own limits are far lower).
    pub fn text(&mut self, s: &str) {
        let bytes = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
        self.u16(bytes.len() as u16);
        self.buf.extend_from_slice(bytes);
    }

    pub fn bytes32(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.buf.extend_from_slice(b);
    }
}

/// Reads fields from a byte slice, each read checked against what is left.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `bytes`, refused when longer than `max`.
    pub fn new(bytes: &'a [u8], max: usize) -> Result<Self, CodecError> {
        if bytes.len() > max {
            return Err(CodecError::TooLarge {
                len: bytes.len(),
                max,
            });
        }
        Ok(Reader { bytes, at: 0 })
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.remaining() < n {
            return Err(CodecError::Truncated {
                at: self.at,
                needed: n - self.remaining(),
            });
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, CodecError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, CodecError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    pub fn id(&mut self) -> Result<HexId, CodecError> {
        let at = self.at;
        HexId::parse(self.take(ID_LEN)?).ok_or(CodecError::BadNodeId(at))
    }

    pub fn bool(&mut self, what: &'static str) -> Result<bool, CodecError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(CodecError::BadValue {
                what,
                value: v as u64,
            }),
        }
    }

    pub fn slot(&mut self) -> Result<u16, CodecError> {
        let s = self.u16()?;
        if s > SLOT_MAX {
            return Err(CodecError::BadSlot(s));
        }
        Ok(s)
    }

    /// An inclusive slot range; reversed ranges are refused here so no later check is needed.
    pub fn range(&mut self) -> Result<(u16, u16), CodecError> {
        let (start, end) = (self.slot()?, self.slot()?);
        if start > end {
            return Err(CodecError::RangeReversed(start, end));
        }
        Ok((start, end))
    }

    /// A count prefix, refused above `max` before anything is allocated for it.
    pub fn count(&mut self, what: &'static str, max: usize) -> Result<usize, CodecError> {
        let count = self.u32()? as usize;
        if count > max {
            return Err(CodecError::TooMany { what, count, max });
        }
        Ok(count)
    }

    pub fn text(&mut self, what: &'static str, max: usize) -> Result<String, CodecError> {
        let len = self.u16()? as usize;
        if len > max {
            return Err(CodecError::FieldTooLong { what, len, max });
        }
        let raw = self.take(len)?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| CodecError::NotUtf8(what))
    }

    pub fn bytes32(&mut self, what: &'static str, max: usize) -> Result<&'a [u8], CodecError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(CodecError::FieldTooLong { what, len, max });
        }
        self.take(len)
    }

    /// Every byte must be used: trailing bytes mean a format we do not understand.
    pub fn finish(self) -> Result<(), CodecError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(CodecError::TrailingBytes(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_what_was_written_and_refuses_short_input() {
        let mut w = Writer::default();
        w.u8(7);
        w.u16(300);
        w.u64(u64::MAX - 1);
        w.text("héllo");
        w.u16(5);
        w.u16(9);
        let mut r = Reader::new(&w.buf, 1024).unwrap();
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u16().unwrap(), 300);
        assert_eq!(r.u64().unwrap(), u64::MAX - 1);
        assert_eq!(r.text("t", 16).unwrap(), "héllo");
        assert_eq!(r.range().unwrap(), (5, 9));
        r.finish().unwrap();

        let mut r = Reader::new(&w.buf[..5], 1024).unwrap();
        r.u8().unwrap();
        r.u16().unwrap();
        assert_eq!(
            r.u64().unwrap_err(),
            CodecError::Truncated { at: 3, needed: 6 }
        );
        assert!(matches!(
            Reader::new(&w.buf, 4).unwrap_err(),
            CodecError::TooLarge { .. }
        ));
    }

    #[test]
    fn bounds_are_checked_before_allocating() {
        let mut w = Writer::default();
        w.u32(u32::MAX);
        let mut r = Reader::new(&w.buf, 16).unwrap();
        assert!(matches!(
            r.count("ranges", 10).unwrap_err(),
            CodecError::TooMany { .. }
        ));
        let mut w = Writer::default();
        w.u16(16384);
        assert_eq!(
            Reader::new(&w.buf, 16).unwrap().slot().unwrap_err(),
            CodecError::BadSlot(16384)
        );
    }
}
