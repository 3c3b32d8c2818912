//! Whether this node is on the majority side of the cluster, as a primary must be to serve
//! (issue 5: "a primary cut off from the majority stops accepting writes within
//! cluster-node-timeout"). Redis refuses commands with -CLUSTERDOWN when fewer than
//! `size / 2 + 1` voting primaries (primaries owning slots) are reachable (§2.12); here the
//! rule is a lease, made to be over before a replica can be promoted in the primary's place.
//!
//! **The rule.** [`Gossip::in_majority`] is true at `now` iff at least `size / 2 + 1` of
//! the voting primaries in this node's topology (`size` of them) count, where
//!
//! - this node counts if it is one of them;
//! - another counts if it echoed back a stamp of this node's taken within the lease window
//!   [`Gossip::lease_ms`] (`echo >= now - lease_ms`, both on this node's clock). Every PING,
//!   PONG and MEET carries the sender's clock and the latest stamp it received from the
//!   receiver, so an echo of stamp `e` proves the peer was alive, at the version its header
//!   advertised, at some instant after `e`. Counting from the stamp rather than from the
//!   arrival is what makes the lease independent of how long messages take;
//! - and, in a topology group, the topology version the peer's last header advertised is
//!   not ahead of this node's (a peer that applied changes this node has not may know it
//!   was deposed);
//! - and, in a topology group, that peer has advertised a topology version at or past
//!   this node's grant (`ConsensusState::promoted_at`: the log index of the `Promote`
//!   that made it primary) for at least [`Gossip::handoff_ms`] = the lease (counted from
//!   the arrival of its first header at or past the grant). Slot grants need no hand-off:
//!   AssignSlots takes only unowned slots, and SETSLOT NODE ends a migration whose source
//!   still redirects (ASK) for every key it no longer holds. Or, sooner (the fast
//!   hand-off): that peer said, in a PING/PONG at a version at or past the grant, that
//!   every echo it sent at a lower version to a node not known to be at its version
//!   carried a stamp it received at least a lease before (`echo_ledger`).
//!
//! **The hand-off (strict, for any links and any delivery times):** say N is promoted at
//! log index v over P, and voter R applies v at time a_R. P counts R only through echoes
//! carried by messages at a version below v (P has not applied v, else it is no primary),
//! i.e. sent by R before a_R, so echoing stamps e < a_R: P stops counting R by
//! e + lease < a_R + lease. N counts R only once a header of R's at or past v has been
//! known to N for a lease; that header arrived after a_R, so N counts R only after
//! a_R + lease. Both need a majority of the same voters, which share some R: their serving
//! times never overlap. This needs no symmetry of links and no bound on delivery, only
//! clocks that run at the same rate over a lease (offsets between them do not matter: each
//! node compares only its own clock's readings).
//!
//! **The fast hand-off** is as strict: such an echo e reached a deposed P by a message R
//! sent below v, so P counts it until at most e + lease <= (its arrival at R) + lease, which
//! R said was over when it sent the claim, before N got it. A node X that R knew to be at
//! R's version w >= v or later is left out of the claim: at w, X knows v, so it is no
//! primary by the ownership v took away. After a crash the claim holds as soon as the live nodes
//! have told R they applied the promotion (the dead primary's last stamp is a node timeout
//! old), so the promoted node waits for that instead of a lease; with the deposed primary
//! alive and still echoed, it waits the lease as above.
//!
//! **Why it is safe with the failover rule** (agent `failover`): a `Promote` in place of
//! primary P is proposed only once P is FAIL, which takes failure reports from a majority of
//! voting primaries (plus the marking node's own PFAIL), each made after that primary heard
//! nothing from P for more than `node_timeout`. Two majorities of the same voters meet in
//! at least one R. R hearing nothing from P for `node_timeout` means R received no stamp of
//! P's in that time, so every echo R sent P is of a stamp older than the silence, and P
//! stopped counting R a lease into it, whichever way the links failed (a link that fails
//! one way only, P hearing R but R not hearing P, starves R's echoes just the same): P had
//! lost its majority at least `node_timeout - lease` before the FAIL, and the promotion
//! comes later still (a Raft commit). A FAIL flag can outlive the silence (reports stay
//! valid 2 × node_timeout, and a slot owner keeps FAIL 2 × node_timeout once back), so P
//! could regain a majority while the promotion is under way; then the voters that applied
//! the promotion are ahead of P's version and P does not count them (the hand-off above),
//! and the leader proposes only while it has itself not heard from P for a whole node
//! timeout.

use super::convert::is_voting;
use super::peer::Peer;
use super::Gossip;
use crate::cluster::id::NodeId;
use crate::cluster::slots::NodeIndex;
use crate::cluster::topology::Topology;
use smallvec::SmallVec;

impl Gossip {
    /// The window within which a voting primary must have been heard from to count for
    /// [`Gossip::in_majority`]: [`GossipSettings::lease_ms`](super::GossipSettings::lease_ms),
    /// the node timeout over `lease_divisor` (at least five ticks), strictly shorter than the
    /// silence after which that primary suspects this node.
    pub fn lease_ms(&self) -> u64 {
        self.settings.lease_ms()
    }

    /// How long a peer must have advertised the version that made this node primary before
    /// it counts for this node: the lease, the time within which the node it replaced stops
    /// counting that peer's echoes from before (module doc).
    pub fn handoff_ms(&self) -> u64 {
        self.lease_ms()
    }

    /// When a message from `id` last arrived (None: never, or not since this core started).
    pub fn last_heard_ms(&self, id: &NodeId) -> Option<u64> {
        self.peers
            .get(id)
            .map(|p| p.data_received_ms)
            .filter(|&at| at != 0)
    }

    /// Whether this node hears a majority of the voting primaries (see the module doc for
    /// the exact rule and why it makes serving safe against failover).
    pub fn in_majority(&self, now_ms: u64, t: &Topology) -> bool {
        now_ms <= self.serving_until(now_ms, t)
    }

    /// Until when (this node's clock, ms) the majority holds on the echoes it has at `now_ms`:
    /// the lease ends then unless fresh echoes come (0: no majority; u64::MAX: this node
    /// alone is the majority). Peers still inside a hand-off at `now_ms` do not count (a later
    /// step counts them). Published as a deadline, commands check it against the clock
    /// themselves: a bus thread descheduled past the lease cannot leave a stale "yes".
    pub fn serving_until(&self, now_ms: u64, t: &Topology) -> u64 {
        let size = t.size();
        if size == 0 {
            return 0;
        }
        let needed = size / 2 + 1;
        let lease = self.lease_ms();
        let my_grant = self.my_grant(t);
        // Voters are at most NODES_MAX; a handful in practice, so no allocation per step.
        let mut ends: SmallVec<[u64; 16]> = (0..t.nodes.len() as NodeIndex)
            .filter(|&i| is_voting(t, i))
            .filter_map(|i| {
                let n = &t.nodes[i as usize];
                if n.is_myself() {
                    return Some(u64::MAX);
                }
                let p = self.peers.get(&n.id)?;
                let counts = !self.consensus
                    || (p.topology_version <= self.topology_version
                        && self.past_grant(now_ms, p, my_grant));
                p.echo_lease_end(lease).filter(|_| counts)
            })
            .collect();
        if ends.len() < needed {
            return 0;
        }
        // The needed-th latest end: until then at least `needed` voters count.
        ends.sort_unstable_by(|a, b| b.cmp(a));
        ends[needed - 1]
    }

    /// The topology version of the promotion that made this node primary (0: its role
    /// predates the group, or it was never promoted).
    pub(super) fn my_grant(&self, t: &Topology) -> u64 {
        Some(t.consensus.promoted_at)
            .filter(|&index| index <= self.topology_version && t.myself().is_primary())
            .unwrap_or(0)
    }

    /// Whether peer `p` may count for this node's grant: past it for a hand-off, or past it
    /// with its word that its older echoes have run out (module doc).
    pub(super) fn past_grant(&self, now_ms: u64, p: &Peer, my_grant: u64) -> bool {
        let waited = p
            .at_or_past_since(my_grant)
            .is_some_and(|since| now_ms.saturating_sub(since) >= self.handoff_ms());
        waited || (my_grant > 0 && p.echoes_expired_below >= my_grant)
    }

    /// Voting primaries alive (a recent echo) at or past this node's grant that do not
    /// count for it yet: pinged every tick (`cron`), so that their word that their older
    /// echoes ran out arrives within a tick of being true rather than at their next
    /// heartbeat. Empty unless this node is a primary waiting out a promotion's hand-off.
    pub(super) fn handoff_pending(&self, now_ms: u64, t: &Topology) -> Vec<NodeIndex> {
        let my_grant = self.my_grant(t);
        if !self.consensus || my_grant == 0 {
            return Vec::new();
        }
        let lease = self.lease_ms();
        (0..t.nodes.len() as NodeIndex)
            .filter(|&i| is_voting(t, i) && !t.nodes[i as usize].is_myself())
            .filter(|&i| {
                self.peers.get(&t.nodes[i as usize].id).is_some_and(|p| {
                    p.echo_lease_end(lease).is_some_and(|end| now_ms <= end)
                        && p.topology_version >= my_grant
                        && !self.past_grant(now_ms, p, my_grant)
                })
            })
            .collect()
    }
}
