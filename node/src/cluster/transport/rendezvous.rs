//! Finding a node's bus address from its ip and bus port.
//!
//! The bus itself runs on fabric datagrams, whose addresses (GID + QPN on verbs, libfabric
//! names on ofi) are not something an operator types. `CLUSTER MEET ip port [cport]` and
//! `redis-cli --cluster create` give an ip and a port, so each node answers on TCP at its bus
//! port (client port + 10000, as Redis's bus) with one line: the text form of its bus address.
//! It carries no secret: every bus message is authenticated on its own.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Longest answer line accepted: an address text is well under this.
pub const ANSWER_MAX: usize = 1024;
/// How long one lookup may take (connect, then read).
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the answering side gives one peer to take its line.
const ANSWER_TIMEOUT: Duration = Duration::from_millis(500);
/// How often the answering thread looks at its stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("can't reach the bus port {0}: {1}")]
    Connect(SocketAddr, std::io::Error),
    #[error("no bus address from {0}: {1}")]
    Read(SocketAddr, std::io::Error),
    #[error("bad bus address from {0}: {1}")]
    Bad(SocketAddr, String),
}

/// What a lookup learns: the peer's bus address text, and this host's ip on the way to it
/// (a node that was never told its own ip takes it from here, as Redis takes it from the
/// local address of a MEET connection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub address: String,
    pub local_ip: Option<IpAddr>,
}

/// Called with this host's ip as a peer saw it (the local address of a lookup it served).
pub type LocalIpHook = Arc<dyn Fn(IpAddr) + Send + Sync>;

/// Asks the node at `at` for its bus address text.
pub fn lookup(at: SocketAddr) -> Result<Found, LookupError> {
    let s =
        TcpStream::connect_timeout(&at, LOOKUP_TIMEOUT).map_err(|e| LookupError::Connect(at, e))?;
    let local_ip = s.local_addr().ok().map(|a| a.ip());
    s.set_read_timeout(Some(LOOKUP_TIMEOUT))
        .map_err(|e| LookupError::Read(at, e))?;
    let mut line = Vec::new();
    BufReader::new(s.take_bounded())
        .read_until(b'\n', &mut line)
        .map_err(|e| LookupError::Read(at, e))?;
    if line.last() != Some(&b'\n') {
        return Err(LookupError::Bad(at, "no complete line".into()));
    }
    line.pop();
    let text = String::from_utf8(line).map_err(|_| LookupError::Bad(at, "not UTF-8".into()))?;
    text.parse::<bus::EndpointAddr>()
        .map_err(|e| LookupError::Bad(at, e.to_string()))?;
    Ok(Found {
        address: text,
        local_ip,
    })
}

trait TakeBounded {
    fn take_bounded(self) -> std::io::Take<TcpStream>;
}

impl TakeBounded for TcpStream {
    fn take_bounded(self) -> std::io::Take<TcpStream> {
        std::io::Read::take(self, ANSWER_MAX as u64)
    }
}

/// The answering side: a thread serving `address` on `listener` until `stop` is set.
pub struct Answerer {
    pub local: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Answerer {
    pub fn start(
        bind: SocketAddr,
        address: String,
        on_local_ip: Option<LocalIpHook>,
    ) -> std::io::Result<Answerer> {
        let listener = TcpListener::bind(bind)?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let theirs = stop.clone();
        let mut line = address.into_bytes();
        line.push(b'\n');
        let thread = std::thread::Builder::new()
            .name("node-bus-rendezvous".into())
            .spawn(move || answer_loop(listener, line, theirs, on_local_ip))?;
        Ok(Answerer {
            local,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Answerer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn answer_loop(
    listener: TcpListener,
    line: Vec<u8>,
    stop: Arc<AtomicBool>,
    on_local_ip: Option<LocalIpHook>,
) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut s, _)) => {
                if let (Some(hook), Ok(local)) = (&on_local_ip, s.local_addr()) {
                    hook(local.ip());
                }
                // One short write per peer; a peer that does not read is not waited for.
                let _ = s.set_nonblocking(false);
                let _ = s.set_write_timeout(Some(ANSWER_TIMEOUT));
                let _ = s.write_all(&line);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(ACCEPT_POLL),
            Err(e) => {
                tracing::warn!(error = %e, "bus rendezvous accept failed");
                std::thread::sleep(ACCEPT_POLL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_returns_the_served_address() {
        let addr = bus::EndpointAddr::Sim { id: 42 }.to_string();
        let seen = Arc::new(std::sync::Mutex::new(None));
        let theirs = seen.clone();
        let hook: LocalIpHook = Arc::new(move |ip| *theirs.lock().unwrap() = Some(ip));
        let a = Answerer::start("127.0.0.1:0".parse().unwrap(), addr.clone(), Some(hook)).unwrap();
        let found = lookup(a.local).unwrap();
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(found.address, addr);
        assert_eq!(found.local_ip, Some(loopback));
        // The answering side learned its own ip from the same connection.
        assert_eq!(*seen.lock().unwrap(), Some(loopback));
    }

    #[test]
    fn a_closed_port_and_garbage_are_errors() {
        let a = Answerer::start(
            "127.0.0.1:0".parse().unwrap(),
            "not an address".into(),
            None,
        )
        .unwrap();
        assert!(matches!(lookup(a.local), Err(LookupError::Bad(..))));
        let port = a.local;
        drop(a);
        assert!(matches!(lookup(port), Err(LookupError::Connect(..))));
    }
}
