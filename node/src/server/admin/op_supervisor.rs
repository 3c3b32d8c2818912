//! Carries the operations of the topology log's journal through their coordinators' lives
//! (a background thread of every cluster node, with its own pace):
//! - an operation this node coordinates that ended here gets its `end` record (retried each
//!   round until the log has it);
//! - a cancel recorded in the log (asked on any node) is passed to the running operation;
//! - an operation the log says this node coordinates and that does not run here (the
//!   leader adopted it, or this node restarted) is resumed from its recorded plan;
//! - on the group's leader, an operation whose coordinator failed (or left the cluster) is
//!   adopted: the leader becomes its coordinator, then resumes it as above;
//! - an operation still running here that the log gives to another coordinator (this node
//!   was stopped or cut off long enough to be adopted from) or has ended stands down: its
//!   worker stops without ending or undoing anything, and this node shows the log's view.
//!
//! Resuming is safe because every step of a plan can be asked again: a slot move is found
//! done in the migration ledger by its request id, AddNode skips what the topology shows
//! done, and a failover already made is seen in the topology.

use super::operations::{Operations, Tracked};
use super::{add_node_op, failover_op, op_log, slot_moves_run};
use crate::cluster::consensus::TopologyCommand;
use crate::cluster::migration::planner::Move;
use crate::cluster::migration::ranges::SlotRanges;
use crate::cluster::op_journal::{OperationPlan, OperationRecord};
use crate::server::Server;
use std::sync::{Arc, Weak};
use std::time::Duration;

const PACE: Duration = Duration::from_millis(250);

pub fn start(server: &Arc<Server>, operations: Arc<Operations>) {
    if server.cluster.is_none() {
        return;
    }
    let weak = Arc::downgrade(server);
    let spawned = std::thread::Builder::new()
        .name("admin-op-supervisor".into())
        .spawn(move || run(weak, operations));
    if let Err(e) = spawned {
        tracing::error!(error = %e, "the admin operation supervisor did not start");
    }
}

fn run(server: Weak<Server>, operations: Arc<Operations>) {
    loop {
        std::thread::sleep(PACE);
        let Some(server) = server.upgrade() else {
            return;
        };
        if server.shutdown.is_triggered() {
            return;
        }
        round(&server, &operations);
    }
}

/// What one round found to do.
enum Step {
    End(u64, crate::cluster::op_journal::OperationOutcome),
    Cancel(String),
    Resume(Box<OperationRecord>),
    Adopt(u64),
    StandDown(String),
}

fn round(server: &Arc<Server>, operations: &Arc<Operations>) {
    let Some(cluster) = server.cluster.as_ref() else {
        return;
    };
    if !cluster.in_group() {
        return;
    }
    let leader = cluster.group_view().leader;
    let mut steps = Vec::new();
    {
        let t = cluster.topology.read();
        let me = t.myself().id;
        for r in t.consensus.operations.running() {
            if r.coordinator == me {
                let id = r.display_id();
                match operations.find(&id) {
                    Some(op) => {
                        let now = op.snapshot();
                        match op_log::outcome_of(&now) {
                            Some(outcome) => steps.push(Step::End(r.id, outcome)),
                            None if r.cancel_requested => steps.push(Step::Cancel(id)),
                            None => {}
                        }
                    }
                    None => steps.push(Step::Resume(Box::new(r.clone()))),
                }
            } else if operations.find(&r.display_id()).is_some() {
                // Stands down below.
            } else if leader == Some(me) {
                let gone = t
                    .index_of(&r.coordinator)
                    .and_then(|i| t.node(i))
                    .is_none_or(|n| n.is_failed());
                if gone {
                    steps.push(Step::Adopt(r.id));
                }
            }
        }
        for local in operations.list() {
            if super::operations::is_terminal(local.state) {
                continue;
            }
            let logged = crate::cluster::op_journal::parse_display_id(&local.id)
                .and_then(|id| t.consensus.operations.get(id));
            if logged.is_some_and(|r| r.coordinator != me || r.ended.is_some()) {
                steps.push(Step::StandDown(local.id));
            }
        }
    }
    for step in steps {
        match step {
            Step::End(id, outcome) => {
                let end = TopologyCommand::OperationEnd {
                    id,
                    outcome,
                    end_ms: crate::clock::unix_millis(),
                };
                if let Err(e) = cluster.propose(end) {
                    tracing::debug!(operation = id, error = %e, "end not recorded yet");
                }
            }
            Step::Cancel(id) => {
                if let Err(e) = operations.cancel(&id) {
                    tracing::debug!(operation = id, error = %e.message(), "a cancel from the log was refused");
                }
            }
            Step::Adopt(id) => {
                let me = cluster.topology.read().myself().id;
                match cluster.propose(TopologyCommand::OperationAdopt {
                    id,
                    coordinator: me,
                }) {
                    Ok(()) => tracing::warn!(
                        operation = %crate::cluster::op_journal::display_id(id),
                        "adopted an operation whose coordinator failed; resuming it"
                    ),
                    Err(e) => tracing::debug!(operation = id, error = %e, "adoption not made"),
                }
            }
            Step::Resume(record) => resume(server, operations, *record),
            Step::StandDown(id) => {
                if let Some(op) = operations.find(&id) {
                    op.stand_down();
                    operations.forget(&id);
                    tracing::warn!(
                        operation = %id,
                        "the topology log names another coordinator for this operation; standing down"
                    );
                }
            }
        }
    }
}

/// Runs `record`'s plan here under its id.
fn resume(server: &Arc<Server>, operations: &Arc<Operations>, record: OperationRecord) {
    let op = operations.resumed(op_log::message(&record), record.fingerprint.clone());
    tracing::info!(operation = %record.display_id(), description = %record.description, "resuming an operation this node coordinates");
    let started = match record.plan {
        OperationPlan::Nothing => {
            op.succeed();
            Ok(())
        }
        OperationPlan::Moves {
            moves,
            drained,
            request_base,
        } => {
            let moves: Result<Vec<Move>, String> = moves
                .into_iter()
                .map(|m| {
                    Ok(Move {
                        source: m.source,
                        target: m.target,
                        slots: SlotRanges::new(&m.ranges).map_err(|e| e.to_string())?,
                        weight: 0,
                    })
                })
                .collect();
            match moves {
                Ok(moves) => slot_moves_run::start(
                    server.clone(),
                    slot_moves_run::Plan {
                        moves,
                        drained,
                        request_base,
                    },
                    op.clone(),
                ),
                Err(why) => {
                    op.fail(format!("the recorded plan does not read: {why}"));
                    Ok(())
                }
            }
        }
        OperationPlan::AddNode {
            host,
            port,
            replica_of,
        } => add_node_op::start(
            server.clone(),
            add_node_op::AddNodePlan::resumed(host, port, replica_of),
            op.clone(),
        ),
        OperationPlan::Failover { replica, force } => resume_failover(server, &op, replica, force),
    };
    if let Err(e) = started {
        op.fail(format!("cannot start its thread: {e}"));
    }
}

/// A failover already made (the topology shows the replica a primary) succeeded; one not
/// made yet is asked again, with Redis's checks made again.
fn resume_failover(
    server: &Arc<Server>,
    op: &Arc<Tracked>,
    replica: crate::cluster::NodeId,
    force: bool,
) -> std::io::Result<()> {
    let promoted = server.cluster.as_ref().is_some_and(|c| {
        let t = c.topology.read();
        t.index_of(&replica)
            .and_then(|i| t.node(i))
            .is_some_and(|n| n.is_primary())
    });
    if promoted {
        op.succeed();
        return Ok(());
    }
    match failover_op::plan(server, &replica.to_string(), force) {
        Ok(plan) => failover_op::start(server.clone(), plan, op.clone()),
        Err(status) => {
            op.fail(format!(
                "resumed after its coordinator failed: {}",
                status.message()
            ));
            Ok(())
        }
    }
}
