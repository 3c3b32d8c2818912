//! Raft names peers by non-zero u64; the cluster names nodes by 40 hex digits. A node's raft
//! id is its first 16 hex digits read as a number: every node computes the same id with no
//! coordination, and logs stay readable (the id is the node id's prefix).
//!
//! Collisions: random node ids share a 64-bit prefix with probability about n²/2⁶⁵ (n nodes),
//! but a hand-made id could. A node whose raft id is zero (raft's "none") or is already held
//! by a different member is refused when it is added ([`LogError::RaftIdCollision`]), and a
//! committed change naming one is rejected on apply the same way on every node; such a node
//! must take a new node id (CLUSTER RESET HARD) to join.

use super::log_error::LogError;
use crate::cluster::id::NodeId;
use std::collections::BTreeMap;

pub fn raft_id(node: &NodeId) -> u64 {
    node.as_bytes()[..16].iter().fold(0u64, |acc, &c| {
        let digit = (c as char).to_digit(16).unwrap_or(0) as u64;
        (acc << 4) | digit
    })
}

/// Raft id to node id for every peer this log may have to address: members, plus peers
/// heard from (a new learner answers a leader it has no snapshot from yet).
#[derive(Debug, Default, Clone)]
pub struct Directory {
    by_raft: BTreeMap<u64, NodeId>,
}

/// Most peers a directory holds: one per node the topology can hold.
pub const DIRECTORY_MAX: usize = crate::cluster::topology::NODES_MAX;

impl Directory {
    /// Checks that `node` can be named in raft, returning its raft id.
    pub fn check(&self, node: &NodeId) -> Result<u64, LogError> {
        let id = raft_id(node);
        match self.by_raft.get(&id) {
            _ if id == 0 => Err(LogError::RaftIdCollision(*node)),
            Some(other) if other != node => Err(LogError::RaftIdCollision(*node)),
            _ => Ok(id),
        }
    }

    /// Records `node` (a member or a peer heard from); false when refused or full.
    pub fn learn(&mut self, node: &NodeId) -> bool {
        let Ok(id) = self.check(node) else {
            return false;
        };
        if !self.by_raft.contains_key(&id) && self.by_raft.len() >= DIRECTORY_MAX {
            return false;
        }
        self.by_raft.insert(id, *node);
        true
    }

    /// Records a member named by a committed change; it wins over a peer merely heard from.
    pub fn assign(&mut self, id: u64, node: NodeId) {
        if self.by_raft.contains_key(&id) || self.by_raft.len() < DIRECTORY_MAX {
            self.by_raft.insert(id, node);
        }
    }

    pub fn node(&self, id: u64) -> Option<NodeId> {
        self.by_raft.get(&id).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::id::HexId;

    #[test]
    fn ids_come_from_the_prefix_and_collisions_are_refused() {
        let a = HexId::parse(b"0123456789abcdef0000000000000000000000aa").unwrap();
        let b = HexId::parse(b"0123456789abcdef0000000000000000000000bb").unwrap();
        let zero = HexId::parse(&[b'0'; 40]).unwrap();
        assert_eq!(raft_id(&a), 0x0123_4567_89ab_cdef);
        let mut d = Directory::default();
        assert!(d.learn(&a));
        assert!(d.learn(&a));
        assert_eq!(d.check(&b).unwrap_err(), LogError::RaftIdCollision(b));
        assert!(!d.learn(&b));
        assert!(!d.learn(&zero));
        assert_eq!(d.node(raft_id(&a)), Some(a));
    }
}
