//! The ring's memory layout and record format: pure functions, no I/O.
//!
//! Reader's region: `[ header (RING_HEADER_LEN) | data (data_len) ]`.
//!
//! Header, little-endian:
//! - `0..8`  tail: the doorbell. The writer WRITEs the absolute end offset of its last posted
//!   record here. It is only a hint: the reader looks at the record at its consumed offset
//!   whatever the tail says, and uses the largest tail it ever read only as evidence that a
//!   record it cannot validate should be there (a late duplicate of an older doorbell WRITE
//!   can move the word backwards; see "Duplicated WRITEs" below).
//! - `8..16` closed: the writer WRITEs [`CLOSED_MARK`] here when it ends the ring on purpose
//!   (its owner dropped the link), so a reader that would otherwise wait for records forever
//!   learns it at once (RDM providers report no dead peer).
//! - `16..64` reserved (zero). The header is one cache line so the doorbell word shares it with
//!   nothing the reader writes.
//!
//! Records live in the data area at `offset % data_len`, where `offset` is the absolute stream
//! position (it only grows). Record, little-endian, 8-byte aligned:
//! - `0..8`   offset: u64, the record's own absolute offset: its sequence number (strictly
//!   increasing, unique per record). A stale record from an earlier lap carries an offset
//!   `data_len * k` smaller, so it never validates at the reader's position.
//! - `8..12`  len: u32, payload bytes (for padding: bytes after the header up to the end).
//! - `12..16` kind: u32, [`KIND_DATA`] or [`KIND_PAD`]; 0 is invalid so zeroed memory never passes.
//! - `16..24` epoch: u64, the ring's generation, [`ring_epoch`] of its advert (address, length,
//!   key: a fresh registration per link), known to both sides without a handshake field. Bytes
//!   of another registration's session, or payload bytes that happen to look like a header at
//!   a predictable offset, do not carry it.
//! - `24..32` crc: u64, CRC-64 (crc64fast, the XZ variant of ECMA-182) over bytes `0..24` and the
//!   payload (padding: over `0..24` only).
//! - payload, then zeros up to the next multiple of [`RECORD_ALIGN`].
//!
//! No footer. The issue asked for sequence and checksum in a footer as well; under unordered
//! placement a footer proves nothing a header does not: the footer's bytes may land before the
//! payload's, so completeness is only ever shown by a checksum over every byte, which the
//! reader computes over its own copy of the record after copying it (a WRITE landing during
//! the copy fails the check). The header checksum covers offset (sequence), length, kind,
//! epoch and payload, so a footer would repeat them for 16 more bytes per record.
//!
//! Wrap-around: a record never splits. If it does not fit before the end of the data area the
//! writer fills the rest with one padding record and starts the record at data position 0. If
//! fewer than [`RECORD_HEADER_LEN`] bytes remain, no padding record fits: both sides skip them
//! by rule. A record's total size is capped at half the data area so that a record always fits
//! once the reader has caught up, whatever the padding before it.
//!
//! Reorder window: the data area itself. Records may land in any order anywhere in
//! `[consumed, consumed + data_len)`; the reader takes them strictly in offset order, each where
//! it lies, so the window needs no buffer beyond the ring.
//!
//! Duplicated WRITEs (EFA's SRD may place a WRITE's payload twice, the second time late):
//! - a duplicate of a record the reader has not taken yet, or took already, changes nothing (a
//!   taken offset is never taken again: `consumed` only grows);
//! - a duplicate landing after the writer reused that space in a later lap overwrites newer
//!   bytes with older ones. Those never validate at the reader's offset (older offset, or a
//!   checksum over mixed bytes fails), so nothing wrong is delivered, but the newer record is
//!   gone from the ring. Recovery: the writer keeps every record until it is acknowledged (its
//!   staging area mirrors the data area); a reader that finds no valid record where the
//!   largest tail it read says there should be one, for [`STALL_WAIT_MIN`] of the caller's
//!   time (doubling on each unproductive request up to [`STALL_WAIT_MAX`]), bumps a counter
//!   in the writer's ack region ([`ACK_RESEND_OFFSET`]); the writer, seeing it grow, WRITEs again every byte
//!   from its acknowledged offset to its posted end, and reuses none of that space until
//!   those WRITEs complete;
//! - a duplicate of a word WRITE (tail, consumed, progress, resend counter) can move the word
//!   back: every word is monotone, so readers of a word keep the largest value they saw, and
//!   the side that owns a word re-WRITEs it every [`WORD_REFRESH_INTERVAL`] of the caller's
//!   time (the reader its words; the writer its doorbell while it waits for an
//!   acknowledgement), so a value that was overwritten before anyone read it comes back.

use crate::error::{BusError, Result};
use crate::provider::RemoteRegion;
use std::time::Duration;

/// Bytes of the ring header in front of the data area.
pub const RING_HEADER_LEN: usize = 64;
/// Offset of the tail doorbell word within the header.
pub const TAIL_OFFSET: usize = 0;
/// Offset of the closed word within the header.
pub const CLOSED_OFFSET: usize = 8;
/// What the writer puts into the closed word; zeroed memory (0) means open.
pub const CLOSED_MARK: u64 = u64::from_le_bytes(*b"closed!\0");
/// Bytes of a record header.
pub const RECORD_HEADER_LEN: usize = 32;
/// Record start alignment: every u64 field is naturally aligned.
pub const RECORD_ALIGN: usize = 8;
/// Smallest data area: below a page the padding overhead dominates.
pub const RING_DATA_MIN: usize = 4096;
/// Largest data area: 1 GiB, far past any replication backlog window we ship.
pub const RING_DATA_MAX: usize = 1 << 30;
/// Bytes of the writer's ack region (one cache line): the consumed offset at
/// [`ACK_CONSUMED_OFFSET`], the resend counter at [`ACK_RESEND_OFFSET`].
pub const ACK_REGION_LEN: usize = 64;
/// Where in the writer's ack region the reader WRITEs its consumed offset.
pub const ACK_CONSUMED_OFFSET: usize = 0;
/// Where in the writer's ack region the reader WRITEs its resend counter: each increase asks
/// the writer to WRITE again everything past its acknowledged offset.
pub const ACK_RESEND_OFFSET: usize = 8;
/// Bytes of the ack region a writer needs at least (both words).
pub const ACK_WORDS_LEN: usize = 16;
/// How long the reader finds no valid record where the tail says one should be before it
/// asks for a resend: a record still landing (torn, reordered) completes within
/// microseconds, a WRITE lost to a late duplicate never does.
pub const STALL_WAIT_MIN: Duration = Duration::from_millis(1);
/// The longest wait between two resend requests: the wait doubles after each request that
/// brought nothing, so a reader behind a slow (not broken) link costs the writer at most one
/// ring of resent bytes per this long.
pub const STALL_WAIT_MAX: Duration = Duration::from_millis(256);
/// How long (the caller's time) after which a side WRITEs its monotone words again although
/// they did not change, so a late duplicate that moved one back is undone (each costs one
/// 8-byte WRITE). Time, not a count of polls: how often a caller polls depends on its load,
/// and a busy poller would otherwise refresh thousands of times a second for nothing.
pub const WORD_REFRESH_INTERVAL: Duration = Duration::from_millis(1);

/// Where a WRITE from the reader's side may land in the ack region without overlapping a word.
const _: () = assert!(ACK_CONSUMED_OFFSET + 8 <= ACK_RESEND_OFFSET);
const _: () = assert!(ACK_RESEND_OFFSET + 8 <= ACK_WORDS_LEN && ACK_WORDS_LEN <= ACK_REGION_LEN);
const _: () = assert!(STALL_WAIT_MIN.as_nanos() <= STALL_WAIT_MAX.as_nanos());

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
    pub epoch: u64,
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
            epoch: u64_at(16),
            crc: u64_at(24),
        }
    }
}

/// The checksum of a record: header bytes `0..24` then the payload.
pub fn record_crc(offset: u64, len: u32, kind: u32, epoch: u64, payload: &[u8]) -> u64 {
    let mut d = crc64fast::Digest::new();
    d.write(&offset.to_le_bytes());
    d.write(&len.to_le_bytes());
    d.write(&kind.to_le_bytes());
    d.write(&epoch.to_le_bytes());
    d.write(payload);
    d.sum64()
}

/// Encodes a header (the crc computed over `payload`).
pub fn encode_header(
    offset: u64,
    len: u32,
    kind: u32,
    epoch: u64,
    payload: &[u8],
) -> [u8; RECORD_HEADER_LEN] {
    let mut h = [0u8; RECORD_HEADER_LEN];
    h[0..8].copy_from_slice(&offset.to_le_bytes());
    h[8..12].copy_from_slice(&len.to_le_bytes());
    h[12..16].copy_from_slice(&kind.to_le_bytes());
    h[16..24].copy_from_slice(&epoch.to_le_bytes());
    h[24..32].copy_from_slice(&record_crc(offset, len, kind, epoch, payload).to_le_bytes());
    h
}

/// The ring's generation: a CRC-64 of its advert (address, length, key) under a tag, never 0.
/// Both sides derive it from the advert they already exchange.
pub fn ring_epoch(ring: &RemoteRegion) -> u64 {
    let mut d = crc64fast::Digest::new();
    d.write(b"ring epoch v1");
    d.write(&ring.addr.to_le_bytes());
    d.write(&ring.len.to_le_bytes());
    d.write(&ring.rkey.to_le_bytes());
    d.sum64().max(1)
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
        assert_eq!(record_total(0), 32);
        assert_eq!(record_total(1), 40);
        assert_eq!(record_total(8), 40);
        assert_eq!(record_total(9), 48);
        assert_eq!(max_payload(4096), 2048 - 32);
        assert!(record_total(max_payload(4096)) <= 4096 / 2);
        check_data_len(4096).unwrap();
        assert!(check_data_len(4095).is_err());
        assert!(check_data_len(4100).is_err());
        assert!(check_data_len(2048).is_err());
    }

    #[test]
    fn header_round_trips_and_crc_covers_payload() {
        let h = encode_header(4096, 3, KIND_DATA, 77, b"abc");
        let d = RecordHeader::decode(&h);
        assert_eq!((d.offset, d.len, d.kind, d.epoch), (4096, 3, KIND_DATA, 77));
        assert_eq!(d.crc, record_crc(4096, 3, KIND_DATA, 77, b"abc"));
        assert_ne!(d.crc, record_crc(4096, 3, KIND_DATA, 77, b"abd"));
        assert_ne!(d.crc, record_crc(0, 3, KIND_DATA, 77, b"abc"));
        assert_ne!(d.crc, record_crc(4096, 3, KIND_DATA, 78, b"abc"));
        // A zeroed header never validates: kind 0, and its crc field is not the crc of zeros.
        assert_ne!(record_crc(0, 0, 0, 0, b""), 0);
    }

    #[test]
    fn epochs_differ_per_registration_and_are_never_zero() {
        let a = RemoteRegion {
            addr: 0x1000,
            len: 4160,
            rkey: 7,
        };
        let b = RemoteRegion { rkey: 8, ..a };
        let c = RemoteRegion { addr: 0x2000, ..a };
        assert_ne!(ring_epoch(&a), ring_epoch(&b));
        assert_ne!(ring_epoch(&a), ring_epoch(&c));
        assert_eq!(ring_epoch(&a), ring_epoch(&a.clone()));
        assert_ne!(ring_epoch(&a), 0);
    }

    #[test]
    fn skip_rule() {
        assert_eq!(next_record_start(0, 4096), 0);
        assert_eq!(next_record_start(4096 - 32, 4096), 4096 - 32);
        assert_eq!(next_record_start(4096 - 24, 4096), 4096);
        assert_eq!(next_record_start(2 * 4096 - 8, 4096), 2 * 4096);
    }
}
