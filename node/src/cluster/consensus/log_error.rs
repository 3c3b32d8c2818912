//! Errors of the topology log: what a proposal, a peer's bytes or a membership change can
//! run into. One enum so the driver can branch (NotLeader → redirect, Poisoned → rebuild).

use super::codec::CodecError;
use super::durable_error::DurableError;
use crate::cluster::id::NodeId;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// Only the leader proposes; `leader` is who this node believes leads (None: nobody yet).
    #[error("not the topology leader (leader: {leader:?})")]
    NotLeader { leader: Option<NodeId> },
    #[error("{count} voters, at most {max}")]
    TooManyVoters { count: usize, max: usize },
    #[error("node {0} is not among the voters or learners it was started with")]
    NotAMember(NodeId),
    #[error("node {0} has raft id 0 or one another member holds: it needs a new node id")]
    RaftIdCollision(NodeId),
    #[error("the group already has {max} voters: add the node as a learner")]
    VotersFull { max: usize },
    #[error("a membership change is still being committed")]
    ConfChangePending,
    #[error("encoding: {0}")]
    Encode(CodecError),
    /// Raft dropped the proposal (leadership transfer, too much uncommitted data).
    #[error("proposal dropped: {0}")]
    Dropped(String),
    #[error("peer message of {len} bytes, at most {max}")]
    MessageTooLarge { len: usize, max: usize },
    #[error("undecodable raft message: {0}")]
    BadMessage(String),
    #[error("bad snapshot: {0}")]
    BadSnapshot(CodecError),
    #[error("message for raft id {to:x}, not this node")]
    WrongRecipient { to: u64 },
    #[error("message claims raft id {claimed:x}, the sender has another")]
    SenderMismatch { claimed: u64 },
    #[error("peers may not send {0}")]
    UnexpectedMessage(String),
    #[error("message inconsistent with this log: {0}")]
    Inconsistent(String),
    #[error("raft: {0}")]
    Raft(String),
    #[error("topology at version {version}, the log applied {applied}")]
    StaleTopology { version: u64, applied: u64 },
    /// raft-rs panicked inside a call (a message it could not handle); its state is no
    /// longer trusted and this log must be rebuilt (a new log catches up by snapshot).
    #[error("the raft state machine failed and must be rebuilt")]
    Poisoned,
    /// The log file could not be read or written. After a failed write the log is poisoned
    /// too: raft believes something is on disk that may not be; reopen the file.
    #[error("topology log file: {0}")]
    Durable(#[from] DurableError),
}

impl From<raft::Error> for LogError {
    fn from(e: raft::Error) -> Self {
        match e {
            raft::Error::ProposalDropped => LogError::Dropped(e.to_string()),
            other => LogError::Raft(other.to_string()),
        }
    }
}
