//! Checks on a peer's bytes before raft-rs sees them: size, decoding, addressing, kinds that
//! never travel, and the few inconsistencies raft-rs would answer with a panic (it treats
//! them as impossible; from the network they are merely wrong).

use super::log::{TopologyLog, STEP_BYTES_MAX};
use super::log_error::LogError;
use super::raft_id::raft_id;
use super::snapshot::SnapshotPayload;
use crate::cluster::id::NodeId;
use protobuf::Message as _;
use raft::prelude::{Message, MessageType};

impl TopologyLog {
    pub(super) fn check_message(&self, from: &NodeId, bytes: &[u8]) -> Result<Message, LogError> {
        if bytes.len() > STEP_BYTES_MAX {
            return Err(LogError::MessageTooLarge {
                len: bytes.len(),
                max: STEP_BYTES_MAX,
            });
        }
        let mut m =
            Message::parse_from_bytes(bytes).map_err(|e| LogError::BadMessage(e.to_string()))?;
        if m.to != self.raw().raft.id {
            return Err(LogError::WrongRecipient { to: m.to });
        }
        if m.from != raft_id(from) || m.from == 0 {
            return Err(LogError::SenderMismatch { claimed: m.from });
        }
        match m.get_msg_type() {
            // Proposals enter through `propose` on the leader only; local kinds never travel.
            t @ (MessageType::MsgPropose
            | MessageType::MsgHup
            | MessageType::MsgBeat
            | MessageType::MsgUnreachable
            | MessageType::MsgSnapStatus
            | MessageType::MsgCheckQuorum
            | MessageType::MsgReadIndex
            | MessageType::MsgReadIndexResp) => {
                return Err(LogError::UnexpectedMessage(format!("{t:?}")))
            }
            // A leader that believes we hold entries we lost (a restart without our state)
            // sends heartbeats committing past our log, which raft-rs treats as corruption.
            // Clamped, the heartbeat is answered, the leader finds our log short and sends
            // what is missing (a snapshot at worst).
            MessageType::MsgHeartbeat if m.commit > self.raw().raft.raft_log.last_index() => {
                m.commit = self.raw().raft.raft_log.last_index();
            }
            // A success claiming entries we never wrote would have us read past our log.
            MessageType::MsgAppendResponse
                if !m.reject
                    && m.term >= self.raw().raft.term
                    && m.index > self.raw().raft.raft_log.last_index() =>
            {
                return Err(LogError::Inconsistent(format!(
                    "append acknowledged up to {} past our last index {}",
                    m.index,
                    self.raw().raft.raft_log.last_index()
                )));
            }
            MessageType::MsgSnapshot => {
                let snapshot = m.get_snapshot();
                let payload =
                    SnapshotPayload::decode(&snapshot.data).map_err(LogError::BadSnapshot)?;
                let index = snapshot.get_metadata().index;
                if payload.image.version != index {
                    return Err(LogError::Inconsistent(format!(
                        "snapshot at {index} holds an image of version {}",
                        payload.image.version
                    )));
                }
            }
            _ => {}
        }
        Ok(m)
    }
}
