//! The restart fence: a node that was a primary and restarted without everything it had
//! acknowledged (killed, or stopped without a final save that it loaded back: its
//! `repl-identity` is not [covered]) serves no keyed command and gives no replica a sync
//! until the topology decides whether it or one of its replicas holds the most. It
//! advertises its fenced history (`NodeRecord.fenced`, the history's replid and the offset it
//! loaded), and then one of two deciders acts, both through [`verdict`] so that they never
//! both do:
//!
//! - the group's leader hands the slots over (`failover.rs`): a replica that advertises the
//!   fenced history further than the fenced node loaded it is promoted (the existing
//!   `Promote`), under the same rule as a failover's: with `repl-sync-acks N`, among at least
//!   `replicas - N + 1` healthy replicas, so that it holds every acknowledged write;
//! - the node itself serves again when it has no logged replica (nothing anywhere holds
//!   more), when enough of them reported since its restart and none is ahead of it, or when
//!   the topology no longer makes it a primary owning slots (the hand-over happened).
//!
//! Otherwise it waits: a replica that may hold acknowledged writes but is failing keeps the
//! shard down (the operator's way out: CLUSTER FORGET of that replica, or CLUSTER FAILOVER
//! FORCE on another). Outside a topology group nothing fails over, so there is no fence.
//!
//! [covered]: the persistence layer's `LoadedHistory::covered`

/// A replication id (the replication layer's `ReplId`, the same 40-hex id type).
use crate::cluster::id::HexId as ReplId;
use crate::cluster::id::NodeId;
use crate::cluster::node::ClusterNode;
use crate::cluster::topology::Topology;
use std::cmp::Reverse;

/// The history a fenced node had: its replication id and the offset of it that the node
/// loaded (0 when it loaded none of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fence {
    pub replid: ReplId,
    pub offset: u64,
    /// When the node started (unix ms): only replicas heard since count as reporting.
    pub since_ms: u64,
}

/// Why a fence is lifted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Lifted {
    #[error("the topology no longer makes it a primary owning slots (handed over)")]
    NotServing,
    #[error("it has no replica: nothing anywhere holds more")]
    NoReplica,
    #[error("no reporting replica holds more")]
    NobodyAhead,
    #[error("not in a topology group: nothing would ever fail it over")]
    NoGroup,
}

impl Lifted {
    /// Whether the node then serves with possibly less than it acknowledged (nothing could
    /// tell): worth a warning.
    pub fn unproven(self) -> bool {
        matches!(self, Lifted::NoReplica | Lifted::NoGroup)
    }
}

/// What to do about a fenced node now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The fence may be lifted.
    Serve(Lifted),
    /// Promote this replica in its place: it holds more of the fenced history.
    HandOver(NodeId),
    Wait,
}

/// The verdict on the fenced node `node` with `fence`, given the topology as this node sees
/// it, `repl-sync-acks` (`sync_acks`) and `heard` (whether a replica counts as having
/// reported recently enough: for the fenced node, heard since it started; for the leader,
/// always). A replica reports when it is logged, not failing, heard, and its header named
/// its replication history (a node that restarted knows no history of its peers until
/// their headers arrive).
pub fn verdict(
    t: &Topology,
    node: &NodeId,
    fence: &Fence,
    sync_acks: usize,
    heard: impl Fn(&NodeId) -> bool,
) -> Verdict {
    let Some(i) = t.index_of(node) else {
        return Verdict::Serve(Lifted::NotServing);
    };
    if !t.nodes[i as usize].is_primary() || !t.slots.owns_any(i) {
        return Verdict::Serve(Lifted::NotServing);
    }
    let logged: Vec<&ClusterNode> = t
        .replicas_of(node)
        .filter(|r| t.consensus.nodes.contains(&r.id))
        .collect();
    if logged.is_empty() {
        return Verdict::Serve(Lifted::NoReplica);
    }
    let reporting: Vec<&&ClusterNode> = logged
        .iter()
        .filter(|r| !r.is_failing() && r.repl_id.is_some() && heard(&r.id))
        .collect();
    let needed = match sync_acks {
        0 => logged.len(),
        acks => logged.len() - acks.min(logged.len()) + 1,
    };
    let ahead = reporting
        .iter()
        .filter(|r| r.repl_id == Some(fence.replid) && r.repl_offset > fence.offset)
        .max_by_key(|r| (r.repl_offset, Reverse(r.id)));
    match ahead {
        // Asynchronous replication promises nothing: the most advanced reporting replica.
        Some(r) if sync_acks == 0 || reporting.len() >= needed => Verdict::HandOver(r.id),
        // One that is not reporting may hold acknowledged writes beyond it.
        Some(_) => Verdict::Wait,
        None if reporting.len() >= needed => Verdict::Serve(Lifted::NobodyAhead),
        None => Verdict::Wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::flags::bit;

    fn id(n: u8) -> NodeId {
        NodeId::parse(format!("{:02x}", n + 0x10).repeat(20).as_bytes()).unwrap()
    }

    const H: u8 = 0xaa;

    fn replid(c: u8) -> ReplId {
        ReplId::parse(format!("{c:02x}").repeat(20).as_bytes()).unwrap()
    }

    /// Node 1 (fenced) owns slots 0-99 with `replicas` replicas (2, 3, ...), all logged,
    /// each advertising history H at the offset given.
    fn shard(offsets: &[Option<u64>]) -> Topology {
        let mut t = Topology::new(ClusterNode::new(id(0), id(0)));
        let mut p = ClusterNode::new(id(1), id(1));
        p.repl_id = Some(replid(H));
        t.add_node(p).unwrap();
        for (k, offset) in offsets.iter().enumerate() {
            let mut r = ClusterNode::new(id(2 + k as u8), id(1));
            r.flags.set(bit::MASTER, false);
            r.flags.set(bit::SLAVE, true);
            r.primary = Some(id(1));
            if let Some(o) = offset {
                r.repl_id = Some(replid(H));
                r.repl_offset = *o;
            }
            t.add_node(r).unwrap();
        }
        let i = t.index_of(&id(1)).unwrap();
        for slot in 0..100 {
            t.slots.set_owner(slot, Some(i));
        }
        t.consensus.nodes = t.nodes.iter().map(|n| n.id).collect();
        t
    }

    fn fence(offset: u64) -> Fence {
        Fence {
            replid: replid(H),
            offset,
            since_ms: 0,
        }
    }

    fn all(_: &NodeId) -> bool {
        true
    }

    #[test]
    fn a_replica_ahead_takes_over_one_behind_lets_the_node_serve() {
        use Verdict::*;
        let table: Vec<(Vec<Option<u64>>, u64, usize, Verdict)> = vec![
            // One replica, sync acks 1: it is ahead, or it is not.
            (vec![Some(500)], 0, 1, HandOver(id(2))),
            (vec![Some(500)], 500, 1, Serve(Lifted::NobodyAhead)),
            (vec![Some(400)], 500, 1, Serve(Lifted::NobodyAhead)),
            // Not reported since the restart: wait.
            (vec![None], 0, 1, Wait),
            // Two replicas, sync acks 1: both must report (2 - 1 + 1), the best one wins.
            (vec![Some(300), Some(700)], 0, 1, HandOver(id(3))),
            (vec![Some(300), None], 0, 1, Wait),
            (vec![Some(300), Some(300)], 0, 1, HandOver(id(2))),
            // Sync acks 2 of 2 replicas: one reporting replica holds every acked write.
            (vec![Some(300), None], 0, 2, HandOver(id(2))),
            (vec![Some(0), None], 0, 2, Serve(Lifted::NobodyAhead)),
            // Asynchronous: every replica must report before the node serves; any one
            // ahead is promoted.
            (vec![Some(10), None], 50, 0, Wait),
            (vec![Some(10), Some(20)], 50, 0, Serve(Lifted::NobodyAhead)),
            (vec![Some(60), None], 50, 0, HandOver(id(2))),
        ];
        for (offsets, loaded, acks, expected) in table {
            let t = shard(&offsets);
            assert_eq!(
                verdict(&t, &id(1), &fence(loaded), acks, all),
                expected,
                "{offsets:?} loaded {loaded} acks {acks}"
            );
        }
    }

    #[test]
    fn failing_unheard_or_other_history_replicas_do_not_report() {
        let mut t = shard(&[Some(500)]);
        let r = t.index_of(&id(2)).unwrap() as usize;
        assert_eq!(
            verdict(&t, &id(1), &fence(0), 1, |_| false),
            Verdict::Wait,
            "not heard since the restart"
        );
        t.nodes[r].flags.set(bit::PFAIL, true);
        assert_eq!(verdict(&t, &id(1), &fence(0), 1, all), Verdict::Wait);
        t.nodes[r].flags.set(bit::PFAIL, false);
        t.nodes[r].repl_id = Some(replid(0xbb));
        assert_eq!(
            verdict(&t, &id(1), &fence(0), 1, all),
            Verdict::Serve(Lifted::NobodyAhead),
            "a replica of another history holds none of the fenced one"
        );
        // An unlogged replica is not the group's: it neither counts nor is promoted.
        t.consensus.nodes.retain(|n| *n != id(2));
        assert_eq!(
            verdict(&t, &id(1), &fence(0), 1, all),
            Verdict::Serve(Lifted::NoReplica)
        );
    }

    #[test]
    fn a_node_no_longer_owning_slots_serves() {
        let mut t = shard(&[Some(500)]);
        for slot in 0..100 {
            t.slots.set_owner(slot, None);
        }
        assert!(matches!(
            verdict(&t, &id(1), &fence(0), 1, all),
            Verdict::Serve(_)
        ));
        assert!(matches!(
            verdict(&t, &id(9), &fence(0), 1, all),
            Verdict::Serve(_)
        ));
    }
}
