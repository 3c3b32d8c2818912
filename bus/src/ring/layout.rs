//! The ring's memory layout and record format: pure functions, no I/O.
//!
//! Reader's region: `[ header (RING_HEADER_LEN) | data (data_len) ]`.
//!
//! Header, little-endian:
//! - `0..8`  tail: the doorbell. The writer WRITEs the absolute end offset of its last posted
//!   record here. It is only a hint that something may be new: records are validated on their own.
//! - `8..16` closed: the writer WRITEs [`CLOSED_MARK`] here when it ends the ring on purpose
//!   (its owner dropped the link), so a reader that would otherwise wait for records forever
//!   learns it at once (RDM providers report no dead peer).
//! - `16..64` reserved (zero). The header is one cache line so the doorbell word shares it with
//!   nothing the reader writes.
//!
//! Records live in the data area at `offset % data_len`, where `offset` is the absolute stream
//! position (it only grows). Record, little-endian, 8-byte aligned:
//! - `0..8`   offset: u64, the record's own absolute offset. A stale record from an earlier lap
//!   carries an offset `data_len * k` smaller, so it never validates at the reader's position.
//! - `8..12`  len: u32, payload bytes (for padding: bytes after the header up to the end).
//! - `12..16` kind: u32, [`KIND_DATA`] or [`KIND_PAD`]; 0 is invalid so zeroed memory never passes.
//! - `16..24` crc: u64, CRC-64 (crc64fast, the XZ variant of ECMA-182) over bytes `0..16` and the
//!   payload (padding: over `0..16` only).
//! - payload, then zeros up to the next multiple of [`RECORD_ALIGN`].
//!
//! Wrap-around: a record never splits. If it does not fit before the end of the data area the
//! writer fills the rest with one padding record and starts the record at data position 0. If
//! fewer than [`RECORD_HEADER_LEN`] bytes remain, no padding record fits: both sides skip them
//! by rule. A record's total size is capped at half the data area so that a record always fits
//! once the reader has caught up, whatever the padding before it.

use crate::error::{BusError, Result};

/// Bytes of the ring header in front of the data area.
pub const RING_HEADER_LEN: usize = 64;
/// Offset of the tail doorbell word within the header.
pub const TAIL_OFFSET: usize = 0;
/// Offset of the closed word within the header.
pub const CLOSED_OFFSET: usize = 8;
/// What the writer puts into the closed word; zeroed memory (0) means open.
pub const CLOSED_MARK: u64 = u64::from_le_bytes(*b"closed!\0");
/// Bytes of a record header.
pub const RECORD_HEADER_LEN: usize = 24;
/// Record start alignment: every u64 field is naturally aligned.
pub const RECORD_ALIGN: usize = 8;
/// Smallest data area: below a page the padding overhead dominates.
pub const RING_DATA_MIN: usize = 4096;
/// Largest data area: 1 GiB, far past any replication backlog window we ship.
pub const RING_DATA_MAX: usize = 1 << 30;
/// Bytes of the writer's ack region (one cache line; the consumed offset is at 0).
pub const ACK_REGION_LEN: usize = 64;

pub const KIND_DATA: u32 = 1;
pub const KIND_PAD: u32 = 2;

const _: () = assert!(RECORD_HEADER_LEN.is_multiple_of(RECORD_ALIGN));
const _: () = assert!(RING_HEADER_LEN.is_multiple_of(RECORD_ALIGN));
const _: () = assert!(RING_DATA_MIN.is_multiple_of(RECORD_ALIGN));
const _: () = assert!(RING_DATA_MAX.is_multiple_of(RECORD_ALIGN));
const _: () = assert!(TAIL_OFFSET.is_multiple_of(8) && TAIL_OFFSET + 8 <= RING_HEADER_LEN);
const _: () = assert!(CLOSED_OFFSET.is_multiple_of(8) && CLOSED_OFFSET + 8 <= RING_HEADER_LEN);
const _: () = assert!(CLOSED_OFFSET != TAIL_OFFSET);
// The "fewer than a header remains" skip covers at most one header of bytes.
const _: () = assert!(RING_DATA_MIN / 2 > 2 * RECORD_HEADER_LEN);

/// Bytes a record with `payload` bytes occupies, header and alignment included.
pub const fn record_total(payload: usize) -> usize {
    (RECORD_HEADER_LEN + payload).div_ceil(RECORD_ALIGN) * RECORD_ALIGN
}

/// Largest payload of one record on a data area of `data_len` bytes.
pub const fn max_payload(data_len: usize) -> usize {
    (data_len / 2) / RECORD_ALIGN * RECORD_ALIGN - RECORD_HEADER_LEN
}

/// Checks a data area length against the limits and alignment.
pub fn check_data_len(data_len: usize) -> Result<()> {
    if !(RING_DATA_MIN..=RING_DATA_MAX).contains(&data_len)
        || !data_len.is_multiple_of(RECORD_ALIGN)
    {
        return Err(BusError::Invalid {
            what: "ring data length",
            reason: format!(
                "{data_len} is not a multiple of {RECORD_ALIGN} in {RING_DATA_MIN}..={RING_DATA_MAX}"
            ),
        });
    }
    Ok(())
}

/// A decoded record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub offset: u64,
    pub len: u32,
    pub kind: u32,
    pub crc: u64,
}

impl RecordHeader {
    pub fn decode(b: &[u8; RECORD_HEADER_LEN]) -> Self {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
        RecordHeader {
            offset: u64_at(0),
            len: u32_at(8),
            kind: u32_at(12),
            crc: u64_at(16),
        }
    }
}

/// The checksum of a record: header bytes `0..16` then the payload.
pub fn record_crc(offset: u64, len: u32, kind: u32, payload: &[u8]) -> u64 {
    let mut d = crc64fast::Digest::new();
    d.write(&offset.to_le_bytes());
    d.write(&len.to_le_bytes());
    d.write(&kind.to_le_bytes());
    d.write(payload);
    d.sum64()
}

/// Encodes a header (the crc computed over `payload`).
pub fn encode_header(offset: u64, len: u32, kind: u32, payload: &[u8]) -> [u8; RECORD_HEADER_LEN] {
    let mut h = [0u8; RECORD_HEADER_LEN];
    h[0..8].copy_from_slice(&offset.to_le_bytes());
    h[8..12].copy_from_slice(&len.to_le_bytes());
    h[12..16].copy_from_slice(&kind.to_le_bytes());
    h[16..24].copy_from_slice(&record_crc(offset, len, kind, payload).to_le_bytes());
    h
}

/// Where the record that follows absolute `offset` starts: `offset` itself, or the start of the
/// next lap when fewer than a header's bytes remain before the end (the skip rule).
pub fn next_record_start(offset: u64, data_len: usize) -> u64 {
    let pos = (offset % data_len as u64) as usize;
    let remaining = data_len - pos;
    if remaining < RECORD_HEADER_LEN {
        offset + remaining as u64
    } else {
        offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_limits() {
        assert_eq!(record_total(0), 24);
        assert_eq!(record_total(1), 32);
        assert_eq!(record_total(8), 32);
        assert_eq!(record_total(9), 40);
        assert_eq!(max_payload(4096), 2048 - 24);
        assert!(record_total(max_payload(4096)) <= 4096 / 2);
        check_data_len(4096).unwrap();
        assert!(check_data_len(4095).is_err());
        assert!(check_data_len(4100).is_err());
        assert!(check_data_len(2048).is_err());
    }

    #[test]
    fn header_round_trips_and_crc_covers_payload() {
        let h = encode_header(4096, 3, KIND_DATA, b"abc");
        let d = RecordHeader::decode(&h);
        assert_eq!((d.offset, d.len, d.kind), (4096, 3, KIND_DATA));
        assert_eq!(d.crc, record_crc(4096, 3, KIND_DATA, b"abc"));
        assert_ne!(d.crc, record_crc(4096, 3, KIND_DATA, b"abd"));
        assert_ne!(d.crc, record_crc(0, 3, KIND_DATA, b"abc"));
        // A zeroed header never validates: kind 0, and its crc field is not the crc of zeros.
        assert_ne!(record_crc(0, 0, 0, b""), 0);
    }

    #[test]
    fn skip_rule() {
        assert_eq!(next_record_start(0, 4096), 0);
        assert_eq!(next_record_start(4096 - 24, 4096), 4096 - 24);
        assert_eq!(next_record_start(4096 - 16, 4096), 4096);
        assert_eq!(next_record_start(2 * 4096 - 8, 4096), 2 * 4096);
    }
}
