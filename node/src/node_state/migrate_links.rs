//! MIGRATE's connections to target nodes, as state: the cache of idle links by `host:port`,
//! each kept for [`LINK_IDLE_MAX`] after its last use as Redis keeps its "migrate cached
//! sockets", so that a reshard's many MIGRATE calls to one target do not each pay a connect.
//!
//! A link's I/O is behind [`LinkIo`]: the layer that owns sockets opens it (`server::
//! migrate_link`, reached by commands through `services::MigrateDialer`) and this layer only
//! keeps it. A link is taken out of the cache while in use, so two MIGRATEs to one target at
//! the same time each get their own link; the one returned last is dropped if the first is
//! back already.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

/// How long an unused link is kept (Redis's MIGRATE_SOCKET_CACHE_TTL).
pub const LINK_IDLE_MAX: Duration = Duration::from_secs(10);
/// Most cached links (Redis's MIGRATE_SOCKET_CACHE_ITEMS); one is dropped to make room.
pub const LINKS_MAX: usize = 64;

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

/// The I/O of one open connection to a target, blocking with the timeout last set.
pub trait LinkIo: Send {
    /// Sets the timeout every following write and read waits at most.
    fn set_timeout(&mut self, timeout: Duration) -> Result<(), LinkError>;
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), LinkError>;
    /// Reads one reply line. End of stream, an overlong line or one without CRLF is an
    /// error: the link is then out of step with the target and must be closed.
    fn read_line(&mut self) -> Result<Line, LinkError>;
}

/// An open connection to a target and what this node knows of its session.
pub struct Link {
    io: Box<dyn LinkIo>,
    /// The database the last successful MIGRATE selected on it; None: send SELECT.
    pub selected_db: Option<i64>,
    last_use: Instant,
}

impl Link {
    /// A link just opened: no database selected yet.
    pub fn new(io: Box<dyn LinkIo>) -> Link {
        Link {
            io,
            selected_db: None,
            last_use: Instant::now(),
        }
    }

    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), LinkError> {
        self.io.set_timeout(timeout)
    }

    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), LinkError> {
        self.io.write_all(bytes)
    }

    pub fn read_line(&mut self) -> Result<Line, LinkError> {
        self.io.read_line()
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

    /// A link whose I/O is never used: the cache only keeps links.
    struct Unused;

    impl LinkIo for Unused {
        fn set_timeout(&mut self, _: Duration) -> Result<(), LinkError> {
            unreachable!("the cache does no I/O")
        }
        fn write_all(&mut self, _: &[u8]) -> Result<(), LinkError> {
            unreachable!("the cache does no I/O")
        }
        fn read_line(&mut self) -> Result<Line, LinkError> {
            unreachable!("the cache does no I/O")
        }
    }

    fn link() -> Link {
        Link::new(Box::new(Unused))
    }

    #[test]
    fn the_cache_keeps_one_link_per_target_and_forgets_idle_ones() {
        let links = MigrateLinks::default();
        links.give_back("a".into(), link());
        links.give_back("a".into(), link());
        assert_eq!(links.len(), 1);
        assert!(links.take("a").is_some());
        assert!(links.take("a").is_none());
        links.give_back("a".into(), link());
        links.close_idle(Instant::now());
        assert_eq!(links.len(), 1);
        links.close_idle(Instant::now() + LINK_IDLE_MAX + Duration::from_secs(1));
        assert!(links.is_empty());
    }

    #[test]
    fn a_full_cache_drops_one_link_to_make_room() {
        let links = MigrateLinks::default();
        for i in 0..LINKS_MAX {
            links.give_back(format!("t{i}"), link());
        }
        links.give_back("new".into(), link());
        assert_eq!(links.len(), LINKS_MAX);
        assert!(links.take("new").is_some());
    }

    #[test]
    fn io_errors_tell_timeouts_from_failures() {
        let e = LinkError::from(io::Error::from(io::ErrorKind::WouldBlock));
        assert!(e.timed_out);
        let e = LinkError::from(io::Error::from(io::ErrorKind::ConnectionReset));
        assert!(!e.timed_out);
    }
}
