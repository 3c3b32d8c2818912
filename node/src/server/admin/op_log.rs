//! The admin operations in the topology log (`cluster::op_journal`): an operation is opened
//! there before it runs, so that every node knows it; this module also builds the API's
//! view of an operation that another node coordinates (from the journal alone, without the
//! coordinator's live progress).

use super::operations::NewOperation;
use crate::cluster::consensus::TopologyCommand;
use crate::cluster::op_journal::{
    self, OperationKind, OperationOutcome, OperationPlan, OperationRecord,
};
use crate::cluster::Cluster;
use crate::server::Server;
use proto::admin::v1 as pb;
use tonic::Status;

/// What opening an operation in the log gave.
pub enum Opened {
    /// Recorded: run it here.
    New,
    /// The request_id named one already (opened by another node, or a concurrent retry).
    Existing(pb::Operation),
}

fn cluster_of(server: &Server) -> Result<&Cluster, Status> {
    server
        .cluster
        .as_ref()
        .ok_or_else(|| Status::failed_precondition("not in cluster mode"))
}

pub fn kind_of(kind: pb::OperationKind) -> Option<OperationKind> {
    OperationKind::from_code(kind as i32 as u8)
}

/// The API's message for a journal record.
pub fn message(r: &OperationRecord) -> pb::Operation {
    let (state, error, end) = match &r.ended {
        None => (pb::OperationState::Running, String::new(), 0),
        Some((OperationOutcome::Succeeded, at)) => {
            (pb::OperationState::Succeeded, String::new(), *at)
        }
        Some((OperationOutcome::Failed(why), at)) => (pb::OperationState::Failed, why.clone(), *at),
        Some((OperationOutcome::Cancelled(why), at)) => {
            (pb::OperationState::Cancelled, why.clone(), *at)
        }
    };
    pb::Operation {
        id: r.display_id(),
        request_id: r.request_id.clone(),
        kind: r.kind.code() as i32,
        state: state as i32,
        progress: Some(pb::Progress::default()),
        start_time_unix_ms: r.start_ms,
        end_time_unix_ms: end,
        error,
        description: r.description.clone(),
        coordinator_id: r.coordinator.to_string(),
    }
}

/// The journal's record of the operation `id` (as the API shows ids), if any.
pub fn find(server: &Server, id: &str) -> Option<OperationRecord> {
    let id = op_journal::parse_display_id(id)?;
    let cluster = server.cluster.as_ref()?;
    let t = cluster.topology.read();
    t.consensus.operations.get(id).cloned()
}

/// Every operation the journal remembers.
pub fn all(server: &Server) -> Vec<OperationRecord> {
    match server.cluster.as_ref() {
        Some(c) => c
            .topology
            .read()
            .consensus
            .operations
            .records()
            .cloned()
            .collect(),
        None => Vec::new(),
    }
}

/// The operation `request_id` names in the journal, if any; ALREADY_EXISTS when it names
/// a different request.
pub fn named(
    server: &Server,
    request_id: &str,
    fingerprint: &str,
) -> Result<Option<pb::Operation>, Status> {
    let Some(cluster) = server.cluster.as_ref() else {
        return Ok(None);
    };
    let t = cluster.topology.read();
    let Some(r) = t.consensus.operations.by_request_id(request_id) else {
        return Ok(None);
    };
    if r.fingerprint != fingerprint {
        return Err(Status::already_exists(format!(
            "request_id {request_id:?} already names operation {} ({}), a different request",
            r.display_id(),
            r.description
        )));
    }
    Ok(Some(message(r)))
}

/// Opens the operation in the topology log with this node as its coordinator. Blocks for
/// the proposal (run it off the async runtime).
pub fn open(
    server: &Server,
    id: u64,
    new: &NewOperation,
    plan: OperationPlan,
) -> Result<Opened, Status> {
    let cluster = cluster_of(server)?;
    let kind = kind_of(new.kind)
        .ok_or_else(|| Status::internal(format!("operation kind {:?}", new.kind)))?;
    let record = OperationRecord {
        id,
        request_id: new.request_id.clone(),
        kind,
        fingerprint: new.fingerprint.clone(),
        description: clip(&new.description),
        coordinator: cluster.topology.read().myself().id,
        start_ms: crate::clock::unix_millis(),
        plan,
        cancel_requested: false,
        ended: None,
    };
    op_journal::codec::check_record(&record)
        .map_err(|e| Status::invalid_argument(format!("the operation is too large: {e}")))?;
    match cluster.propose(TopologyCommand::OperationOpen(Box::new(record))) {
        Ok(()) => Ok(Opened::New),
        Err(e) => match named(server, &new.request_id, &new.fingerprint)? {
            // Another node (or a concurrent retry) opened it first.
            Some(existing) => Ok(Opened::Existing(existing)),
            None => Err(Status::unavailable(format!(
                "the topology log did not record the operation: {e}"
            ))),
        },
    }
}

/// A description within the journal's limit (cut at a character boundary).
fn clip(text: &str) -> String {
    if text.len() <= op_journal::TEXT_MAX {
        return text.to_string();
    }
    let mut end = op_journal::TEXT_MAX - 3;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// The outcome a finished operation's message says, for its `end` record.
pub fn outcome_of(op: &pb::Operation) -> Option<OperationOutcome> {
    let error = || clip(&op.error);
    match pb::OperationState::try_from(op.state).ok()? {
        pb::OperationState::Succeeded => Some(OperationOutcome::Succeeded),
        pb::OperationState::Failed => Some(OperationOutcome::Failed(error())),
        pb::OperationState::Cancelled => Some(OperationOutcome::Cancelled(error())),
        _ => None,
    }
}
