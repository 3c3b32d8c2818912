//! The source's side of one migration, as a state machine without I/O: fed `(now_ms,
//! input)`, it returns [`Action`]s for its driver (propose a topology record, copy a slot,
//! pause or resume writes to the batch's slots, send the end mark, drop moved keys).
//!
//! Per batch: propose `begin` -> copy each slot (from that instant the slot's writes also go
//! down the link) -> catch up -> pause writes once the target is within
//! `pause_lag_bytes`, send the end mark at the paused offset -> when the target has applied
//! it, propose `commit` -> on the commit's application resume (parked commands now find the
//! target owns the slots: MOVED) and drop the moved keys.
//!
//! The safety rule: only the source proposes a commit, and once it has, writes to the batch
//! stay paused until the log applies the commit or an abort. Before that, resuming is always
//! safe (no commit can be applied without the source). A pause without a pending commit
//! lasts at most `pause_max_ms`.

use super::ledger::MigrationId;
use super::ranges::SlotRanges;
use super::settings::MigrationSettings;

/// What the driver tells the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// Time passed (the driver ticks every few ms while the migration runs).
    Tick,
    /// The log applied a record of this migration.
    Applied(Applied),
    /// The slot's keys were copied into the link; its writes follow them on the link.
    SlotCopied { slot: u16 },
    /// The writes to the batch's slots are paused; the link carries `end_offset` bytes.
    WritesPaused { end_offset: u64 },
    /// Bytes put on the link so far (snapshot and writes).
    Streamed { offset: u64 },
    /// Bytes the target has applied (and, for the end mark, its replicas acknowledged).
    TargetApplied { offset: u64 },
    /// The link to the target broke, or the target refused (out of memory...).
    LinkFailed { why: String },
    /// CancelOperation.
    Cancel,
}

/// A record of this migration the log applied, or refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    Opened,
    Begun {
        batch: u32,
    },
    Committed {
        batch: u32,
    },
    Aborted,
    /// A proposal of this migration took no effect; `why` as the ledger said.
    Refused {
        proposal: ProposalKind,
        why: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProposalKind {
    Open,
    Begin,
    Commit,
    Abort,
}

/// What the driver must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    ProposeOpen,
    ProposeBegin {
        batch: u32,
        slots: SlotRanges,
    },
    /// Copy the slot's keys into the link and stream its writes from now on.
    CopySlot {
        slot: u16,
    },
    /// Park commands that write to these slots (reads go on) and answer `WritesPaused`.
    PauseWrites {
        slots: SlotRanges,
    },
    ResumeWrites {
        slots: SlotRanges,
    },
    SendEndMark {
        offset: u64,
    },
    ProposeCommit {
        batch: u32,
    },
    ProposeAbort {
        reason: String,
        cancelled: bool,
    },
    /// The slots are the target's now: delete their keys here (in the background).
    DropKeys {
        slots: SlotRanges,
    },
    Finished(Outcome),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed(String),
    Cancelled(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    Opening {
        proposed_ms: u64,
    },
    Beginning {
        proposed_ms: u64,
    },
    /// Copying the batch's slots one at a time; `next` indexes the batch's slot list.
    Copying {
        next: usize,
    },
    CatchingUp {
        /// No new pause before this (writes get time between pauses).
        no_pause_before_ms: u64,
    },
    Pausing {
        since_ms: u64,
    },
    Paused {
        since_ms: u64,
        end_offset: u64,
    },
    Committing {
        first_proposed_ms: u64,
        proposed_ms: u64,
    },
    Aborting {
        proposed_ms: u64,
        reason: String,
        cancelled: bool,
        /// Writes paused with a commit proposed: they stay paused until an outcome.
        writes_paused: bool,
    },
    Finished,
}

/// One migration as its source runs it.
#[derive(Debug)]
pub struct SourceMigration {
    pub id: MigrationId,
    settings: MigrationSettings,
    batches: Vec<SlotRanges>,
    batch: usize,
    phase: Phase,
    pauses_tried: u32,
    streamed: u64,
    applied: u64,
    /// When the target last acknowledged something new (or when nothing was outstanding).
    last_progress_ms: u64,
    slots_done: usize,
    cancel_requested: bool,
    /// The end of the current write pause, if writes are paused (for the bound check).
    paused_since_ms: Option<u64>,
    /// See [`SourceMigration::hold_pause`].
    pause_held: bool,
}

impl SourceMigration {
    /// A migration of `ranges`; the first actions come from [`SourceMigration::start`].
    pub fn new(id: MigrationId, ranges: &SlotRanges, settings: MigrationSettings) -> Self {
        assert!(settings.slots_per_batch > 0 && settings.pauses_max > 0);
        SourceMigration {
            id,
            settings,
            batches: ranges.batches(settings.slots_per_batch),
            batch: 0,
            phase: Phase::Opening { proposed_ms: 0 },
            pauses_tried: 0,
            streamed: 0,
            applied: 0,
            last_progress_ms: 0,
            slots_done: 0,
            cancel_requested: false,
            paused_since_ms: None,
            pause_held: false,
        }
    }

    pub fn start(&mut self, now_ms: u64) -> Vec<Action> {
        self.phase = Phase::Opening {
            proposed_ms: now_ms,
        };
        self.last_progress_ms = now_ms;
        vec![Action::ProposeOpen]
    }

    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    pub fn slots_done(&self) -> usize {
        self.slots_done
    }

    pub fn batches_total(&self) -> usize {
        self.batches.len()
    }

    /// Since when writes to the current batch are paused, if they are.
    pub fn paused_since_ms(&self) -> Option<u64> {
        self.paused_since_ms
    }

    /// While `on`, the batch stays in its catch-up (copied, writes streaming, the target's
    /// silence still watched) and never pauses: tests hold a migration there to look at
    /// the target's copy before the commit (`cluster-migration-debug-hold`).
    pub fn hold_pause(&mut self, on: bool) {
        self.pause_held = on;
    }

    /// Whether a commit of the current batch has been proposed and no outcome applied yet
    /// (writes must then stay paused).
    pub fn commit_pending(&self) -> bool {
        matches!(self.phase, Phase::Committing { .. })
            || matches!(
                self.phase,
                Phase::Aborting {
                    writes_paused: true,
                    ..
                }
            )
    }

    pub fn step(&mut self, now_ms: u64, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        if self.phase == Phase::Finished {
            return out;
        }
        match input {
            Input::Tick => {}
            Input::Applied(applied) => self.on_applied(now_ms, applied, &mut out),
            Input::SlotCopied { slot } => self.on_slot_copied(now_ms, slot, &mut out),
            Input::WritesPaused { end_offset } => {
                if let Phase::Pausing { since_ms } = self.phase {
                    self.streamed = self.streamed.max(end_offset);
                    self.phase = Phase::Paused {
                        since_ms,
                        end_offset,
                    };
                    out.push(Action::SendEndMark { offset: end_offset });
                }
            }
            Input::Streamed { offset } => {
                if self.streamed <= self.applied && offset > self.applied {
                    // Something outstanding again: the silence clock starts now.
                    self.last_progress_ms = now_ms;
                }
                self.streamed = self.streamed.max(offset);
            }
            Input::TargetApplied { offset } => {
                if offset > self.applied {
                    self.applied = offset;
                    self.last_progress_ms = now_ms;
                }
            }
            Input::LinkFailed { why } => self.give_up(
                now_ms,
                format!("link to the target: {why}"),
                false,
                &mut out,
            ),
            Input::Cancel => {
                self.cancel_requested = true;
                self.give_up(now_ms, "cancelled".into(), true, &mut out);
            }
        }
        self.advance(now_ms, &mut out);
        out
    }

    fn current(&self) -> &SlotRanges {
        &self.batches[self.batch]
    }

    fn on_applied(&mut self, now_ms: u64, applied: Applied, out: &mut Vec<Action>) {
        match (&self.phase, applied) {
            (Phase::Opening { .. }, Applied::Opened) => self.propose_begin(now_ms, out),
            (Phase::Beginning { .. }, Applied::Begun { batch }) if batch as usize == self.batch => {
                self.phase = Phase::Copying { next: 0 };
                let first = self
                    .current()
                    .slots()
                    .next()
                    .expect("batches are not empty");
                out.push(Action::CopySlot { slot: first });
            }
            (Phase::Committing { .. } | Phase::Aborting { .. }, Applied::Committed { batch })
                if batch as usize == self.batch =>
            {
                self.batch_committed(now_ms, out)
            }
            (_, Applied::Aborted) => {
                let (reason, cancelled) = match &self.phase {
                    Phase::Aborting {
                        reason, cancelled, ..
                    } => (reason.clone(), *cancelled),
                    _ => ("aborted by the topology leader".to_string(), false),
                };
                self.resume_if_paused(out);
                self.finish(
                    match cancelled {
                        true => Outcome::Cancelled(reason),
                        false => Outcome::Failed(reason),
                    },
                    out,
                );
            }
            (phase, Applied::Refused { proposal, why }) => match (phase, proposal) {
                (Phase::Opening { .. }, ProposalKind::Open) => {
                    self.finish(Outcome::Failed(why), out)
                }
                (Phase::Beginning { .. }, ProposalKind::Begin) => {
                    self.give_up(now_ms, why, false, out)
                }
                // A refused commit means the op ended (an abort won) or the batch moved
                // on; the abort's own application says which.
                (
                    Phase::Aborting {
                        reason, cancelled, ..
                    },
                    ProposalKind::Abort,
                ) => {
                    // Records apply in order, so an op that ended by a commit or another
                    // abort was reported (and finished this machine) before; a refused abort
                    // means the open never landed. Nothing moved.
                    let outcome = match cancelled {
                        true => Outcome::Cancelled(reason.clone()),
                        false => Outcome::Failed(reason.clone()),
                    };
                    self.resume_if_paused(out);
                    self.finish(outcome, out);
                }
                _ => {}
            },
            _ => {}
        }
    }

    fn on_slot_copied(&mut self, now_ms: u64, slot: u16, out: &mut Vec<Action>) {
        let Phase::Copying { next } = self.phase else {
            return;
        };
        let slots: Vec<u16> = self.current().slots().collect();
        if slots.get(next) != Some(&slot) {
            return;
        }
        match slots.get(next + 1) {
            Some(&following) => {
                self.phase = Phase::Copying { next: next + 1 };
                out.push(Action::CopySlot { slot: following });
            }
            None => {
                self.phase = Phase::CatchingUp {
                    no_pause_before_ms: now_ms,
                }
            }
        }
    }

    /// The timers and the lag-driven moves, after every input.
    fn advance(&mut self, now_ms: u64, out: &mut Vec<Action>) {
        let s = self.settings;
        let outstanding = self.streamed > self.applied;
        let silent =
            outstanding && now_ms.saturating_sub(self.last_progress_ms) > s.link_silence_max_ms;
        match self.phase.clone() {
            Phase::Opening { proposed_ms } if now_ms - proposed_ms >= s.propose_retry_ms => {
                self.phase = Phase::Opening {
                    proposed_ms: now_ms,
                };
                out.push(Action::ProposeOpen);
            }
            Phase::Beginning { proposed_ms } if now_ms - proposed_ms >= s.propose_retry_ms => {
                self.propose_begin(now_ms, out)
            }
            Phase::Copying { .. }
            | Phase::CatchingUp { .. }
            | Phase::Pausing { .. }
            | Phase::Paused { .. }
                if silent =>
            {
                self.give_up(
                    now_ms,
                    format!(
                        "the target acknowledged nothing for {} ms",
                        s.link_silence_max_ms
                    ),
                    false,
                    out,
                )
            }
            Phase::CatchingUp { no_pause_before_ms }
                if !self.pause_held
                    && now_ms >= no_pause_before_ms
                    && self.streamed - self.applied.min(self.streamed) <= s.pause_lag_bytes =>
            {
                self.phase = Phase::Pausing { since_ms: now_ms };
                self.paused_since_ms = Some(now_ms);
                out.push(Action::PauseWrites {
                    slots: self.current().clone(),
                });
            }
            Phase::Paused { end_offset, .. } if self.applied >= end_offset => {
                self.phase = Phase::Committing {
                    first_proposed_ms: now_ms,
                    proposed_ms: now_ms,
                };
                out.push(Action::ProposeCommit {
                    batch: self.batch as u32,
                });
            }
            Phase::Pausing { since_ms } | Phase::Paused { since_ms, .. }
                if now_ms - since_ms >= s.pause_max_ms =>
            {
                // The target did not catch up in time: let writes through, try again later.
                self.resume_if_paused(out);
                self.pauses_tried += 1;
                if self.pauses_tried >= s.pauses_max {
                    let why = format!(
                        "the target did not catch up within {} pauses of {} ms",
                        s.pauses_max, s.pause_max_ms
                    );
                    self.give_up(now_ms, why, false, out);
                } else {
                    self.phase = Phase::CatchingUp {
                        no_pause_before_ms: now_ms + s.pause_max_ms,
                    };
                }
            }
            Phase::Committing {
                first_proposed_ms,
                proposed_ms,
            } => {
                if now_ms - first_proposed_ms >= s.commit_wait_max_ms {
                    let why = format!(
                        "the commit was not applied within {} ms",
                        s.commit_wait_max_ms
                    );
                    self.give_up(now_ms, why, self.cancel_requested, out);
                } else if now_ms - proposed_ms >= s.propose_retry_ms {
                    self.phase = Phase::Committing {
                        first_proposed_ms,
                        proposed_ms: now_ms,
                    };
                    out.push(Action::ProposeCommit {
                        batch: self.batch as u32,
                    });
                }
            }
            Phase::Aborting {
                proposed_ms,
                reason,
                cancelled,
                writes_paused,
            } if now_ms - proposed_ms >= s.propose_retry_ms => {
                self.phase = Phase::Aborting {
                    proposed_ms: now_ms,
                    reason: reason.clone(),
                    cancelled,
                    writes_paused,
                };
                out.push(Action::ProposeAbort { reason, cancelled });
            }
            _ => {}
        }
    }

    fn propose_begin(&mut self, now_ms: u64, out: &mut Vec<Action>) {
        self.phase = Phase::Beginning {
            proposed_ms: now_ms,
        };
        self.pauses_tried = 0;
        out.push(Action::ProposeBegin {
            batch: self.batch as u32,
            slots: self.current().clone(),
        });
    }

    fn batch_committed(&mut self, now_ms: u64, out: &mut Vec<Action>) {
        let slots = self.current().clone();
        self.slots_done += slots.slot_count();
        self.resume_if_paused(out);
        out.push(Action::DropKeys { slots });
        let aborting = matches!(self.phase, Phase::Aborting { .. });
        self.batch += 1;
        if self.batch == self.batches.len() {
            // The last batch: the op has succeeded in the log; a pending abort is refused.
            self.finish(Outcome::Succeeded, out);
        } else if aborting {
            // The commit won the race with the abort, which ends the op at its application.
            if let Phase::Aborting { writes_paused, .. } = &mut self.phase {
                *writes_paused = false;
            }
        } else if self.cancel_requested {
            self.give_up(now_ms, "cancelled".into(), true, out);
        } else {
            self.propose_begin(now_ms, out);
        }
    }

    /// Ends the op with an abort, unless it is past what an abort can stop.
    fn give_up(&mut self, now_ms: u64, reason: String, cancelled: bool, out: &mut Vec<Action>) {
        match self.phase {
            Phase::Finished | Phase::Aborting { .. } => {}
            // Nothing in the log yet that an abort could end; the open may still land, and
            // is then aborted by the retry below.
            Phase::Committing { .. } => {
                // A commit is proposed: writes stay paused until the log says which won.
                self.phase = Phase::Aborting {
                    proposed_ms: now_ms,
                    reason: reason.clone(),
                    cancelled,
                    writes_paused: true,
                };
                out.push(Action::ProposeAbort { reason, cancelled });
            }
            _ => {
                self.resume_if_paused(out);
                self.phase = Phase::Aborting {
                    proposed_ms: now_ms,
                    reason: reason.clone(),
                    cancelled,
                    writes_paused: false,
                };
                out.push(Action::ProposeAbort { reason, cancelled });
            }
        }
    }

    fn resume_if_paused(&mut self, out: &mut Vec<Action>) {
        if self.paused_since_ms.take().is_some() {
            out.push(Action::ResumeWrites {
                slots: self.current().clone(),
            });
        }
    }

    fn finish(&mut self, outcome: Outcome, out: &mut Vec<Action>) {
        self.phase = Phase::Finished;
        out.push(Action::Finished(outcome));
    }
}
