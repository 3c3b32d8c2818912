//! The payload of one ring record on a replication link: the replication offset of its first
//! stream byte, then the stream bytes. The Ring numbers records by ring position (which
//! includes headers and padding); the replica needs the stream's own numbering to order,
//! deduplicate and acknowledge, so every record carries it.
//!
//! Layout, little-endian: `0..8` first byte's offset (u64, from 1), then the bytes.

/// Bytes in front of the stream bytes.
pub const RECORD_PREFIX_LEN: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("replication record of {0} bytes is shorter than its {RECORD_PREFIX_LEN}-byte prefix")]
    Short(usize),
    #[error("replication record names offset 0 (stream bytes are numbered from 1)")]
    ZeroOffset,
}

/// Appends a record for `bytes` starting at stream offset `first_byte` to `out`.
pub fn encode_record(first_byte: u64, bytes: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&first_byte.to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Splits a record into its first byte's offset and its stream bytes.
pub fn decode_record(payload: &[u8]) -> Result<(u64, &[u8]), RecordError> {
    let Some((prefix, bytes)) = payload.split_first_chunk::<RECORD_PREFIX_LEN>() else {
        return Err(RecordError::Short(payload.len()));
    };
    let offset = u64::from_le_bytes(*prefix);
    if offset == 0 {
        return Err(RecordError::ZeroOffset);
    }
    Ok((offset, bytes))
}

/// Most stream bytes one record may carry on a ring whose largest payload is `max_payload`.
pub fn max_stream_bytes(max_payload: usize) -> usize {
    max_payload.saturating_sub(RECORD_PREFIX_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_short_or_zero() {
        let mut out = Vec::new();
        encode_record(42, b"*1\r\n$4\r\nPING\r\n", &mut out);
        assert_eq!(out.len(), RECORD_PREFIX_LEN + 14);
        assert_eq!(decode_record(&out), Ok((42, &b"*1\r\n$4\r\nPING\r\n"[..])));
        assert_eq!(decode_record(&out[..7]), Err(RecordError::Short(7)));
        let mut zero = Vec::new();
        encode_record(0, b"x", &mut zero);
        assert_eq!(decode_record(&zero), Err(RecordError::ZeroOffset));
        let mut empty = Vec::new();
        encode_record(9, b"", &mut empty);
        assert_eq!(decode_record(&empty), Ok((9, &b""[..])));
        assert_eq!(max_stream_bytes(2024), 2016);
        assert_eq!(max_stream_bytes(3), 0);
    }
}
