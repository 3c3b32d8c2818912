//! The `admin.v1.Admin` service: each RPC checks its request and hands over to the module
//! that does the work.

use super::operations::{Begun, NewOperation, Operations, Tracked};
use super::{add_node_op, failover_op, slot_moves_plan, slot_moves_run, slot_stats, watch_cluster};
use crate::server::Server;
use proto::admin::v1 as pb;
use proto::admin::v1::admin_server::Admin;
use std::sync::Arc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// Changes queued for one slow operation watcher before its stream waits.
const OPERATION_WATCH_QUEUE_MAX: usize = 16;
/// WatchOperation streams open at once on this node.
pub const OPERATION_WATCHERS_MAX: usize = 64;
static OPERATION_WATCHERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub struct AdminService {
    server: Arc<Server>,
    operations: Arc<Operations>,
}

impl AdminService {
    /// `operations` is the node's registry (the metrics endpoint reads it too).
    pub fn new(server: Arc<Server>, operations: Arc<Operations>) -> Self {
        AdminService { server, operations }
    }

    fn myself_id(&self) -> String {
        self.server
            .cluster
            .as_ref()
            .map(|c| c.topology.read().myself().id.to_string())
            .unwrap_or_default()
    }

    /// Registers the operation, or answers the one its request_id named; `start` runs only
    /// for a new one.
    fn begin(
        &self,
        new: NewOperation,
        start: impl FnOnce(Arc<Tracked>) -> std::io::Result<()>,
    ) -> Result<Response<pb::Operation>, Status> {
        match self.operations.begin(new)? {
            Begun::Existing(op) => Ok(Response::new(op.snapshot())),
            Begun::New(op) => {
                if let Err(e) = start(op.clone()) {
                    op.fail(format!("cannot start its thread: {e}"));
                }
                Ok(Response::new(op.snapshot()))
            }
        }
    }
}

impl AdminService {
    /// Registers an operation of slot moves and runs them (see `slot_moves_run`).
    fn begin_moves(
        &self,
        new: NewOperation,
        moves: Vec<crate::cluster::migration::planner::Move>,
        drained: Option<crate::cluster::NodeId>,
    ) -> Result<Response<pb::Operation>, Status> {
        let server = self.server.clone();
        let request_id = new.request_id.clone();
        self.begin(new, move |op| {
            let plan = slot_moves_run::Plan {
                moves,
                drained,
                request_base: slot_moves_run::request_base(&request_id, &op.id()),
            };
            slot_moves_run::start(server, plan, op)
        })
    }

    /// Runs a blocking plan (it asks other nodes) off the runtime's threads.
    async fn plan_off_runtime<T: Send + 'static>(
        &self,
        plan: impl FnOnce(&Server) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let server = self.server.clone();
        tokio::task::spawn_blocking(move || plan(&server))
            .await
            .map_err(|e| Status::internal(format!("planning: {e}")))?
    }
}

fn ranges_text(ranges: &[pb::SlotRange]) -> String {
    ranges
        .iter()
        .map(|r| format!("{}-{}", r.start, r.end))
        .collect::<Vec<_>>()
        .join(",")
}

#[tonic::async_trait]
impl Admin for AdminService {
    async fn get_cluster(
        &self,
        _: Request<pb::GetClusterRequest>,
    ) -> Result<Response<pb::Cluster>, Status> {
        let cluster = self
            .server
            .cluster
            .as_ref()
            .ok_or_else(|| Status::failed_precondition("not in cluster mode"))?;
        Ok(Response::new(super::cluster_view::cluster_message(cluster)))
    }

    type WatchClusterStream = watch_cluster::ClusterChanges;

    async fn watch_cluster(
        &self,
        request: Request<pb::WatchClusterRequest>,
    ) -> Result<Response<Self::WatchClusterStream>, Status> {
        let since = request.into_inner().since_version;
        Ok(Response::new(watch_cluster::watch(
            self.server.clone(),
            since,
        )?))
    }

    async fn get_slot_stats(
        &self,
        request: Request<pb::GetSlotStatsRequest>,
    ) -> Result<Response<pb::GetSlotStatsResponse>, Status> {
        let slots = slot_stats::requested_slots(&self.server, &request.into_inner().ranges)?;
        let walk = slot_stats::Walk::begin()?;
        let server = self.server.clone();
        // A walk of the slots' tables: off the runtime's threads.
        let stats = tokio::task::spawn_blocking(move || {
            let _walk = walk;
            slot_stats::slot_stats(&server, &slots)
        })
        .await
        .map_err(|e| Status::internal(format!("slot stats: {e}")))?;
        Ok(Response::new(stats))
    }

    async fn migrate_slots(
        &self,
        request: Request<pb::MigrateSlotsRequest>,
    ) -> Result<Response<pb::Operation>, Status> {
        let r = request.into_inner();
        let fingerprint = format!(
            "migrate-slots {} to {}",
            ranges_text(&r.ranges),
            r.target_node_id
        );
        if let Some(op) = self.operations.named(&r.request_id, &fingerprint)? {
            return Ok(Response::new(op.snapshot()));
        }
        let moves = slot_moves_plan::migrate(&self.server, &r.ranges, &r.target_node_id)?;
        let new = NewOperation {
            request_id: r.request_id,
            kind: pb::OperationKind::MigrateSlots,
            description: format!("migrate {}", slot_moves_plan::describe(&moves)),
            fingerprint,
            coordinator_id: self.myself_id(),
        };
        self.begin_moves(new, moves, None)
    }

    async fn rebalance(
        &self,
        request: Request<pb::RebalanceRequest>,
    ) -> Result<Response<pb::Operation>, Status> {
        let r = request.into_inner();
        let threshold = if r.threshold == 0.0 {
            0.05
        } else {
            r.threshold
        };
        let fingerprint = format!("rebalance threshold={threshold} dry_run={}", r.dry_run);
        if let Some(op) = self.operations.named(&r.request_id, &fingerprint)? {
            return Ok(Response::new(op.snapshot()));
        }
        let moves = self
            .plan_off_runtime(move |s| slot_moves_plan::rebalance(s, threshold))
            .await?;
        let plan_text = slot_moves_plan::describe(&moves);
        let new = NewOperation {
            request_id: r.request_id,
            kind: pb::OperationKind::Rebalance,
            description: format!(
                "rebalance by bytes within {:.0}% of the mean{}: {plan_text}",
                threshold * 100.0,
                if r.dry_run { " (dry run)" } else { "" }
            ),
            fingerprint,
            coordinator_id: self.myself_id(),
        };
        if r.dry_run {
            // The plan is the answer: the operation ends at once, in its description.
            return self.begin(new, |op| {
                op.update(|o| {
                    let p = o.progress.get_or_insert_with(Default::default);
                    p.slots_total = moves.iter().map(|m| m.slots.slot_count() as u32).sum();
                    p.phase = plan_text.clone();
                });
                op.succeed();
                Ok(())
            });
        }
        self.begin_moves(new, moves, None)
    }

    async fn add_node(
        &self,
        request: Request<pb::AddNodeRequest>,
    ) -> Result<Response<pb::Operation>, Status> {
        let r = request.into_inner();
        let replica_of = (!r.replica_of.is_empty()).then_some(r.replica_of.as_str());
        let fingerprint = format!("add-node {} {:?}", r.address, replica_of);
        if let Some(op) = self.operations.named(&r.request_id, &fingerprint)? {
            return Ok(Response::new(op.snapshot()));
        }
        let plan = add_node_op::plan(&self.server, &r.address, replica_of)?;
        let description = match replica_of {
            Some(p) => format!("add {} as a replica of {p}", r.address),
            None => format!("add {} as a primary", r.address),
        };
        let new = NewOperation {
            request_id: r.request_id,
            kind: pb::OperationKind::AddNode,
            description,
            fingerprint,
            coordinator_id: self.myself_id(),
        };
        let server = self.server.clone();
        self.begin(new, |op| add_node_op::start(server, plan, op))
    }

    async fn drain_node(
        &self,
        request: Request<pb::DrainNodeRequest>,
    ) -> Result<Response<pb::Operation>, Status> {
        let r = request.into_inner();
        let fingerprint = format!("drain {}", r.node_id);
        if let Some(op) = self.operations.named(&r.request_id, &fingerprint)? {
            return Ok(Response::new(op.snapshot()));
        }
        let node = r.node_id.clone();
        let (drained, moves) = self
            .plan_off_runtime(move |s| slot_moves_plan::drain(s, &node))
            .await?;
        let new = NewOperation {
            request_id: r.request_id,
            kind: pb::OperationKind::DrainNode,
            description: format!(
                "drain {drained}: {}, then forget it",
                slot_moves_plan::describe(&moves)
            ),
            fingerprint,
            coordinator_id: self.myself_id(),
        };
        self.begin_moves(new, moves, Some(drained))
    }

    async fn failover(
        &self,
        request: Request<pb::FailoverRequest>,
    ) -> Result<Response<pb::Operation>, Status> {
        let r = request.into_inner();
        let fingerprint = format!("failover {} force={}", r.replica_node_id, r.force);
        if let Some(op) = self.operations.named(&r.request_id, &fingerprint)? {
            return Ok(Response::new(op.snapshot()));
        }
        let plan = failover_op::plan(&self.server, &r.replica_node_id, r.force)?;
        let new = NewOperation {
            request_id: r.request_id,
            kind: pb::OperationKind::Failover,
            description: format!(
                "failover of {}{}",
                r.replica_node_id,
                if r.force { " (force)" } else { "" }
            ),
            fingerprint,
            coordinator_id: self.myself_id(),
        };
        let server = self.server.clone();
        self.begin(new, |op| failover_op::start(server, plan, op))
    }

    async fn get_operation(
        &self,
        request: Request<pb::GetOperationRequest>,
    ) -> Result<Response<pb::Operation>, Status> {
        let op = self.operations.get(&request.into_inner().id)?;
        Ok(Response::new(op.snapshot()))
    }

    async fn list_operations(
        &self,
        _: Request<pb::ListOperationsRequest>,
    ) -> Result<Response<pb::ListOperationsResponse>, Status> {
        Ok(Response::new(pb::ListOperationsResponse {
            operations: self.operations.list(),
        }))
    }

    type WatchOperationStream = ReceiverStream<Result<pb::Operation, Status>>;

    async fn watch_operation(
        &self,
        request: Request<pb::WatchOperationRequest>,
    ) -> Result<Response<Self::WatchOperationStream>, Status> {
        let op = self.operations.get(&request.into_inner().id)?;
        let permit = super::stream_limit::acquire(
            &OPERATION_WATCHERS,
            OPERATION_WATCHERS_MAX,
            "WatchOperation",
        )?;
        let mut changes = op.subscribe();
        let (tx, rx) = tokio::sync::mpsc::channel(OPERATION_WATCH_QUEUE_MAX);
        tokio::spawn(async move {
            let _permit = permit;
            loop {
                let now = changes.borrow_and_update().clone();
                let done = super::operations::is_terminal(now.state);
                if tx.send(Ok(now)).await.is_err() || done {
                    return;
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn cancel_operation(
        &self,
        request: Request<pb::CancelOperationRequest>,
    ) -> Result<Response<pb::Operation>, Status> {
        Ok(Response::new(
            self.operations.cancel(&request.into_inner().id)?,
        ))
    }
}
