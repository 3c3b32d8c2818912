//! A replica's reorder buffer: stream records `(offset, bytes)` that may arrive out of order
//! or twice (EFA and the `sim` fabric reorder; a primary that reconnects may resend) are
//! released strictly in offset order, each byte exactly once.
//!
//! A record's `offset` is the number of its first stream byte (Redis numbering, from 1).
//! Records that overlap what was already released are trimmed; a record wholly released
//! before is ignored. A record beyond a gap is held until the gap fills; what is held is
//! bounded, and past the bound the replica has lost track of its primary: it needs a full
//! sync ([`ApplyOrderError`]).

use std::collections::BTreeMap;

/// Default bound on bytes held behind a gap: 64 MiB. A primary has at most one ring's worth
/// of unacknowledged records in flight (`repl-ring-size`, far smaller), so more held bytes
/// mean a record was lost, not delayed.
pub const REORDER_BYTES_MAX_DEFAULT: usize = 64 << 20;
/// Records held behind a gap, whatever their size: each costs a map entry, so a flood of tiny
/// records must not grow memory without bound either.
pub const REORDER_RECORDS_MAX: usize = 1 << 16;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyOrderError {
    #[error("replication reorder buffer full: {held} bytes held, {max} allowed, waiting for offset {waiting_for}")]
    BytesFull {
        held: usize,
        max: usize,
        waiting_for: u64,
    },
    #[error("replication reorder buffer full: {REORDER_RECORDS_MAX} records held, waiting for offset {waiting_for}")]
    RecordsFull { waiting_for: u64 },
}

#[derive(Debug, Clone)]
pub struct ApplyOrder {
    /// The number of the next byte to release.
    next: u64,
    /// Records beyond a gap, by first byte; on the same first byte the longer is kept.
    held: BTreeMap<u64, Vec<u8>>,
    held_bytes: usize,
    max_bytes: usize,
}

impl ApplyOrder {
    /// Releases from `processed + 1` on (`processed`: the last stream byte the replica has,
    /// e.g. the offset of the snapshot it loaded). `max_bytes`: the bound on held bytes.
    pub fn new(processed: u64, max_bytes: usize) -> Self {
        ApplyOrder {
            next: processed + 1,
            held: BTreeMap::new(),
            held_bytes: 0,
            max_bytes,
        }
    }

    /// The number of the next byte to be released.
    pub fn next_offset(&self) -> u64 {
        self.next
    }

    /// The last byte released (Redis's `read_reploff` of the master client).
    pub fn released_offset(&self) -> u64 {
        self.next - 1
    }

    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    pub fn held_records(&self) -> usize {
        self.held.len()
    }

    /// Starts over at `processed` with nothing held (after a full sync).
    pub fn reset(&mut self, processed: u64) {
        self.next = processed + 1;
        self.held.clear();
        self.held_bytes = 0;
    }

    /// Takes one record and appends to `out` every byte that is now in order; returns how many
    /// bytes were appended. On error nothing changed: the caller must resynchronise fully.
    pub fn push(
        &mut self,
        offset: u64,
        bytes: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<usize, ApplyOrderError> {
        let end = offset.saturating_add(bytes.len() as u64);
        if end <= self.next {
            return Ok(0); // empty, or every byte released before
        }
        if offset > self.next {
            self.hold(offset, bytes)?;
            return Ok(0);
        }
        let before = out.len();
        out.extend_from_slice(&bytes[(self.next - offset) as usize..]);
        self.next = end;
        self.release_held(out);
        Ok(out.len() - before)
    }

    fn hold(&mut self, offset: u64, bytes: &[u8]) -> Result<(), ApplyOrderError> {
        let existing = self.held.get(&offset).map_or(0, Vec::len);
        if existing >= bytes.len() {
            return Ok(()); // a duplicate, or a shorter cut of what is held
        }
        let held = self.held_bytes - existing + bytes.len();
        if held > self.max_bytes {
            return Err(ApplyOrderError::BytesFull {
                held,
                max: self.max_bytes,
                waiting_for: self.next,
            });
        }
        if existing == 0 && self.held.len() >= REORDER_RECORDS_MAX {
            return Err(ApplyOrderError::RecordsFull {
                waiting_for: self.next,
            });
        }
        self.held.insert(offset, bytes.to_vec());
        self.held_bytes = held;
        Ok(())
    }

    /// Releases held records that now start at or before `next`. Each turn removes one
    /// record, so the loop ends within `held.len()` turns.
    fn release_held(&mut self, out: &mut Vec<u8>) {
        while let Some(entry) = self.held.first_entry() {
            if *entry.key() > self.next {
                break;
            }
            let (offset, bytes) = entry.remove_entry();
            self.held_bytes -= bytes.len();
            let end = offset + bytes.len() as u64;
            if end > self.next {
                out.extend_from_slice(&bytes[(self.next - offset) as usize..]);
                self.next = end;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::seq::SliceRandom;
    use rand::SeedableRng;

    #[test]
    fn in_order_records_pass_straight_through() {
        let mut a = ApplyOrder::new(0, 100);
        let mut out = Vec::new();
        assert_eq!(a.push(1, b"abc", &mut out), Ok(3));
        assert_eq!(a.push(4, b"de", &mut out), Ok(2));
        assert_eq!(out, b"abcde");
        assert_eq!(
            (a.next_offset(), a.released_offset(), a.held_bytes()),
            (6, 5, 0)
        );
    }

    #[test]
    fn gaps_are_held_until_filled() {
        let mut a = ApplyOrder::new(10, 100);
        let mut out = Vec::new();
        assert_eq!(a.push(15, b"ef", &mut out), Ok(0));
        assert_eq!(a.push(17, b"g", &mut out), Ok(0));
        assert_eq!((a.held_records(), a.held_bytes()), (2, 3));
        assert!(out.is_empty());
        assert_eq!(a.push(11, b"abc", &mut out), Ok(3));
        assert!(out == b"abc" && a.next_offset() == 14);
        assert_eq!(a.push(14, b"d", &mut out), Ok(4));
        assert_eq!(out, b"abcdefg");
        assert_eq!((a.held_records(), a.held_bytes()), (0, 0));
    }

    #[test]
    fn duplicates_and_overlaps_release_each_byte_once() {
        let mut a = ApplyOrder::new(0, 100);
        let mut out = Vec::new();
        a.push(1, b"abcd", &mut out).unwrap();
        assert_eq!(a.push(1, b"abcd", &mut out), Ok(0));
        assert_eq!(a.push(2, b"bc", &mut out), Ok(0));
        // Overlaps the released prefix: only the new tail comes out.
        assert_eq!(a.push(3, b"cdef", &mut out), Ok(2));
        // A held record and a longer cut at the same offset: the longer wins.
        a.push(9, b"i", &mut out).unwrap();
        a.push(9, b"ijk", &mut out).unwrap();
        a.push(9, b"ij", &mut out).unwrap();
        assert_eq!(a.held_bytes(), 3);
        a.push(7, b"gh", &mut out).unwrap();
        assert_eq!(out, b"abcdefghijk");
        assert!(a.push(0, b"", &mut out).is_ok());
    }

    #[test]
    fn the_byte_bound_is_a_typed_error_and_changes_nothing() {
        let mut a = ApplyOrder::new(0, 4);
        let mut out = Vec::new();
        a.push(5, b"abc", &mut out).unwrap();
        assert_eq!(
            a.push(9, b"de", &mut out),
            Err(ApplyOrderError::BytesFull {
                held: 5,
                max: 4,
                waiting_for: 1
            })
        );
        assert_eq!(a.held_bytes(), 3);
        // The record at the gap is released whatever the bound.
        assert_eq!(a.push(1, b"wxyz", &mut out), Ok(7));
        a.reset(100);
        assert_eq!((a.next_offset(), a.held_records()), (101, 0));
    }

    #[test]
    fn the_record_count_is_bounded_too() {
        let mut a = ApplyOrder::new(0, usize::MAX);
        let mut out = Vec::new();
        for i in 0..REORDER_RECORDS_MAX as u64 {
            a.push(10 + 2 * i, b"x", &mut out).unwrap();
        }
        assert_eq!(
            a.push(5, b"x", &mut out),
            Err(ApplyOrderError::RecordsFull { waiting_for: 1 })
        );
    }

    proptest! {
        /// The stream cut into records at random points, plus duplicate records cut
        /// differently, delivered in a seeded random order: the output is exactly the stream,
        /// and after every push it is a prefix of it.
        #[test]
        fn releases_the_stream_under_any_order(
            stream in proptest::collection::vec(any::<u8>(), 1..300),
            cuts in proptest::collection::vec(1usize..20, 1..40),
            dup_cuts in proptest::collection::vec((0usize..300, 1usize..30), 0..20),
            base in 0u64..1_000_000,
            seed in any::<u64>(),
        ) {
            let mut records = Vec::new();
            let (mut at, mut i) = (0usize, 0usize);
            while at < stream.len() {
                let len = cuts[i % cuts.len()].min(stream.len() - at);
                records.push((at, len));
                at += len;
                i += 1;
            }
            for (start, len) in dup_cuts {
                let start = start % stream.len();
                records.push((start, len.min(stream.len() - start)));
            }
            records.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
            // Room for every record at once: held bytes count duplicates too.
            let total: usize = records.iter().map(|(_, len)| len).sum();
            let mut a = ApplyOrder::new(base, total);
            let mut out = Vec::new();
            for (start, len) in records {
                a.push(base + 1 + start as u64, &stream[start..start + len], &mut out).unwrap();
                prop_assert_eq!(&out[..], &stream[..out.len()]);
                prop_assert_eq!(a.released_offset(), base + out.len() as u64);
            }
            prop_assert_eq!(out, stream);
            prop_assert_eq!(a.held_bytes(), 0);
        }
    }
}
