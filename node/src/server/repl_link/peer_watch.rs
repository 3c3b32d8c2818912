//! In cluster mode, each end of a replication link watches the other through gossip, which
//! notices a dead or restarted node within `cluster-node-timeout`, instead of waiting for
//! the ring to fall silent for `repl-timeout`:
//!
//! - a new process incarnation (the peer restarted): the link is gone;
//! - FAIL (a majority agrees the peer is down): the link is gone;
//! - silent here for a node timeout (PFAIL, or a FAIL flag with nothing heard since): the
//!   peer is suspected; a primary stops counting it for WAIT, `min-replicas-*`,
//!   `repl-sync-acks` and its shutdown wait, but keeps the link (a bus hiccup with a working
//!   ring must not make it relink in a loop). A FAIL flag alone is not suspicion: it
//!   outlives the silence (a node back from the dead keeps it for a while);
//! - on the primary's side, a node the topology no longer names as its replica: gone.
//!
//! [`WatchState::observe`] is the rule, pure; [`PeerWatch`] reads the topology and the peer
//! view for it, at most once per [`CHECK_PERIOD`].

use crate::cluster::flags::bit;
use crate::cluster::{Cluster, NodeId};
use std::time::{Duration, Instant};

/// How often a link thread looks at gossip: far below any node timeout, far above the cost.
pub const CHECK_PERIOD: Duration = Duration::from_millis(20);

/// What gossip says of the peer now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// The incarnation its last header named (0: none yet).
    pub incarnation: u64,
    pub pfail: bool,
    pub fail: bool,
    /// Nothing heard from it for a node timeout (or ever).
    pub silent: bool,
    /// For a primary watching a replica: whether the topology still names it a replica of
    /// this node (None: the node is not in the topology, nothing is concluded).
    pub still_replica: Option<bool>,
}

/// The verdict on the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerState {
    Alive,
    /// PFAIL: not counted as a live replica, link kept.
    Suspected,
    /// The link must end (why).
    Gone(&'static str),
}

/// What a watch remembers between looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchState {
    /// The incarnation the link belongs to: the one the peer named when it linked, else the
    /// one gossip showed then (0: none yet; the first one shown is taken).
    incarnation: u64,
    /// Gossip has shown `incarnation` since the link was set up. Until then a peer that
    /// named its incarnation may still appear under its previous one (gossip from before
    /// its restart): that is not a new restart.
    current_seen: bool,
    was_failed: bool,
}

impl WatchState {
    /// A watch that starts from `seen` (what gossip said when the link was set up) and, if
    /// the peer named it, the incarnation the link belongs to.
    pub fn new(seen: &Seen, named: Option<u64>) -> Self {
        let incarnation = named.filter(|&n| n != 0).unwrap_or(seen.incarnation);
        WatchState {
            incarnation,
            current_seen: incarnation != 0 && seen.incarnation == incarnation,
            was_failed: seen.fail,
        }
    }

    pub fn observe(&mut self, seen: &Seen) -> PeerState {
        match seen.incarnation {
            0 => {}
            n if n == self.incarnation => self.current_seen = true,
            n if self.incarnation == 0 => {
                self.incarnation = n;
                self.current_seen = true;
            }
            // The peer's previous incarnation, not yet replaced in gossip.
            _ if !self.current_seen => {}
            _ => return PeerState::Gone("the peer restarted (new incarnation)"),
        }
        let newly_failed = seen.fail && !self.was_failed;
        self.was_failed = seen.fail;
        if newly_failed {
            return PeerState::Gone("the peer is FAIL");
        }
        if seen.still_replica == Some(false) {
            return PeerState::Gone("the topology no longer names it a replica of this node");
        }
        if seen.pfail || seen.silent {
            return PeerState::Suspected;
        }
        PeerState::Alive
    }
}

/// A link thread's watch on its peer, reading gossip at most once per [`CHECK_PERIOD`].
pub struct PeerWatch {
    node: NodeId,
    /// Set on a primary watching a replica: the topology must keep naming it a replica of
    /// this node.
    primary: Option<NodeId>,
    state: WatchState,
    next_check: Instant,
    last: PeerState,
    node_timeout_ms: u64,
}

impl PeerWatch {
    /// Watches `node` as a primary watches its replica (`as_primary` is this node's id) or
    /// as a replica watches its primary (`None`); `named` is the incarnation the peer
    /// named when it linked, if it did.
    pub fn new(
        cluster: &Cluster,
        node: NodeId,
        as_primary: Option<NodeId>,
        named: Option<u64>,
        node_timeout_ms: u64,
    ) -> Self {
        let seen = read(cluster, &node, as_primary, node_timeout_ms);
        PeerWatch {
            node,
            primary: as_primary,
            state: WatchState::new(&seen, named),
            next_check: Instant::now() + CHECK_PERIOD,
            last: PeerState::Alive,
            node_timeout_ms,
        }
    }

    /// The peer's state, looked at again if [`CHECK_PERIOD`] has passed since the last look.
    pub fn check(&mut self, cluster: &Cluster) -> PeerState {
        let now = Instant::now();
        if now >= self.next_check {
            self.next_check = now + CHECK_PERIOD;
            let seen = read(cluster, &self.node, self.primary, self.node_timeout_ms);
            self.last = self.state.observe(&seen);
        }
        self.last
    }
}

/// What gossip and the topology say of `node` now.
fn read(
    cluster: &Cluster,
    node: &NodeId,
    as_primary: Option<NodeId>,
    node_timeout_ms: u64,
) -> Seen {
    let (incarnation, silent) = {
        let view = cluster.peer_view.read();
        match view.get(node) {
            Some(p) => (
                p.incarnation,
                view.at_ms.saturating_sub(p.heard_ms) > node_timeout_ms,
            ),
            // Not in the view yet (the bus has not ticked since it met the node).
            None => (0, false),
        }
    };
    let t = cluster.topology.read();
    let Some(n) = t.index_of(node).and_then(|i| t.node(i)) else {
        return Seen {
            incarnation,
            ..Seen::default()
        };
    };
    Seen {
        incarnation,
        pfail: n.flags.has(bit::PFAIL),
        fail: n.flags.has(bit::FAIL),
        silent,
        still_replica: as_primary.map(|me| n.is_replica() && n.primary == Some(me)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(incarnation: u64) -> Seen {
        Seen {
            incarnation,
            ..Seen::default()
        }
    }

    #[test]
    fn a_new_incarnation_ends_the_link_once_the_current_one_was_seen() {
        // Not named: the one gossip shows at setup is the link's.
        let mut w = WatchState::new(&seen(5), None);
        assert_eq!(w.observe(&seen(5)), PeerState::Alive);
        assert_eq!(w.observe(&seen(0)), PeerState::Alive, "nothing said");
        assert!(matches!(w.observe(&seen(6)), PeerState::Gone(_)));
        // Unknown at setup: the first one shown is taken.
        let mut w = WatchState::new(&seen(0), None);
        assert_eq!(w.observe(&seen(7)), PeerState::Alive);
        assert!(matches!(w.observe(&seen(8)), PeerState::Gone(_)));
        // Named by the peer: its previous incarnation, still in gossip, is no restart;
        // once the named one was shown, any other is.
        let mut w = WatchState::new(&seen(3), Some(4));
        assert_eq!(w.observe(&seen(3)), PeerState::Alive);
        assert_eq!(w.observe(&seen(4)), PeerState::Alive);
        assert!(matches!(w.observe(&seen(9)), PeerState::Gone(_)));
    }

    #[test]
    fn fail_ends_the_link_pfail_only_suspects() {
        let mut w = WatchState::new(&seen(1), None);
        let pfail = Seen {
            pfail: true,
            ..seen(1)
        };
        assert_eq!(w.observe(&pfail), PeerState::Suspected);
        assert_eq!(w.observe(&seen(1)), PeerState::Alive, "heard again");
        let fail = Seen {
            fail: true,
            ..seen(1)
        };
        assert!(matches!(w.observe(&fail), PeerState::Gone(_)));
        // A link set up while the peer was FAIL is not ended by that same FAIL, and the
        // flag (which outlives the silence) does not make it suspect while it is heard.
        let mut w = WatchState::new(&fail, None);
        assert_eq!(w.observe(&fail), PeerState::Alive);
        let silent_fail = Seen {
            silent: true,
            ..fail
        };
        assert_eq!(w.observe(&silent_fail), PeerState::Suspected);
        assert_eq!(w.observe(&seen(1)), PeerState::Alive);
        assert!(
            matches!(w.observe(&fail), PeerState::Gone(_)),
            "failed again"
        );
    }

    #[test]
    fn a_replica_the_topology_moved_away_is_gone() {
        let mut w = WatchState::new(&seen(1), None);
        let mine = Seen {
            still_replica: Some(true),
            ..seen(1)
        };
        assert_eq!(w.observe(&mine), PeerState::Alive);
        let unknown = Seen {
            still_replica: None,
            ..seen(1)
        };
        assert_eq!(w.observe(&unknown), PeerState::Alive);
        let moved = Seen {
            still_replica: Some(false),
            ..seen(1)
        };
        assert!(matches!(w.observe(&moved), PeerState::Gone(_)));
    }
}
