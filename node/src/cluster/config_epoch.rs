//! CLUSTER BUMPEPOCH and SET-CONFIG-EPOCH: this node's config epoch set by hand, with
//! redis-server 7.0.15's rules (`clusterBumpConfigEpochWithoutConsensus`, and the
//! SET-CONFIG-EPOCH checks `redis-cli --cluster create` relies on).

use super::error::ClusterError;
use super::topology::Topology;

/// BUMPEPOCH's answer: `BUMPED n` or `STILL n`, n being this node's config epoch after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bump {
    Bumped(u64),
    Still(u64),
}

impl Bump {
    pub fn text(self) -> String {
        match self {
            Bump::Bumped(e) => format!("BUMPED {e}"),
            Bump::Still(e) => format!("STILL {e}"),
        }
    }
}

impl Topology {
    /// The greatest config epoch known, or the current epoch if greater (`clusterGetMaxEpoch`).
    pub fn max_epoch(&self) -> u64 {
        self.nodes
            .iter()
            .map(|n| n.config_epoch)
            .max()
            .unwrap_or(0)
            .max(self.current_epoch)
    }

    /// Takes a new config epoch unless this node's is already non-zero and the greatest.
    pub fn bump_epoch(&mut self) -> Bump {
        let mine = self.myself().config_epoch;
        if mine != 0 && mine == self.max_epoch() {
            return Bump::Still(mine);
        }
        self.current_epoch += 1;
        let epoch = self.current_epoch;
        self.myself_mut().config_epoch = epoch;
        Bump::Bumped(epoch)
    }

    /// Sets this node's config epoch; only on a node that knows no other and has none yet.
    pub fn set_config_epoch(&mut self, epoch: i64) -> Result<(), ClusterError> {
        let Ok(epoch) = u64::try_from(epoch) else {
            return Err(ClusterError::InvalidConfigEpoch(epoch));
        };
        if self.nodes.len() > 1 {
            return Err(ClusterError::ConfigEpochOthersKnown);
        }
        if self.myself().config_epoch != 0 {
            return Err(ClusterError::ConfigEpochNonZero);
        }
        self.myself_mut().config_epoch = epoch;
        self.current_epoch = self.current_epoch.max(epoch);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::id::HexId;
    use crate::cluster::node::ClusterNode;
    use rand::SeedableRng;

    fn lone() -> Topology {
        let mut r = rand::rngs::StdRng::seed_from_u64(6);
        Topology::new(ClusterNode::new(
            HexId::random(&mut r),
            HexId::random(&mut r),
        ))
    }

    /// The sequence run on a fresh redis-server 7.0.15 cluster node, with its replies.
    #[test]
    fn set_config_epoch_answers_as_redis() {
        let mut t = lone();
        let e = |r: Result<(), ClusterError>| r.unwrap_err().to_string();
        assert_eq!(
            e(t.set_config_epoch(-1)),
            "ERR Invalid config epoch specified: -1"
        );
        // 0 is accepted and leaves the epoch at 0, so another set is still allowed.
        t.set_config_epoch(0).unwrap();
        t.set_config_epoch(7).unwrap();
        assert_eq!((t.myself().config_epoch, t.current_epoch), (7, 7));
        assert_eq!(
            e(t.set_config_epoch(8)),
            "ERR Node config epoch is already non-zero"
        );
        let mut r = rand::rngs::StdRng::seed_from_u64(1);
        t.add_node(ClusterNode::new(
            HexId::random(&mut r),
            HexId::random(&mut r),
        ))
        .unwrap();
        assert_eq!(
            e(t.set_config_epoch(9)),
            "ERR The user can assign a config epoch only when the node does not know any other node."
        );
    }

    #[test]
    fn a_lower_epoch_leaves_the_current_epoch_alone() {
        let mut t = lone();
        t.current_epoch = 10;
        t.set_config_epoch(4).unwrap();
        assert_eq!((t.myself().config_epoch, t.current_epoch), (4, 10));
    }

    #[test]
    fn bumpepoch_answers_as_redis() {
        let mut t = lone();
        // Epoch 7 set by hand is the greatest: STILL 7 (as redis-server said).
        t.set_config_epoch(7).unwrap();
        assert_eq!(t.bump_epoch().text(), "STILL 7");
        // After a hard reset (all zero): BUMPED 1 then STILL 1.
        let mut t = lone();
        assert_eq!(t.bump_epoch(), Bump::Bumped(1));
        assert_eq!(t.bump_epoch(), Bump::Still(1));
        // Another node with a greater epoch: bumped past the current epoch.
        let mut r = rand::rngs::StdRng::seed_from_u64(2);
        let mut other = ClusterNode::new(HexId::random(&mut r), HexId::random(&mut r));
        other.config_epoch = 5;
        t.add_node(other).unwrap();
        t.current_epoch = 5;
        assert_eq!(t.bump_epoch().text(), "BUMPED 6");
        assert_eq!((t.myself().config_epoch, t.current_epoch), (6, 6));
    }
}
