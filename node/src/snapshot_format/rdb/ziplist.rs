//! Ziplists (the compact lists of Redis before 7.0, still loaded by 7.0 from older RDB
//! versions): header (total bytes u32, tail offset u32, count u16, little-endian), entries,
//! 0xFF. Each entry: the previous entry's size (1 byte, or 0xFE and 4 bytes), an encoding
//! (string length in 6, 14 or 32 bits big-endian, or an integer kind), the data.

use super::listpack::Entry;
use super::RdbError;

const HEADER_LEN: usize = 10;
const END: u8 = 0xFF;

/// Every entry of `zl`, after checking its structure (sizes, previous-entry lengths, end).
pub fn entries(zl: &[u8]) -> Result<Vec<Entry<'_>>, RdbError> {
    let corrupt = |what, offset| RdbError::Corrupt { what, offset };
    if zl.len() < HEADER_LEN + 1 {
        return Err(corrupt("ziplist shorter than its header", 0));
    }
    let u32_at = |i: usize| u32::from_le_bytes([zl[i], zl[i + 1], zl[i + 2], zl[i + 3]]) as usize;
    if u32_at(0) != zl.len() {
        return Err(corrupt("ziplist size differs from its header", 0));
    }
    let declared = u16::from_le_bytes([zl[8], zl[9]]);
    let byte = |i: usize| {
        zl.get(i)
            .copied()
            .ok_or(corrupt("ziplist entry past the end", i))
    };
    let mut out = Vec::new();
    let mut at = HEADER_LEN;
    let mut previous_len = 0usize;
    loop {
        let first = byte(at)?;
        if first == END {
            if at + 1 != zl.len() {
                return Err(corrupt("bytes after the ziplist end", at));
            }
            break;
        }
        let (prevlen, mut p) = if first < 0xFE {
            (usize::from(first), at + 1)
        } else if first == 0xFE {
            let b = [byte(at + 1)?, byte(at + 2)?, byte(at + 3)?, byte(at + 4)?];
            (u32::from_le_bytes(b) as usize, at + 5)
        } else {
            return Err(corrupt("bad ziplist previous length", at));
        };
        if prevlen != previous_len {
            return Err(corrupt("ziplist previous length is wrong", at));
        }
        let enc = byte(p)?;
        p += 1;
        let (data_len, int_kind) = match enc >> 6 {
            0 => (usize::from(enc & 0x3F), None),
            1 => {
                let low = byte(p)?;
                p += 1;
                ((usize::from(enc & 0x3F) << 8) | usize::from(low), None)
            }
            2 if enc == 0x80 => {
                let b = [byte(p)?, byte(p + 1)?, byte(p + 2)?, byte(p + 3)?];
                p += 4;
                (u32::from_be_bytes(b) as usize, None)
            }
            _ => match enc {
                0xC0 => (2, Some(16)),
                0xD0 => (4, Some(32)),
                0xE0 => (8, Some(64)),
                0xF0 => (3, Some(24)),
                0xFE => (1, Some(8)),
                0xF1..=0xFD => (0, Some(0)),
                _ => return Err(corrupt("unknown ziplist encoding", p - 1)),
            },
        };
        let end = p
            .checked_add(data_len)
            .filter(|&e| e <= zl.len())
            .ok_or(corrupt("ziplist entry past the end", at))?;
        let data = &zl[p..end];
        out.push(match int_kind {
            None => Entry::Str(data),
            Some(0) => Entry::Int(i64::from(enc & 0x0F) - 1),
            Some(bits) => {
                let v = data
                    .iter()
                    .rev()
                    .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
                let shift = 64 - bits;
                Entry::Int(((v << shift) as i64) >> shift)
            }
        });
        previous_len = end - at;
        at = end;
    }
    if declared != u16::MAX && usize::from(declared) != out.len() {
        return Err(corrupt("ziplist count differs from its header", 8));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ziplist built by hand the way Redis 6 lays one out.
    fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0usize;
        for e in entries {
            let start = body.len();
            if prev < 254 {
                body.push(prev as u8);
            } else {
                body.push(0xFE);
                body.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            body.extend_from_slice(e);
            prev = body.len() - start;
        }
        let mut zl = Vec::new();
        let total = (HEADER_LEN + body.len() + 1) as u32;
        zl.extend_from_slice(&total.to_le_bytes());
        zl.extend_from_slice(&0u32.to_le_bytes());
        zl.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(END);
        zl
    }

    #[test]
    fn reads_every_encoding() {
        let long = [vec![0x40 | 1, 0x2C], vec![b'y'; 300]].concat();
        let zl = ziplist(&[
            b"\x03abc",
            &long,
            b"\xFE\x80",
            b"\xC0\x00\x80",
            b"\xF0\xff\xff\x7f",
            b"\xD0\x00\x00\x00\x80",
            b"\xE0\xff\xff\xff\xff\xff\xff\xff\x7f",
            b"\xF1",
            b"\xFD",
        ]);
        let e = entries(&zl).unwrap();
        assert_eq!(e[0], Entry::Str(b"abc"));
        assert_eq!(e[1], Entry::Str(&[b'y'; 300]));
        assert_eq!(
            &e[2..],
            [
                Entry::Int(-128),
                Entry::Int(-32768),
                Entry::Int(8_388_607),
                Entry::Int(i64::from(i32::MIN)),
                Entry::Int(i64::MAX),
                Entry::Int(0),
                Entry::Int(12)
            ]
        );
    }

    #[test]
    fn damage_is_caught() {
        let zl = ziplist(&[b"\x01a", b"\x01b"]);
        assert!(entries(&zl).is_ok());
        let mut wrong_prev = zl.clone();
        wrong_prev[HEADER_LEN + 3] = 9;
        assert!(entries(&wrong_prev).is_err());
        let mut wrong_count = zl.clone();
        wrong_count[8] = 5;
        assert!(entries(&wrong_count).is_err());
        let mut too_long = zl.clone();
        too_long[HEADER_LEN + 1] = 0x3F;
        assert!(entries(&too_long).is_err());
    }
}
