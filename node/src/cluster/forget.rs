//! CLUSTER FORGET's topology part, with redis-server 7.0.15's checks: the node leaves the
//! table with its slots and open-slot markers, and its replicas no longer name it (Redis's
//! `freeClusterNode` clears their `slaveof`). Keeping gossip from adding it back for a
//! minute is the gossip core's blacklist (`gossip::blacklist`).

use super::error::ClusterError;
use super::node::ClusterNode;
use super::topology::Topology;

impl Topology {
    /// Removes the node named by `arg`; returns it.
    pub fn forget(&mut self, arg: &[u8]) -> Result<ClusterNode, ClusterError> {
        let i = self.lookup_arg(arg)?;
        if i == self.myself_index() {
            return Err(ClusterError::ForgetMyself);
        }
        let id = self.nodes[i as usize].id;
        let me = self.myself();
        if me.is_replica() && me.primary == Some(id) {
            return Err(ClusterError::ForgetMyPrimary);
        }
        let node = self
            .remove_node(i)
            .ok_or_else(|| ClusterError::UnknownNode(id.to_string()))?;
        for n in self.nodes.iter_mut() {
            if n.primary == Some(id) {
                n.primary = None;
            }
        }
        Ok(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::id::{HexId, NodeId};
    use rand::SeedableRng;

    fn four() -> (Topology, Vec<NodeId>) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        let mut t = Topology::new(ClusterNode::new(
            HexId::random(&mut rng),
            HexId::random(&mut rng),
        ));
        let mut ids = vec![t.myself().id];
        for _ in 0..3 {
            let n = ClusterNode::new(HexId::random(&mut rng), HexId::random(&mut rng));
            ids.push(n.id);
            t.add_node(n).unwrap();
        }
        (t, ids)
    }

    #[test]
    fn forget_refuses_as_redis_does() {
        let (mut t, ids) = four();
        let e = |r: Result<ClusterNode, ClusterError>| r.unwrap_err().to_string();
        assert_eq!(e(t.forget(b"nope")), "ERR Unknown node nope");
        assert_eq!(
            e(t.forget(ids[0].as_bytes())),
            "ERR I tried hard but I can't forget myself..."
        );
        t.replicate(ids[1].as_bytes(), 0).unwrap();
        assert_eq!(
            e(t.forget(ids[1].as_bytes())),
            "ERR Can't forget my master!"
        );
        assert_eq!(t.nodes.len(), 4);
    }

    #[test]
    fn forget_drops_the_node_its_slots_markers_and_replica_links() {
        let (mut t, ids) = four();
        let two = t.index_of(&ids[2]);
        t.slots.set_owner(5, two);
        t.slots.set_owner(6, t.index_of(&ids[3]));
        t.slots.migrating.insert(6, ids[2]);
        let three = t.index_of(&ids[3]).unwrap() as usize;
        t.nodes[three].flags = crate::cluster::flags::NodeFlags(crate::cluster::flags::bit::SLAVE);
        t.nodes[three].primary = Some(ids[2]);
        let gone = t.forget(ids[2].as_bytes()).unwrap();
        assert_eq!(gone.id, ids[2]);
        assert!(t.index_of(&ids[2]).is_none());
        assert_eq!(t.slots.owner(5), None);
        assert_eq!(t.slots.owner(6), t.index_of(&ids[3]));
        assert!(t.slots.migrating.is_empty());
        assert_eq!(t.nodes[t.index_of(&ids[3]).unwrap() as usize].primary, None);
        assert_eq!(
            t.forget(ids[2].as_bytes()).unwrap_err().to_string(),
            format!("ERR Unknown node {}", ids[2])
        );
    }
}
