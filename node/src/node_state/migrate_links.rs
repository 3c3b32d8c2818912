//! MIGRATE's connections to target nodes: a blocking TCP link per `host:port`, kept for
//! [`LINK_IDLE_MAX`] after its last use as Redis keeps its "migrate cached sockets", so that
//! a reshard's many MIGRATE calls to one target do not each pay a connect.
//!
//! The I/O is blocking with the caller's timeout on every connect, write and read, because
//! commands run synchronously (see `commands/migration/migrate.rs` for why that is the
//! choice). A link is taken out of the cache while in use, so two MIGRATEs to one target at
//! the same time each get their own link; the one returned last is dropped if the first is
//! back already.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// How long an unused link is kept (Redis's MIGRATE_SOCKET_CACHE_TTL).
pub const LINK_IDLE_MAX: Duration = Duration::from_secs(10);
/// Most cached links (Redis's MIGRATE_SOCKET_CACHE_ITEMS); one is dropped to make room.
pub const LINKS_MAX: usize = 64;
/// Longest reply line read from a target. The replies MIGRATE reads (AUTH, SELECT,
/// RESTORE) are one short status or error line; anything longer is not a node answering.
pub const REPLY_LINE_MAX: u64 = 4096;

/// An open connection to a target.
pub struct Link {
    stream: BufReader<TcpStream>,
    /// The database the last successful MIGRATE selected on it; None: send SELECT.
    pub selected_db: Option<i64>,
    last_use: Instant,
}

/// How an I/O step failed, as MIGRATE reports and retries it.
#[derive(Debug)]
pub struct LinkError {
    /// The failure was a timeout (not retried, as Redis does not retry ETIMEDOUT).
    pub timed_out: bool,
    pub source: io::Error,
}

impl From<io::Error> for LinkError {
    fn from(source: io::Error) -> Self {
        let timed_out = matches!(
            source.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        );
        LinkError { timed_out, source }
    }
}

/// One reply line from the target, CRLF removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// `+...`, `:...` or anything that is not an error.
    Ok,
    /// `-TEXT`: the text without its `-`.
    Error(String),
}

impl Link {
    /// Connects to `host:port` within `timeout` (each resolved address in turn).
    pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<Link, LinkError> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address for the host");
        for addr in (host, port).to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(stream) => {
                    stream.set_nodelay(true)?;
                    return Ok(Link {
                        stream: BufReader::new(stream),
                        selected_db: None,
                        last_use: Instant::now(),
                    });
                }
                Err(e) => last = e,
            }
        }
        Err(last.into())
    }

    /// Sets the timeout every following write and read waits at most.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), LinkError> {
        let socket = self.stream.get_ref();
        socket.set_read_timeout(Some(timeout))?;
        socket.set_write_timeout(Some(timeout))?;
        Ok(())
    }

    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), LinkError> {
        self.stream.get_mut().write_all(bytes)?;
        Ok(())
    }

    /// Reads one reply line. End of stream, a line over [`REPLY_LINE_MAX`] or one without
    /// CRLF is an error: the link is then out of step with the target and must be closed.
    pub fn read_line(&mut self) -> Result<Line, LinkError> {
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

/// The cache of idle links, by `host:port` as the client wrote them.
#[derive(Default)]
pub struct MigrateLinks {
    idle: Mutex<HashMap<String, Link>>,
}

impl MigrateLinks {
    /// The cached link to `name`, taken out of the cache.
    pub fn take(&self, name: &str) -> Option<Link> {
        self.idle.lock().remove(name)
    }

    /// Puts a link back after a use that left it in step with its target.
    pub fn give_back(&self, name: String, mut link: Link) {
        link.last_use = Instant::now();
        let mut idle = self.idle.lock();
        if idle.len() >= LINKS_MAX && !idle.contains_key(&name) {
            // Full: drop any one, as Redis drops a random one.
            if let Some(victim) = idle.keys().next().cloned() {
                idle.remove(&victim);
            }
        }
        idle.entry(name).or_insert(link);
    }

    /// Closes links unused for longer than [`LINK_IDLE_MAX`] (called by the cron).
    pub fn close_idle(&self, now: Instant) {
        self.idle
            .lock()
            .retain(|_, link| now.saturating_duration_since(link.last_use) <= LINK_IDLE_MAX);
    }

    /// Closes the cached link to `name`, if any.
    pub fn close(&self, name: &str) {
        self.idle.lock().remove(name);
    }

    pub fn len(&self) -> usize {
        self.idle.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    fn link_to(port: u16) -> Link {
        let mut link = Link::connect("127.0.0.1", port, Duration::from_secs(2)).unwrap();
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
        let mut link = Link::connect("127.0.0.1", port, Duration::from_secs(2)).unwrap();
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
        assert!(Link::connect("127.0.0.1", port, Duration::from_millis(500)).is_err());
    }

    #[test]
    fn the_cache_keeps_one_link_per_target_and_forgets_idle_ones() {
        let port = target(b"+OK\r\n");
        let links = MigrateLinks::default();
        links.give_back("a".into(), link_to(port));
        links.give_back("a".into(), link_to(port));
        assert_eq!(links.len(), 1);
        assert!(links.take("a").is_some());
        assert!(links.take("a").is_none());
        links.give_back("a".into(), link_to(port));
        links.close_idle(Instant::now());
        assert_eq!(links.len(), 1);
        links.close_idle(Instant::now() + LINK_IDLE_MAX + Duration::from_secs(1));
        assert!(links.is_empty());
    }
}
