//! CLUSTER RESET [SOFT|HARD] on the topology (Redis 7.0.15's `clusterReset`): every other
//! node is forgotten, every slot and open-slot marker released, a replica becomes a
//! primary; a hard reset also takes a new node id (and shard id, as Redis 7.2) and puts the
//! epochs back to 0. A primary holding keys is refused.

use super::error::ClusterError;
use super::flags::bit;
use super::id::HexId;
use super::topology::Topology;
use rand::Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetKind {
    Soft,
    Hard,
}

impl ResetKind {
    /// The optional argument, case-insensitive as Redis; None for anything else.
    pub fn parse(arg: Option<&[u8]>) -> Option<ResetKind> {
        match arg {
            None => Some(ResetKind::Soft),
            Some(a) if a.eq_ignore_ascii_case(b"soft") => Some(ResetKind::Soft),
            Some(a) if a.eq_ignore_ascii_case(b"hard") => Some(ResetKind::Hard),
            Some(_) => None,
        }
    }
}

/// What the caller must do besides the topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResetDone {
    /// This node was a replica: Redis flushes its data set (it no longer follows anyone).
    pub flush_data: bool,
}

impl Topology {
    pub fn reset(
        &mut self,
        kind: ResetKind,
        keys_held: usize,
        rng: &mut impl Rng,
    ) -> Result<ResetDone, ClusterError> {
        if self.myself().is_primary() && keys_held != 0 {
            return Err(ClusterError::ResetWithKeys);
        }
        let was_replica = self.myself().is_replica();
        self.keep_only_myself();
        // The node leaves its topology group too (the bus's agent drops its log): it is in
        // none, and says version 0 so that a group's leader may take it in again.
        self.consensus = Default::default();
        let me = self.myself_mut();
        if was_replica {
            me.flags.set(bit::SLAVE, false);
            me.flags.set(bit::MASTER, true);
            me.primary = None;
        }
        if kind == ResetKind::Hard {
            me.config_epoch = 0;
            me.id = HexId::random(rng);
            me.shard = HexId::random(rng);
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
        }
        self.refresh_state();
        Ok(ResetDone {
            flush_data: was_replica,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::node::ClusterNode;
    use rand::SeedableRng;

    fn rng() -> rand::rngs::StdRng {
        rand::rngs::StdRng::seed_from_u64(8)
    }

    /// Myself owning slots 0-99 at config epoch 3, two other nodes, open slots, epoch 5.
    fn busy() -> Topology {
        let mut r = rng();
        let mut me = ClusterNode::new(HexId::random(&mut r), HexId::random(&mut r));
        me.config_epoch = 3;
        let mut t = Topology::new(me);
        for _ in 0..2 {
            let n = ClusterNode::new(HexId::random(&mut r), HexId::random(&mut r));
            t.add_node(n).unwrap();
        }
        t.add_slots(&[(0, 99)]).unwrap();
        t.slots.set_owner(200, Some(1));
        let other = t.nodes[1].id;
        t.slots.migrating.insert(5, other);
        t.slots.importing.insert(300, other);
        t.current_epoch = 5;
        t.last_vote_epoch = 4;
        t
    }

    #[test]
    fn the_argument_is_soft_hard_or_nothing() {
        assert_eq!(ResetKind::parse(None), Some(ResetKind::Soft));
        assert_eq!(ResetKind::parse(Some(b"SoFt")), Some(ResetKind::Soft));
        assert_eq!(ResetKind::parse(Some(b"HARD")), Some(ResetKind::Hard));
        assert_eq!(ResetKind::parse(Some(b"bogus")), None);
    }

    #[test]
    fn a_primary_with_keys_is_refused() {
        let mut t = busy();
        let before = t.clone();
        assert_eq!(
            t.reset(ResetKind::Soft, 1, &mut rng())
                .unwrap_err()
                .to_string(),
            "ERR CLUSTER RESET can't be called with master nodes containing keys"
        );
        assert_eq!(t, before);
    }

    #[test]
    fn soft_forgets_everyone_and_every_slot_but_keeps_id_and_epochs() {
        let mut t = busy();
        let id = t.myself().id;
        let done = t.reset(ResetKind::Soft, 0, &mut rng()).unwrap();
        assert!(!done.flush_data);
        assert_eq!(t.nodes.len(), 1);
        assert_eq!(t.myself().id, id);
        assert_eq!(t.slots.assigned(), 0);
        assert!(t.slots.migrating.is_empty() && t.slots.importing.is_empty());
        assert_eq!((t.current_epoch, t.myself().config_epoch), (5, 3));
        assert!(t.myself().is_myself() && t.myself().is_primary());
    }

    #[test]
    fn hard_takes_a_new_identity_and_zero_epochs() {
        let mut t = busy();
        let (id, shard) = (t.myself().id, t.myself().shard);
        t.reset(
            ResetKind::Hard,
            0,
            &mut rand::rngs::StdRng::seed_from_u64(9),
        )
        .unwrap();
        assert_ne!(t.myself().id, id);
        assert_ne!(t.myself().shard, shard);
        assert_eq!(t.index_of(&t.myself().id), Some(0));
        assert_eq!(
            (t.current_epoch, t.last_vote_epoch, t.myself().config_epoch),
            (0, 0, 0)
        );
    }

    #[test]
    fn a_replica_becomes_a_primary_and_its_data_goes() {
        let mut t = busy();
        t.flush_slots(0).unwrap();
        let primary = t.nodes[1].id;
        t.replicate(primary.as_bytes(), 0).unwrap();
        // A replica may hold its primary's keys: it is reset all the same.
        let done = t.reset(ResetKind::Soft, 10, &mut rng()).unwrap();
        assert!(done.flush_data);
        let me = t.myself();
        assert!(me.is_primary() && !me.is_replica() && me.primary.is_none());
    }
}
