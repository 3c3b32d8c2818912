//! A client's received, not yet executed bytes, in memory that stays initialized.
//!
//! Why not `BytesMut`: its spare capacity counts as uninitialized, so a safe read into it
//! (tokio's `read_buf` through a socket without `unsafe`) zeroes the whole spare before every
//! read: 16 KiB or more per read, ~2% of the node's CPU under pipelined GETs (perf). Here the
//! spare was zeroed once, when the buffer grew, and reads go straight into it, as Redis reads
//! into its query buffer.

use std::ops::Deref;

pub struct InputBuffer {
    /// All of it initialized; `len()` is the capacity.
    buf: Vec<u8>,
    /// Unexecuted bytes are `buf[start..end]`.
    start: usize,
    end: usize,
}

impl InputBuffer {
    pub fn with_capacity(capacity: usize) -> Self {
        InputBuffer {
            buf: vec![0; capacity],
            start: 0,
            end: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Drops the first `n` unexecuted bytes (they were executed).
    pub fn advance(&mut self, n: usize) {
        assert!(n <= self.len(), "advance past the received bytes");
        self.start += n;
        if self.start == self.end {
            // Drained: the next read starts at the front, no bytes to move.
            self.start = 0;
            self.end = 0;
        }
    }

    /// At least `min` bytes of free space after the received bytes, for a read to fill and
    /// [`InputBuffer::commit`] to take. Moves a partial request to the front before growing.
    pub fn spare_mut(&mut self, min: usize) -> &mut [u8] {
        if self.buf.len() - self.end < min {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let needed = self.end + min;
            if self.buf.len() < needed {
                // Doubling keeps a large bulk value's reads amortised O(1) per byte.
                let grown = needed.max(self.buf.len().saturating_mul(2));
                self.buf.resize(grown, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// Takes the `n` bytes a read put at the start of [`InputBuffer::spare_mut`].
    pub fn commit(&mut self, n: usize) {
        assert!(
            n <= self.buf.len() - self.end,
            "commit past the spare space"
        );
        self.end += n;
    }

    pub fn extend_from_slice(&mut self, data: &[u8]) {
        self.spare_mut(data.len())[..data.len()].copy_from_slice(data);
        self.commit(data.len());
    }

    /// Replaces an empty buffer that grew past `keep_max` with a fresh one of `capacity`.
    pub fn shrink_when_empty(&mut self, keep_max: usize, capacity: usize) {
        if self.is_empty() && self.buf.len() > keep_max {
            *self = InputBuffer::with_capacity(capacity);
        }
    }
}

impl Deref for InputBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fill_the_spare_and_advancing_drops_executed_bytes() {
        let mut input = InputBuffer::with_capacity(8);
        let spare = input.spare_mut(4);
        spare[..5].copy_from_slice(b"hello");
        input.commit(5);
        assert_eq!(&input[..], b"hello");
        input.advance(2);
        assert_eq!(&input[..], b"llo");
        input.advance(3);
        assert!(input.is_empty());
        // Drained: the whole buffer is free again without moving anything.
        assert_eq!(input.spare_mut(8).len(), 8);
    }

    #[test]
    fn a_partial_request_moves_to_the_front_before_the_buffer_grows() {
        let mut input = InputBuffer::with_capacity(8);
        input.extend_from_slice(b"abcdefg");
        input.advance(5);
        // 6 free bytes are needed, 1 is at the end and 5 before the partial "fg".
        assert_eq!(input.spare_mut(6).len(), 6);
        assert_eq!(input.capacity(), 8, "compacted, not grown");
        assert_eq!(&input[..], b"fg");
        input.extend_from_slice(b"hij");
        assert_eq!(&input[..], b"fghij");
    }

    #[test]
    fn growing_keeps_the_received_bytes_and_at_least_doubles() {
        let mut input = InputBuffer::with_capacity(4);
        input.extend_from_slice(b"abcd");
        input.extend_from_slice(b"e");
        assert_eq!(&input[..], b"abcde");
        assert!(input.capacity() >= 8);
        input.extend_from_slice(&[b'x'; 100]);
        assert_eq!(input.len(), 105);
        assert_eq!(&input[..5], b"abcde");
    }

    #[test]
    fn an_empty_oversized_buffer_is_replaced() {
        let mut input = InputBuffer::with_capacity(4);
        input.extend_from_slice(&[1; 64]);
        input.shrink_when_empty(16, 4);
        assert_eq!(input.capacity(), 64, "not empty: kept");
        input.advance(64);
        input.shrink_when_empty(16, 4);
        assert_eq!(input.capacity(), 4);
    }

    #[test]
    #[should_panic(expected = "advance past")]
    fn advancing_past_the_received_bytes_is_a_bug() {
        let mut input = InputBuffer::with_capacity(4);
        input.extend_from_slice(b"ab");
        input.advance(3);
    }
}
