//! Applying a committed command to a node's topology. Pure and deterministic: the outcome
//! depends only on the command and on the replicated part of the topology (nodes the log
//! added, their roles, the slot map), so every node accepts or refuses an entry alike. A
//! refused entry still advances the version: it was committed, it just changed nothing.

use super::apply_migration;
use super::codec::CodecError;
use super::command::{NodeAddress, TopologyCommand};
use crate::cluster::error::ClusterError;
use crate::cluster::flags::bit;
use crate::cluster::id::NodeId;
use crate::cluster::node::ClusterNode;
use crate::cluster::ops::check_slots;
use crate::cluster::slots::NodeIndex;
use crate::cluster::topology::{Topology, NODES_MAX};

/// Why a committed entry changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("entry {index} is not after topology version {version}")]
    AlreadyApplied { index: u64, version: u64 },
    #[error("unknown node {0}")]
    UnknownNode(NodeId),
    #[error("node {0} is not a primary")]
    NotPrimary(NodeId),
    #[error("node {0} is not a replica of a known primary")]
    NotReplica(NodeId),
    #[error("node {0} owns slots")]
    OwnsSlots(NodeId),
    #[error("node {0} has replicas")]
    HasReplicas(NodeId),
    #[error("node {0} cannot replicate itself")]
    SelfReplication(NodeId),
    /// Slot checks shared with ADDSLOTS/DELSLOTS (busy, unassigned, repeated), and a full
    /// node table.
    #[error("{0}")]
    Cluster(#[from] ClusterError),
    #[error("undecodable entry: {0}")]
    Undecodable(#[from] CodecError),
    /// A migration record the ledger refused (ended, wrong batch, slot busy...).
    #[error("{0}")]
    Migration(String),
    /// An operation record the journal refused (a repeated request_id, an ended one...).
    #[error("{0}")]
    Operation(#[from] crate::cluster::op_journal::JournalRefusal),
}

impl From<crate::cluster::migration::ledger::Refusal> for ApplyError {
    fn from(r: crate::cluster::migration::ledger::Refusal) -> Self {
        ApplyError::Migration(r.to_string())
    }
}

/// Applies the entry at `index` to `topology`: version becomes `index` whether the command
/// is accepted or refused. Entries at or below the version (replayed after a snapshot) are
/// refused without any change.
pub fn apply(
    topology: &mut Topology,
    index: u64,
    command: &TopologyCommand,
) -> Result<(), ApplyError> {
    advance_version(topology, index)?;
    let result = change(topology, index, command);
    topology.refresh_state();
    if let Err(e) = &result {
        tracing::debug!(index, error = %e, "topology entry refused");
    }
    result
}

/// Records that the entry at `index` was applied without changing the topology (a leader's
/// empty entry, a membership change, an undecodable entry).
pub fn advance_version(topology: &mut Topology, index: u64) -> Result<(), ApplyError> {
    let version = topology.consensus.version;
    if index <= version {
        return Err(ApplyError::AlreadyApplied { index, version });
    }
    topology.consensus.version = index;
    Ok(())
}

fn change(t: &mut Topology, index: u64, command: &TopologyCommand) -> Result<(), ApplyError> {
    match command {
        TopologyCommand::AssignSlots { node, ranges } => {
            let owner = primary(t, node)?;
            check_slots(&t.slots, ranges, |m, s| match m.owner(s) {
                Some(_) => Err(ClusterError::SlotBusy(s)),
                None => Ok(()),
            })?;
            for &(start, end) in ranges {
                for slot in start..=end {
                    bind_slot(t, slot, owner);
                }
            }
            grant_epoch(t, owner, index);
        }
        TopologyCommand::RemoveSlots { ranges } => {
            check_slots(&t.slots, ranges, |m, s| match m.owner(s) {
                Some(_) => Ok(()),
                None => Err(ClusterError::SlotUnassigned(s)),
            })?;
            for &(start, end) in ranges {
                for slot in start..=end {
                    t.slots.set_owner(slot, None);
                }
            }
        }
        TopologyCommand::SetSlotNode { slot, node } => {
            let owner = primary(t, node)?;
            bind_slot(t, *slot, owner);
            grant_epoch(t, owner, index);
        }
        TopologyCommand::AddNode { id, shard, address } => add_node(t, *id, *shard, address)?,
        TopologyCommand::ForgetNode { id } => forget_node(t, id)?,
        TopologyCommand::Promote { replica } => promote(t, replica, index)?,
        TopologyCommand::SetReplicaOf { replica, primary } => set_replica_of(t, replica, primary)?,
        TopologyCommand::MigrationOpen(open) => apply_migration::open(t, open)?,
        TopologyCommand::OperationOpen(record) => {
            t.consensus.operations.open((**record).clone())?
        }
        TopologyCommand::OperationAdopt { id, coordinator } => {
            t.consensus.operations.adopt(*id, *coordinator)?
        }
        TopologyCommand::OperationCancel { id } => t.consensus.operations.request_cancel(*id)?,
        TopologyCommand::OperationEnd {
            id,
            outcome,
            end_ms,
        } => t.consensus.operations.end(*id, outcome.clone(), *end_ms)?,
        TopologyCommand::MigrationBegin { id, batch, ranges } => {
            apply_migration::begin(t, *id, *batch, ranges)?
        }
        TopologyCommand::MigrationCommit { id, batch } => {
            apply_migration::commit(t, *id, *batch, index)?
        }
        TopologyCommand::MigrationAbort {
            id,
            reason,
            cancelled,
        } => apply_migration::abort(t, *id, reason, *cancelled)?,
    }
    Ok(())
}

/// A node the log added (others are unknown to the log, whatever the table holds).
fn logged(t: &Topology, id: &NodeId) -> Result<NodeIndex, ApplyError> {
    t.index_of(id)
        .filter(|_| t.consensus.nodes.contains(id))
        .ok_or(ApplyError::UnknownNode(*id))
}

fn primary(t: &Topology, id: &NodeId) -> Result<NodeIndex, ApplyError> {
    let i = logged(t, id)?;
    if !t.nodes[i as usize].is_primary() {
        return Err(ApplyError::NotPrimary(*id));
    }
    Ok(i)
}

pub(super) fn logged_primary(t: &Topology, id: &NodeId) -> Result<NodeIndex, ApplyError> {
    primary(t, id)
}

pub(super) fn bind_slot_to(t: &mut Topology, slot: u16, owner: NodeIndex) {
    bind_slot(t, slot, owner)
}

pub(super) fn grant_epoch_to(t: &mut Topology, i: NodeIndex, index: u64) {
    grant_epoch(t, i, index)
}

fn owns_slots(t: &Topology, i: NodeIndex) -> bool {
    t.slots.runs().iter().any(|&(_, _, o)| o == i)
}

fn has_logged_replicas(t: &Topology, id: &NodeId) -> bool {
    t.replicas_of(id).any(|r| t.consensus.nodes.contains(&r.id))
}

/// Binds `slot` to `owner`, ending this node's own migration markers the binding settles:
/// the source stops migrating a slot it no longer owns, the target stops importing it.
fn bind_slot(t: &mut Topology, slot: u16, owner: NodeIndex) {
    let me = t.myself_index();
    if t.slots.owner(slot) == Some(me) && owner != me {
        t.slots.migrating.remove(&slot);
    }
    if owner == me {
        t.slots.importing.remove(&slot);
    }
    t.slots.set_owner(slot, Some(owner));
}

/// The log index is the epoch of the change: unique and increasing, so no two claims on a
/// slot ever share an epoch (no configEpoch collision to resolve).
fn grant_epoch(t: &mut Topology, i: NodeIndex, index: u64) {
    t.nodes[i as usize].config_epoch = index;
    t.current_epoch = t.current_epoch.max(index);
}

fn set_role(node: &mut ClusterNode, primary: Option<NodeId>) {
    node.flags.set(bit::MASTER, primary.is_none());
    node.flags.set(bit::SLAVE, primary.is_some());
    node.primary = primary;
}

fn add_node(
    t: &mut Topology,
    id: NodeId,
    shard: crate::cluster::id::ShardId,
    address: &NodeAddress,
) -> Result<(), ApplyError> {
    let known_to_log = t.consensus.nodes.contains(&id);
    if !known_to_log && t.consensus.nodes.len() >= LOGGED_NODES_MAX {
        return Err(ClusterError::TooManyNodes(LOGGED_NODES_MAX).into());
    }
    let i = match t.index_of(&id) {
        Some(i) => i,
        None => {
            make_room(t);
            t.add_node(ClusterNode::new(id, shard))?
        }
    };
    let node = &mut t.nodes[i as usize];
    if !known_to_log {
        // First time the log sees it: its replicated fields start from the same values on
        // every node, whatever gossip had said about it here.
        node.shard = shard;
        node.config_epoch = 0;
        set_role(node, None);
    }
    node.ip.clone_from(&address.ip);
    node.port = address.port;
    node.cport = address.cport;
    node.hostname.clone_from(&address.hostname);
    t.consensus.nodes.insert(id);
    Ok(())
}

/// Most nodes the log adds: one place in the table stays for myself, so whether an AddNode
/// fits depends only on the log's own nodes, the same on every node.
pub const LOGGED_NODES_MAX: usize = NODES_MAX - 1;

/// Frees a table place if the table is full, by dropping a node only gossip knows: the log's
/// nodes always fit (at most LOGGED_NODES_MAX of them, plus myself).
pub(super) fn make_room(t: &mut Topology) {
    if t.nodes.len() < NODES_MAX {
        return;
    }
    let me = t.myself_index();
    let evict = (0..t.nodes.len() as NodeIndex)
        .find(|&i| i != me && !t.consensus.nodes.contains(&t.nodes[i as usize].id));
    if let Some(i) = evict {
        t.remove_node(i);
    }
}

fn forget_node(t: &mut Topology, id: &NodeId) -> Result<(), ApplyError> {
    let i = logged(t, id)?;
    if owns_slots(t, i) {
        return Err(ApplyError::OwnsSlots(*id));
    }
    if has_logged_replicas(t, id) {
        return Err(ApplyError::HasReplicas(*id));
    }
    t.consensus.nodes.remove(id);
    // A node keeps itself in its own table: once forgotten it is simply outside the log.
    if i != t.myself_index() {
        t.remove_node(i);
    }
    Ok(())
}

fn promote(t: &mut Topology, replica: &NodeId, index: u64) -> Result<(), ApplyError> {
    let r = logged(t, replica)?;
    let old = t.nodes[r as usize]
        .primary
        .filter(|_| t.nodes[r as usize].is_replica())
        .and_then(|p| logged(t, &p).ok())
        .ok_or(ApplyError::NotReplica(*replica))?;
    let old_id = t.nodes[old as usize].id;
    for (start, end, owner) in t.slots.runs() {
        if owner == old {
            for slot in start..=end {
                bind_slot(t, slot, r);
            }
        }
    }
    // The rest of the shard, the old primary included, now follows the promoted node.
    for node in t.nodes.iter_mut() {
        if node.id == old_id || (node.is_replica() && node.primary == Some(old_id)) {
            set_role(node, Some(*replica));
        }
    }
    set_role(&mut t.nodes[r as usize], None);
    grant_epoch(t, r, index);
    if r == t.myself_index() {
        t.consensus.promoted_at = index;
    }
    Ok(())
}

fn set_replica_of(
    t: &mut Topology,
    replica: &NodeId,
    primary_id: &NodeId,
) -> Result<(), ApplyError> {
    let r = logged(t, replica)?;
    let p = primary(t, primary_id)?;
    if r == p {
        return Err(ApplyError::SelfReplication(*replica));
    }
    if owns_slots(t, r) {
        return Err(ApplyError::OwnsSlots(*replica));
    }
    if has_logged_replicas(t, replica) {
        return Err(ApplyError::HasReplicas(*replica));
    }
    let shard = t.nodes[p as usize].shard;
    let node = &mut t.nodes[r as usize];
    node.shard = shard;
    set_role(node, Some(*primary_id));
    Ok(())
}
