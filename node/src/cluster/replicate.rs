//! CLUSTER REPLICATE and REPLICAS (SLAVES) as topology methods, with redis-server 7.0.15's
//! checks in its order. Only the topology changes here: this node is flagged a replica of
//! the primary and joins its shard; copying the primary's data is replication's job.

use super::error::ClusterError;
use super::flags::bit;
use super::node::ClusterNode;
use super::topology::Topology;

impl Topology {
    /// Makes this node a replica of the primary named by `arg` (Redis's `clusterSetMaster`).
    /// A primary must own no slots and hold no keys (`keys_held`); a replica may switch
    /// primaries freely.
    pub fn replicate(&mut self, arg: &[u8], keys_held: usize) -> Result<(), ClusterError> {
        let i = self.lookup_arg(arg)?;
        let me = self.myself_index();
        if i == me {
            return Err(ClusterError::ReplicateMyself);
        }
        let primary = &self.nodes[i as usize];
        if primary.is_replica() {
            return Err(ClusterError::ReplicateReplica);
        }
        let (primary_id, primary_shard) = (primary.id, primary.shard);
        if self.myself().is_primary() {
            if !self.slots.ranges_of(me).is_empty() || keys_held != 0 {
                return Err(ClusterError::ReplicateNotEmpty);
            }
            // A primary turning replica closes its open slots (`clusterCloseAllSlots`).
            self.slots.migrating.clear();
            self.slots.importing.clear();
        }
        let myself = self.myself_mut();
        myself.flags.set(bit::MASTER, false);
        myself.flags.set(bit::MIGRATE_TO, false);
        myself.flags.set(bit::SLAVE, true);
        myself.primary = Some(primary_id);
        // A replica belongs to its primary's shard (Redis 7.2's `updateShardId`).
        myself.shard = primary_shard;
        self.refresh_state();
        Ok(())
    }

    /// The replicas of the primary named by `arg`, in table order.
    pub fn replicas_arg(&self, arg: &[u8]) -> Result<Vec<&ClusterNode>, ClusterError> {
        let i = self.lookup_arg(arg)?;
        let node = &self.nodes[i as usize];
        if node.is_replica() {
            return Err(ClusterError::NotAPrimary);
        }
        Ok(self.replicas_of(&node.id).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::id::{HexId, NodeId};
    use crate::cluster::nodes_text::cluster_nodes;
    use rand::SeedableRng;

    /// Myself (index 0) and two primaries, the second owning slot 7.
    fn three() -> (Topology, Vec<NodeId>) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut ids = Vec::new();
        let mut t = Topology::new(ClusterNode::new(
            HexId::random(&mut rng),
            HexId::random(&mut rng),
        ));
        ids.push(t.myself().id);
        for _ in 0..2 {
            let n = ClusterNode::new(HexId::random(&mut rng), HexId::random(&mut rng));
            ids.push(n.id);
            t.add_node(n).unwrap();
        }
        t.slots.set_owner(7, t.index_of(&ids[2]));
        (t, ids)
    }

    fn err(r: Result<(), ClusterError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn replicate_refuses_as_redis_does() {
        let (mut t, ids) = three();
        let me = ids[0].to_string();
        assert_eq!(err(t.replicate(b"abc", 0)), "ERR Unknown node abc");
        let upper = ids[1].to_string().to_ascii_uppercase();
        assert_eq!(
            err(t.replicate(upper.as_bytes(), 0)),
            format!("ERR Unknown node {upper}")
        );
        assert_eq!(
            err(t.replicate(me.as_bytes(), 0)),
            "ERR Can't replicate myself"
        );
        assert_eq!(
            err(t.replicate(ids[1].as_bytes(), 3)),
            "ERR To set a master the node must be empty and without assigned slots."
        );
        t.slots.set_owner(9, Some(t.myself_index()));
        assert_eq!(
            err(t.replicate(ids[1].as_bytes(), 0)),
            "ERR To set a master the node must be empty and without assigned slots."
        );
        // Node 2 turned replica (as gossip would say) cannot be followed.
        let two = t.index_of(&ids[2]).unwrap() as usize;
        t.nodes[two].flags = crate::cluster::flags::NodeFlags(bit::SLAVE);
        t.nodes[two].primary = Some(ids[1]);
        assert_eq!(
            err(t.replicate(ids[2].as_bytes(), 0)),
            "ERR I can only replicate a master, not a replica."
        );
        assert!(t.myself().is_primary(), "nothing changed");
    }

    #[test]
    fn replicate_flags_myself_a_replica_in_the_primary_shard() {
        let (mut t, ids) = three();
        t.slots.importing.insert(100, ids[2]);
        t.replicate(ids[1].as_bytes(), 0).unwrap();
        let me = t.myself();
        assert!(me.is_replica() && !me.is_primary());
        assert_eq!(me.primary, Some(ids[1]));
        let primary_shard = t.nodes[t.index_of(&ids[1]).unwrap() as usize].shard;
        assert_eq!(me.shard, primary_shard);
        assert!(t.slots.importing.is_empty(), "open slots are closed");
        let line = cluster_nodes(&t).lines().next().unwrap().to_string();
        assert!(
            line.contains(&format!(" myself,slave {} ", ids[1])),
            "{line}"
        );
        // A replica may switch primaries, slots or keys notwithstanding.
        t.replicate(ids[2].as_bytes(), 5).unwrap();
        assert_eq!(t.myself().primary, Some(ids[2]));
        // And the primaries list it.
        let names: Vec<NodeId> = t
            .replicas_arg(ids[2].as_bytes())
            .unwrap()
            .iter()
            .map(|n| n.id)
            .collect();
        assert_eq!(names, vec![ids[0]]);
        assert!(t.replicas_arg(ids[1].as_bytes()).unwrap().is_empty());
    }

    #[test]
    fn replicas_of_a_replica_or_an_unknown_node_are_errors() {
        let (mut t, ids) = three();
        t.replicate(ids[1].as_bytes(), 0).unwrap();
        assert_eq!(
            t.replicas_arg(ids[0].as_bytes()).unwrap_err().to_string(),
            "ERR The specified node is not a master"
        );
        assert_eq!(
            t.replicas_arg(b"nope").unwrap_err().to_string(),
            "ERR Unknown node nope"
        );
    }
}
