//! MIGRATE's connection to a target node: a blocking TCP link, with the caller's timeout on
//! every connect, write and read, because commands run synchronously (see
//! `commands/migration/migrate.rs` for why that is the choice). The cache that keeps links
//! between MIGRATEs is state (`node_state::migrate_links`); this is its I/O.

use crate::node_state::migrate_links::{Line, LinkError, LinkIo};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Longest reply line read from a target. The replies MIGRATE reads (AUTH, SELECT,
/// RESTORE) are one short status or error line; anything longer is not a node answering.
pub const REPLY_LINE_MAX: u64 = 4096;

/// An open TCP connection to a target.
pub struct TcpLink {
    stream: BufReader<TcpStream>,
}

/// Connects to `host:port` within `timeout` (each resolved address in turn).
pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpLink, LinkError> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address for the host");
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(TcpLink {
                    stream: BufReader::new(stream),
                });
            }
            Err(e) => last = e,
        }
    }
    Err(last.into())
}

impl LinkIo for TcpLink {
    fn set_timeout(&mut self, timeout: Duration) -> Result<(), LinkError> {
        let socket = self.stream.get_ref();
        socket.set_read_timeout(Some(timeout))?;
        socket.set_write_timeout(Some(timeout))?;
        Ok(())
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), LinkError> {
        self.stream.get_mut().write_all(bytes)?;
        Ok(())
    }

    /// A line over [`REPLY_LINE_MAX`] is an error, as is end of stream or a line without CRLF.
    fn read_line(&mut self) -> Result<Line, LinkError> {
        let mut line = Vec::new();
        (&mut self.stream)
            .take(REPLY_LINE_MAX)
            .read_until(b'\n', &mut line)?;
        let Some(text) = line.strip_suffix(b"\r\n") else {
            let why = if line.is_empty() {
                "connection closed by the target"
            } else {
                "reply line too long or unterminated"
            };
            return Err(io::Error::new(io::ErrorKind::InvalidData, why).into());
        };
        Ok(match text.split_first() {
            Some((b'-', message)) => Line::Error(String::from_utf8_lossy(message).into_owned()),
            _ => Line::Ok,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A target that answers each connection with `reply` after reading anything.
    fn target(reply: &'static [u8]) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(4) {
                let Ok(mut s) = stream else { continue };
                let mut buf = [0u8; 64];
                let _ = s.read(&mut buf);
                let _ = s.write_all(reply);
            }
        });
        port
    }

    fn link_to(port: u16) -> TcpLink {
        let mut link = connect("127.0.0.1", port, Duration::from_secs(2)).unwrap();
        link.set_timeout(Duration::from_secs(2)).unwrap();
        link.write_all(b"PING\r\n").unwrap();
        link
    }

    #[test]
    fn reads_status_and_error_lines() {
        let mut link = link_to(target(
            b"+OK\r\n-BUSYKEY Target key name already exists.\r\n",
        ));
        assert_eq!(link.read_line().unwrap(), Line::Ok);
        assert_eq!(
            link.read_line().unwrap(),
            Line::Error("BUSYKEY Target key name already exists.".into())
        );
        // Then the target closes: an error, not a timeout.
        let e = link.read_line().unwrap_err();
        assert!(!e.timed_out, "{e:?}");
    }

    #[test]
    fn an_overlong_line_is_refused() {
        static LONG: [u8; 5000] = [b'+'; 5000];
        let mut link = link_to(target(&LONG));
        assert!(link.read_line().is_err());
    }

    #[test]
    fn a_silent_target_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut link = connect("127.0.0.1", port, Duration::from_secs(2)).unwrap();
        link.set_timeout(Duration::from_millis(50)).unwrap();
        let e = link.read_line().unwrap_err();
        assert!(e.timed_out, "{e:?}");
        drop(listener);
    }

    #[test]
    fn connecting_to_a_closed_port_fails() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        assert!(connect("127.0.0.1", port, Duration::from_millis(500)).is_err());
    }
}
