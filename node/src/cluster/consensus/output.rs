//! What one turn of the topology log hands back: bytes to send, a snapshot to install,
//! committed commands to apply, and changes of leader or membership.

use super::apply::{advance_version, apply, ApplyError};
use super::codec::CodecError;
use super::command::TopologyCommand;
use super::image::TopologyImage;
use super::log_store::Persist;
use crate::cluster::id::NodeId;
use crate::cluster::topology::Topology;

/// Names a proposal made by this node, so its outcome can be matched when it commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProposalId(pub u64);

/// A committed command entry, in log order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub index: u64,
    /// The decoded command, or why it is undecodable (the same on every node).
    pub command: Result<TopologyCommand, CodecError>,
    /// Set when this node proposed the entry.
    pub proposal: Option<ProposalId>,
}

/// Who leads, as this node now believes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderChange {
    pub leader: Option<NodeId>,
    pub term: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberRole {
    Voter,
    Learner,
    Removed,
}

/// A membership change the log applied (or rejected: `applied` false).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MembershipChange {
    pub index: u64,
    pub node: Option<NodeId>,
    pub role: MemberRole,
    pub applied: bool,
}

#[derive(Debug, Default)]
pub struct Output {
    /// What the driver must make durable before it sends or applies anything below
    /// ([`LogStore::save`](super::log_store::LogStore::save)).
    pub persist: Option<Persist>,
    /// Raft messages to send, encoded with raft's codec: (recipient, bytes).
    pub messages: Vec<(NodeId, Vec<u8>)>,
    /// A snapshot from the leader: install it before the committed entries.
    pub restore: Option<TopologyImage>,
    pub committed: Vec<Committed>,
    /// Highest index applied in this turn, command or not (elections and membership changes
    /// take log entries too); the topology version moves to it.
    pub applied: Option<u64>,
    pub leader: Option<LeaderChange>,
    pub membership: Vec<MembershipChange>,
    /// Take a snapshot now ([`TopologyLog::compact`](super::TopologyLog::compact) with the
    /// topology this output was applied to): a peer needs a fresher one, or the log holds
    /// more than LOG_ENTRIES_MAX entries since the last.
    pub snapshot_due: bool,
}

impl Output {
    pub fn is_empty(&self) -> bool {
        self.persist.is_none()
            && self.messages.is_empty()
            && self.restore.is_none()
            && self.committed.is_empty()
            && self.applied.is_none()
            && self.leader.is_none()
            && self.membership.is_empty()
            && !self.snapshot_due
    }

    /// Installs the snapshot, applies the committed commands in order and moves the version
    /// to the last applied index. Returns each entry's outcome (refusals are normal: a
    /// committed command may be invalid by the time it applies).
    pub fn apply_to(&self, topology: &mut Topology) -> Vec<(u64, Result<(), ApplyError>)> {
        let mut outcomes = Vec::with_capacity(self.committed.len() + 1);
        if let Some(image) = &self.restore {
            outcomes.push((image.version, image.restore(topology)));
        }
        for entry in &self.committed {
            let result = match &entry.command {
                Ok(command) => apply(topology, entry.index, command),
                Err(e) => advance_version(topology, entry.index)
                    .and(Err(ApplyError::Undecodable(e.clone()))),
            };
            outcomes.push((entry.index, result));
        }
        if let Some(index) = self.applied {
            if index > topology.consensus.version {
                topology.consensus.version = index;
            }
        }
        outcomes
    }
}
