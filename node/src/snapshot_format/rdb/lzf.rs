//! LZF decompression, for the strings Redis stores compressed (`RDB_ENC_LZF`): a sequence
//! of literal runs (control byte below 32: that many bytes plus one follow) and back
//! references (top 3 bits: length - 2, 7 meaning "plus the next byte"; low 5 bits and the
//! next byte: distance - 1 back into the output).
//!
//! Every step is checked against both ends, so a hostile input ends in `None`, never in a
//! read out of bounds; the output never grows past the length the payload declared.

/// Most output one input byte can describe: a 3-byte back reference yields 264 bytes.
pub const MAX_RATIO: usize = 88;

/// The `expected_len` bytes `input` decompresses to, or None if it is not LZF data of
/// exactly that length.
pub fn decompress(input: &[u8], expected_len: usize) -> Option<Vec<u8>> {
    if expected_len > input.len().saturating_mul(MAX_RATIO) {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(expected_len);
    let mut ip = 0usize;
    while ip < input.len() {
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            let literal = input.get(ip..ip + run)?;
            if out.len() + run > expected_len {
                return None;
            }
            out.extend_from_slice(literal);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(ip)?);
                ip += 1;
            }
            let low = usize::from(*input.get(ip)?);
            ip += 1;
            let distance = ((ctrl & 0x1f) << 8) + low + 1;
            let len = len + 2;
            let start = out.len().checked_sub(distance)?;
            if out.len() + len > expected_len {
                return None;
            }
            // Byte by byte: the reference may overlap what it produces (runs).
            for i in 0..len {
                let b = out[start + i];
                out.push(b);
            }
        }
    }
    (out.len() == expected_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decodes_redis_compressed_run() {
        // The value of SET s_lzf <100 x "a"> as redis-server 7.0.15 DUMPs it
        // (compressed 9 bytes, 100 long).
        let compressed = [0x01, 0x61, 0x61, 0xe0, 0x57, 0x00, 0x01, 0x61, 0x61];
        assert_eq!(decompress(&compressed, 100).unwrap(), vec![b'a'; 100]);
        assert!(decompress(&compressed, 99).is_none());
        assert!(decompress(&compressed, 101).is_none());
    }

    #[test]
    fn references_before_the_start_are_refused() {
        assert!(decompress(&[0x20, 0x05], 3).is_none());
        assert!(decompress(&[0x00], 1).is_none(), "literal past the input");
        assert!(
            decompress(&[0x00, b'a', 0xe0], 300).is_none(),
            "reference cut short"
        );
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(input in prop::collection::vec(any::<u8>(), 0..200), len in 0usize..20_000) {
            if let Some(out) = decompress(&input, len) {
                prop_assert_eq!(out.len(), len);
            }
        }
    }
}
