//! The operations this node coordinates: ids, the caller's `request_id` (the same one twice
//! names the same operation), state and progress, watchers, cancellation.
//!
//! This is the coordinator's live view (progress, watchers, cancel) of the operations it
//! runs. Those that change the cluster are also recorded in the topology log
//! (`cluster::op_journal`, through `op_log`), which every node reads and from which the
//! leader resumes an operation whose coordinator died (`op_supervisor`).

use parking_lot::Mutex;
use proto::admin::v1 as pb;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use tonic::Status;

/// Operations remembered; past it the oldest finished one is forgotten.
pub const OPERATIONS_MAX: usize = 1024;
/// Longest text of a request's arguments (an address, node ids) taken.
pub const REQUEST_TEXT_MAX: usize = 512;
/// Operations running at once; more are refused (RESOURCE_EXHAUSTED).
pub const RUNNING_OPERATIONS_MAX: usize = 16;
/// Longest `request_id`.
pub const REQUEST_ID_MAX: usize = 256;

/// One operation: its message, published to watchers at every change.
pub struct Tracked {
    /// What was asked, to tell a retry from a different request under the same id.
    fingerprint: String,
    state: tokio::sync::watch::Sender<pb::Operation>,
    /// [`CANCELLABLE`], [`CANCEL_REQUESTED`] or [`COMMITTED`]: one word, so that a cancel and
    /// the worker's step past the point of no return cannot both win.
    cancel: AtomicU8,
    /// The topology log names another coordinator (the leader adopted the operation while
    /// this node was stopped or cut off) or has its end: the worker here stops at its next
    /// check without ending or undoing anything; the coordinator the log names carries on.
    stood_down: std::sync::atomic::AtomicBool,
}

/// A cancel may still stop the operation.
const CANCELLABLE: u8 = 0;
/// A cancel was accepted; the worker ends CANCELLED at its next check.
const CANCEL_REQUESTED: u8 = 1;
/// The change was handed to the cluster; a cancel is refused.
const COMMITTED: u8 = 2;

impl Tracked {
    pub fn snapshot(&self) -> pb::Operation {
        self.state.borrow().clone()
    }

    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<pb::Operation> {
        self.state.subscribe()
    }

    pub fn id(&self) -> String {
        self.state.borrow().id.clone()
    }

    /// Changes the message (progress, phase) and tells the watchers.
    pub fn update(&self, f: impl FnOnce(&mut pb::Operation)) {
        self.state.send_modify(f);
    }

    pub fn running(&self, phase: &str) {
        self.update(|op| {
            op.state = pb::OperationState::Running as i32;
            progress(op).phase = phase.to_string();
        });
    }

    pub fn succeed(&self) {
        self.end(pb::OperationState::Succeeded, String::new());
    }

    pub fn fail(&self, why: impl Into<String>) {
        self.end(pb::OperationState::Failed, why.into());
    }

    /// Ends CANCELLED if a cancel was asked for; true then (the worker stops).
    pub fn stop_if_cancelled(&self) -> bool {
        if self.cancel.load(Ordering::Acquire) != CANCEL_REQUESTED {
            return false;
        }
        self.end(
            pb::OperationState::Cancelled,
            "cancelled by CancelOperation".into(),
        );
        true
    }

    /// Tells the worker to stop without ending the operation (see `stood_down`).
    pub fn stand_down(&self) {
        self.stood_down.store(true, Ordering::Release);
    }

    /// Whether the worker should stop because another node coordinates the operation now.
    pub fn stood_down(&self) -> bool {
        self.stood_down.load(Ordering::Acquire)
    }

    /// Whether a cancel was asked for (an operation that stops on its own terms, e.g. a slot
    /// migration that must be rolled back by the topology log, looks without ending).
    pub fn cancel_requested(&self) -> bool {
        self.cancel.load(Ordering::Acquire) == CANCEL_REQUESTED
    }

    /// Ends CANCELLED with `why`.
    pub fn cancelled(&self, why: impl Into<String>) {
        self.end(pb::OperationState::Cancelled, why.into());
    }

    /// From here on a cancel is refused: the change is handed to the cluster. False when a
    /// cancel came first: the operation has ended CANCELLED and the worker must stop.
    #[must_use]
    pub fn past_point_of_no_return(&self) -> bool {
        match self.cancel.compare_exchange(
            CANCELLABLE,
            COMMITTED,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) | Err(COMMITTED) => true,
            Err(_) => !self.stop_if_cancelled(),
        }
    }

    fn end(&self, state: pb::OperationState, error: String) {
        self.update(|op| {
            if is_terminal(op.state) {
                return;
            }
            op.state = state as i32;
            op.error = error;
            op.end_time_unix_ms = crate::clock::unix_millis();
        });
    }
}

fn progress(op: &mut pb::Operation) -> &mut pb::Progress {
    op.progress.get_or_insert_with(Default::default)
}

pub fn is_terminal(state: i32) -> bool {
    pb::OperationState::try_from(state).is_ok_and(pb::OperationState::is_terminal)
}

/// What a new operation is.
#[derive(Clone)]
pub struct NewOperation {
    /// Its id if already drawn (an operation recorded in the topology log), else empty: a
    /// new one is drawn.
    pub id: String,
    pub request_id: String,
    pub kind: pb::OperationKind,
    pub description: String,
    pub fingerprint: String,
    pub coordinator_id: String,
}

/// [`Operations::begin`]'s answer: a new operation to run, or the one a request_id named.
pub enum Begun {
    New(Arc<Tracked>),
    Existing(Arc<Tracked>),
}

#[derive(Default)]
pub struct Operations {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// In the order they began.
    by_id: indexmap::IndexMap<String, Arc<Tracked>>,
    by_request: HashMap<String, String>,
}

impl Operations {
    /// Registers a new operation (PENDING), or finds the one `request_id` already names.
    pub fn begin(&self, new: NewOperation) -> Result<Begun, Status> {
        if new.request_id.len() > REQUEST_ID_MAX {
            return Err(Status::invalid_argument(format!(
                "request_id is longer than {REQUEST_ID_MAX} bytes"
            )));
        }
        // Kept with every remembered operation (up to OPERATIONS_MAX): a request's size
        // must not decide the registry's memory (tonic alone admits 4 MiB messages).
        if new.fingerprint.len() > REQUEST_TEXT_MAX {
            return Err(Status::invalid_argument(format!(
                "the request's arguments are {} bytes; at most {REQUEST_TEXT_MAX}",
                new.fingerprint.len()
            )));
        }
        let mut inner = self.inner.lock();
        if let Some(op) = inner.named(&new.request_id, &new.fingerprint)? {
            return Ok(Begun::Existing(op));
        }
        let running = inner
            .by_id
            .values()
            .filter(|op| !is_terminal(op.snapshot().state))
            .count();
        if running >= RUNNING_OPERATIONS_MAX {
            return Err(Status::resource_exhausted(format!(
                "{RUNNING_OPERATIONS_MAX} operations are running on this node already"
            )));
        }
        if inner.by_id.len() >= OPERATIONS_MAX {
            inner.forget_oldest_finished();
        }
        let id = match new.id.is_empty() {
            true => crate::cluster::op_journal::display_id(rand::random()),
            false => new.id.clone(),
        };
        if inner.by_id.contains_key(&id) {
            return Err(Status::already_exists(format!("operation {id} exists")));
        }
        let op = pb::Operation {
            id: id.clone(),
            request_id: new.request_id.clone(),
            kind: new.kind as i32,
            state: pb::OperationState::Pending as i32,
            progress: Some(pb::Progress::default()),
            start_time_unix_ms: crate::clock::unix_millis(),
            end_time_unix_ms: 0,
            error: String::new(),
            description: new.description,
            coordinator_id: new.coordinator_id,
        };
        let tracked = Arc::new(Tracked {
            fingerprint: new.fingerprint,
            state: tokio::sync::watch::Sender::new(op),
            cancel: AtomicU8::new(CANCELLABLE),
            stood_down: Default::default(),
        });
        if !new.request_id.is_empty() {
            inner.by_request.insert(new.request_id, id.clone());
        }
        inner.by_id.insert(id, tracked.clone());
        Ok(Begun::New(tracked))
    }

    /// The operation `request_id` names already, if any (checked before a request is
    /// validated: a retried failover must find its operation, not be told the node is no
    /// longer a replica).
    pub fn named(
        &self,
        request_id: &str,
        fingerprint: &str,
    ) -> Result<Option<Arc<Tracked>>, Status> {
        self.inner.lock().named(request_id, fingerprint)
    }

    pub fn find(&self, id: &str) -> Option<Arc<Tracked>> {
        self.inner.lock().by_id.get(id).cloned()
    }

    /// Drops an operation registered for a request the topology log did not record (or
    /// recorded under another operation).
    pub fn forget(&self, id: &str) {
        let mut inner = self.inner.lock();
        if let Some(op) = inner.by_id.shift_remove(id) {
            let request_id = op.snapshot().request_id;
            if inner.by_request.get(&request_id).is_some_and(|i| i == id) {
                inner.by_request.remove(&request_id);
            }
        }
    }

    /// Registers an operation this node carries on from the topology log (adopted, or its
    /// own from before a restart), as `now` shows it; it runs from here. Not bounded by
    /// [`RUNNING_OPERATIONS_MAX`]: the log bounds the operations running in the cluster.
    pub fn resumed(&self, now: pb::Operation, fingerprint: String) -> Arc<Tracked> {
        let mut inner = self.inner.lock();
        if inner.by_id.len() >= OPERATIONS_MAX {
            inner.forget_oldest_finished();
        }
        let id = now.id.clone();
        let request_id = now.request_id.clone();
        let tracked = Arc::new(Tracked {
            fingerprint,
            state: tokio::sync::watch::Sender::new(now),
            cancel: AtomicU8::new(CANCELLABLE),
            stood_down: Default::default(),
        });
        if !request_id.is_empty() {
            inner.by_request.insert(request_id, id.clone());
        }
        inner.by_id.insert(id, tracked.clone());
        tracked
    }

    pub fn get(&self, id: &str) -> Result<Arc<Tracked>, Status> {
        self.inner
            .lock()
            .by_id
            .get(id)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("no operation {id:?} on this node")))
    }

    pub fn list(&self) -> Vec<pb::Operation> {
        self.inner
            .lock()
            .by_id
            .values()
            .map(|op| op.snapshot())
            .collect()
    }

    /// Asks the operation to stop; it ends CANCELLED at its next step. A finished one is
    /// answered as it is; one past its point of no return is refused.
    pub fn cancel(&self, id: &str) -> Result<pb::Operation, Status> {
        let op = self.get(id)?;
        let now = op.snapshot();
        if is_terminal(now.state) {
            return Ok(now);
        }
        match op.cancel.compare_exchange(
            CANCELLABLE,
            CANCEL_REQUESTED,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) | Err(CANCEL_REQUESTED) => Ok(op.snapshot()),
            Err(_) => Err(Status::failed_precondition(format!(
                "operation {id} can no longer be cancelled: its change was handed to the cluster"
            ))),
        }
    }
}

impl Inner {
    fn named(&self, request_id: &str, fingerprint: &str) -> Result<Option<Arc<Tracked>>, Status> {
        if request_id.is_empty() {
            return Ok(None);
        }
        let Some(op) = self
            .by_request
            .get(request_id)
            .and_then(|id| self.by_id.get(id))
        else {
            return Ok(None);
        };
        if op.fingerprint != fingerprint {
            return Err(Status::already_exists(format!(
                "request_id {request_id:?} already names operation {} ({}), a different request",
                op.id(),
                op.snapshot().description
            )));
        }
        Ok(Some(op.clone()))
    }

    fn forget_oldest_finished(&mut self) {
        let oldest = self
            .by_id
            .iter()
            .find(|(_, op)| is_terminal(op.snapshot().state))
            .map(|(id, op)| (id.clone(), op.snapshot().request_id));
        if let Some((id, request_id)) = oldest {
            self.by_id.shift_remove(&id);
            self.by_request.remove(&request_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(request_id: &str, fingerprint: &str) -> NewOperation {
        NewOperation {
            id: String::new(),
            request_id: request_id.into(),
            kind: pb::OperationKind::Failover,
            description: "d".into(),
            fingerprint: fingerprint.into(),
            coordinator_id: "c".into(),
        }
    }

    #[test]
    fn oversized_requests_are_refused_before_they_are_kept() {
        let ops = Operations::default();
        let long = "a".repeat(REQUEST_TEXT_MAX + 1);
        let e = ops.begin(new("", &long)).err().unwrap();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        let e = ops
            .begin(new(&"r".repeat(REQUEST_ID_MAX + 1), "f"))
            .err()
            .unwrap();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(ops.list().is_empty());
        assert!(ops.begin(new("", &long[1..])).is_ok());
    }

    #[test]
    fn a_request_id_names_one_operation() {
        let ops = Operations::default();
        let Ok(Begun::New(a)) = ops.begin(new("r1", "f")) else {
            panic!("first is new")
        };
        let Ok(Begun::Existing(b)) = ops.begin(new("r1", "f")) else {
            panic!("second is the same")
        };
        assert_eq!(a.id(), b.id());
        let e = ops.begin(new("r1", "other")).err().unwrap();
        assert_eq!(e.code(), tonic::Code::AlreadyExists);
        let Ok(Begun::New(c)) = ops.begin(new("", "f")) else {
            panic!("no request id: always new")
        };
        assert_ne!(c.id(), a.id());
        assert_eq!(ops.list().len(), 2);
    }

    #[test]
    fn cancel_ends_it_at_the_next_step_unless_past_the_point_of_no_return() {
        let ops = Operations::default();
        let Ok(Begun::New(a)) = ops.begin(new("", "f")) else {
            panic!()
        };
        a.running("step");
        ops.cancel(&a.id()).unwrap();
        assert!(a.stop_if_cancelled());
        assert_eq!(a.snapshot().state, pb::OperationState::Cancelled as i32);
        a.succeed();
        assert_eq!(
            a.snapshot().state,
            pb::OperationState::Cancelled as i32,
            "ends once"
        );
        let Ok(Begun::New(b)) = ops.begin(new("", "f")) else {
            panic!()
        };
        assert!(b.past_point_of_no_return());
        let e = ops.cancel(&b.id()).err().unwrap();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        assert_eq!(ops.get("nope").err().unwrap().code(), tonic::Code::NotFound);
    }

    #[test]
    fn a_cancel_and_the_point_of_no_return_never_both_win() {
        // Raced from two threads many times: either the cancel is refused and the worker goes
        // on, or the cancel is accepted and the worker stops with the operation CANCELLED.
        for _ in 0..200 {
            let ops = Arc::new(Operations::default());
            let Ok(Begun::New(op)) = ops.begin(new("", "f")) else {
                panic!()
            };
            let id = op.id();
            let canceller = {
                let ops = ops.clone();
                std::thread::spawn(move || ops.cancel(&id).is_ok())
            };
            let worker_goes_on = op.past_point_of_no_return();
            let cancel_accepted = canceller.join().unwrap();
            assert_ne!(worker_goes_on, cancel_accepted);
            let cancelled = op.snapshot().state == pb::OperationState::Cancelled as i32;
            assert_eq!(cancelled, cancel_accepted);
        }
    }

    #[test]
    fn running_operations_are_bounded() {
        let ops = Operations::default();
        for _ in 0..RUNNING_OPERATIONS_MAX {
            assert!(ops.begin(new("", "f")).is_ok());
        }
        let e = ops.begin(new("", "f")).err().unwrap();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
    }
}
