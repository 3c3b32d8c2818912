//! Key to hash slot, exactly as Redis Cluster computes it: CRC16-XMODEM of the key, or of the
//! first non-empty `{...}` section of it, modulo 16384.

/// Number of hash slots in a cluster.
pub const SLOT_COUNT: usize = 16384;

const _: () = assert!(SLOT_COUNT.is_power_of_two());

/// CRC16-XMODEM (poly 0x1021, init 0), eight bytes per step ("slicing-by-8").
///
/// Why not a byte at a time: every command hashes its keys, and the byte loop is one long
/// chain of dependent table lookups (perf: most of `lock_for`'s time, 7% of a pipelined GET).
/// CRC is linear, so an 8-byte block's CRC is the XOR of each byte's CRC shifted by the
/// bytes after it (`CRC16_SLICES[k]`: a byte followed by k zero bytes); the eight lookups are
/// independent. The running CRC enters the block XORed into its first two bytes.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    let mut blocks = bytes.chunks_exact(8);
    for block in &mut blocks {
        let t = &CRC16_SLICES;
        let [hi, lo] = crc.to_be_bytes();
        crc = t[7][(block[0] ^ hi) as usize]
            ^ t[6][(block[1] ^ lo) as usize]
            ^ t[5][block[2] as usize]
            ^ t[4][block[3] as usize]
            ^ t[3][block[4] as usize]
            ^ t[2][block[5] as usize]
            ^ t[1][block[6] as usize]
            ^ t[0][block[7] as usize];
    }
    crc16_bytewise(crc, blocks.remainder())
}

/// The classic one-byte-per-step CRC16-XMODEM, continuing from `crc`.
fn crc16_bytewise(mut crc: u16, bytes: &[u8]) -> u16 {
    for &b in bytes {
        crc = (crc << 8) ^ CRC16_SLICES[0][(((crc >> 8) as u8) ^ b) as usize];
    }
    crc
}

/// `CRC16_SLICES[0]` is the usual table (CRC of one byte); `[k]` is the CRC of that byte
/// followed by k zero bytes.
const CRC16_SLICES: [[u16; 256]; 8] = {
    let mut t = [[0u16; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
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
            // One more zero byte after it.
            t[k][i] = (prev << 8) ^ t[0][(prev >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    t
};

/// The part of a key that is hashed: the content of the first `{...}` if it is non-empty,
/// otherwise the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = find_byte(key, b'{') {
        if let Some(len) = find_byte(&key[open + 1..], b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// Where `byte` first occurs in `bytes`, eight bytes per step.
///
/// Why not `position`: every keyed command looks for a `{` through its whole key (nearly
/// always absent), and the byte loop was ~100 instructions of a 16-byte key, more than the
/// CRC itself (callgrind, pipelined SET). A word XORed with the byte repeated has a zero
/// byte where the byte was; `(w - 0x01..01) & !w & 0x80..80` flags every zero byte, and
/// wrongly flags only bytes above a true zero (the borrow), so the lowest flag (the first
/// byte in memory, little-endian) is the first match.
fn find_byte(bytes: &[u8], byte: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let repeated = ONES * u64::from(byte);
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word) ^ repeated;
        let zero_bytes = word.wrapping_sub(ONES) & !word & HIGHS;
        if zero_bytes != 0 {
            return Some(at + (zero_bytes.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let rest = chunks.remainder();
    rest.iter().position(|&b| b == byte).map(|i| at + i)
}

/// The hash slot of a key.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOT_COUNT as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_reference_check_value() {
        // The XMODEM check value from the CRC catalogue, also quoted by the cluster spec.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn eight_bytes_at_a_time_equals_one_byte_at_a_time() {
        // Every length across the block boundaries, with bytes that exercise every table.
        let data: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(167) ^ (i >> 3)) as u8)
            .collect();
        for start in 0..9 {
            for end in start..data.len() {
                let bytes = &data[start..end];
                assert_eq!(
                    crc16(bytes),
                    crc16_bytewise(0, bytes),
                    "bytes {start}..{end}"
                );
            }
        }
    }

    #[test]
    fn slots_match_redis() {
        // Values observed from `CLUSTER KEYSLOT` on redis-server 7.0.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"key:000000000000"), key_slot(b"key:000000000000"));
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
    }

    #[test]
    fn find_byte_finds_the_first_occurrence_at_every_place() {
        // Every length across the word boundaries, the byte at every place, with a second
        // occurrence after it and bytes around it that differ from it by one (a borrow).
        for len in 0..40 {
            let mut bytes: Vec<u8> = (0..len)
                .map(|i| if i % 2 == 0 { b'z' } else { b'|' })
                .collect();
            assert_eq!(find_byte(&bytes, b'{'), None, "len {len}");
            for at in 0..len {
                let saved = bytes[at];
                bytes[at] = b'{';
                if at + 3 < len {
                    bytes[at + 3] = b'{';
                }
                assert_eq!(find_byte(&bytes, b'{'), Some(at), "len {len} at {at}");
                assert_eq!(
                    find_byte(&bytes, b'{'),
                    bytes.iter().position(|&b| b == b'{')
                );
                if at + 3 < len {
                    bytes[at + 3] = if (at + 3) % 2 == 0 { b'z' } else { b'|' };
                }
                bytes[at] = saved;
            }
        }
        // Bytes with the high bit set and zero bytes, looked for and around.
        let bytes = [0u8, 0x80, 0xff, 0x7b, 0x7a, 0, 0xfb, 0x7b, 0x7b, 0x00];
        for byte in [0u8, 0x80, 0xff, 0x7b, 0x7a, 0xfb, 0x7c] {
            assert_eq!(
                find_byte(&bytes, byte),
                bytes.iter().position(|&b| b == byte),
                "byte {byte:#x}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn find_byte_agrees_with_a_byte_loop(
            // A small alphabet, so that most inputs hold the byte, some several times;
            // neighbours of `{` and bytes with the high bit set test the borrow.
            picks in proptest::collection::vec(0usize..6, 0..70),
            wanted in 0usize..6,
        ) {
            const ALPHABET: [u8; 6] = [0x00, b'{', b'|', 0x80, 0xfb, 0xff];
            let bytes: Vec<u8> = picks.iter().map(|&i| ALPHABET[i]).collect();
            let byte = ALPHABET[wanted];
            proptest::prop_assert_eq!(
                find_byte(&bytes, byte),
                bytes.iter().position(|&b| b == byte)
            );
        }
    }

    #[test]
    fn empty_or_unclosed_tags_hash_the_whole_key() {
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"foo{bar"), b"foo{bar");
    }
}
