//! Finding a node again after it restarted on a new bus address. A fabric address (an
//! ephemeral ofi:tcp port, a verbs QPN) does not survive a restart, and a node learns a
//! peer's new one only from that peer's PING. When every node restarts at once (a whole
//! cluster stopped and started), nobody's PING reaches anybody, so each node asks a silent
//! peer's bus port (`ip:cport`, the TCP rendezvous CLUSTER MEET uses) for its address.
//!
//! The rendezvous is not authenticated: a wrong answer only sends pings astray (every bus
//! message is sealed and names its sender, so a stranger's address gains nothing), and the
//! node's own PING puts its true address back.

use super::{Action, Event, Gossip};
use crate::cluster::flags::bit;
use crate::cluster::id::NodeId;
use crate::cluster::slots::NodeIndex;
use crate::cluster::topology::Topology;

/// Least time between two lookups of one node: a node that is down for long is asked about
/// this often (one short TCP connect each), not at every tick.
pub const LOOKUP_RETRY_MIN_MS: u64 = 500;

impl Gossip {
    /// Node `i` has not answered at its bus address for half a node timeout: asks its bus
    /// port for the address, at most once per retry period.
    pub(super) fn rediscover(&mut self, now_ms: u64, t: &Topology, i: NodeIndex) {
        let node = &t.nodes[i as usize];
        if node.ip.is_empty() || node.cport == 0 || node.flags.has(bit::HANDSHAKE) {
            return;
        }
        let (id, ip, cport) = (node.id, node.ip.clone(), node.cport);
        let retry = self.settings.ping_interval_ms().max(LOOKUP_RETRY_MIN_MS);
        let peer = self.peer(id);
        if peer.last_lookup_ms != 0 && now_ms.saturating_sub(peer.last_lookup_ms) < retry {
            return;
        }
        peer.last_lookup_ms = now_ms;
        self.out.push(Action::Lookup { id, ip, cport });
    }

    /// The bus port of node `id` answered `addr`: pings go there from now on, at once.
    pub(super) fn address_found(
        &mut self,
        now_ms: u64,
        id: NodeId,
        addr: String,
        t: &mut Topology,
    ) {
        let Some(i) = t.index_of(&id) else {
            return;
        };
        let node = &mut t.nodes[i as usize];
        if node.is_myself() || node.bus_addr == addr {
            return;
        }
        node.bus_addr = addr.clone();
        node.flags.set(bit::NOADDR, false);
        // The ping left for the old address is not this address's to answer.
        node.ping_sent = 0;
        self.save = true;
        self.event(Event::AddressFound {
            id,
            addr: addr.clone(),
        });
        self.send_ping(now_ms, t, &addr, Some(i), super::outgoing::PingKind::Ping);
    }
}
