//! Nodes CLUSTER FORGET removed, kept from being added back by gossip for a while (Redis's
//! nodes blacklist): other nodes may still mention a forgotten node until the operator has
//! sent FORGET to all of them, and a node re-added in between would come back everywhere.

use crate::cluster::id::NodeId;
use crate::cluster::topology::NODES_MAX;
use std::collections::HashMap;

/// How long a forgotten node stays out (Redis's `CLUSTER_BLACKLIST_TTL`, one minute: the
/// time redis-cli has to send FORGET to every node).
pub const BLACKLIST_TTL_MS: u64 = 60_000;
/// Most ids kept at once: a cluster has at most this many nodes to forget; past it the
/// entry closest to expiring makes room.
pub const BLACKLIST_MAX: usize = NODES_MAX;

#[derive(Debug, Default)]
pub struct Blacklist {
    /// Id -> last ms it is still refused.
    until: HashMap<NodeId, u64>,
}

impl Blacklist {
    /// Refuses `id` for the next [`BLACKLIST_TTL_MS`] (again from now if already there).
    pub fn add(&mut self, id: NodeId, now_ms: u64) {
        self.expire(now_ms);
        if self.until.len() >= BLACKLIST_MAX && !self.until.contains_key(&id) {
            if let Some(oldest) = self.until.iter().min_by_key(|(_, u)| **u).map(|(i, _)| *i) {
                self.until.remove(&oldest);
            }
        }
        self.until
            .insert(id, now_ms.saturating_add(BLACKLIST_TTL_MS));
    }

    pub fn contains(&mut self, id: &NodeId, now_ms: u64) -> bool {
        self.expire(now_ms);
        self.until.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.until.len()
    }

    pub fn is_empty(&self) -> bool {
        self.until.is_empty()
    }

    fn expire(&mut self, now_ms: u64) {
        self.until.retain(|_, until| *until >= now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::id::HexId;
    use rand::SeedableRng;

    fn ids(n: usize) -> Vec<NodeId> {
        let mut r = rand::rngs::StdRng::seed_from_u64(11);
        (0..n).map(|_| HexId::random(&mut r)).collect()
    }

    #[test]
    fn an_entry_lasts_the_ttl_and_a_new_add_restarts_it() {
        let id = ids(1)[0];
        let mut b = Blacklist::default();
        b.add(id, 1_000);
        assert!(b.contains(&id, 1_000 + BLACKLIST_TTL_MS));
        assert!(!b.contains(&id, 1_001 + BLACKLIST_TTL_MS));
        assert!(b.is_empty(), "expired entries are dropped");
        b.add(id, 5_000);
        b.add(id, 30_000);
        assert!(b.contains(&id, 30_000 + BLACKLIST_TTL_MS));
    }

    #[test]
    fn it_is_bounded() {
        let all = ids(BLACKLIST_MAX + 1);
        let mut b = Blacklist::default();
        for (i, id) in all.iter().enumerate() {
            b.add(*id, i as u64);
        }
        assert_eq!(b.len(), BLACKLIST_MAX);
        assert!(
            !b.contains(&all[0], BLACKLIST_MAX as u64),
            "the oldest made room"
        );
        assert!(b.contains(&all[BLACKLIST_MAX], BLACKLIST_MAX as u64));
    }
}
