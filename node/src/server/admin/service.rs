//! The `admin.v1.Admin` service: each RPC checks its request and hands over to the module
//! that does the work.

use super::op_log::{self, Opened};
use super::operations::{Begun, NewOperation, Operations, Tracked};
use super::{add_node_op, failover_op, slot_moves_plan, slot_moves_run, slot_stats, watch_cluster};
use crate::cluster::consensus::TopologyCommand;
use crate::cluster::op_journal::{self, OperationPlan, PlannedMove};
use crate::server::Server;
use proto::admin::v1 as pb;
use proto::admin::v1::admin_server::Admin;
use std::sync::Arc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// Changes queued for one slow operation watcher before its stream waits.
const OPERATION_WATCH_QUEUE_MAX: usize = 16;
/// How often a watch of an operation another node coordinates looks at the log.
const JOURNAL_WATCH_POLL: std::time::Duration = std::time::Duration::from_millis(250);
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

    /// The operation as this node runs it, unless the topology log gives it to another
    /// coordinator (this node was adopted from): then the log's view is the one to show.
    fn local_view(&self, id: &str) -> Option<Arc<Tracked>> {
        let op = self.operations.find(id)?;
        let elsewhere = op_log::find(&self.server, id)
            .is_some_and(|r| r.coordinator.to_string() != self.myself_id());
        (!elsewhere).then_some(op)
    }

    fn myself_id(&self) -> String {
        self.server
            .cluster
            .as_ref()
            .map(|c| c.topology.read().myself().id.to_string())
            .unwrap_or_default()
    }

    /// Registers an operation that changes nothing in the cluster (a dry run), or answers
    /// the one its request_id named; `start` runs only for a new one.
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

    /// The operation `request_id` names, here or anywhere in the cluster (the topology
    /// log's journal); ALREADY_EXISTS when it names a different request.
    fn named(&self, request_id: &str, fingerprint: &str) -> Result<Option<pb::Operation>, Status> {
        if let Some(op) = self.operations.named(request_id, fingerprint)? {
            return Ok(Some(op.snapshot()));
        }
        op_log::named(&self.server, request_id, fingerprint)
    }

    /// Registers an operation that changes the cluster and records it in the topology log
    /// (its id, what was asked, its plan) before `start` runs it here; answers the
    /// operation its request_id named when another node recorded it first. `id`: drawn by
    /// [`new_operation_id`].
    async fn begin_logged(
        &self,
        id: u64,
        new: NewOperation,
        plan: OperationPlan,
        start: impl FnOnce(Arc<Tracked>) -> std::io::Result<()> + Send,
    ) -> Result<Response<pb::Operation>, Status> {
        let display = op_journal::display_id(id);
        let recorded = new.clone();
        // Registered before the log has it: the supervisor resumes an operation of this
        // node that the log shows and the registry lacks, and must not resume this one.
        let op = match self.operations.begin(NewOperation {
            id: display.clone(),
            ..new
        })? {
            Begun::Existing(op) => return Ok(Response::new(op.snapshot())),
            Begun::New(op) => op,
        };
        let server = self.server.clone();
        let opened =
            tokio::task::spawn_blocking(move || op_log::open(&server, id, &recorded, plan))
                .await
                .map_err(|e| Status::internal(format!("recording the operation: {e}")));
        match opened.and_then(|o| o) {
            Ok(Opened::New) => {
                if let Err(e) = start(op.clone()) {
                    op.fail(format!("cannot start its thread: {e}"));
                }
                Ok(Response::new(op.snapshot()))
            }
            Ok(Opened::Existing(other)) => {
                self.operations.forget(&display);
                Ok(Response::new(other))
            }
            Err(status) => {
                self.operations.forget(&display);
                Err(status)
            }
        }
    }
}

impl AdminService {
    /// Registers an operation of slot moves, records it with its moves, and runs them (see
    /// `slot_moves_run`).
    async fn begin_moves(
        &self,
        new: NewOperation,
        moves: Vec<crate::cluster::migration::planner::Move>,
        drained: Option<crate::cluster::NodeId>,
    ) -> Result<Response<pb::Operation>, Status> {
        let server = self.server.clone();
        let request_id = new.request_id.clone();
        let planned: Vec<PlannedMove> = moves
            .iter()
            .map(|m| PlannedMove {
                source: m.source,
                target: m.target,
                ranges: m.slots.ranges().to_vec(),
            })
            .collect();
        let id = new_operation_id();
        let request_base = slot_moves_run::request_base(&request_id, &op_journal::display_id(id));
        let plan = OperationPlan::Moves {
            moves: planned,
            drained,
            request_base: request_base.clone(),
        };
        self.begin_logged(id, new, plan, move |op| {
            let plan = slot_moves_run::Plan {
                moves,
                drained,
                request_base,
            };
            slot_moves_run::start(server, plan, op)
        })
        .await
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

/// A new operation's id: random, 64 bits, so that two nodes do not pick the same one (the
/// log refuses a repeat, and the caller then hears UNAVAILABLE and may retry).
fn new_operation_id() -> u64 {
    rand::random()
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
        if let Some(op) = self.named(&r.request_id, &fingerprint)? {
            return Ok(Response::new(op));
        }
        let moves = slot_moves_plan::migrate(&self.server, &r.ranges, &r.target_node_id)?;
        let new = NewOperation {
            id: String::new(),
            request_id: r.request_id,
            kind: pb::OperationKind::MigrateSlots,
            description: format!("migrate {}", slot_moves_plan::describe(&moves)),
            fingerprint,
            coordinator_id: self.myself_id(),
        };
        self.begin_moves(new, moves, None).await
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
        if let Some(op) = self.named(&r.request_id, &fingerprint)? {
            return Ok(Response::new(op));
        }
        let moves = self
            .plan_off_runtime(move |s| slot_moves_plan::rebalance(s, threshold))
            .await?;
        let plan_text = slot_moves_plan::describe(&moves);
        let new = NewOperation {
            id: String::new(),
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
        self.begin_moves(new, moves, None).await
    }

    async fn add_node(
        &self,
        request: Request<pb::AddNodeRequest>,
    ) -> Result<Response<pb::Operation>, Status> {
        let r = request.into_inner();
        let replica_of = (!r.replica_of.is_empty()).then_some(r.replica_of.as_str());
        let fingerprint = format!("add-node {} {:?}", r.address, replica_of);
        if let Some(op) = self.named(&r.request_id, &fingerprint)? {
            return Ok(Response::new(op));
        }
        let plan = add_node_op::plan(&self.server, &r.address, replica_of)?;
        let description = match replica_of {
            Some(p) => format!("add {} as a replica of {p}", r.address),
            None => format!("add {} as a primary", r.address),
        };
        let new = NewOperation {
            id: String::new(),
            request_id: r.request_id,
            kind: pb::OperationKind::AddNode,
            description,
            fingerprint,
            coordinator_id: self.myself_id(),
        };
        let server = self.server.clone();
        let recorded = plan.recorded();
        self.begin_logged(new_operation_id(), new, recorded, |op| {
            add_node_op::start(server, plan, op)
        })
        .await
    }

    async fn drain_node(
        &self,
        request: Request<pb::DrainNodeRequest>,
    ) -> Result<Response<pb::Operation>, Status> {
        let r = request.into_inner();
        let fingerprint = format!("drain {}", r.node_id);
        if let Some(op) = self.named(&r.request_id, &fingerprint)? {
            return Ok(Response::new(op));
        }
        let node = r.node_id.clone();
        let (drained, moves) = self
            .plan_off_runtime(move |s| slot_moves_plan::drain(s, &node))
            .await?;
        let new = NewOperation {
            id: String::new(),
            request_id: r.request_id,
            kind: pb::OperationKind::DrainNode,
            description: format!(
                "drain {drained}: {}, then forget it",
                slot_moves_plan::describe(&moves)
            ),
            fingerprint,
            coordinator_id: self.myself_id(),
        };
        self.begin_moves(new, moves, Some(drained)).await
    }

    async fn failover(
        &self,
        request: Request<pb::FailoverRequest>,
    ) -> Result<Response<pb::Operation>, Status> {
        let r = request.into_inner();
        let fingerprint = format!("failover {} force={}", r.replica_node_id, r.force);
        if let Some(op) = self.named(&r.request_id, &fingerprint)? {
            return Ok(Response::new(op));
        }
        let plan = failover_op::plan(&self.server, &r.replica_node_id, r.force)?;
        let new = NewOperation {
            id: String::new(),
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
        let recorded = OperationPlan::Failover {
            replica: plan.replica,
            force: r.force,
        };
        self.begin_logged(new_operation_id(), new, recorded, |op| {
            failover_op::start(server, plan, op)
        })
        .await
    }

    async fn get_operation(
        &self,
        request: Request<pb::GetOperationRequest>,
    ) -> Result<Response<pb::Operation>, Status> {
        let id = request.into_inner().id;
        if let Some(op) = self.local_view(&id) {
            return Ok(Response::new(op.snapshot()));
        }
        // Coordinated by another node (or before this node restarted): the log's view.
        op_log::find(&self.server, &id)
            .map(|r| Response::new(op_log::message(&r)))
            .ok_or_else(|| Status::not_found(format!("no operation {id:?}")))
    }

    async fn list_operations(
        &self,
        _: Request<pb::ListOperationsRequest>,
    ) -> Result<Response<pb::ListOperationsResponse>, Status> {
        let mut operations: Vec<pb::Operation> = self
            .operations
            .list()
            .into_iter()
            .filter(|o| self.local_view(&o.id).is_some())
            .collect();
        let here: std::collections::HashSet<String> =
            operations.iter().map(|o| o.id.clone()).collect();
        operations.extend(
            op_log::all(&self.server)
                .iter()
                .filter(|r| !here.contains(&r.display_id()))
                .map(op_log::message),
        );
        Ok(Response::new(pb::ListOperationsResponse { operations }))
    }

    type WatchOperationStream = ReceiverStream<Result<pb::Operation, Status>>;

    async fn watch_operation(
        &self,
        request: Request<pb::WatchOperationRequest>,
    ) -> Result<Response<Self::WatchOperationStream>, Status> {
        let id = request.into_inner().id;
        let local = self.local_view(&id);
        if local.is_none() && op_log::find(&self.server, &id).is_none() {
            return Err(Status::not_found(format!("no operation {id:?}")));
        }
        let permit = super::stream_limit::acquire(
            &OPERATION_WATCHERS,
            OPERATION_WATCHERS_MAX,
            "WatchOperation",
        )?;
        let (tx, rx) = tokio::sync::mpsc::channel(OPERATION_WATCH_QUEUE_MAX);
        let server = self.server.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut last = None;
            if let Some(op) = local {
                match watch_local(&op, &tx).await {
                    LocalWatch::Ended => return,
                    // This node stood down: the coordinator the log names carries on.
                    LocalWatch::Gone(now) => last = Some(now),
                }
            }
            watch_log(&server, &id, &tx, last).await;
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn cancel_operation(
        &self,
        request: Request<pb::CancelOperationRequest>,
    ) -> Result<Response<pb::Operation>, Status> {
        let id = request.into_inner().id;
        if self.operations.find(&id).is_some() {
            return Ok(Response::new(self.operations.cancel(&id)?));
        }
        let record = op_log::find(&self.server, &id)
            .ok_or_else(|| Status::not_found(format!("no operation {id:?}")))?;
        if record.ended.is_some() {
            return Ok(Response::new(op_log::message(&record)));
        }
        // Another node coordinates it: the cancel goes through the log, which its
        // coordinator reads (the answer is the operation as it stands; watch it end).
        let server = self.server.clone();
        let cancel = TopologyCommand::OperationCancel { id: record.id };
        tokio::task::spawn_blocking(move || {
            server
                .cluster
                .as_ref()
                .ok_or_else(|| Status::failed_precondition("not in cluster mode"))?
                .propose(cancel)
                .map_err(|e| Status::unavailable(format!("the cancel was not recorded: {e}")))
        })
        .await
        .map_err(|e| Status::internal(format!("recording the cancel: {e}")))??;
        let now = op_log::find(&self.server, &id).unwrap_or(record);
        Ok(Response::new(op_log::message(&now)))
    }
}

/// How following an operation this node runs ended.
enum LocalWatch {
    /// It reached a terminal state (sent), or the watcher left.
    Ended,
    /// Its worker stood down before it ended (the last state sent): follow the log.
    Gone(pb::Operation),
}

/// Sends the operation's state at each change until it ends or its worker is gone.
async fn watch_local(
    op: &Tracked,
    tx: &tokio::sync::mpsc::Sender<Result<pb::Operation, Status>>,
) -> LocalWatch {
    let mut changes = op.subscribe();
    loop {
        let now = changes.borrow_and_update().clone();
        let done = super::operations::is_terminal(now.state);
        if tx.send(Ok(now.clone())).await.is_err() || done {
            return LocalWatch::Ended;
        }
        if op.stood_down() {
            return LocalWatch::Gone(now);
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return LocalWatch::Gone(now) },
            _ = tx.closed() => return LocalWatch::Ended,
            // A stand-down changes nothing in the state: look for it now and then.
            _ = tokio::time::sleep(JOURNAL_WATCH_POLL) => {}
        }
    }
}

/// Sends the log's view of the operation at each change until it ends (another node
/// coordinates it); `last` is what the watcher was sent already.
async fn watch_log(
    server: &Server,
    id: &str,
    tx: &tokio::sync::mpsc::Sender<Result<pb::Operation, Status>>,
    mut last: Option<pb::Operation>,
) {
    loop {
        let Some(now) = op_log::find(server, id).map(|r| op_log::message(&r)) else {
            return;
        };
        let done = super::operations::is_terminal(now.state);
        if last.as_ref() != Some(&now) {
            last = Some(now.clone());
            if tx.send(Ok(now)).await.is_err() {
                return;
            }
        }
        if done {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(JOURNAL_WATCH_POLL) => {}
            _ = tx.closed() => return,
        }
    }
}
