//! The gossip core's bus-port lookups (`gossip::rediscover`), each on a short thread of its
//! own: a lookup is a TCP connect and one line read with a timeout, which must not hold the
//! bus thread. The answer returns as a request to the bus thread.

use super::rendezvous;
use super::runtime::Request;
use crate::cluster::id::NodeId;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

/// Lookups running at once: a whole cluster restarting asks about every peer, each at most
/// once per retry period; more than this wait for the next period.
pub const LOOKUPS_IN_FLIGHT_MAX: usize = 16;

#[derive(Default)]
pub struct Lookups {
    in_flight: Arc<AtomicUsize>,
}

impl Lookups {
    /// Asks `ip:cport` for node `id`'s bus address; the answer goes to `requests`. Skipped
    /// (the core asks again later) when too many are running or the ip is not an address.
    pub fn start(&self, id: NodeId, ip: &str, cport: u16, requests: SyncSender<Request>) {
        let Ok(ip) = ip.parse::<IpAddr>() else {
            return;
        };
        if self.in_flight.fetch_add(1, Ordering::AcqRel) >= LOOKUPS_IN_FLIGHT_MAX {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let in_flight = self.in_flight.clone();
        let at = SocketAddr::new(ip, cport);
        let spawned = std::thread::Builder::new()
            .name("node-bus-lookup".into())
            .spawn(move || {
                match rendezvous::lookup(at) {
                    Ok(found) => {
                        let _ = requests.try_send(Request::AddressFound {
                            id,
                            addr: found.address,
                        });
                    }
                    Err(e) => tracing::debug!(%id, error = %e, "bus port lookup failed"),
                }
                in_flight.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
    }
}
