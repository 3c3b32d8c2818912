//! Fabric clients that have not proven who they are (issue 15: bounded memory per
//! unauthenticated peer, and their number). With `requirepass` set, each new fabric client
//! starts with the small pre-auth window ([`bus::stream::Stream::server_preauth`]) and is
//! tracked here by the accept thread until it authenticates:
//! - at most `rdma-unauthenticated-max` at once: a new one closes the oldest;
//! - each gets [`FABRIC_AUTH_DEADLINE`] to authenticate, then it is closed.
//!
//! Its [`FabricClient`](super::client::FabricClient) raises the `proven` flag when its
//! session authenticates (and then grants the stream its full window); closing goes through
//! CLIENT KILL's path ([`ClientShared::kill`]).

use crate::node_state::client::ClientShared;
use crate::node_state::stats::Stats;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a fabric client may stay unauthenticated while a password is set.
pub const FABRIC_AUTH_DEADLINE: Duration = Duration::from_secs(10);
/// Input an unauthenticated fabric client may have pending (unparsed) before it is closed:
/// its window is 8 KiB, so a longer pending request can only be an attempt to pin memory.
pub const FABRIC_PREAUTH_INPUT_MAX: usize = 8 * 1024;
/// Starting size of the read and write buffers of a fabric client that starts with the
/// pre-auth window: AUTH and its reply fit, and both grow on demand (to
/// `INITIAL_BUFFER` and beyond) once it has authenticated. An idle unproven peer costs
/// two of these, not two `INITIAL_BUFFER`s.
pub const FABRIC_PREAUTH_BUFFER: usize = 512;

struct Unproven {
    shared: Arc<ClientShared>,
    proven: Arc<AtomicBool>,
    since: Instant,
}

impl Unproven {
    /// Still waiting to authenticate (not proven, not closed by anyone, not gone).
    fn waiting(&self) -> bool {
        !self.proven.load(Relaxed)
            && !self.shared.is_killed()
            && Arc::strong_count(&self.shared) > 1
    }
}

/// The accept thread's list of unauthenticated fabric clients, oldest first.
#[derive(Default)]
pub struct PreAuth {
    waiting: VecDeque<Unproven>,
}

impl PreAuth {
    /// Tracks a new client; closes the oldest waiting ones beyond `max` (counting the new
    /// one). Returns the flag its FabricClient raises once authenticated.
    pub fn admit(
        &mut self,
        shared: Arc<ClientShared>,
        max: usize,
        closed: &AtomicU64,
    ) -> Arc<AtomicBool> {
        self.waiting.retain(Unproven::waiting);
        while self.waiting.len() >= max.max(1) {
            if let Some(old) = self.waiting.pop_front() {
                tracing::info!(
                    client = old.shared.id,
                    "closing the oldest unauthenticated fabric client (rdma-unauthenticated-max)"
                );
                old.shared.kill();
                Stats::add(closed, 1);
            }
        }
        let proven = Arc::new(AtomicBool::new(false));
        self.waiting.push_back(Unproven {
            shared,
            proven: proven.clone(),
            since: Instant::now(),
        });
        proven
    }

    /// Closes clients unauthenticated for longer than `deadline`.
    pub fn expire(&mut self, deadline: Duration, closed: &AtomicU64) {
        self.waiting.retain(Unproven::waiting);
        while let Some(first) = self.waiting.front() {
            if first.since.elapsed() <= deadline {
                break;
            }
            if let Some(old) = self.waiting.pop_front() {
                tracing::info!(
                    client = old.shared.id,
                    "closing a fabric client that did not authenticate in time"
                );
                old.shared.kill();
                Stats::add(closed, 1);
            }
        }
    }

    /// Clients waiting to authenticate.
    pub fn len(&self) -> usize {
        self.waiting.iter().filter(|u| u.waiting()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn client(id: u64) -> Arc<ClientShared> {
        let a: SocketAddr = "0.0.0.0:0".parse().unwrap();
        Arc::new(ClientShared::new(id, a, a))
    }

    /// Goal: beyond the limit the oldest waiting client is closed; authenticated, killed and
    /// gone clients do not count; the deadline closes the old ones only.
    #[test]
    fn the_oldest_goes_first_and_proven_ones_do_not_count() {
        let closed = AtomicU64::new(0);
        let mut p = PreAuth::default();
        let clients: Vec<_> = (1..=4).map(client).collect();
        let flags: Vec<_> = clients[..3]
            .iter()
            .map(|c| p.admit(c.clone(), 3, &closed))
            .collect();
        assert_eq!(p.len(), 3);
        flags[1].store(true, Relaxed);
        assert_eq!(p.len(), 2);
        p.admit(clients[3].clone(), 3, &closed);
        assert!(!clients[0].is_killed(), "room was made by the proven one");
        let fifth = client(5);
        p.admit(fifth.clone(), 3, &closed);
        assert!(clients[0].is_killed(), "the oldest waiting one goes");
        assert!(!clients[2].is_killed() && !clients[1].is_killed());
        assert_eq!(closed.load(Relaxed), 1);
        p.expire(Duration::from_secs(3600), &closed);
        assert_eq!(p.len(), 3);
        p.expire(Duration::ZERO, &closed);
        assert!(clients[2].is_killed() && clients[3].is_killed() && fifth.is_killed());
        assert!(!clients[1].is_killed());
        assert_eq!(closed.load(Relaxed), 4);
        assert!(p.is_empty());
    }
}
