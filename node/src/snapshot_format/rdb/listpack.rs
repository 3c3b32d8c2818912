//! Listpacks (Redis 7's compact list of strings and integers): a 6-byte header (total bytes
//! u32, element count u16, both little-endian; 65535 = "count it"), the entries, and 0xFF.
//! Each entry is an encoding byte (with the string length or the integer's width), the data,
//! and its own size again (1 to 5 bytes, 7 bits each) so that it can be walked backwards.
//!
//! [`entries`] checks all of it, including each entry's back-length, so a listpack that
//! passes is exactly what Redis's deep sanitization would accept.

use super::RdbError;

const HEADER_LEN: usize = 6;
const EOF: u8 = 0xFF;
/// The header's count when it is too large to hold.
const UNKNOWN_COUNT: u16 = u16::MAX;

/// One entry's value: listpacks keep integers in binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry<'a> {
    Str(&'a [u8]),
    Int(i64),
}

impl<'a> Entry<'a> {
    /// The entry as the string Redis would hand out (integers in decimal).
    pub fn to_bytes(self) -> Box<[u8]> {
        match self {
            Entry::Str(s) => s.into(),
            Entry::Int(n) => itoa::Buffer::new().format(n).as_bytes().into(),
        }
    }

    /// The entry as an integer (`lpGetIntegerIfValid`: strings that spell one count too).
    pub fn as_int(self) -> Option<i64> {
        match self {
            Entry::Int(n) => Some(n),
            Entry::Str(s) => std::str::from_utf8(s).ok()?.parse().ok(),
        }
    }
}

fn corrupt(what: &'static str, offset: usize) -> RdbError {
    RdbError::Corrupt { what, offset }
}

/// Sign-extends the low `bits` of `v`.
fn signed(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// How many bytes an entry of `len` bytes (encoding and data) takes to say its length.
fn backlen_size(len: usize) -> usize {
    crate::db::stream::node::backlen_bytes(len as u64) as usize
}

/// The back-length bytes of an entry of `len` bytes, as they are laid out (most
/// significant group first, every byte but the first with its top bit set).
fn put_backlen(out: &mut Vec<u8>, len: usize) {
    let n = backlen_size(len);
    for i in (0..n).rev() {
        let group = ((len >> (7 * i)) & 127) as u8;
        out.push(if i == n - 1 { group } else { group | 128 });
    }
}

fn read_backlen(bytes: &[u8]) -> usize {
    // Stored so that it reads right to left: the last byte holds the lowest 7 bits.
    bytes
        .iter()
        .fold(0usize, |acc, &b| (acc << 7) | usize::from(b & 127))
}

/// Every entry of `lp`, in order, after checking the whole structure.
pub fn entries(lp: &[u8]) -> Result<Vec<Entry<'_>>, RdbError> {
    if lp.len() < HEADER_LEN + 1 {
        return Err(corrupt("listpack shorter than its header", 0));
    }
    if le(&lp[..4]) != lp.len() as u64 {
        return Err(corrupt("listpack size differs from its header", 0));
    }
    let declared = le(&lp[4..6]) as u16;
    let mut out = Vec::new();
    let mut at = HEADER_LEN;
    loop {
        let Some(&first) = lp.get(at) else {
            return Err(corrupt("listpack without its end byte", at));
        };
        if first == EOF {
            if at + 1 != lp.len() {
                return Err(corrupt("bytes after the listpack end", at));
            }
            break;
        }
        let (header, data_len, kind) = encoding(lp, at)?;
        let data_at = at + header;
        let end = data_at
            .checked_add(data_len)
            .filter(|&e| e <= lp.len())
            .ok_or_else(|| corrupt("listpack entry past the end", at))?;
        let data = &lp[data_at..end];
        let entry = match kind {
            Kind::Str => Entry::Str(data),
            Kind::Inline(v) => Entry::Int(v),
            Kind::Int(bits) => Entry::Int(signed(le(data), bits)),
        };
        let len = end - at;
        let back = backlen_size(len);
        let back_bytes = lp
            .get(end..end + back)
            .ok_or_else(|| corrupt("listpack entry past the end", at))?;
        if read_backlen(back_bytes) != len {
            return Err(corrupt("listpack entry back-length is wrong", end));
        }
        out.push(entry);
        at = end + back;
    }
    if declared != UNKNOWN_COUNT && usize::from(declared) != out.len() {
        return Err(corrupt("listpack count differs from its header", 4));
    }
    Ok(out)
}

enum Kind {
    Str,
    /// An integer held in the encoding bytes themselves.
    Inline(i64),
    /// An integer of this many bits in the data.
    Int(u32),
}

/// The entry at `at`: header size, data size, and what the data is.
fn encoding(lp: &[u8], at: usize) -> Result<(usize, usize, Kind), RdbError> {
    let b = lp[at];
    let next = |i: usize| {
        lp.get(at + i)
            .copied()
            .ok_or_else(|| corrupt("listpack entry past the end", at))
    };
    Ok(if b & 0x80 == 0 {
        (1, 0, Kind::Inline(i64::from(b)))
    } else if b & 0xC0 == 0x80 {
        (1, usize::from(b & 0x3F), Kind::Str)
    } else if b & 0xE0 == 0xC0 {
        let v = (u64::from(b & 0x1F) << 8) | u64::from(next(1)?);
        (2, 0, Kind::Inline(signed(v, 13)))
    } else if b & 0xF0 == 0xE0 {
        (
            2,
            (usize::from(b & 0x0F) << 8) | usize::from(next(1)?),
            Kind::Str,
        )
    } else {
        match b {
            0xF0 => {
                let len = le(&[next(1)?, next(2)?, next(3)?, next(4)?]);
                (5, len as usize, Kind::Str)
            }
            0xF1 => (1, 2, Kind::Int(16)),
            0xF2 => (1, 3, Kind::Int(24)),
            0xF3 => (1, 4, Kind::Int(32)),
            0xF4 => (1, 8, Kind::Int(64)),
            _ => return Err(corrupt("unknown listpack encoding", at)),
        }
    })
}

/// Builds a listpack, choosing Redis's encodings (integers in the smallest width).
pub struct Writer {
    buf: Vec<u8>,
    count: usize,
}

impl Default for Writer {
    fn default() -> Self {
        Writer::new()
    }
}

impl Writer {
    pub fn new() -> Writer {
        Writer {
            buf: vec![0; HEADER_LEN],
            count: 0,
        }
    }

    /// Bytes so far (for node size limits).
    pub fn len(&self) -> usize {
        self.buf.len() + 1
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u64) & 0x1FFF;
            self.buf.push(0xC0 | (u >> 8) as u8);
            self.buf.push(u as u8);
        } else if i16::try_from(v).is_ok() {
            self.buf.push(0xF1);
            self.buf.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            self.buf.push(0xF2);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if i32::try_from(v).is_ok() {
            self.buf.push(0xF3);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            self.buf.push(0xF4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        self.finish_entry(start);
    }

    /// A string, stored as an integer when it is the canonical form of one (as Redis does).
    pub fn string(&mut self, s: &[u8]) {
        if let Some(v) = canonical_int(s) {
            return self.int(v);
        }
        let start = self.buf.len();
        let n = s.len();
        if n < 64 {
            self.buf.push(0x80 | n as u8);
        } else if n < 4096 {
            self.buf.push(0xE0 | (n >> 8) as u8);
            self.buf.push(n as u8);
        } else {
            self.buf.push(0xF0);
            self.buf.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.finish_entry(start);
    }

    fn finish_entry(&mut self, start: usize) {
        let len = self.buf.len() - start;
        put_backlen(&mut self.buf, len);
        self.count += 1;
    }

    /// `self`'s entries followed by `rest`'s.
    pub fn append(mut self, rest: Writer) -> Writer {
        self.buf.extend_from_slice(&rest.buf[HEADER_LEN..]);
        self.count += rest.count;
        self
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::try_from(self.count).unwrap_or(UNKNOWN_COUNT);
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// `s` as an i64 when it is exactly the decimal form of one (no sign on zero, no leading
/// zeros, no spaces), the strings Redis stores as integers.
pub fn canonical_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 || s == b"-0" {
        return None;
    }
    proto::resp::request::parse_i64(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn reads_a_redis_hash_listpack() {
        // HSET h_lp f v n 123 neg -70000 on redis-server 7.0.15, from its DUMP.
        let lp = hex("1c0000000600816602817602816e027b01836e656704f290eefe04ff");
        let e = entries(&lp).unwrap();
        assert_eq!(
            e,
            [
                Entry::Str(b"f"),
                Entry::Str(b"v"),
                Entry::Str(b"n"),
                Entry::Int(123),
                Entry::Str(b"neg"),
                Entry::Int(-70000)
            ]
        );
    }

    #[test]
    fn writes_what_it_reads() {
        let values: [&[u8]; 12] = [
            b"",
            b"0",
            b"127",
            b"128",
            b"-4096",
            b"4095",
            b"-32768",
            b"70000",
            b"-8388608",
            b"2147483647",
            b"9223372036854775807",
            b"007",
        ];
        let mut w = Writer::new();
        for v in values {
            w.string(v);
        }
        let long = vec![b'x'; 5000];
        w.string(&long);
        let lp = w.finish();
        let back: Vec<Box<[u8]>> = entries(&lp)
            .unwrap()
            .into_iter()
            .map(Entry::to_bytes)
            .collect();
        let mut expected: Vec<Box<[u8]>> = values.iter().map(|v| (*v).into()).collect();
        expected.push(long.into());
        assert_eq!(back, expected);
    }

    #[test]
    fn structural_damage_is_caught() {
        let mut w = Writer::new();
        w.string(b"abc");
        w.int(5);
        let lp = w.finish();
        assert!(entries(&lp).is_ok());
        let mut wrong_size = lp.clone();
        wrong_size[0] += 1;
        assert!(entries(&wrong_size).is_err());
        let mut wrong_count = lp.clone();
        wrong_count[4] = 3;
        assert!(entries(&wrong_count).is_err());
        let mut wrong_backlen = lp.clone();
        wrong_backlen[10] = 9;
        assert!(entries(&wrong_backlen).is_err());
        assert!(entries(&lp[..lp.len() - 1]).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            if bytes.len() >= 4 {
                let n = bytes.len() as u32;
                bytes[..4].copy_from_slice(&n.to_le_bytes());
            }
            let _ = entries(&bytes);
        }

        #[test]
        fn strings_round_trip(v in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..40)) {
            let mut w = Writer::new();
            for s in &v {
                w.string(s);
            }
            let lp = w.finish();
            let back: Vec<Vec<u8>> = entries(&lp).unwrap().into_iter().map(|e| e.to_bytes().into_vec()).collect();
            prop_assert_eq!(back, v);
        }
    }
}
