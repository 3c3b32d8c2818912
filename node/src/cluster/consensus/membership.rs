//! Membership changes of the topology group: raft conf changes (one at a time, the node id in
//! the change's context so every member learns how to address the newcomer), with the cap
//! of [`VOTERS_MAX`] voters checked when proposing and again, deterministically, on apply.

use super::log::{TopologyLog, VOTERS_MAX};
use super::log_error::LogError;
use super::output::{MemberRole, MembershipChange};
use super::raft_id::raft_id;
use crate::cluster::id::{HexId, NodeId};
use protobuf::Message as _;
use raft::prelude::{ConfChange, ConfChangeType, Entry};

impl TopologyLog {
    pub(super) fn propose_conf_change(
        &mut self,
        node: &NodeId,
        change: ConfChangeType,
    ) -> Result<(), LogError> {
        if !self.is_leader() {
            return Err(LogError::NotLeader {
                leader: self.leader(),
            });
        }
        let id = self.directory().check(node)?;
        // raft-rs would turn a second pending change into an empty entry without saying so.
        if self.raw().raft.has_pending_conf() {
            return Err(LogError::ConfChangePending);
        }
        let mut cc = ConfChange::default();
        cc.set_change_type(change);
        cc.node_id = id;
        cc.context = node.as_bytes().to_vec().into();
        self.guarded_call(|raw| {
            raw.propose_conf_change(Vec::new(), cc)
                .map_err(LogError::from)
        })?;
        self.directory_mut().learn(node);
        Ok(())
    }

    /// Applies a committed conf change entry, or rejects it; either way the same on every
    /// node, since it depends only on the entry and the current configuration.
    pub(super) fn apply_conf_change(&mut self, entry: &Entry) -> MembershipChange {
        let mut change = MembershipChange {
            index: entry.index,
            node: None,
            role: MemberRole::Removed,
            applied: false,
        };
        let Ok(cc) = ConfChange::parse_from_bytes(&entry.data) else {
            tracing::warn!(index = entry.index, "undecodable conf change rejected");
            return change;
        };
        let Some(node) = HexId::parse(&cc.context).filter(|n| raft_id(n) == cc.node_id) else {
            tracing::warn!(
                index = entry.index,
                "conf change without a matching node id"
            );
            return change;
        };
        change.node = Some(node);
        change.role = match cc.get_change_type() {
            ConfChangeType::AddNode => MemberRole::Voter,
            ConfChangeType::AddLearnerNode => MemberRole::Learner,
            ConfChangeType::RemoveNode => MemberRole::Removed,
        };
        let conf = self.raw().raft.prs().conf().to_conf_state();
        let is_voter = conf.get_voters().contains(&cc.node_id);
        let is_member = is_voter || conf.get_learners().contains(&cc.node_id);
        if change.role == MemberRole::Voter && !is_voter && conf.get_voters().len() >= VOTERS_MAX {
            tracing::warn!(index = entry.index, %node, "voter cap reached, conf change rejected");
            return change;
        }
        if is_member && self.directory().node(cc.node_id).is_some_and(|n| n != node) {
            tracing::warn!(index = entry.index, %node, "raft id collision, conf change rejected");
            return change;
        }
        match self.raw_mut().apply_conf_change(&cc) {
            Ok(cs) => {
                self.raw_mut().mut_store().mem.wl().set_conf_state(cs);
                self.directory_mut().assign(cc.node_id, node);
                change.applied = true;
                tracing::info!(index = entry.index, %node, role = ?change.role, "topology group membership changed");
            }
            Err(e) => {
                tracing::warn!(index = entry.index, error = %e, "conf change rejected by raft")
            }
        }
        change
    }
}
