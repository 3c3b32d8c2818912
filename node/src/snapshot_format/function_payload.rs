//! FUNCTION DUMP / RESTORE payloads: the libraries' codes, versioned and checksummed.
//!
//! ```text
//! count:varint (len:varint code)*count   u16 version   u64 crc64 of every byte before it
//! ```
//!
//! Only codes travel, as in Redis's RDB: a restore runs each one again to learn its
//! functions. Decoding is bounded by the libraries' own limits.

use super::format::{crc64, put_bytes, put_varint, Decoder};
use crate::node_state::functions::{MAX_LIBRARIES, MAX_LIBRARY_CODE_BYTES, MAX_TOTAL_CODE_BYTES};

/// The payload version written and the only one read.
pub const VERSION: u16 = 1;
/// Most bytes a payload may have: every library at its limit, plus framing.
pub const MAX_PAYLOAD_BYTES: usize = MAX_TOTAL_CODE_BYTES + 64 * 1024;

/// Why a payload was refused, in Redis's words where Redis has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("ERR payload version or checksum are wrong")]
    VersionOrChecksum,
    #[error("ERR payload of {0} bytes is over the limit of {MAX_PAYLOAD_BYTES} bytes")]
    TooLarge(usize),
    #[error("ERR given payload is not a valid function dump")]
    Malformed,
}

/// The payload of `codes`.
pub fn encode<'a>(codes: impl ExactSizeIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, codes.len() as u64);
    for code in codes {
        put_bytes(&mut out, code);
    }
    out.extend_from_slice(&VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The codes a payload holds.
pub fn decode(payload: &[u8]) -> Result<Vec<Box<[u8]>>, PayloadError> {
    if payload.len() > MAX_PAYLOAD_BYTES {
        return Err(PayloadError::TooLarge(payload.len()));
    }
    let Some(body_len) = payload.len().checked_sub(10) else {
        return Err(PayloadError::VersionOrChecksum);
    };
    let (body, trailer) = payload.split_at(body_len);
    let version = u16::from_le_bytes([trailer[0], trailer[1]]);
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&trailer[2..]);
    if version != VERSION || u64::from_le_bytes(stored) != crc64(&payload[..body_len + 2]) {
        return Err(PayloadError::VersionOrChecksum);
    }
    let mut d = Decoder::new(body, body.len() as u64);
    let count = d.varint().map_err(|_| PayloadError::Malformed)?;
    if count > MAX_LIBRARIES as u64 {
        return Err(PayloadError::Malformed);
    }
    let mut codes = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let code = d.bytes().map_err(|_| PayloadError::Malformed)?;
        if code.len() > MAX_LIBRARY_CODE_BYTES {
            return Err(PayloadError::Malformed);
        }
        codes.push(code);
    }
    d.expect_end().map_err(|_| PayloadError::Malformed)?;
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_damage_is_refused() {
        let codes: Vec<&[u8]> = vec![b"#!lua name=a\n", b"#!lua name=b\nx"];
        let payload = encode(codes.iter().copied());
        let back = decode(&payload).unwrap();
        assert_eq!(back.iter().map(|c| &c[..]).collect::<Vec<_>>(), codes);
        let mut bad = payload.clone();
        bad[3] ^= 1;
        assert_eq!(decode(&bad), Err(PayloadError::VersionOrChecksum));
        assert_eq!(decode(b"bad_payload"), Err(PayloadError::VersionOrChecksum));
        assert_eq!(decode(b""), Err(PayloadError::VersionOrChecksum));
        assert!(matches!(
            decode(&vec![0u8; MAX_PAYLOAD_BYTES + 1]),
            Err(PayloadError::TooLarge(_))
        ));
        assert_eq!(decode(&encode(std::iter::empty())).unwrap().len(), 0);
    }
}
