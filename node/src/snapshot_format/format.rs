//! The snapshot format: how values, entries and whole files are laid out in bytes, with no
//! I/O policy (files, temp names, fsync live in `snapshot.rs` and `load.rs`). One encoding
//! serves snapshot files, DUMP/RESTORE payloads, and later full sync and slot migration.
//!
//! File layout (all integers little-endian; `varint` is LEB128, at most 10 bytes):
//!
//! ```text
//! "NODESNAP"  u16 version
//! record*     AUX   0xFA  name:bytes value:bytes     (informational, unknown names skipped)
//!             ENTRY 0xF0  expires_at:varint (ms since epoch, 0 = none) key:bytes value
//!             FUNCTION 0xF5 code:bytes                    (a function library, version 3)
//!             SELECT_DB 0xFE db:varint     (the entries that follow are in database `db`,
//!                                           version 4; before one, database 0)
//!             END   0xFF
//! u64 crc64 of every byte above (CRC-64/XZ, the `crc64fast` crate)
//! ```
//!
//! `bytes` is `len:varint` then `len` bytes. A value is a type tag then its body:
//! `STR bytes` | `INT zigzag-varint` | `LIST n:varint bytes*n` | `HASH n:varint (field value)*n`
//! | `SET n:varint bytes*n` | `ZSET n:varint (member score:f64)*n`, zset members in
//! (score, member) order | `STREAM ...` (version 2, `stream_format.rs`). Aggregates other
//! than streams are never empty.
//!
//! Decoding is bounded: every length is checked against the bytes that remain and a named
//! limit before anything is allocated, preallocation is capped, and there is no nesting, so a
//! hostile or corrupt input costs at most memory proportional to its own size and never panics.

use crate::db::packed::PackLimits;
use crate::db::packing::Packing;
use crate::db::value::{HashValue, ListValue, SetValue};
use crate::db::zset::ZSet;
use crate::db::{Key, Value};
use std::io::Read;

/// The first bytes of every snapshot file.
pub const MAGIC: &[u8; 8] = b"NODESNAP";
/// The format version written; readers accept 1..=VERSION. Bump it on any layout change.
pub const VERSION: u16 = 4;
/// The version that brought streams (values have not changed since; version 3 added the
/// files' FUNCTION record).
pub const STREAM_VERSION: u16 = 2;

/// Longest string, key or element accepted: the most `proto-max-bulk-len` can be set to,
/// so anything the node could have stored fits.
pub const MAX_STRING_LEN: u64 = 1 << 32;
/// Most elements in one aggregate. Far above what fits in memory; the real bound is the
/// input's size, checked separately.
pub const MAX_ELEMENTS: u64 = 1 << 32;
/// Most elements preallocated from a count read from the input: a lying count then costs
/// at most this much before the input runs out, and honest large values grow by doubling.
pub const PREALLOC_MAX: usize = 4096;
/// Longest AUX name or value: they are short labels, never data.
pub const MAX_AUX_LEN: u64 = 4096;
/// Longest function library code accepted (the libraries' own limit).
pub const MAX_FUNCTION_CODE_LEN: u64 = crate::node_state::functions::MAX_LIBRARY_CODE_BYTES as u64;
/// Longest LEB128 encoding of a u64.
pub const MAX_VARINT_LEN: usize = 10;

/// Value type tags.
pub mod tag {
    pub const STR: u8 = 0;
    pub const INT: u8 = 1;
    pub const LIST: u8 = 2;
    pub const HASH: u8 = 3;
    pub const SET: u8 = 4;
    pub const ZSET: u8 = 5;
    pub const STREAM: u8 = 6;
}

/// Record opcodes in a file.
pub mod op {
    pub const ENTRY: u8 = 0xF0;
    pub const FUNCTION: u8 = 0xF5;
    pub const SELECT_DB: u8 = 0xFE;
    pub const AUX: u8 = 0xFA;
    pub const END: u8 = 0xFF;
}

/// What is wrong with encoded bytes. Offsets count from the start of the input.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("truncated at offset {offset}: {needed} bytes needed, {available} left")]
    Truncated {
        offset: u64,
        needed: u64,
        available: u64,
    },
    #[error("not a snapshot (bad magic bytes)")]
    BadMagic,
    #[error("format version {found} is not supported (this node reads 1 to {VERSION})")]
    Version { found: u16 },
    #[error("checksum mismatch: stored {stored:#018x}, computed {computed:#018x}")]
    Checksum { stored: u64, computed: u64 },
    #[error("malformed varint at offset {offset}")]
    Varint { offset: u64 },
    #[error("{what} length {len} at offset {offset} exceeds the limit of {max}")]
    TooLong {
        what: &'static str,
        len: u64,
        max: u64,
        offset: u64,
    },
    #[error("unknown value type {tag} at offset {offset}")]
    UnknownType { tag: u8, offset: u64 },
    #[error("unknown record type {op:#04x} at offset {offset}")]
    UnknownRecord { op: u8, offset: u64 },
    #[error("empty {what} at offset {offset}")]
    Empty { what: &'static str, offset: u64 },
    #[error("duplicate {what} at offset {offset}")]
    Duplicate { what: &'static str, offset: u64 },
    #[error("database {db} at offset {offset} is past this node's {databases} databases (raise `databases`)")]
    DbOutOfRange {
        db: u64,
        databases: usize,
        offset: u64,
    },
    #[error("NaN score at offset {offset}")]
    NanScore { offset: u64 },
    #[error("{count} unexpected bytes after the end at offset {offset}")]
    Trailing { count: u64, offset: u64 },
    #[error("read error: {0}")]
    Io(#[from] std::io::Error),
}

/// CRC-64 of `bytes` (the checksum of files and payloads).
pub fn crc64(bytes: &[u8]) -> u64 {
    let mut digest = crc64fast::Digest::new();
    digest.write(bytes);
    digest.sum64()
}

// ---------------------------------------------------------------------------------------
// Encoding: appends to a Vec, cannot fail.

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends one value: its tag, then its body.
pub fn put_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Str(s) => {
            out.push(tag::STR);
            put_bytes(out, s);
        }
        Value::Int(n) => {
            out.push(tag::INT);
            put_varint(out, zigzag(*n));
        }
        Value::List(list) => {
            out.push(tag::LIST);
            put_varint(out, list.len() as u64);
            for e in list.iter() {
                put_bytes(out, e);
            }
        }
        Value::Hash(hash) => {
            out.push(tag::HASH);
            put_varint(out, hash.len() as u64);
            for (f, v) in hash.iter() {
                put_bytes(out, f);
                put_bytes(out, v);
            }
        }
        Value::Set(set) => {
            out.push(tag::SET);
            put_varint(out, set.len() as u64);
            for m in set.iter() {
                put_bytes(out, m);
            }
        }
        Value::ZSet(zset) => {
            out.push(tag::ZSET);
            put_varint(out, zset.len() as u64);
            let mut written = 0usize;
            for (member, score) in zset_pairs(zset) {
                put_bytes(out, member);
                out.extend_from_slice(&score.to_le_bytes());
                written += 1;
            }
            debug_assert_eq!(written, zset.len(), "zset count and pairs disagree");
        }
        Value::Stream(stream) => {
            out.push(tag::STREAM);
            super::stream_format::put_stream(out, stream);
        }
    }
}

/// The only read access the format makes into a sorted set (so that a change of ZSet's
/// representation touches this function and `zset_add` only).
fn zset_pairs(zset: &ZSet) -> impl Iterator<Item = (&[u8], f64)> + '_ {
    zset.iter()
}

/// The only write access the format makes into a sorted set; true if `member` was new.
/// A set over the sorted-set size limit reads as not new: the file is refused either way.
fn zset_add(zset: &mut ZSet, member: &[u8], score: f64, limits: PackLimits) -> bool {
    matches!(zset.insert(member, score, limits), Ok(None))
}

pub fn put_header(out: &mut Vec<u8>) {
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
}

pub fn put_aux(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    debug_assert!(name.len() as u64 <= MAX_AUX_LEN && value.len() as u64 <= MAX_AUX_LEN);
    out.push(op::AUX);
    put_bytes(out, name);
    put_bytes(out, value);
}

pub fn put_entry(out: &mut Vec<u8>, key: &[u8], expires_at: u64, value: &Value) {
    out.push(op::ENTRY);
    put_varint(out, expires_at);
    put_bytes(out, key);
    put_value(out, value);
}

/// The database of the entries that follow (a file without one has them all in database 0).
pub fn put_select_db(out: &mut Vec<u8>, db: usize) {
    out.push(op::SELECT_DB);
    put_varint(out, db as u64);
}

/// A function library's code (FUNCTION LOAD's payload): loading runs it again.
pub fn put_function(out: &mut Vec<u8>, code: &[u8]) {
    out.push(op::FUNCTION);
    put_bytes(out, code);
}

pub fn put_end(out: &mut Vec<u8>) {
    out.push(op::END);
}

// ---------------------------------------------------------------------------------------
// Decoding.

/// One record of a file.
#[derive(Debug)]
pub enum Record {
    Entry {
        key: Key,
        /// Ms since epoch, 0 for none.
        expires_at: u64,
        value: Value,
        /// Offset of the record (for error messages about it).
        offset: u64,
    },
    Aux {
        name: Box<[u8]>,
        value: Box<[u8]>,
    },
    Function {
        code: Box<[u8]>,
    },
    /// The entries that follow are in this database (the loader checks it against its
    /// `databases`).
    SelectDb {
        db: u64,
        offset: u64,
    },
    End,
}

/// Reads the format from `src`, consuming at most `len` bytes: the caller says how many
/// bytes the input holds (a file's length, minus its checksum), and every length read from
/// the input is checked against what remains before memory is allocated for it.
pub struct Decoder<R> {
    src: R,
    offset: u64,
    remaining: u64,
    /// What the values decoded are packed by.
    packing: Packing,
}

impl<R: Read> Decoder<R> {
    /// A decoder of `len` bytes from `src`; values packed by Redis's default thresholds
    /// unless [`Decoder::with_packing`] says otherwise.
    pub fn new(src: R, len: u64) -> Self {
        Decoder {
            src,
            offset: 0,
            remaining: len,
            packing: Packing::DEFAULT,
        }
    }

    /// Values packed by `packing` (the node's configured thresholds).
    pub fn with_packing(mut self, packing: Packing) -> Self {
        self.packing = packing;
        self
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Bytes the decoder may still consume.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    pub fn into_inner(self) -> R {
        self.src
    }

    fn truncated(&self, needed: u64) -> FormatError {
        FormatError::Truncated {
            offset: self.offset,
            needed,
            available: self.remaining,
        }
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<(), FormatError> {
        let n = buf.len() as u64;
        if n > self.remaining {
            return Err(self.truncated(n));
        }
        self.src.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                // The input is shorter than its caller said (a file cut while we read it).
                self.truncated(n)
            } else {
                FormatError::Io(e)
            }
        })?;
        self.offset += n;
        self.remaining -= n;
        Ok(())
    }

    fn u8(&mut self) -> Result<u8, FormatError> {
        let mut b = [0u8; 1];
        self.fill(&mut b)?;
        Ok(b[0])
    }

    pub fn u16(&mut self) -> Result<u16, FormatError> {
        let mut b = [0u8; 2];
        self.fill(&mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    pub fn u64(&mut self) -> Result<u64, FormatError> {
        let mut b = [0u8; 8];
        self.fill(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn f64(&mut self) -> Result<f64, FormatError> {
        Ok(f64::from_bits(self.u64()?))
    }

    pub fn varint(&mut self) -> Result<u64, FormatError> {
        let at = self.offset;
        let mut v = 0u64;
        for i in 0..MAX_VARINT_LEN {
            let b = self.u8()?;
            // The 10th byte holds only the top bit of a u64.
            if i == MAX_VARINT_LEN - 1 && b > 1 {
                return Err(FormatError::Varint { offset: at });
            }
            v |= u64::from(b & 0x7F) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(FormatError::Varint { offset: at })
    }

    /// A length or count, checked against `max` and against the bytes left, assuming each
    /// unit takes at least `min_bytes_each` bytes of input.
    pub(super) fn length_of(
        &mut self,
        what: &'static str,
        max: u64,
        min_bytes_each: u64,
    ) -> Result<usize, FormatError> {
        self.length(what, max, min_bytes_each)
    }

    fn length(
        &mut self,
        what: &'static str,
        max: u64,
        min_bytes_each: u64,
    ) -> Result<usize, FormatError> {
        let at = self.offset;
        let n = self.varint()?;
        if n > max {
            return Err(FormatError::TooLong {
                what,
                len: n,
                max,
                offset: at,
            });
        }
        let needed = n.saturating_mul(min_bytes_each);
        if needed > self.remaining {
            return Err(self.truncated(needed));
        }
        usize::try_from(n).map_err(|_| FormatError::TooLong {
            what,
            len: n,
            max: usize::MAX as u64,
            offset: at,
        })
    }

    fn bytes_max(&mut self, what: &'static str, max: u64) -> Result<Box<[u8]>, FormatError> {
        let n = self.length(what, max, 1)?;
        // Safe to allocate: n is at most the bytes that remain in the input.
        let mut buf = vec![0u8; n];
        self.fill(&mut buf)?;
        Ok(buf.into_boxed_slice())
    }

    pub fn bytes(&mut self) -> Result<Box<[u8]>, FormatError> {
        self.bytes_max("string", MAX_STRING_LEN)
    }

    /// An aggregate's element count: at least one, each element at least `min_bytes_each`.
    fn count(&mut self, what: &'static str, min_bytes_each: u64) -> Result<usize, FormatError> {
        let at = self.offset;
        let n = self.length(what, MAX_ELEMENTS, min_bytes_each)?;
        if n == 0 {
            return Err(FormatError::Empty { what, offset: at });
        }
        Ok(n)
    }

    /// One value: tag and body.
    pub fn value(&mut self) -> Result<Value, FormatError> {
        let at = self.offset;
        let t = self.u8()?;
        Ok(match t {
            tag::STR => Value::Str(self.bytes()?),
            tag::INT => Value::Int(unzigzag(self.varint()?)),
            tag::LIST => {
                let n = self.count("list", 1)?;
                // Packed by the loader's threshold until it outgrows it (`db::list`).
                let mut list = ListValue::new();
                for _ in 0..n {
                    list.push_back(&self.bytes()?, self.packing.list);
                }
                Value::List(Box::new(list))
            }
            tag::HASH => {
                let n = self.count("hash", 2)?;
                // Packed by the loader's thresholds until it outgrows them (`db::hash`).
                let mut hash = HashValue::default();
                for _ in 0..n {
                    let field_at = self.offset;
                    let field = self.bytes()?;
                    let value = self.bytes()?;
                    if !hash.insert(&field, &value, self.packing.hash) {
                        return Err(FormatError::Duplicate {
                            what: "hash field",
                            offset: field_at,
                        });
                    }
                }
                Value::Hash(Box::new(hash))
            }
            tag::SET => {
                let n = self.count("set", 1)?;
                // Packed by the loader's thresholds until it outgrows them (`db::set`).
                let mut set = SetValue::default();
                for _ in 0..n {
                    let member_at = self.offset;
                    if !set.insert(&self.bytes()?, self.packing.set) {
                        return Err(FormatError::Duplicate {
                            what: "set member",
                            offset: member_at,
                        });
                    }
                }
                Value::Set(Box::new(set))
            }
            tag::ZSET => {
                // Each pair: at least a 1-byte length and an 8-byte score.
                let n = self.count("zset", 9)?;
                let mut zset = ZSet::default();
                for _ in 0..n {
                    let member_at = self.offset;
                    let member = self.bytes()?;
                    let score_at = self.offset;
                    let score = self.f64()?;
                    if score.is_nan() {
                        return Err(FormatError::NanScore { offset: score_at });
                    }
                    if !zset_add(&mut zset, &member, score, self.packing.zset) {
                        return Err(FormatError::Duplicate {
                            what: "zset member",
                            offset: member_at,
                        });
                    }
                }
                Value::ZSet(Box::new(zset))
            }
            tag::STREAM => Value::Stream(Box::new(self.stream()?)),
            other => {
                return Err(FormatError::UnknownType {
                    tag: other,
                    offset: at,
                })
            }
        })
    }

    /// The file header; returns the version found.
    pub fn header(&mut self) -> Result<u16, FormatError> {
        let mut magic = [0u8; 8];
        self.fill(&mut magic)?;
        if &magic != MAGIC {
            return Err(FormatError::BadMagic);
        }
        let version = self.u16()?;
        if version == 0 || version > VERSION {
            return Err(FormatError::Version { found: version });
        }
        Ok(version)
    }

    /// The next record of a file.
    pub fn record(&mut self) -> Result<Record, FormatError> {
        let at = self.offset;
        match self.u8()? {
            op::ENTRY => {
                let expires_at = self.varint()?;
                let key = self.bytes_max("key", MAX_STRING_LEN)?;
                let value = self.value()?;
                Ok(Record::Entry {
                    key,
                    expires_at,
                    value,
                    offset: at,
                })
            }
            op::AUX => Ok(Record::Aux {
                name: self.bytes_max("aux name", MAX_AUX_LEN)?,
                value: self.bytes_max("aux value", MAX_AUX_LEN)?,
            }),
            op::FUNCTION => Ok(Record::Function {
                code: self.bytes_max("function code", MAX_FUNCTION_CODE_LEN)?,
            }),
            op::SELECT_DB => Ok(Record::SelectDb {
                db: self.varint()?,
                offset: at,
            }),
            op::END => Ok(Record::End),
            other => Err(FormatError::UnknownRecord {
                op: other,
                offset: at,
            }),
        }
    }

    /// Checks that every byte the caller announced was consumed.
    pub fn expect_end(&self) -> Result<(), FormatError> {
        if self.remaining != 0 {
            return Err(FormatError::Trailing {
                count: self.remaining,
                offset: self.offset,
            });
        }
        Ok(())
    }
}

/// Decodes exactly one value from `bytes` (no trailing bytes allowed), packed by Redis's
/// default thresholds.
pub fn value_from_slice(bytes: &[u8]) -> Result<Value, FormatError> {
    value_from_slice_packed(bytes, Packing::DEFAULT)
}

/// [`value_from_slice`] with aggregates packed by `packing`.
pub fn value_from_slice_packed(bytes: &[u8], packing: Packing) -> Result<Value, FormatError> {
    let mut d = Decoder::new(bytes, bytes.len() as u64).with_packing(packing);
    let v = d.value()?;
    d.expect_end()?;
    Ok(v)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::db::set::SetLimits;
    use proptest::prelude::*;

    /// True if two values hold the same data (Value has no PartialEq: scores are floats).
    pub fn same(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Str(x), Value::Str(y)) => x == y,
            (Value::Int(x), Value::Int(y)) => x == y,
            (Value::List(x), Value::List(y)) => x == y,
            (Value::Hash(x), Value::Hash(y)) => x.iter().eq(y.iter()),
            (Value::Set(x), Value::Set(y)) => x.iter().eq(y.iter()),
            (Value::ZSet(x), Value::ZSet(y)) => x
                .iter()
                .map(|(m, s)| (m, s.to_bits()))
                .eq(y.iter().map(|(m, s)| (m, s.to_bits()))),
            _ => false,
        }
    }

    fn elem() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(any::<u8>(), 0..24)
    }

    fn score() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>().prop_filter("no NaN", |f| !f.is_nan()),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(0.0),
            Just(-0.0),
            (-1000i32..1000).prop_map(f64::from),
        ]
    }

    pub fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            elem().prop_map(|e| Value::Str(e.into())),
            any::<i64>().prop_map(Value::Int),
            prop::collection::vec(elem(), 1..20)
                .prop_map(|v| Value::List(Box::new(v.iter().map(|e| &e[..]).collect()))),
            prop::collection::vec((elem(), elem()), 1..20).prop_map(|v| {
                let mut h = HashValue::default();
                for (f, x) in v {
                    h.insert(&f, &x, PackLimits::HASH_DEFAULT);
                }
                Value::Hash(Box::new(h))
            }),
            prop::collection::vec(elem(), 1..20).prop_map(|v| {
                let mut s = SetValue::default();
                for m in v {
                    s.insert(&m, SetLimits::DEFAULT);
                }
                Value::Set(Box::new(s))
            }),
            prop::collection::vec((elem(), score()), 1..20).prop_map(|v| {
                let mut z = ZSet::default();
                for (m, s) in v {
                    let _ = z.insert(&m, s, PackLimits::ZSET_DEFAULT);
                }
                Value::ZSet(Box::new(z))
            }),
        ]
    }

    fn encoded(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        put_value(&mut out, v);
        out
    }

    proptest! {
        #[test]
        fn values_round_trip(v in value()) {
            let bytes = encoded(&v);
            let back = value_from_slice(&bytes).unwrap();
            prop_assert!(same(&v, &back), "{v:?} came back as {back:?}");
        }

        #[test]
        fn varints_round_trip(n in any::<u64>()) {
            let mut out = Vec::new();
            put_varint(&mut out, n);
            prop_assert!(out.len() <= MAX_VARINT_LEN);
            let mut d = Decoder::new(&out[..], out.len() as u64);
            prop_assert_eq!(d.varint().unwrap(), n);
            prop_assert_eq!(d.remaining(), 0);
        }

        #[test]
        fn zigzag_round_trips(n in any::<i64>()) {
            prop_assert_eq!(unzigzag(zigzag(n)), n);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = value_from_slice(&bytes);
            let mut d = Decoder::new(&bytes[..], bytes.len() as u64);
            while let Ok(r) = d.record() {
                if matches!(r, Record::End) { break; }
            }
        }

        #[test]
        fn every_truncation_is_an_error(v in value()) {
            let bytes = encoded(&v);
            for cut in 0..bytes.len() {
                prop_assert!(value_from_slice(&bytes[..cut]).is_err(), "cut at {cut} decoded");
            }
        }
    }

    #[test]
    fn huge_lengths_are_refused_before_allocating() {
        // A string claiming 2^60 bytes, and aggregates claiming 2^60 and 2^32 elements,
        // followed by a few bytes: refused without allocating (this would abort otherwise).
        for (t, n) in [
            (tag::STR, 1u64 << 60),
            (tag::LIST, 1 << 60),
            (tag::HASH, 1 << 60),
            (tag::SET, 1 << 32),
            (tag::ZSET, (1 << 32) - 1),
        ] {
            let mut bytes = vec![t];
            put_varint(&mut bytes, n);
            bytes.extend_from_slice(&[1, 2, 3, 4]);
            let e = value_from_slice(&bytes).unwrap_err();
            assert!(
                matches!(
                    e,
                    FormatError::TooLong { .. } | FormatError::Truncated { .. }
                ),
                "{e}"
            );
        }
        let mut bytes = vec![op::ENTRY, 0];
        put_varint(&mut bytes, 1 << 60);
        let mut d = Decoder::new(&bytes[..], bytes.len() as u64);
        assert!(matches!(d.record(), Err(FormatError::TooLong { .. })));
    }

    #[test]
    fn function_records_round_trip_and_version_2_files_still_load() {
        let mut out = Vec::new();
        put_header(&mut out);
        put_function(&mut out, b"#!lua name=a\n");
        put_end(&mut out);
        let mut d = Decoder::new(&out[..], out.len() as u64);
        assert_eq!(d.header().unwrap(), VERSION);
        assert!(
            matches!(d.record(), Ok(Record::Function { code }) if &code[..] == b"#!lua name=a\n")
        );
        assert!(matches!(d.record(), Ok(Record::End)));
        let mut old = MAGIC.to_vec();
        old.extend_from_slice(&2u16.to_le_bytes());
        old.push(op::END);
        let mut d = Decoder::new(&old[..], old.len() as u64);
        assert_eq!(d.header().unwrap(), 2);
        assert!(matches!(d.record(), Ok(Record::End)));
        let mut out = Vec::new();
        put_select_db(&mut out, 9);
        let mut d = Decoder::new(&out[..], out.len() as u64);
        assert!(matches!(d.record(), Ok(Record::SelectDb { db: 9, .. })));
        let mut huge = vec![op::FUNCTION];
        put_varint(&mut huge, MAX_FUNCTION_CODE_LEN + 1);
        let mut d = Decoder::new(&huge[..], 1 << 30);
        assert!(matches!(d.record(), Err(FormatError::TooLong { .. })));
    }

    #[test]
    fn malformed_inputs_name_what_is_wrong() {
        let err = |b: &[u8]| value_from_slice(b).unwrap_err().to_string();
        assert!(err(&[9]).contains("unknown value type 9"));
        assert!(err(&[tag::LIST, 0]).contains("empty list"));
        assert!(err(&[tag::SET, 2, 1, b'a', 1, b'a']).contains("duplicate set member"));
        assert!(err(&[tag::HASH, 2, 1, b'a', 0, 1, b'a', 0]).contains("duplicate hash field"));
        let mut nan = vec![tag::ZSET, 1, 1, b'a'];
        nan.extend_from_slice(&f64::NAN.to_le_bytes());
        assert!(err(&nan).contains("NaN score"));
        assert!(err(&[tag::STR, 1, b'a', b'b']).contains("unexpected bytes"));
        assert!(err(&[
            tag::INT,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0x7F
        ])
        .contains("malformed varint"));
        let mut d = Decoder::new(&b"NODESNAQ\x01\x00"[..], 10);
        assert!(matches!(d.header(), Err(FormatError::BadMagic)));
        let mut d = Decoder::new(&b"NODESNAP\x09\x00"[..], 10);
        assert!(matches!(d.header(), Err(FormatError::Version { found: 9 })));
    }

    #[test]
    fn layout_is_stable() {
        // A byte fixture: changing it means changing VERSION (old files must still load).
        let mut h = HashValue::default();
        h.insert(b"f", b"v", PackLimits::HASH_DEFAULT);
        let mut out = Vec::new();
        put_entry(&mut out, b"k", 300, &Value::Hash(Box::new(h)));
        put_value(&mut out, &Value::Int(-2));
        assert_eq!(
            out,
            [
                0xF0,
                0xAC,
                0x02,
                1,
                b'k',
                tag::HASH,
                1,
                1,
                b'f',
                1,
                b'v',
                tag::INT,
                3
            ]
        );
    }
}
