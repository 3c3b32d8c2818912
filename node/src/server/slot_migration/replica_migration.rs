//! `cluster-allow-replica-migration` (Redis 7 semantics): a primary that an atomic slot
//! migration left without any slot becomes a replica of the node that took its last slot,
//! and its replicas follow that node too (Redis moves them the same way). With `no` it
//! stays an empty primary (with its replicas).
//!
//! The source decides, as in Redis the node that lost its slots does (the setting is its
//! own), when its driver has finished a migration that committed at least one batch; the
//! supervisor asks again for the last such migration once per process start and while a
//! proposal fails, so a source that died (or lost its leader) between the last commit and
//! its role change still follows the taker. The
//! role changes go through the topology log (`SetReplicaOf`, as CLUSTER REPLICATE's do):
//! its replicas first, since the log refuses to make a primary with logged replicas a
//! replica. Replication then follows the log (`repl_link::cluster_role`).

use crate::cluster::consensus::TopologyCommand;
use crate::cluster::id::NodeId;
use crate::server::Server;

/// Attempts per proposal (each waits up to `Cluster::proposal_wait`): a leader change in
/// between costs one.
const ATTEMPTS: u32 = 3;

/// What the source must propose once a migration to `taker` ended: the replicas to move,
/// then itself; `None` while it still owns a slot, is no primary, takes part in another
/// running migration, or the setting is `no`.
fn plan(server: &Server, taker: NodeId) -> Option<Vec<TopologyCommand>> {
    if !server.config.read().cluster.allow_replica_migration {
        return None;
    }
    let cluster = server.cluster.as_ref()?;
    let t = cluster.topology.read();
    let me = t.myself();
    let mine = t.myself_index();
    let owns_a_slot = t.slots.runs().iter().any(|&(_, _, owner)| owner == mine);
    let busy = t
        .consensus
        .migrations
        .running()
        .any(|r| r.source == me.id || r.target == me.id);
    let taker_is_primary = t
        .index_of(&taker)
        .and_then(|i| t.node(i))
        .is_some_and(|n| n.is_primary());
    if !me.is_primary() || owns_a_slot || busy || !taker_is_primary || taker == me.id {
        return None;
    }
    let mut plan: Vec<TopologyCommand> = t
        .replicas_of(&me.id)
        .filter(|r| t.consensus.nodes.contains(&r.id))
        .map(|r| TopologyCommand::SetReplicaOf {
            replica: r.id,
            primary: taker,
        })
        .collect();
    plan.push(TopologyCommand::SetReplicaOf {
        replica: me.id,
        primary: taker,
    });
    Some(plan)
}

/// After a migration of this node's slots to `taker` ended with a batch committed: if this
/// node owns no slot any more, it (and its replicas) follow `taker`, unless
/// `cluster-allow-replica-migration` is `no`. Blocks the calling thread for the proposals.
/// False when a proposal failed (ask again later); true when done or nothing to do.
pub fn follow_the_taker(server: &Server, taker: NodeId) -> bool {
    let Some(plan) = plan(server, taker) else {
        return true;
    };
    let Some(cluster) = server.cluster.as_ref() else {
        return true;
    };
    tracing::info!(%taker, "emptied of its last slot: becoming a replica of the node that took it");
    for command in plan {
        let mut result = Ok(());
        for _ in 0..ATTEMPTS {
            result = cluster.propose(command.clone());
            if result.is_ok() {
                break;
            }
        }
        if let Err(e) = result {
            tracing::warn!(error = %e, ?command, "replica migration not made");
            return false;
        }
    }
    true
}
