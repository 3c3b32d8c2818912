//! One ring record on a replication link: a kind byte, then that kind's body. Stream bytes and
//! a full sync's snapshot travel over the same ring, in order, so the replica must tell them
//! apart without guessing.
//!
//! Layout, little-endian:
//! - `1` stream: a [`super::record`] (first byte's offset u64, the stream bytes);
//! - `2` snapshot begin: the snapshot's replication offset u64, total length u64, CRC-64 u64;
//! - `3` snapshot chunk: the position of its first byte in the snapshot u64, the bytes;
//! - `4` ping: no body. The primary sends one when it has sent nothing for a while, so that a
//!   replica can tell an idle primary from a gone one (Redis: `repl-ping-replica-period`).

use super::record::{decode_record, encode_record, max_stream_bytes, RecordError};

const KIND_STREAM: u8 = 1;
const KIND_SNAPSHOT_BEGIN: u8 = 2;
const KIND_SNAPSHOT_CHUNK: u8 = 3;
const KIND_PING: u8 = 4;
/// The kind byte in front of every body.
pub const FRAME_KIND_LEN: usize = 1;
const BEGIN_BODY_LEN: usize = 24;
const CHUNK_PREFIX_LEN: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Stream bytes whose first byte is number `first_byte`.
    Stream { first_byte: u64, bytes: &'a [u8] },
    /// A snapshot taken at replication `offset` follows: `total_len` bytes with CRC-64 `crc`.
    SnapshotBegin {
        offset: u64,
        total_len: u64,
        crc: u64,
    },
    /// Snapshot bytes starting at position `at` of the snapshot.
    SnapshotChunk { at: u64, bytes: &'a [u8] },
    /// The primary is alive and had nothing to send.
    Ping,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("empty replication frame")]
    Empty,
    #[error("unknown replication frame kind {0}")]
    UnknownKind(u8),
    #[error("replication frame of kind {kind} has a {len}-byte body, which does not fit it")]
    BadLength { kind: u8, len: usize },
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// Appends `frame` to `out`.
pub fn encode_frame(frame: &Frame<'_>, out: &mut Vec<u8>) {
    match *frame {
        Frame::Stream { first_byte, bytes } => {
            out.push(KIND_STREAM);
            encode_record(first_byte, bytes, out);
        }
        Frame::SnapshotBegin {
            offset,
            total_len,
            crc,
        } => {
            out.push(KIND_SNAPSHOT_BEGIN);
            out.extend_from_slice(&offset.to_le_bytes());
            out.extend_from_slice(&total_len.to_le_bytes());
            out.extend_from_slice(&crc.to_le_bytes());
        }
        Frame::SnapshotChunk { at, bytes } => {
            out.push(KIND_SNAPSHOT_CHUNK);
            out.extend_from_slice(&at.to_le_bytes());
            out.extend_from_slice(bytes);
        }
        Frame::Ping => out.push(KIND_PING),
    }
}

/// Reads a frame out of a ring record's payload.
pub fn decode_frame(payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    let (&kind, body) = payload.split_first().ok_or(FrameError::Empty)?;
    let bad = || FrameError::BadLength {
        kind,
        len: body.len(),
    };
    match kind {
        KIND_STREAM => {
            let (first_byte, bytes) = decode_record(body)?;
            Ok(Frame::Stream { first_byte, bytes })
        }
        KIND_SNAPSHOT_BEGIN => {
            let words: &[u8; BEGIN_BODY_LEN] = body.try_into().map_err(|_| bad())?;
            let word = |i: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&words[i * 8..i * 8 + 8]);
                u64::from_le_bytes(w)
            };
            Ok(Frame::SnapshotBegin {
                offset: word(0),
                total_len: word(1),
                crc: word(2),
            })
        }
        KIND_SNAPSHOT_CHUNK => {
            let (at, bytes) = body
                .split_first_chunk::<CHUNK_PREFIX_LEN>()
                .ok_or_else(bad)?;
            Ok(Frame::SnapshotChunk {
                at: u64::from_le_bytes(*at),
                bytes,
            })
        }
        KIND_PING if body.is_empty() => Ok(Frame::Ping),
        KIND_PING => Err(bad()),
        other => Err(FrameError::UnknownKind(other)),
    }
}

/// Most stream (or snapshot) bytes one frame may carry on a ring whose largest payload is
/// `max_payload`.
pub fn max_frame_bytes(max_payload: usize) -> usize {
    // A chunk's prefix is as long as a stream record's, so one limit serves both.
    max_stream_bytes(max_payload.saturating_sub(FRAME_KIND_LEN))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frame: Frame<'_>) {
        let mut out = Vec::new();
        encode_frame(&frame, &mut out);
        assert_eq!(decode_frame(&out).unwrap(), frame);
    }

    #[test]
    fn every_kind_round_trips() {
        round_trip(Frame::Stream {
            first_byte: 77,
            bytes: b"*1\r\n$4\r\nPING\r\n",
        });
        round_trip(Frame::SnapshotBegin {
            offset: 5,
            total_len: 1 << 40,
            crc: 0xdead_beef,
        });
        round_trip(Frame::SnapshotChunk { at: 0, bytes: b"" });
        round_trip(Frame::Ping);
        round_trip(Frame::SnapshotChunk {
            at: 4096,
            bytes: b"abc",
        });
        assert_eq!(max_frame_bytes(100), 91);
        assert_eq!(max_frame_bytes(5), 0);
    }

    #[test]
    fn malformed_frames_are_errors() {
        assert_eq!(decode_frame(b""), Err(FrameError::Empty));
        assert_eq!(decode_frame(&[9, 1, 2]), Err(FrameError::UnknownKind(9)));
        assert_eq!(
            decode_frame(&[KIND_PING, 0]),
            Err(FrameError::BadLength { kind: 4, len: 1 })
        );
        assert_eq!(
            decode_frame(&[KIND_SNAPSHOT_BEGIN, 0, 0]),
            Err(FrameError::BadLength { kind: 2, len: 2 })
        );
        assert_eq!(
            decode_frame(&[KIND_SNAPSHOT_CHUNK, 1]),
            Err(FrameError::BadLength { kind: 3, len: 1 })
        );
        assert_eq!(
            decode_frame(&[KIND_STREAM, 1, 2]),
            Err(FrameError::Record(RecordError::Short(2)))
        );
        let mut zero = vec![KIND_STREAM];
        encode_record(0, b"x", &mut zero);
        assert_eq!(
            decode_frame(&zero),
            Err(FrameError::Record(RecordError::ZeroOffset))
        );
    }
}
