//! Intsets (small sets of integers): encoding width (2, 4 or 8) as u32, element count as
//! u32, then the elements, sorted ascending, each little-endian in that width.

use super::RdbError;

const HEADER_LEN: usize = 8;

/// The members of `blob`, checked: a known width, a size that matches the count, and
/// strictly ascending members (so no duplicates).
pub fn members(blob: &[u8]) -> Result<Vec<i64>, RdbError> {
    let corrupt = |what, offset| RdbError::Corrupt { what, offset };
    if blob.len() < HEADER_LEN {
        return Err(corrupt("intset shorter than its header", 0));
    }
    let mut word = [0u8; 4];
    word.copy_from_slice(&blob[..4]);
    let width = u32::from_le_bytes(word) as usize;
    word.copy_from_slice(&blob[4..8]);
    let count = u32::from_le_bytes(word) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(corrupt("unknown intset encoding", 0));
    }
    if (blob.len() - HEADER_LEN) != count.saturating_mul(width) {
        return Err(corrupt("intset size differs from its count", 4));
    }
    let mut out = Vec::with_capacity(count);
    for (i, chunk) in blob[HEADER_LEN..].chunks_exact(width).enumerate() {
        let v = match width {
            2 => i64::from(i16::from_le_bytes([chunk[0], chunk[1]])),
            4 => i64::from(i32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]])),
            _ => {
                let mut b = [0u8; 8];
                b.copy_from_slice(chunk);
                i64::from_le_bytes(b)
            }
        };
        if out.last().is_some_and(|&prev| prev >= v) {
            return Err(corrupt("intset out of order", HEADER_LEN + i * width));
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_redis_intset() {
        // SADD set_int 1 -5 70000 5000000000 on redis-server 7.0.15 (8-byte width).
        let mut blob = vec![8, 0, 0, 0, 4, 0, 0, 0];
        for v in [-5i64, 1, 70000, 5_000_000_000] {
            blob.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(members(&blob).unwrap(), [-5, 1, 70000, 5_000_000_000]);
        let two = [2, 0, 0, 0, 2, 0, 0, 0, 0xff, 0xff, 1, 0];
        assert_eq!(members(&two).unwrap(), [-1, 1]);
    }

    #[test]
    fn damage_is_caught() {
        assert!(
            members(&[2, 0, 0, 0, 2, 0, 0, 0, 1, 0, 1, 0]).is_err(),
            "duplicate"
        );
        assert!(
            members(&[2, 0, 0, 0, 3, 0, 0, 0, 1, 0, 2, 0]).is_err(),
            "short"
        );
        assert!(members(&[3, 0, 0, 0, 0, 0, 0, 0]).is_err(), "width");
        assert!(
            members(&[2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]).is_err(),
            "huge count"
        );
        assert!(members(&[2, 0, 0]).is_err());
    }
}
