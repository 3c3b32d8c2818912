//! The replication backlog: the most recent bytes of the replication stream, addressed by
//! replication offset, from which a replica that reconnects resynchronises partially.
//!
//! Offsets are Redis's (protocols.md §4): the stream's bytes are numbered from 1;
//! `master_repl_offset` is the number of the last byte written (0 before any);
//! `repl_backlog_first_byte_offset` is the number of the oldest byte still held, which is
//! `master_repl_offset + 1` while nothing is held. A replica asks (PSYNC) for the first byte it
//! lacks, so any request in `first_byte_offset ..= master_repl_offset + 1` can be served.
//!
//! Trimming is per byte (as Redis 6's circular buffer; Redis 7 trims whole 16 KiB blocks and
//! may hold a little more), so `histlen` never exceeds `size`.

use std::collections::VecDeque;

/// Defined with the parameters (the layer below), named here where the backlog is sized.
pub use crate::config::params::{REPL_BACKLOG_SIZE_DEFAULT, REPL_BACKLOG_SIZE_MAX};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BacklogError {
    #[error("repl-backlog-size must be between 1 and {REPL_BACKLOG_SIZE_MAX} bytes, got {0}")]
    BadSize(usize),
}

/// A bounded byte ring addressed by replication offset.
#[derive(Debug, Clone)]
pub struct Backlog {
    /// The newest `histlen` bytes of the stream; never longer than `size`.
    bytes: VecDeque<u8>,
    size: usize,
    master_repl_offset: u64,
}

impl Backlog {
    /// An empty backlog of `size` bytes whose next byte will be `master_repl_offset + 1`
    /// (Redis's `createReplicationBacklog`).
    pub fn new(size: usize, master_repl_offset: u64) -> Result<Self, BacklogError> {
        check_size(size)?;
        Ok(Backlog {
            bytes: VecDeque::new(),
            size,
            master_repl_offset,
        })
    }

    /// `repl_backlog_size`.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The number of the last byte written (`master_repl_offset`).
    pub fn master_repl_offset(&self) -> u64 {
        self.master_repl_offset
    }

    /// The number of the oldest byte held (`repl_backlog_first_byte_offset`).
    pub fn start_offset(&self) -> u64 {
        self.master_repl_offset + 1 - self.bytes.len() as u64
    }

    /// Bytes held (`repl_backlog_histlen`).
    pub fn histlen(&self) -> usize {
        self.bytes.len()
    }

    /// Appends stream bytes, dropping the oldest beyond `size`; returns the new
    /// `master_repl_offset`.
    pub fn append(&mut self, data: &[u8]) -> u64 {
        self.master_repl_offset += data.len() as u64;
        // Only the newest `size` bytes can survive; trim first so the deque never grows
        // past `size`.
        let kept = &data[data.len().saturating_sub(self.size)..];
        let overflow = (self.bytes.len() + kept.len()).saturating_sub(self.size);
        self.bytes.drain(..overflow);
        self.bytes.extend(kept);
        self.master_repl_offset
    }

    /// The bytes from `from_offset` (the first byte wanted) to the end, or `None` when they
    /// are no longer (or not yet) all here: `from_offset` before `start_offset` or after
    /// `master_repl_offset + 1`. Asking for `master_repl_offset + 1` gives an empty range.
    pub fn range(&self, from_offset: u64) -> Option<BacklogRange<'_>> {
        let end = self.master_repl_offset + 1;
        if from_offset < self.start_offset() || from_offset > end {
            return None;
        }
        let skip = (from_offset - self.start_offset()) as usize;
        let (a, b) = self.bytes.as_slices();
        let (first, second) = if skip < a.len() {
            (&a[skip..], b)
        } else {
            (&b[skip - a.len()..], &b[..0])
        };
        Some(BacklogRange {
            from_offset,
            first,
            second,
        })
    }

    /// Drops the history and continues at `master_repl_offset` (a replica that loaded a full
    /// sync at that offset).
    pub fn reset(&mut self, master_repl_offset: u64) {
        self.bytes.clear();
        self.master_repl_offset = master_repl_offset;
    }

    /// Changes the size (CONFIG SET repl-backlog-size), keeping the newest bytes that fit, as
    /// Redis 7 does.
    pub fn resize(&mut self, size: usize) -> Result<(), BacklogError> {
        check_size(size)?;
        let overflow = self.bytes.len().saturating_sub(size);
        self.bytes.drain(..overflow);
        self.bytes.shrink_to(size);
        self.size = size;
        Ok(())
    }
}

fn check_size(size: usize) -> Result<(), BacklogError> {
    if size == 0 || size > REPL_BACKLOG_SIZE_MAX {
        return Err(BacklogError::BadSize(size));
    }
    Ok(())
}

/// Backlog bytes from one offset to the end, in at most two pieces (the ring may wrap).
#[derive(Debug, Clone, Copy)]
pub struct BacklogRange<'a> {
    from_offset: u64,
    first: &'a [u8],
    second: &'a [u8],
}

impl<'a> BacklogRange<'a> {
    /// The number of the range's first byte.
    pub fn from_offset(&self) -> u64 {
        self.from_offset
    }

    pub fn len(&self) -> usize {
        self.first.len() + self.second.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pieces, oldest first; none is empty.
    pub fn chunks(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        [self.first, self.second]
            .into_iter()
            .filter(|c| !c.is_empty())
    }

    /// The pieces cut to at most `max` bytes each, each with the number of its first byte:
    /// what becomes one ring record apiece.
    pub fn records(&self, max: usize) -> impl Iterator<Item = (u64, &'a [u8])> + 'a {
        let max = max.max(1);
        let mut offset = self.from_offset;
        self.chunks()
            .flat_map(move |c| c.chunks(max))
            .map(move |piece| {
                let at = offset;
                offset += piece.len() as u64;
                (at, piece)
            })
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        for c in self.chunks() {
            out.extend_from_slice(c);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn refuses_a_zero_or_absurd_size() {
        assert_eq!(Backlog::new(0, 0).unwrap_err(), BacklogError::BadSize(0));
        assert!(Backlog::new(REPL_BACKLOG_SIZE_MAX + 1, 0).is_err());
        let mut b = Backlog::new(REPL_BACKLOG_SIZE_DEFAULT, 0).unwrap();
        assert!(b.resize(0).is_err());
        assert_eq!(b.size(), REPL_BACKLOG_SIZE_DEFAULT);
    }

    #[test]
    fn offsets_follow_redis() {
        let mut b = Backlog::new(10, 0).unwrap();
        // Empty: the first byte held would be the next one written.
        assert_eq!(
            (b.master_repl_offset(), b.start_offset(), b.histlen()),
            (0, 1, 0)
        );
        assert_eq!(b.append(b"hello"), 5);
        assert_eq!((b.start_offset(), b.histlen()), (1, 5));
        assert_eq!(b.append(b"worldwide"), 14);
        // 14 bytes written, 10 held: bytes 5..=14.
        assert_eq!((b.start_offset(), b.histlen()), (5, 10));
        assert_eq!(b.range(5).unwrap().to_vec(), b"oworldwide");
        assert_eq!(b.range(10).unwrap().to_vec(), b"dwide");
        assert!(b.range(15).unwrap().is_empty());
        assert!(b.range(4).is_none());
        assert!(b.range(16).is_none());
    }

    #[test]
    fn starts_at_a_given_offset_and_resets() {
        let mut b = Backlog::new(8, 100).unwrap();
        assert_eq!(b.start_offset(), 101);
        assert!(b.range(101).unwrap().is_empty());
        assert!(b.range(100).is_none());
        b.append(b"abc");
        assert_eq!(b.range(102).unwrap().to_vec(), b"bc");
        b.reset(500);
        assert_eq!(
            (b.master_repl_offset(), b.start_offset(), b.histlen()),
            (500, 501, 0)
        );
        assert!(b.range(102).is_none());
    }

    #[test]
    fn a_write_larger_than_the_backlog_keeps_its_tail() {
        let mut b = Backlog::new(4, 0).unwrap();
        b.append(b"ab");
        assert_eq!(b.append(b"0123456789"), 12);
        assert_eq!(b.start_offset(), 9);
        assert_eq!(b.range(9).unwrap().to_vec(), b"6789");
    }

    #[test]
    fn resize_keeps_the_newest_bytes() {
        let mut b = Backlog::new(8, 0).unwrap();
        b.append(b"abcdefgh");
        b.resize(3).unwrap();
        assert_eq!((b.start_offset(), b.histlen()), (6, 3));
        assert_eq!(b.range(6).unwrap().to_vec(), b"fgh");
        b.resize(16).unwrap();
        b.append(b"ij");
        assert_eq!(b.range(6).unwrap().to_vec(), b"fghij");
    }

    #[test]
    fn records_cut_the_range_and_number_each_piece() {
        let mut b = Backlog::new(6, 0).unwrap();
        b.append(b"abcd");
        b.append(b"efgh"); // wraps inside the deque
        let r = b.range(4).unwrap();
        let recs: Vec<(u64, Vec<u8>)> = r.records(2).map(|(o, p)| (o, p.to_vec())).collect();
        let joined: Vec<u8> = recs.iter().flat_map(|(_, p)| p.clone()).collect();
        assert_eq!(joined, b"defgh");
        let mut expect = 4;
        for (o, p) in &recs {
            assert_eq!(*o, expect);
            assert!(!p.is_empty() && p.len() <= 2);
            expect += p.len() as u64;
        }
        assert_eq!(expect, 9);
    }

    proptest! {
        /// The backlog against a model that keeps the whole stream in a Vec: for every append
        /// sequence and every request offset, the backlog serves exactly the model's suffix
        /// when that suffix is within the newest `size` bytes, and refuses otherwise.
        #[test]
        fn matches_a_vec_model(
            size in 1usize..64,
            start in 0u64..1000,
            writes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..30),
            probes in proptest::collection::vec(0u64..2000, 1..20),
        ) {
            let mut b = Backlog::new(size, start).unwrap();
            let mut model: Vec<u8> = Vec::new();
            for w in &writes {
                model.extend_from_slice(w);
                prop_assert_eq!(b.append(w), start + model.len() as u64);
                let held = model.len().min(size);
                prop_assert_eq!(b.histlen(), held);
                prop_assert_eq!(b.start_offset(), start + 1 + (model.len() - held) as u64);
            }
            let end = start + model.len() as u64; // master_repl_offset
            let first = b.start_offset();
            for p in probes.iter().map(|p| p + start.saturating_sub(500)) {
                match b.range(p) {
                    Some(r) => {
                        prop_assert!(p >= first && p <= end + 1);
                        let from = (p - start - 1) as usize;
                        prop_assert_eq!(r.to_vec(), model[from..].to_vec());
                    }
                    None => prop_assert!(p < first || p > end + 1),
                }
            }
        }
    }
}
