//! The source's driver of one migration: runs the `cluster::migration::source` machine on
//! its own thread (a background loop that owns its pace), feeding it what the topology log
//! applied, what the link carried and what the target answered, and carrying out its
//! actions: proposals, slot copies, write pauses, the drop of handed-over keys.

use super::copy::{copy_slot, SlotCopy};
use super::link::Link;
use super::purge::purge_slots;
use super::registry::DriverState;
use crate::clock::unix_millis;
use crate::cluster::agent::ProposeError;
use crate::cluster::consensus::command::MigrationOpen;
use crate::cluster::consensus::TopologyCommand;
use crate::cluster::id::NodeId;
use crate::cluster::migration::source::{Action, Applied, Input, Outcome, ProposalKind};
use crate::cluster::migration::{
    LinkQueue, MigrationId, MigrationSettings, MigrationState, QueueBounds, SlotRanges,
    SourceMigration,
};
use crate::cluster::Cluster;
use crate::db::keyspace::shard_of_slot;
use crate::server::Server;
use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The driver's pace while nothing arrives.
const IDLE_TICK: Duration = Duration::from_millis(1);

pub struct Plan {
    pub id: MigrationId,
    pub request_id: String,
    pub ranges: SlotRanges,
    pub target: NodeId,
    pub settings: MigrationSettings,
}

/// What the log has shown of this migration so far.
#[derive(Default)]
struct Seen {
    opened: bool,
    begun: Option<u32>,
    committed: u32,
    ended: bool,
}

struct Driver {
    server: Arc<Server>,
    plan: Plan,
    me: NodeId,
    state: Arc<DriverState>,
    machine: SourceMigration,
    seen: Seen,
    /// The current batch's link and queue.
    link: Option<(Link, Arc<LinkQueue>)>,
    link_failure_reported: bool,
    /// Where the next batch's stream continues (offsets run across batches).
    offset_base: u64,
    inputs: VecDeque<Input>,
    /// When the current write pause began, as the driver carried it out (the machine's
    /// `paused_since_ms` has ms resolution; the pauses to report are a few ms).
    paused_at: Option<Instant>,
    /// The link's (appended, answered) offsets last handed to the machine: only a change is
    /// an input, so that the loop sleeps its idle tick while the target catches up instead
    /// of spinning (on a small machine the spin takes the core the target applies on).
    link_seen: (u64, u64),
}

/// However the driver ends (its machine finished, or a panic unwinding its thread), no slot
/// of its plan stays paused: a pause left by a driver that is gone would park every write to
/// those slots, and every command MOVED off them, until its wait runs out, and again after.
/// The machine resumes on each of its ends, so this finds nothing paused but after a panic.
impl Drop for Driver {
    fn drop(&mut self) {
        let Some(cluster) = self.server.cluster.as_ref() else {
            return;
        };
        let gate = &cluster.migration_gate;
        if gate.any_paused() && self.plan.ranges.slots().any(|slot| gate.paused(slot)) {
            tracing::warn!(migration = %self.plan.id, "the migration's driver ended with writes paused: resumed");
            gate.resume(&self.plan.ranges);
        }
    }
}

pub fn run(server: Arc<Server>, plan: Plan, state: Arc<DriverState>) {
    if let Some(mut driver) = Driver::new(server, plan, state) {
        driver.run_loop();
    }
}

impl Driver {
    /// None outside cluster mode.
    fn new(server: Arc<Server>, plan: Plan, state: Arc<DriverState>) -> Option<Driver> {
        let me = server.cluster.as_ref()?.topology.read().myself().id;
        let machine = SourceMigration::new(plan.id, &plan.ranges, plan.settings);
        Some(Driver {
            server,
            plan,
            me,
            state,
            machine,
            seen: Seen::default(),
            link: None,
            link_failure_reported: false,
            offset_base: 0,
            inputs: VecDeque::new(),
            paused_at: None,
            link_seen: (0, 0),
        })
    }

    fn cluster(&self) -> &Cluster {
        self.server.cluster.as_ref().expect("checked at start")
    }

    fn run_loop(&mut self) {
        let mut actions: VecDeque<Action> = self.machine.start(unix_millis()).into();
        loop {
            while let Some(action) = actions.pop_front() {
                self.execute(action);
            }
            if self.machine.is_finished() {
                break;
            }
            self.observe();
            if self.inputs.is_empty() {
                std::thread::sleep(IDLE_TICK);
                self.inputs.push_back(Input::Tick);
            }
            // `cluster-migration-debug-hold` (tests only): no write pause while set.
            let hold = self.server.config.read().cluster.migration_debug_hold;
            self.machine.hold_pause(hold);
            while let Some(input) = self.inputs.pop_front() {
                actions.extend(self.machine.step(unix_millis(), input));
            }
            self.state.progress.lock().slots_done = self.machine.slots_done() as u64;
        }
        self.close_link();
        let gate = &self.cluster().migration_gate;
        gate.close_link(self.plan.id);
        if !gate.streaming() {
            self.server.replication.set_migration_consumer(false);
        }
    }

    /// Inputs from the applied log, the link and a cancel.
    fn observe(&mut self) {
        self.observe_log();
        if let Some((link, queue)) = &self.link {
            if let Some(why) = link.failure().filter(|_| !self.link_failure_reported) {
                self.link_failure_reported = true;
                self.inputs.push_back(Input::LinkFailed { why });
            }
            let (appended, answered) = (queue.appended(), link.answered());
            // The machine ignores offsets it has seen (no progress, no new silence), so
            // handing it only changes is the same to it.
            if appended != self.link_seen.0 {
                self.inputs.push_back(Input::Streamed { offset: appended });
                self.state.progress.lock().bytes_streamed = appended;
            }
            if answered != self.link_seen.1 {
                self.inputs
                    .push_back(Input::TargetApplied { offset: answered });
            }
            self.link_seen = (appended, answered);
        }
        if self.state.cancel.swap(false, Relaxed) {
            self.inputs.push_back(Input::Cancel);
        }
    }

    fn observe_log(&mut self) {
        let record = {
            let t = self.cluster().topology.read();
            t.consensus.migrations.get(self.plan.id).cloned()
        };
        let Some(r) = record else {
            return;
        };
        if !self.seen.opened {
            self.seen.opened = true;
            self.inputs.push_back(Input::Applied(Applied::Opened));
        }
        while self.seen.committed < r.batches_done {
            let batch = self.seen.committed;
            self.seen.committed += 1;
            self.inputs
                .push_back(Input::Applied(Applied::Committed { batch }));
        }
        if let Some((batch, _)) = &r.moving {
            if self.seen.begun != Some(*batch) {
                self.seen.begun = Some(*batch);
                self.inputs
                    .push_back(Input::Applied(Applied::Begun { batch: *batch }));
            }
        }
        let aborted = matches!(
            r.state,
            MigrationState::Failed(_) | MigrationState::Cancelled(_)
        );
        if aborted && !self.seen.ended {
            self.seen.ended = true;
            self.inputs.push_back(Input::Applied(Applied::Aborted));
        }
    }

    fn execute(&mut self, action: Action) {
        if !matches!(action, Action::CopySlot { .. }) {
            tracing::trace!(migration = %self.plan.id, ?action, "slot migration step");
        }
        match action {
            Action::ProposeOpen => {
                let command = TopologyCommand::MigrationOpen(MigrationOpen {
                    id: self.plan.id.0,
                    request_id: self.plan.request_id.clone(),
                    source: self.me,
                    target: self.plan.target,
                    ranges: self.plan.ranges.ranges().to_vec(),
                    slots_per_batch: self.plan.settings.slots_per_batch as u32,
                });
                self.propose(command, ProposalKind::Open);
                // The request id already named another migration: this one never exists.
                let other = {
                    let t = self.cluster().topology.read();
                    let ledger = &t.consensus.migrations;
                    match ledger.get(self.plan.id) {
                        Some(_) => None,
                        None => ledger
                            .by_request_id(&self.plan.request_id)
                            .filter(|r| r.id != self.plan.id)
                            .map(|r| r.id),
                    }
                };
                if let Some(other) = other {
                    self.inputs.push_back(Input::Applied(Applied::Refused {
                        proposal: ProposalKind::Open,
                        why: format!("request_id names migration {other}"),
                    }));
                }
            }
            Action::ProposeBegin { batch, slots } => {
                let command = TopologyCommand::MigrationBegin {
                    id: self.plan.id.0,
                    batch,
                    ranges: slots.ranges().to_vec(),
                };
                self.propose(command, ProposalKind::Begin);
            }
            Action::CopySlot { slot } => self.copy(slot),
            Action::PauseWrites { slots } => {
                self.paused_at = Some(Instant::now());
                let gate = &self.cluster().migration_gate;
                gate.pause(&slots);
                // Every write to these slots that locked its shard before the pause has fed
                // the link once each shard was taken once; later ones find the pause under
                // their shard lock and park.
                let shards: BTreeSet<usize> = slots.slots().map(shard_of_slot).collect();
                for shard in shards {
                    drop(self.server.keyspace.lock_shard(shard));
                }
                let end_offset = self
                    .link
                    .as_ref()
                    .map(|(_, q)| q.appended())
                    .unwrap_or(self.offset_base);
                self.inputs.push_back(Input::WritesPaused { end_offset });
            }
            Action::ResumeWrites { slots } => {
                // After a commit: the parked writes go once the target has applied it too,
                // so none is sent back here by a target a step behind the log.
                if let Some(batch) = self.seen.begun.filter(|b| *b < self.seen.committed) {
                    if let Some((host, port)) = self.target_address() {
                        let seen = super::link::wait_target_committed(
                            &self.server,
                            &host,
                            port,
                            self.plan.id,
                            batch,
                        );
                        if !seen {
                            tracing::debug!(migration = %self.plan.id, batch, "the target's commit not seen");
                        }
                    }
                }
                self.cluster().migration_gate.resume(&slots);
                if let Some(since) = self.paused_at.take() {
                    let pause_us = since.elapsed().as_micros() as u64;
                    self.state.progress.lock().pauses.record(pause_us);
                }
            }
            // The target's answer to every command through the end offset is its ack.
            Action::SendEndMark { .. } => {}
            Action::ProposeCommit { batch } => {
                let command = TopologyCommand::MigrationCommit {
                    id: self.plan.id.0,
                    batch,
                };
                self.propose(command, ProposalKind::Commit);
            }
            Action::ProposeAbort { reason, cancelled } => {
                let command = TopologyCommand::MigrationAbort {
                    id: self.plan.id.0,
                    reason: crate::cluster::migration::ledger::abort_reason(&reason),
                    cancelled,
                };
                self.propose(command, ProposalKind::Abort);
            }
            Action::DropKeys { slots } => {
                // The slots are the target's now: their writes stop streaming (they are
                // MOVED), and the batch's link ends.
                self.close_link();
                let dropped = purge_slots(&self.server, slots.slots(), |_| true);
                tracing::debug!(migration = %self.plan.id, dropped, "handed-over keys dropped");
            }
            Action::Finished(outcome) => {
                match &outcome {
                    Outcome::Succeeded => {
                        tracing::info!(migration = %self.plan.id, "slot migration succeeded")
                    }
                    Outcome::Failed(why) | Outcome::Cancelled(why) => {
                        tracing::warn!(migration = %self.plan.id, why, "slot migration ended")
                    }
                }
                {
                    let mut p = self.state.progress.lock();
                    p.outcome = Some(outcome);
                    p.elapsed = Some(p.started.elapsed());
                }
                if self.seen.committed > 0 {
                    // A failed proposal is asked again by the supervisor.
                    let _ =
                        super::replica_migration::follow_the_taker(&self.server, self.plan.target);
                }
            }
        }
    }

    /// Proposes `command` and waits for its outcome; a refusal is the machine's input, a
    /// timeout is not (the machine proposes again, and the log may still apply it).
    fn propose(&mut self, command: TopologyCommand, kind: ProposalKind) {
        let outcome = match self.cluster().propose_then(command, None) {
            Ok(outcome) => outcome,
            Err(e) => {
                tracing::debug!(migration = %self.plan.id, error = %e, "proposal not made");
                return;
            }
        };
        match outcome.recv_timeout(Cluster::proposal_wait()) {
            Ok(Err(ProposeError::Refused(why))) => {
                self.observe_log();
                self.inputs.push_back(Input::Applied(Applied::Refused {
                    proposal: kind,
                    why: why.to_string(),
                }));
            }
            Ok(Ok(())) => self.observe_log(),
            Ok(Err(e)) => {
                tracing::debug!(migration = %self.plan.id, error = %e, "proposal not committed")
            }
            Err(_) => {}
        }
    }

    fn copy(&mut self, slot: u16) {
        if self.link.is_none() {
            let Some(batch) = self.seen.begun else {
                return;
            };
            match self.open_link(batch) {
                Ok(link) => self.link = Some(link),
                Err(why) => {
                    self.inputs.push_back(Input::LinkFailed { why });
                    return;
                }
            }
        }
        let Some((_, queue)) = &self.link else { return };
        let queue = queue.clone();
        let copied = copy_slot(
            &self.server,
            &self.cluster().migration_gate,
            slot,
            self.plan.id,
            &queue,
            Duration::from_millis(self.plan.settings.link_silence_max_ms),
        );
        let (copied, done) = match copied {
            SlotCopy::Done(c) => (c, true),
            SlotCopy::Stopped(c) => (c, false),
        };
        {
            let mut p = self.state.progress.lock();
            p.keys_copied += copied.keys;
        }
        if done {
            self.inputs.push_back(Input::SlotCopied { slot });
        } else {
            let why = queue.broken().unwrap_or_else(|| "it closed".to_string());
            self.inputs.push_back(Input::LinkFailed {
                why: format!("the copy of slot {slot} stopped: {why}"),
            });
        }
    }

    fn target_address(&self) -> Option<(String, u16)> {
        let t = self.cluster().topology.read();
        let node = t.index_of(&self.plan.target).and_then(|i| t.node(i))?;
        Some((node.ip.clone(), node.port))
    }

    fn open_link(&mut self, batch: u32) -> Result<(Link, Arc<LinkQueue>), String> {
        let (host, port) = self
            .target_address()
            .ok_or_else(|| format!("the target {} is not known", self.plan.target))?;
        let bounds = QueueBounds::with_hard(self.plan.settings.link_queue_bytes_max);
        let queue = Arc::new(LinkQueue::new(bounds, self.offset_base));
        self.link_failure_reported = false;
        let link = Link::open(
            &self.server,
            &host,
            port,
            self.plan.id,
            batch,
            queue.clone(),
        )?;
        self.state.progress.lock().link = link.carrier().to_string();
        self.cluster()
            .migration_gate
            .install_link(self.plan.id, queue.clone());
        Ok((link, queue))
    }

    fn close_link(&mut self) {
        if let Some((link, queue)) = self.link.take() {
            self.offset_base = queue.appended();
            self.state.progress.lock().bytes_streamed = self.offset_base;
            self.cluster().migration_gate.close_link(self.plan.id);
            link.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::lease_wait_tests::cluster_node_owning_every_slot;

    #[test]
    fn a_driver_that_ends_with_writes_paused_resumes_them() {
        // Goal: a driver dropped while its batch's pause holds (its thread unwinding from a
        // panic) leaves no slot of its plan paused, and resumes no other slot.
        let (server, _dir) = cluster_node_owning_every_slot();
        let gate = &server.cluster.as_ref().expect("cluster").migration_gate;
        let ranges = SlotRanges::new(&[(10, 20)]).expect("ranges");
        let elsewhere = SlotRanges::new(&[(500, 500)]).expect("ranges");
        let plan = Plan {
            id: MigrationId(7),
            request_id: "drop-test".into(),
            ranges: ranges.clone(),
            target: server
                .cluster
                .as_ref()
                .expect("cluster")
                .topology
                .read()
                .myself()
                .id,
            settings: MigrationSettings::default(),
        };
        let state = server.slot_migrations.add(plan.id);
        let driver = Driver::new(server.clone(), plan, state).expect("cluster mode");
        gate.pause(&SlotRanges::new(&[(12, 14)]).expect("ranges"));
        gate.pause(&elsewhere);
        drop(driver);
        assert!(ranges.slots().all(|slot| !gate.paused(slot)));
        assert!(
            gate.paused(500),
            "another migration's pause is not this driver's"
        );
    }
}
