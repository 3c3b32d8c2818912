//! Which slots a node keeps out of sight while it holds their keys only as a migration's
//! copy (the target's invisible import, docs/atomic-migration.md): derived from the ledger
//! and the slot map alone, so every applied log entry settles it, the same way on a target
//! and on its replicas (which hold the copy through the target's replication stream).
//!
//! A slot is hidden on the nodes of shard `P` (its primary and replicas) while `P` does not
//! own it and either
//! - a batch moving into `P` holds it (the copy is being made), or
//! - a batch into `P` was aborted with it (the copy waits for the supervisor to drop it).
//!
//! The commit that gives `P` the slot makes it visible in the same log entry.

use super::ledger::{MigrationLedger, MigrationState};
use crate::cluster::id::NodeId;
use crate::cluster::topology::Topology;

/// The slots the nodes of the shard led by `primary` hide, ascending; `owned` tells the
/// slots `primary` owns as of the same entry.
pub fn hidden_slots(
    ledger: &MigrationLedger,
    primary: &NodeId,
    owned: impl Fn(u16) -> bool,
) -> Vec<u16> {
    let mut out = Vec::new();
    for r in ledger.all().filter(|r| r.target == *primary) {
        let copied = match &r.state {
            MigrationState::Running => r.moving.as_ref().map(|(_, slots)| slots),
            MigrationState::Failed(_) | MigrationState::Cancelled(_) => r.aborted_slots.as_ref(),
            MigrationState::Succeeded => None,
        };
        out.extend(
            copied
                .into_iter()
                .flat_map(|s| s.slots())
                .filter(|&s| !owned(s)),
        );
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// [`hidden_slots`] for this node as `t` stands: its own shard's (a replica hides what its
/// primary does).
pub fn hidden_slots_here(t: &Topology) -> Vec<u16> {
    let me = t.myself();
    let primary = match me.primary {
        Some(p) if !me.is_primary() => p,
        _ => me.id,
    };
    let Some(index) = t.index_of(&primary) else {
        return Vec::new();
    };
    hidden_slots(&t.consensus.migrations, &primary, |slot| {
        t.slots.owner(slot) == Some(index)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::migration::ledger::{MigrationId, OpenRequest};
    use crate::cluster::migration::ranges::SlotRanges;
    use std::collections::HashMap;

    fn node(n: u8) -> NodeId {
        NodeId::parse(format!("{:040x}", n).as_bytes()).unwrap()
    }

    fn ranges(r: &[(u16, u16)]) -> SlotRanges {
        SlotRanges::new(r).unwrap()
    }

    /// A slot map the test moves slots in as the log's commit would: node 1 owns 0-99.
    struct Map(HashMap<u16, NodeId>);

    impl Map {
        fn new() -> Self {
            Map((0..100).map(|s| (s, node(1))).collect())
        }
        fn owner(&self) -> impl Fn(u16) -> Option<NodeId> + '_ {
            |s| self.0.get(&s).copied()
        }
        fn owns(&self, n: NodeId) -> impl Fn(u16) -> bool + '_ {
            move |s| self.0.get(&s) == Some(&n)
        }
    }

    fn open(l: &mut MigrationLedger, map: &Map, id: u64, slots: (u16, u16)) -> MigrationId {
        let id = MigrationId(id);
        let request = OpenRequest {
            id,
            request_id: "",
            source: node(1),
            target: node(2),
            ranges: ranges(&[slots]),
            slots_per_batch: 5,
        };
        l.open(request, map.owner()).unwrap();
        id
    }

    #[test]
    fn a_batch_is_hidden_on_its_target_from_begin_to_commit_and_nowhere_else() {
        let (mut l, mut map) = (MigrationLedger::default(), Map::new());
        let id = open(&mut l, &map, 1, (0, 9));
        assert!(hidden_slots(&l, &node(2), map.owns(node(2))).is_empty());
        l.begin(id, 0, &ranges(&[(0, 4)]), map.owner()).unwrap();
        assert_eq!(
            hidden_slots(&l, &node(2), map.owns(node(2))),
            [0, 1, 2, 3, 4]
        );
        // The source owns them and shows them; a third node holds no copy.
        assert!(hidden_slots(&l, &node(1), map.owns(node(1))).is_empty());
        assert!(hidden_slots(&l, &node(3), map.owns(node(3))).is_empty());
        let change = l.commit(id, 0).unwrap();
        for s in change.slots.slots() {
            map.0.insert(s, node(2));
        }
        assert!(hidden_slots(&l, &node(2), map.owns(node(2))).is_empty());
        l.begin(id, 1, &ranges(&[(5, 9)]), map.owner()).unwrap();
        assert_eq!(
            hidden_slots(&l, &node(2), map.owns(node(2))),
            [5, 6, 7, 8, 9]
        );
    }

    #[test]
    fn an_aborted_batch_stays_hidden_on_its_target_until_the_target_owns_the_slot() {
        let (mut l, mut map) = (MigrationLedger::default(), Map::new());
        let id = open(&mut l, &map, 1, (10, 12));
        l.begin(id, 0, &ranges(&[(10, 12)]), map.owner()).unwrap();
        l.abort(id, "link lost", false).unwrap();
        // The copy waits for the supervisor's purge out of sight.
        assert_eq!(hidden_slots(&l, &node(2), map.owns(node(2))), [10, 11, 12]);
        // A later migration that gives node 2 slot 11 shows it.
        let again = open(&mut l, &map, 2, (11, 11));
        l.begin(again, 0, &ranges(&[(11, 11)]), map.owner())
            .unwrap();
        assert_eq!(hidden_slots(&l, &node(2), map.owns(node(2))), [10, 11, 12]);
        l.commit(again, 0).unwrap();
        map.0.insert(11, node(2));
        assert_eq!(hidden_slots(&l, &node(2), map.owns(node(2))), [10, 12]);
    }
}
