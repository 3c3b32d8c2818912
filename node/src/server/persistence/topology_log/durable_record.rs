//! One record of the topology log file: kind (1 byte), payload length (u32 LE), record
//! checksum (u64 LE, CRC-64/XZ over kind, length and payload), header checksum (u32 LE, the
//! low half of the CRC-64 over the 13 bytes before it), then the payload: a raft protobuf
//! message. The checksums let a load tell a record cut short by a crash from one damaged
//! later; the header's own one keeps a damaged length from passing for a record that runs
//! past the end of the file (which would look like a crash mid-write).

use crate::cluster::consensus::durable_error::DurableError;
use crate::cluster::consensus::log::STEP_BYTES_MAX;

pub const HEADER_LEN: usize = 1 + 4 + 8 + 4;

/// Largest payload: what one peer message may carry (a snapshot with raft's framing), since
/// every record holds something that came in one (or the node's own, smaller, snapshot).
pub const RECORD_BYTES_MAX: usize = STEP_BYTES_MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// Term, vote and commit index.
    HardState = 1,
    /// One log entry; it replaces any held at its index or after (raft's append).
    Entry = 2,
    /// A snapshot; it replaces every entry held.
    Snapshot = 3,
}

impl RecordKind {
    pub fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(RecordKind::HardState),
            2 => Some(RecordKind::Entry),
            3 => Some(RecordKind::Snapshot),
            _ => None,
        }
    }
}

/// Appends one framed record to `out`.
pub fn encode(kind: RecordKind, payload: &[u8], out: &mut Vec<u8>) -> Result<(), DurableError> {
    if payload.len() > RECORD_BYTES_MAX {
        return Err(DurableError::RecordTooLarge {
            len: payload.len(),
            max: RECORD_BYTES_MAX,
        });
    }
    let len = payload.len() as u32;
    out.push(kind as u8);
    out.extend_from_slice(&len.to_le_bytes());
    let start = out.len();
    out.extend_from_slice(&checksum(kind as u8, len, payload).to_le_bytes());
    let head = header_checksum(&out[start - 5..]);
    out.extend_from_slice(&head.to_le_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// A record's header as read, not yet checked.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    pub kind: u8,
    pub len: u32,
    crc: u64,
    /// Whether the header's own checksum holds.
    intact: bool,
}

impl Header {
    pub fn parse(bytes: &[u8; HEADER_LEN]) -> Self {
        let mut len = [0u8; 4];
        len.copy_from_slice(&bytes[1..5]);
        let mut crc = [0u8; 8];
        crc.copy_from_slice(&bytes[5..13]);
        let mut head = [0u8; 4];
        head.copy_from_slice(&bytes[13..17]);
        Header {
            kind: bytes[0],
            len: u32::from_le_bytes(len),
            crc: u64::from_le_bytes(crc),
            intact: header_checksum(&bytes[..13]) == u32::from_le_bytes(head),
        }
    }

    /// Whether kind and length are as written (the payload is checked by [`Self::matches`]).
    pub fn is_intact(&self) -> bool {
        self.intact
    }

    /// Whether `payload` is the one this header was written with.
    pub fn matches(&self, payload: &[u8]) -> bool {
        self.intact
            && payload.len() == self.len as usize
            && checksum(self.kind, self.len, payload) == self.crc
    }
}

fn header_checksum(bytes: &[u8]) -> u32 {
    let mut digest = crc64fast::Digest::new();
    digest.write(bytes);
    digest.sum64() as u32
}

fn checksum(kind: u8, len: u32, payload: &[u8]) -> u64 {
    let mut digest = crc64fast::Digest::new();
    digest.write(&[kind]);
    digest.write(&len.to_le_bytes());
    digest.write(payload);
    digest.sum64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_any_flipped_bit_is_noticed() {
        let mut out = Vec::new();
        encode(RecordKind::Entry, b"payload", &mut out).unwrap();
        let header = Header::parse(out[..HEADER_LEN].try_into().unwrap());
        assert_eq!(RecordKind::from_byte(header.kind), Some(RecordKind::Entry));
        assert!(header.matches(&out[HEADER_LEN..]));
        for bit in 0..out.len() * 8 {
            let mut bad = out.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let h = Header::parse(bad[..HEADER_LEN].try_into().unwrap());
            assert!(!h.matches(&bad[HEADER_LEN..]), "bit {bit} went unnoticed");
        }
    }

    #[test]
    fn an_oversized_payload_is_refused() {
        let mut out = Vec::new();
        let big = vec![0u8; RECORD_BYTES_MAX + 1];
        assert_eq!(
            encode(RecordKind::Snapshot, &big, &mut out).unwrap_err(),
            DurableError::RecordTooLarge {
                len: RECORD_BYTES_MAX + 1,
                max: RECORD_BYTES_MAX
            }
        );
        assert!(out.is_empty());
    }
}
