//! A buffered RESP connection: requests are encoded into a write buffer and sent on `flush`;
//! replies are decoded from a read buffer with `proto`'s frame decoder. Both buffers are bounded.

use bytes::{Buf, BytesMut};
use proto::resp::{decode, encode, Frame};

use super::error::ClientError;
use super::transport::Transport;

/// Default limit on one reply's size in bytes: a 512 MiB bulk (the server's own bulk limit)
/// plus room for its header. A reply still incomplete at this size fails with
/// [`ClientError::ReplyTooLarge`] instead of growing the buffer further.
pub const REPLY_BYTES_MAX: usize = 512 * 1024 * 1024 + 1024;

/// Default limit on requests queued and not yet flushed, in bytes: same reasoning (the server
/// refuses a bigger bulk anyway).
pub const REQUEST_BYTES_MAX: usize = 512 * 1024 * 1024 + 1024;

/// The smallest read: enough for a pipeline's worth of small replies in one system call.
pub const READ_CHUNK_MIN: usize = 64 * 1024;

/// Limits on a connection's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferLimits {
    pub reply_bytes_max: usize,
    pub request_bytes_max: usize,
}

impl Default for BufferLimits {
    fn default() -> Self {
        BufferLimits {
            reply_bytes_max: REPLY_BYTES_MAX,
            request_bytes_max: REQUEST_BYTES_MAX,
        }
    }
}

/// A transport with its read and write buffers.
#[derive(Debug)]
pub struct Connection {
    transport: Transport,
    read: BytesMut,
    write: BytesMut,
    limits: BufferLimits,
}

impl Connection {
    pub fn new(transport: Transport, limits: BufferLimits) -> Connection {
        Connection {
            transport,
            read: BytesMut::with_capacity(READ_CHUNK_MIN),
            write: BytesMut::with_capacity(READ_CHUNK_MIN),
            limits,
        }
    }

    /// Queues a command (an array of bulk strings) without sending it.
    pub fn queue_command<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<(), ClientError> {
        let frame = Frame::Array(args.iter().map(|a| Frame::bulk(a.as_ref())).collect());
        let before = self.write.len();
        encode(&frame, &mut self.write);
        self.check_request_size(before)
    }

    /// Queues bytes that already are one or more requests (RESP or inline), as the benchmark
    /// prepares them.
    pub fn queue_raw(&mut self, request: &[u8]) -> Result<(), ClientError> {
        let before = self.write.len();
        self.write.extend_from_slice(request);
        self.check_request_size(before)
    }

    fn check_request_size(&mut self, before: usize) -> Result<(), ClientError> {
        let len = self.write.len();
        if len > self.limits.request_bytes_max {
            self.write.truncate(before);
            return Err(ClientError::RequestTooLarge {
                len,
                max: self.limits.request_bytes_max,
            });
        }
        Ok(())
    }

    /// Sends everything queued.
    pub async fn flush(&mut self) -> Result<(), ClientError> {
        if !self.write.is_empty() {
            self.transport.write_all(&self.write).await?;
            self.write.clear();
        }
        Ok(())
    }

    /// Reads the next reply frame.
    pub async fn read_frame(&mut self) -> Result<Frame, ClientError> {
        loop {
            if let Some((frame, used)) = decode(&self.read)? {
                self.read.advance(used);
                return Ok(frame);
            }
            let buffered = self.read.len();
            if buffered >= self.limits.reply_bytes_max {
                return Err(ClientError::ReplyTooLarge {
                    buffered,
                    max: self.limits.reply_bytes_max,
                });
            }
            // The decoder starts over on every attempt, so let a big reply arrive in chunks
            // that grow with it (at most doubling the buffer): fewer attempts, linear cost.
            let room = buffered
                .max(READ_CHUNK_MIN)
                .min(self.limits.reply_bytes_max - buffered);
            self.read.reserve(room);
            let n = self.transport.read_some(&mut self.read).await?;
            if n == 0 {
                return Err(ClientError::Closed);
            }
        }
    }
}
