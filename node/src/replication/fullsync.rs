//! A full sync's snapshot over the replication ring: the primary cuts the snapshot (opaque
//! bytes here) into a begin frame (offset, total length, CRC-64) and chunk frames; the replica
//! reassembles them, checks length and checksum, and hands the whole snapshot to its loader.
//! The stream continues on the same ring from the snapshot's offset + 1.
//!
//! The ring delivers records in order, once, so chunks must arrive at consecutive positions:
//! anything else is a broken primary, not a delay.

use super::link_frame::{encode_frame, Frame};

/// Default bound on a snapshot the replica holds in memory while it arrives: 4 GiB. The whole
/// snapshot is kept until the loader takes it; past this a replica would rather refuse the
/// sync than take the host's memory (the node can raise it for larger datasets).
pub const SNAPSHOT_BYTES_MAX_DEFAULT: u64 = 4 << 30;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FullSyncError {
    #[error("snapshot of {total} bytes exceeds the limit of {max}")]
    TooLarge { total: u64, max: u64 },
    #[error("snapshot chunk with no snapshot begun")]
    ChunkWithoutBegin,
    #[error("snapshot chunk at {got}, expected {expected}")]
    OutOfOrder { expected: u64, got: u64 },
    #[error("snapshot chunk ends at {end}, past the announced {total} bytes")]
    Overrun { end: u64, total: u64 },
    #[error("snapshot checksum {got:#x} does not match the announced {expected:#x}")]
    Checksum { expected: u64, got: u64 },
}

/// A received snapshot: load `bytes`, then apply the stream from `offset + 1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

pub fn snapshot_crc(bytes: &[u8]) -> u64 {
    let mut d = crc64fast::Digest::new();
    d.write(bytes);
    d.sum64()
}

/// What the next frame of a [`SnapshotSender`] covers; hand it back to `sent` once the ring
/// took the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotStep {
    Begin,
    Chunk { len: usize },
}

/// The primary's side: the frames of one snapshot, produced one at a time so a full ring can
/// refuse one and get it again later.
#[derive(Debug)]
pub struct SnapshotSender {
    offset: u64,
    bytes: Vec<u8>,
    crc: u64,
    begun: bool,
    sent: usize,
}

impl SnapshotSender {
    /// A snapshot taken at replication `offset`.
    pub fn new(offset: u64, bytes: Vec<u8>) -> Self {
        let crc = snapshot_crc(&bytes);
        SnapshotSender {
            offset,
            bytes,
            crc,
            begun: false,
            sent: 0,
        }
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Snapshot bytes not yet taken by the ring.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.sent
    }

    pub fn is_done(&self) -> bool {
        self.begun && self.sent == self.bytes.len()
    }

    /// Encodes the next frame (chunks of at most `max_chunk` bytes, at least 1) into `out`,
    /// which is cleared first; `None` when every frame was sent.
    pub fn next_frame(&self, max_chunk: usize, out: &mut Vec<u8>) -> Option<SnapshotStep> {
        out.clear();
        if !self.begun {
            encode_frame(
                &Frame::SnapshotBegin {
                    offset: self.offset,
                    total_len: self.bytes.len() as u64,
                    crc: self.crc,
                },
                out,
            );
            return Some(SnapshotStep::Begin);
        }
        if self.sent == self.bytes.len() {
            return None;
        }
        let len = max_chunk.max(1).min(self.bytes.len() - self.sent);
        encode_frame(
            &Frame::SnapshotChunk {
                at: self.sent as u64,
                bytes: &self.bytes[self.sent..self.sent + len],
            },
            out,
        );
        Some(SnapshotStep::Chunk { len })
    }

    /// The frame `step` described was taken by the ring.
    pub fn sent(&mut self, step: SnapshotStep) {
        match step {
            SnapshotStep::Begin => self.begun = true,
            SnapshotStep::Chunk { len } => self.sent += len,
        }
    }
}

/// The replica's side: reassembles one snapshot at a time within a byte limit.
#[derive(Debug)]
pub struct SnapshotAssembler {
    max_bytes: u64,
    partial: Option<Partial>,
}

#[derive(Debug)]
struct Partial {
    offset: u64,
    total: u64,
    crc: u64,
    bytes: Vec<u8>,
}

impl SnapshotAssembler {
    pub fn new(max_bytes: u64) -> Self {
        SnapshotAssembler {
            max_bytes,
            partial: None,
        }
    }

    /// Whether a snapshot is being received.
    pub fn in_progress(&self) -> bool {
        self.partial.is_some()
    }

    /// Bytes of the snapshot being received so far.
    pub fn received(&self) -> u64 {
        self.partial.as_ref().map_or(0, |p| p.bytes.len() as u64)
    }

    /// A snapshot begins (a second begin restarts: the primary started the sync over).
    /// An empty snapshot is complete at once.
    pub fn begin(
        &mut self,
        offset: u64,
        total: u64,
        crc: u64,
    ) -> Result<Option<Snapshot>, FullSyncError> {
        self.partial = None;
        if total > self.max_bytes {
            return Err(FullSyncError::TooLarge {
                total,
                max: self.max_bytes,
            });
        }
        self.partial = Some(Partial {
            offset,
            total,
            crc,
            bytes: Vec::new(),
        });
        self.finish_if_complete()
    }

    /// Takes the chunk at position `at`; returns the snapshot once its last byte arrived and
    /// its checksum matched. On error the partial snapshot is dropped.
    pub fn chunk(&mut self, at: u64, bytes: &[u8]) -> Result<Option<Snapshot>, FullSyncError> {
        let Some(p) = self.partial.as_mut() else {
            return Err(FullSyncError::ChunkWithoutBegin);
        };
        let expected = p.bytes.len() as u64;
        let end = at.saturating_add(bytes.len() as u64);
        let error = if at != expected {
            Some(FullSyncError::OutOfOrder { expected, got: at })
        } else if end > p.total {
            Some(FullSyncError::Overrun {
                end,
                total: p.total,
            })
        } else {
            None
        };
        if let Some(e) = error {
            self.partial = None;
            return Err(e);
        }
        p.bytes.extend_from_slice(bytes);
        self.finish_if_complete()
    }

    fn finish_if_complete(&mut self) -> Result<Option<Snapshot>, FullSyncError> {
        match &self.partial {
            Some(p) if p.bytes.len() as u64 == p.total => {}
            _ => return Ok(None),
        }
        let Some(p) = self.partial.take() else {
            return Ok(None);
        };
        let got = snapshot_crc(&p.bytes);
        if got != p.crc {
            return Err(FullSyncError::Checksum {
                expected: p.crc,
                got,
            });
        }
        Ok(Some(Snapshot {
            offset: p.offset,
            bytes: p.bytes,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::link_frame::decode_frame;
    use super::*;

    /// Sends `blob` through sender → frames → assembler.
    fn transfer(blob: Vec<u8>, max_chunk: usize, limit: u64) -> Result<Snapshot, FullSyncError> {
        let mut tx = SnapshotSender::new(42, blob);
        let mut rx = SnapshotAssembler::new(limit);
        let mut frame = Vec::new();
        let mut done = None;
        while let Some(step) = tx.next_frame(max_chunk, &mut frame) {
            tx.sent(step);
            let got = match decode_frame(&frame).unwrap() {
                Frame::SnapshotBegin {
                    offset,
                    total_len,
                    crc,
                } => rx.begin(offset, total_len, crc)?,
                Frame::SnapshotChunk { at, bytes } => rx.chunk(at, bytes)?,
                Frame::Stream { .. } | Frame::Ping => {
                    panic!("a non-snapshot frame from the snapshot sender")
                }
            };
            if got.is_some() {
                assert!(done.is_none(), "two snapshots out of one");
                done = got;
            }
        }
        assert!(tx.is_done());
        Ok(done.expect("the snapshot completed"))
    }

    #[test]
    fn snapshots_of_any_size_reassemble_exactly() {
        for (len, chunk) in [
            (0usize, 10usize),
            (1, 10),
            (10, 10),
            (11, 10),
            (100_000, 4000),
        ] {
            let blob: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let got = transfer(blob.clone(), chunk, 1 << 20).unwrap();
            assert_eq!(got.offset, 42);
            assert!(got.bytes == blob, "len {len}");
        }
    }

    #[test]
    fn too_large_is_refused_before_any_chunk() {
        let err = transfer(vec![1; 2000], 100, 1999).unwrap_err();
        assert_eq!(
            err,
            FullSyncError::TooLarge {
                total: 2000,
                max: 1999
            }
        );
    }

    #[test]
    fn gaps_overruns_stray_chunks_and_bad_checksums_are_errors() {
        let mut rx = SnapshotAssembler::new(100);
        assert_eq!(rx.chunk(0, b"x"), Err(FullSyncError::ChunkWithoutBegin));
        let crc = snapshot_crc(b"abcd");
        assert_eq!(rx.begin(7, 4, crc), Ok(None));
        assert_eq!(
            rx.chunk(1, b"b"),
            Err(FullSyncError::OutOfOrder {
                expected: 0,
                got: 1
            })
        );
        assert!(!rx.in_progress());
        rx.begin(7, 4, crc).unwrap();
        assert_eq!(rx.chunk(0, b"ab"), Ok(None));
        assert_eq!(rx.received(), 2);
        assert_eq!(
            rx.chunk(2, b"cde"),
            Err(FullSyncError::Overrun { end: 5, total: 4 })
        );
        rx.begin(7, 4, crc).unwrap();
        assert!(matches!(
            rx.chunk(0, b"abcX"),
            Err(FullSyncError::Checksum { .. })
        ));
        rx.begin(7, 4, crc).unwrap();
        assert_eq!(
            rx.chunk(0, b"abcd"),
            Ok(Some(Snapshot {
                offset: 7,
                bytes: b"abcd".to_vec()
            }))
        );
    }
}
