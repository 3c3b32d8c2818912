//! CRC-64 computed over a stream as it passes, in large chunks (the digest is fast per
//! chunk, slow per byte), for writing and for reading snapshot files.

use std::io::{Read, Write};

/// Digests everything written through it.
pub struct CrcWriter<W> {
    inner: W,
    digest: crc64fast::Digest,
    written: u64,
}

impl<W: Write> CrcWriter<W> {
    pub fn new(inner: W) -> Self {
        CrcWriter {
            inner,
            digest: crc64fast::Digest::new(),
            written: 0,
        }
    }

    pub fn sum64(&self) -> u64 {
        self.digest.sum64()
    }

    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.digest.write(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Digests the first `covered` bytes read through it (a file's body, not its trailing
/// checksum). Put it under a `BufReader` so that it sees large reads.
pub struct CrcReader<R> {
    inner: R,
    digest: crc64fast::Digest,
    position: u64,
    covered: u64,
}

impl<R: Read> CrcReader<R> {
    pub fn new(inner: R, covered: u64) -> Self {
        CrcReader {
            inner,
            digest: crc64fast::Digest::new(),
            position: 0,
            covered,
        }
    }

    /// The checksum of the covered bytes read so far.
    pub fn sum64(&self) -> u64 {
        self.digest.sum64()
    }
}

impl<R: Read> Read for CrcReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let digest_len = self.covered.saturating_sub(self.position).min(n as u64) as usize;
        self.digest.write(&buf[..digest_len]);
        self.position += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot_format::format::crc64;
    use std::io::BufReader;

    #[test]
    fn reader_covers_only_the_prefix_whatever_the_chunking() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        for covered in [0, 1, 4095, 9_992, 10_000] {
            let r = CrcReader::new(&data[..], covered);
            let mut r = BufReader::with_capacity(100, r);
            let mut sink = Vec::new();
            r.read_to_end(&mut sink).unwrap();
            assert_eq!(
                r.get_ref().sum64(),
                crc64(&data[..covered as usize]),
                "covered {covered}"
            );
        }
    }

    #[test]
    fn writer_digests_what_it_writes() {
        let mut w = CrcWriter::new(Vec::new());
        w.write_all(b"hello ").unwrap();
        w.write_all(b"world").unwrap();
        assert_eq!(w.sum64(), crc64(b"hello world"));
        assert_eq!(w.written(), 11);
    }
}
