//! The handshake over a plain TCP connection (the default rendezvous of every ofi provider;
//! the only one EFA has): the listener accepts TCP at the bind address, reads HELLO, answers
//! ACCEPT, and closes; the messages are the same bytes as over the fabric (`handshake.rs`).
//!
//! The listener side never blocks on a peer: each accepted socket is a [`PendingHello`],
//! non-blocking, read a little at a time by the listener's `accept` and dropped past
//! [`HANDSHAKE_DEADLINE`], in a table of at most `HANDSHAKE_PENDING_MAX` (listener.rs). An
//! idle or slow TCP connection to the fabric port costs one descriptor and one slot for two
//! seconds and never holds up a new HELLO.

#![allow(unsafe_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::addr::OFI_ADDR_MAX;
use crate::error::BusError;

use super::handshake::{Handshake, HANDSHAKE_MAX};

/// Bound on each read or write of a handshake over TCP: a peer that stalls mid-handshake
/// cannot hold a listener longer than this.
pub const SOCKET_IO_TIMEOUT: Duration = Duration::from_secs(2);
const HEADER: usize = 16;

fn io_error(what: &str, e: std::io::Error) -> BusError {
    BusError::Closed(format!("ofi handshake socket: {what}: {e}"))
}

/// The handshake listener's accept backlog (the kernel caps it at `net.core.somaxconn`).
/// std listens with 128: a burst of idle connections fills that, and a real connector's SYN
/// is then dropped and retried after 1, 3, 7... seconds.
pub const HANDSHAKE_BACKLOG: i32 = 4096;

/// Listens again with [`HANDSHAKE_BACKLOG`] (Linux updates the backlog of a listening
/// socket).
pub fn deepen_backlog(listener: &TcpListener) -> std::io::Result<()> {
    // SAFETY: the descriptor belongs to `listener`, alive for the call; listen() touches no
    // memory of ours.
    let rc = unsafe { libc::listen(listener.as_raw_fd(), HANDSHAKE_BACKLOG) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// How long an accepted socket may take to deliver its whole HELLO.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(2);

/// An accepted handshake socket whose HELLO is still arriving.
pub struct PendingHello {
    stream: TcpStream,
    buf: [u8; HANDSHAKE_MAX],
    got: usize,
    since: Instant,
    pub from: SocketAddr,
}

impl PendingHello {
    /// The socket's descriptor, for a listener that blocks until one is readable.
    pub fn fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.stream)
    }

    pub fn new(stream: TcpStream, from: SocketAddr) -> Result<Self, BusError> {
        stream
            .set_nonblocking(true)
            .map_err(|e| io_error("set non-blocking", e))?;
        Ok(PendingHello {
            stream,
            buf: [0u8; HANDSHAKE_MAX],
            got: 0,
            since: Instant::now(),
            from,
        })
    }

    /// Whether it has had its time.
    pub fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.since) > HANDSHAKE_DEADLINE
    }

    /// The bytes the message needs in all, once its header is in (never past HANDSHAKE_MAX).
    fn wanted(&self) -> Result<usize, BusError> {
        if self.got < HEADER {
            return Ok(HEADER);
        }
        let name_len = u16::from_le_bytes([self.buf[6], self.buf[7]]) as usize;
        if name_len == 0 || name_len > OFI_ADDR_MAX {
            return Err(BusError::Protocol(format!(
                "ofi handshake: name length {name_len} outside 1..={OFI_ADDR_MAX}"
            )));
        }
        Ok(HEADER + name_len)
    }

    /// Reads what has arrived without waiting: the handshake once complete, `None` while
    /// more is needed; an error for a closed socket or a malformed message.
    pub fn advance(&mut self) -> Result<Option<Handshake>, BusError> {
        loop {
            let wanted = self.wanted()?;
            if self.got == wanted && wanted > HEADER {
                return Handshake::decode(&self.buf[..wanted]).map(Some);
            }
            match self.stream.read(&mut self.buf[self.got..wanted]) {
                Ok(0) => return Err(BusError::Closed("handshake socket closed early".into())),
                Ok(n) => self.got += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error("read", e)),
            }
        }
    }

    /// Sends `message` (the ACCEPT) without waiting: a fresh socket's buffer takes the few
    /// bytes at once; a peer that leaves no room gets nothing.
    pub fn answer(mut self, message: &Handshake) -> Result<(), BusError> {
        let bytes = message.encode();
        match self.stream.write(&bytes) {
            Ok(n) if n == bytes.len() => Ok(()),
            Ok(n) => Err(BusError::Closed(format!(
                "handshake socket took {n} of {} bytes",
                bytes.len()
            ))),
            Err(e) => Err(io_error("write", e)),
        }
    }
}

/// Writes one handshake message.
pub fn write_handshake(stream: &mut TcpStream, message: &Handshake) -> Result<(), BusError> {
    stream
        .set_write_timeout(Some(SOCKET_IO_TIMEOUT))
        .map_err(|e| io_error("set timeout", e))?;
    stream
        .write_all(&message.encode())
        .map_err(|e| io_error("write", e))
}

/// Reads one handshake message: the fixed header, then exactly the name length it announces
/// (bounded by `OFI_ADDR_MAX`, so a peer cannot make us read more than `HANDSHAKE_MAX`), by
/// `deadline` (a connector's ACCEPT: its connect timeout, since the listener may take a
/// while, e.g. the second it gives an unresponsive hub, `hub.rs`).
pub fn read_handshake(stream: &mut TcpStream, deadline: Instant) -> Result<Handshake, BusError> {
    let mut buf = [0u8; HANDSHAKE_MAX];
    read_exact_by(stream, &mut buf[..HEADER], deadline)?;
    let name_len = u16::from_le_bytes([buf[6], buf[7]]) as usize;
    if name_len == 0 || name_len > OFI_ADDR_MAX {
        return Err(BusError::Protocol(format!(
            "ofi handshake: name length {name_len} outside 1..={OFI_ADDR_MAX}"
        )));
    }
    read_exact_by(stream, &mut buf[HEADER..HEADER + name_len], deadline)?;
    Handshake::decode(&buf[..HEADER + name_len])
}

/// Fills `buf` from `stream`, each read waiting only for what is left until `deadline`.
fn read_exact_by(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> Result<(), BusError> {
    let mut filled = 0;
    while filled < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io_error("read", std::io::ErrorKind::TimedOut.into()));
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|e| io_error("set timeout", e))?;
        match stream.read(&mut buf[filled..]) {
            Ok(0) => return Err(io_error("read", std::io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error("read", e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofi::handshake::Kind;
    use std::net::TcpListener;

    /// Goal: a handshake crosses a TCP connection intact, and a peer announcing an oversized
    /// name is refused without reading it.
    #[test]
    fn round_trip_and_oversized_name() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let sent = Handshake {
            kind: Kind::Hello,
            nonce: 42,
            name: vec![1, 2, 3],
        };
        let to_send = sent.clone();
        let t = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            write_handshake(&mut s, &to_send).unwrap();
            let mut s = TcpStream::connect(addr).unwrap();
            let mut bad = to_send.encode();
            bad[6] = 0xff;
            bad[7] = 0xff;
            s.write_all(&bad).unwrap();
        });
        let (mut a, _) = listener.accept().unwrap();
        assert_eq!(
            read_handshake(&mut a, Instant::now() + SOCKET_IO_TIMEOUT).unwrap(),
            sent
        );
        let (mut b, _) = listener.accept().unwrap();
        assert!(matches!(
            read_handshake(&mut b, Instant::now() + SOCKET_IO_TIMEOUT),
            Err(BusError::Protocol(_))
        ));
        t.join().unwrap();
    }
}
