//! CLUSTER MEET's bus-port lookups, each on a short thread of its own that owns its retry
//! loop: an ip and port become a fabric address by asking the node's bus port over TCP
//! ([`rendezvous::lookup`]), and a node that does not answer yet (still starting, as pods of
//! an orchestrated cluster often are) is asked again for [`MEET_RETRY_FOR`], as Redis keeps a
//! handshake node until it answers or times out. The pauses between asks are this thread's
//! own; the command that started it has replied already. The address found goes to the bus
//! thread as a [`Request::Meet`].

use super::rendezvous::{self, LocalIpHook};
use super::runtime::Request;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

/// Lookups in flight at once; more MEETs are refused until some finish.
pub const MEET_LOOKUPS_MAX: usize = 16;
/// How long a MEET keeps asking a node that does not answer its bus port.
pub const MEET_RETRY_FOR: Duration = Duration::from_secs(15);
/// First pause between two asks; it doubles up to [`MEET_RETRY_PAUSE_MAX`].
const MEET_RETRY_PAUSE: Duration = Duration::from_millis(100);
const MEET_RETRY_PAUSE_MAX: Duration = Duration::from_secs(2);

static LOOKUPS_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

#[derive(Debug, thiserror::Error)]
pub enum MeetLookupError {
    #[error("too many CLUSTER MEET lookups in progress, try again")]
    TooMany,
    #[error("CLUSTER MEET: {0}")]
    Thread(std::io::Error),
}

/// Starts asking `target` (an ip and bus port) for its fabric address; once found, this
/// host's ip as the peer saw it goes to `learn_ip` and a MEET of the address to `requests`.
pub fn start(
    target: SocketAddr,
    requests: SyncSender<Request>,
    learn_ip: Option<LocalIpHook>,
) -> Result<(), MeetLookupError> {
    if LOOKUPS_IN_FLIGHT.fetch_add(1, Ordering::AcqRel) >= MEET_LOOKUPS_MAX {
        LOOKUPS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        return Err(MeetLookupError::TooMany);
    }
    let spawned = std::thread::Builder::new()
        .name("node-cluster-meet".into())
        .spawn(move || {
            match lookup_until_answered(target) {
                Ok(found) => match found.address.parse() {
                    Ok(addr) => {
                        if let (Some(ip), Some(hook)) = (found.local_ip, &learn_ip) {
                            hook(ip);
                        }
                        let _ = requests.send(Request::Meet(addr));
                    }
                    Err(e) => tracing::warn!(%target, error = %e, "CLUSTER MEET: bad address"),
                },
                Err(e) => tracing::warn!(%target, error = %e, "CLUSTER MEET lookup failed"),
            }
            LOOKUPS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        });
    if let Err(e) = spawned {
        LOOKUPS_IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
        return Err(MeetLookupError::Thread(e));
    }
    Ok(())
}

/// Asks `target`'s bus port for its fabric address until it answers or [`MEET_RETRY_FOR`]
/// has passed; returns the last failure then. Runs on the lookup's own thread.
fn lookup_until_answered(target: SocketAddr) -> Result<rendezvous::Found, rendezvous::LookupError> {
    let deadline = Instant::now() + MEET_RETRY_FOR;
    let mut pause = MEET_RETRY_PAUSE;
    loop {
        match rendezvous::lookup(target) {
            Ok(found) => return Ok(found),
            // It answered, with something that is not an address: asking again won't help.
            Err(e @ rendezvous::LookupError::Bad(..)) => return Err(e),
            Err(e) if Instant::now() + pause >= deadline => return Err(e),
            Err(e) => {
                tracing::debug!(%target, error = %e, "CLUSTER MEET: no answer yet, asking again");
                std::thread::sleep(pause);
                pause = (pause * 2).min(MEET_RETRY_PAUSE_MAX);
            }
        }
    }
}
