//! A cursor over RDB bytes: RDB's variable lengths, its strings (plain, integer-encoded,
//! LZF-compressed), doubles and millisecond times, every read checked against what is left.

use super::{lzf, RdbError};
use crate::db::packing::Packing;
use std::borrow::Cow;

/// Length prefix forms (rdb.h `RDB_6BITLEN` ... `RDB_ENCVAL`).
const LEN_6BIT: u8 = 0;
const LEN_14BIT: u8 = 1;
const LEN_32BIT: u8 = 0x80;
const LEN_64BIT: u8 = 0x81;
const ENCVAL: u8 = 3;
/// Special string encodings after an `ENCVAL` prefix.
pub const ENC_INT8: u8 = 0;
pub const ENC_INT16: u8 = 1;
pub const ENC_INT32: u8 = 2;
pub const ENC_LZF: u8 = 3;

pub struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
    /// What the values read are packed by.
    packing: Packing,
}

/// A length prefix: a plain length, or the kind of a specially encoded string.
enum Prefix {
    Len(u64),
    Encoded(u8),
}

impl<'a> Input<'a> {
    pub fn new(bytes: &'a [u8]) -> Input<'a> {
        Input::with_packing(bytes, Packing::DEFAULT)
    }

    pub fn with_packing(bytes: &'a [u8], packing: Packing) -> Input<'a> {
        Input {
            bytes,
            at: 0,
            packing,
        }
    }

    pub fn packing(&self) -> Packing {
        self.packing
    }

    pub fn offset(&self) -> usize {
        self.at
    }

    pub fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub fn corrupt(&self, what: &'static str) -> RdbError {
        RdbError::Corrupt {
            what,
            offset: self.at,
        }
    }

    pub fn take(&mut self, n: u64) -> Result<&'a [u8], RdbError> {
        match usize::try_from(n) {
            Ok(n) if n <= self.left() => {
                let out = &self.bytes[self.at..self.at + n];
                self.at += n;
                Ok(out)
            }
            _ => Err(RdbError::Truncated {
                offset: self.at,
                needed: n,
                left: self.left(),
            }),
        }
    }

    pub fn u8(&mut self) -> Result<u8, RdbError> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RdbError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64)?);
        Ok(out)
    }

    fn prefix(&mut self) -> Result<Prefix, RdbError> {
        let first = self.u8()?;
        Ok(match first >> 6 {
            ENCVAL => Prefix::Encoded(first & 0x3f),
            LEN_6BIT => Prefix::Len(u64::from(first & 0x3f)),
            LEN_14BIT => Prefix::Len((u64::from(first & 0x3f) << 8) | u64::from(self.u8()?)),
            _ if first == LEN_32BIT => Prefix::Len(u64::from(u32::from_be_bytes(self.array()?))),
            _ if first == LEN_64BIT => Prefix::Len(u64::from_be_bytes(self.array()?)),
            _ => return Err(self.corrupt("unknown length encoding")),
        })
    }

    /// A plain length (`rdbLoadLen`).
    pub fn length(&mut self) -> Result<u64, RdbError> {
        match self.prefix()? {
            Prefix::Len(n) => Ok(n),
            Prefix::Encoded(_) => Err(self.corrupt("encoded value where a length was expected")),
        }
    }

    /// A count of things each at least `min_bytes_each` long: refused when the bytes left
    /// cannot hold that many, so that it can size an allocation.
    pub fn count(&mut self, min_bytes_each: u64) -> Result<usize, RdbError> {
        let at = self.at;
        let n = self.length()?;
        if n.saturating_mul(min_bytes_each) > self.left() as u64 {
            return Err(RdbError::Truncated {
                offset: at,
                needed: n.saturating_mul(min_bytes_each),
                left: self.left(),
            });
        }
        Ok(n as usize)
    }

    /// A string (`rdbGenericLoadStringObject`): borrowed when stored verbatim, formatted
    /// when integer-encoded, decompressed when LZF.
    pub fn string(&mut self) -> Result<Cow<'a, [u8]>, RdbError> {
        match self.prefix()? {
            Prefix::Len(n) => Ok(Cow::Borrowed(self.take(n)?)),
            Prefix::Encoded(ENC_LZF) => {
                let compressed_len = self.length()?;
                let len = self.length()?;
                let compressed = self.take(compressed_len)?;
                let len = usize::try_from(len).map_err(|_| self.corrupt("LZF length"))?;
                lzf::decompress(compressed, len)
                    .map(Cow::Owned)
                    .ok_or_else(|| self.corrupt("invalid LZF compressed string"))
            }
            Prefix::Encoded(kind) => {
                let n = self.encoded_int(kind)?;
                Ok(Cow::Owned(
                    itoa::Buffer::new().format(n).as_bytes().to_vec(),
                ))
            }
        }
    }

    /// A string that is either an integer (kept as one) or bytes: a top-level string value
    /// keeps its integer form without a round trip through text.
    pub fn string_or_int(&mut self) -> Result<Result<i64, Cow<'a, [u8]>>, RdbError> {
        let at = self.at;
        if let Prefix::Encoded(kind @ (ENC_INT8 | ENC_INT16 | ENC_INT32)) = self.prefix()? {
            return Ok(Ok(self.encoded_int(kind)?));
        }
        self.at = at;
        Ok(Err(self.string()?))
    }

    fn encoded_int(&mut self, kind: u8) -> Result<i64, RdbError> {
        Ok(match kind {
            ENC_INT8 => i64::from(self.u8()? as i8),
            ENC_INT16 => i64::from(i16::from_le_bytes(self.array()?)),
            ENC_INT32 => i64::from(i32::from_le_bytes(self.array()?)),
            _ => return Err(self.corrupt("unknown string encoding")),
        })
    }

    /// An IEEE 754 double, little-endian (`rdbLoadBinaryDoubleValue`, ZSET_2).
    pub fn binary_double(&mut self) -> Result<f64, RdbError> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// A double as text behind a length byte, 253/254/255 meaning NaN/+inf/-inf
    /// (`rdbLoadDoubleValue`, the old ZSET type).
    pub fn text_double(&mut self) -> Result<f64, RdbError> {
        Ok(match self.u8()? {
            255 => f64::NEG_INFINITY,
            254 => f64::INFINITY,
            253 => f64::NAN,
            len => {
                let text = self.take(u64::from(len))?;
                parse_double(text).ok_or_else(|| self.corrupt("unreadable double"))?
            }
        })
    }

    /// Unix ms, 8 bytes little-endian (`rdbLoadMillisecondTime`).
    pub fn millis(&mut self) -> Result<u64, RdbError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A fixed-size raw field (stream IDs in PELs).
    pub fn raw<const N: usize>(&mut self) -> Result<[u8; N], RdbError> {
        self.array()
    }
}

/// A double written as text by Redis (`%.17g`, "inf", "-inf"), as listpack scores are.
pub fn parse_double(text: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(text).ok()?;
    match s {
        "inf" | "+inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        _ => s.parse::<f64>().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_in_every_form() {
        let mut i = Input::new(&[
            0x05, 0x41, 0x02, 0x80, 0, 1, 0, 0, 0x81, 0, 0, 0, 1, 0, 0, 0, 0,
        ]);
        assert_eq!(i.length().unwrap(), 5);
        assert_eq!(i.length().unwrap(), 0x102);
        assert_eq!(i.length().unwrap(), 0x10000);
        assert_eq!(i.length().unwrap(), 1 << 32);
        assert!(matches!(i.length(), Err(RdbError::Truncated { .. })));
        assert!(Input::new(&[0x82]).length().is_err());
    }

    #[test]
    fn integer_encoded_strings() {
        let mut i = Input::new(&[0xc0, 0xff, 0xc1, 0x39, 0x30, 0xc2, 0, 0, 0, 0x80]);
        assert_eq!(&*i.string().unwrap(), b"-1");
        assert_eq!(i.string_or_int().unwrap(), Ok(12345));
        assert_eq!(i.string_or_int().unwrap(), Ok(i64::from(i32::MIN)));
        assert!(Input::new(&[0xc5]).string().is_err());
    }

    #[test]
    fn counts_are_checked_against_what_is_left() {
        let mut i = Input::new(&[0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1]);
        assert!(matches!(i.count(1), Err(RdbError::Truncated { .. })));
        let mut i = Input::new(&[0x03, 1, 2, 3]);
        assert_eq!(i.count(1).unwrap(), 3);
        let mut i = Input::new(&[0x03, 1, 2, 3]);
        assert!(i.count(2).is_err());
    }
}
