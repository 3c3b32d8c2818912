//! CRC-64 as Redis computes it over DUMP payloads and RDB files: the "Jones" polynomial
//! (0xad93d23594c935a9), reflected, initial value 0, no final xor. It is not the CRC-64/XZ
//! of our own format (`crc64fast`), so the two trailers tell the formats apart.
//!
//! Slicing-by-8: eight tables built at compile time, eight bytes per step.

/// The reflected form of 0xad93d23594c935a9.
const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

const fn tables() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static TABLES: [[u64; 256]; 8] = tables();

/// Redis's `crc64(0, bytes, len)`.
pub fn crc64_jones(bytes: &[u8]) -> u64 {
    let t = &TABLES;
    let mut crc = 0u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        let v = crc ^ u64::from_le_bytes(word);
        crc = t[7][(v & 0xff) as usize]
            ^ t[6][((v >> 8) & 0xff) as usize]
            ^ t[5][((v >> 16) & 0xff) as usize]
            ^ t[4][((v >> 24) & 0xff) as usize]
            ^ t[3][((v >> 32) & 0xff) as usize]
            ^ t[2][((v >> 40) & 0xff) as usize]
            ^ t[1][((v >> 48) & 0xff) as usize]
            ^ t[0][(v >> 56) as usize];
    }
    for &b in chunks.remainder() {
        crc = t[0][((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit by bit, the definition, to check the tables against.
    fn slow(bytes: &[u8]) -> u64 {
        let mut crc = 0u64;
        for &b in bytes {
            crc ^= u64::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ POLY
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    #[test]
    fn matches_redis_check_value() {
        // Redis's crc64.c self-test: crc64(0, "123456789") = e9c6d914c4b8d9ca.
        assert_eq!(crc64_jones(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64_jones(b""), 0);
    }

    #[test]
    fn slicing_agrees_with_the_bitwise_definition() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 31 + 7) as u8).collect();
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 100, 1000] {
            assert_eq!(crc64_jones(&data[..len]), slow(&data[..len]), "len {len}");
        }
    }
}
