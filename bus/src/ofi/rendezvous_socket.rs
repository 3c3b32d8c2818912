//! The handshake over a plain TCP connection, for providers whose endpoints have no IP address
//! to listen on (EFA): the listener accepts TCP at the bind address, reads HELLO, answers
//! ACCEPT, and closes; the messages are the same bytes as over the fabric (`handshake.rs`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

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
/// (bounded by `OFI_ADDR_MAX`, so a peer cannot make us read more than `HANDSHAKE_MAX`).
pub fn read_handshake(stream: &mut TcpStream) -> Result<Handshake, BusError> {
    stream
        .set_read_timeout(Some(SOCKET_IO_TIMEOUT))
        .map_err(|e| io_error("set timeout", e))?;
    let mut buf = [0u8; HANDSHAKE_MAX];
    stream
        .read_exact(&mut buf[..HEADER])
        .map_err(|e| io_error("read", e))?;
    let name_len = u16::from_le_bytes([buf[6], buf[7]]) as usize;
    if name_len == 0 || name_len > OFI_ADDR_MAX {
        return Err(BusError::Protocol(format!(
            "ofi handshake: name length {name_len} outside 1..={OFI_ADDR_MAX}"
        )));
    }
    stream
        .read_exact(&mut buf[HEADER..HEADER + name_len])
        .map_err(|e| io_error("read", e))?;
    Handshake::decode(&buf[..HEADER + name_len])
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
        assert_eq!(read_handshake(&mut a).unwrap(), sent);
        let (mut b, _) = listener.accept().unwrap();
        assert!(matches!(read_handshake(&mut b), Err(BusError::Protocol(_))));
        t.join().unwrap();
    }
}
