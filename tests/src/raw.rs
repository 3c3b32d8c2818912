//! A raw RESP connection for tests that need the exact frames a node sends: RESP3 push
//! frames, pub/sub confirmations, replies with errors inside arrays. Frames are decoded with
//! `proto::resp::decode`, the workspace's own strict decoder.

pub use proto::resp::Frame;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How long `read` waits for a frame before failing the test.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest amount of unparsed input a test connection buffers (a test frame is far smaller).
const BUFFER_MAX: usize = 64 * 1024 * 1024;

pub struct RawClient {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Start of the undecoded bytes in `buf` (consumed bytes are dropped in bulk, so reading
    /// many small frames from one large read stays linear).
    start: usize,
}

impl RawClient {
    pub fn connect(port: u16) -> RawClient {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connecting to node");
        stream.set_nodelay(true).expect("nodelay");
        RawClient {
            stream,
            buf: Vec::new(),
            start: 0,
        }
    }

    /// Sends one command as an array of bulk strings.
    pub fn send(&mut self, args: &[&str]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.stream
            .write_all(&Frame::command(&args).to_bytes())
            .expect("sending a command");
    }

    /// Sends several commands in one write (a pipeline the node reads in one go).
    pub fn send_batch(&mut self, commands: &[&[&str]]) {
        let mut bytes = Vec::new();
        for args in commands {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            bytes.extend_from_slice(&Frame::command(&args).to_bytes());
        }
        self.stream.write_all(&bytes).expect("sending commands");
    }

    /// The next frame, waiting up to [`READ_TIMEOUT`]; panics if none comes.
    pub fn read(&mut self) -> Frame {
        self.read_within(READ_TIMEOUT)
            .unwrap_or_else(|| panic!("no reply within {READ_TIMEOUT:?}"))
    }

    /// The next frame if one arrives within `wait` (to check that nothing more was sent).
    pub fn read_within(&mut self, wait: Duration) -> Option<Frame> {
        let deadline = Instant::now() + wait;
        loop {
            let pending = &self.buf[self.start..];
            if let Some((frame, used)) = proto::resp::decode(pending).expect("valid RESP") {
                self.start += used;
                if self.start * 2 >= self.buf.len() {
                    self.buf.drain(..self.start);
                    self.start = 0;
                }
                return Some(frame);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream
                .set_read_timeout(Some(left))
                .expect("read timeout");
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("node closed the connection"),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    let unread = self.buf.len() - self.start;
                    assert!(unread <= BUFFER_MAX, "reply larger than expected");
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => panic!("reading from node: {e}"),
            }
        }
    }

    /// Sends a command and reads one frame.
    pub fn call(&mut self, args: &[&str]) -> Frame {
        self.send(args);
        self.read()
    }

    /// Sends a command of binary arguments and reads one frame.
    pub fn call_bytes(&mut self, args: &[&[u8]]) -> Frame {
        self.stream
            .write_all(&Frame::command(args).to_bytes())
            .expect("sending a command");
        self.read()
    }

    /// Whether the node closed the connection within `wait` (after QUIT, a kill...).
    pub fn closed_within(&mut self, wait: Duration) -> bool {
        self.stream
            .set_read_timeout(Some(wait))
            .expect("read timeout");
        let mut chunk = [0u8; 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(_) => return false,
            }
        }
    }
}

/// A bulk string frame.
pub fn bulk(s: &str) -> Frame {
    Frame::bulk(s.as_bytes())
}

/// An array of bulk strings.
pub fn bulks(items: &[&str]) -> Frame {
    Frame::Array(items.iter().map(|s| bulk(s)).collect())
}
