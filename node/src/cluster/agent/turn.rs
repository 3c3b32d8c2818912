//! The agent's Raft traffic: peer bytes in, proposals (own or forwarded), raft ticks, and
//! the Ready turn that sends messages, applies committed changes to the topology and
//! answers the commands that waited for them.

use super::{AgentAction, Group, PreJoin, ProposeError, TopologyAgent};
use crate::cluster::consensus::{
    log_store, ApplyError, LogError, MemberRole, ProposalId, TopologyCommand, TopologyLog,
};
use crate::cluster::flags::bit;
use crate::cluster::id::NodeId;
use crate::cluster::topology::Topology;

/// Ready turns per input: a one-voter group commits a proposal on its second turn; more
/// turns than this in one step only mean a busy log, which the next input drains.
const TURNS_PER_STEP_MAX: usize = 8;
/// Changes waiting for a leader to be known, at most (beyond them: Busy). Parked only for
/// the moments a group has no known leader, so a few suffice.
pub(super) const PARKED_MAX: usize = 64;
/// Raft ticks given at once after a stall (a paused process must not fire every timer it
/// missed: the election timeout alone is 10-20 ticks).
const CATCH_UP_TICKS_MAX: u64 = 5;

impl<W> TopologyAgent<W> {
    pub(super) fn tick_raft(&mut self, now_ms: u64) {
        let Some(g) = &mut self.group else { return };
        if self.raft_clock_ms == 0 {
            // Reopened from the store: the clock starts at the first tick.
            self.raft_clock_ms = now_ms;
        }
        let tick_ms = self.settings.raft_tick_ms.max(1);
        let due = now_ms.saturating_sub(self.raft_clock_ms) / tick_ms;
        if due > CATCH_UP_TICKS_MAX {
            self.raft_clock_ms = now_ms;
        } else {
            self.raft_clock_ms += due * tick_ms;
        }
        for _ in 0..due.min(CATCH_UP_TICKS_MAX) {
            if let Err(e) = g.log.tick() {
                tracing::warn!(error = %e, "topology log tick");
            }
        }
    }

    /// Starts or joins `group` with `log` (its raft clock starts now).
    pub(super) fn enter(&mut self, now_ms: u64, id: NodeId, log: TopologyLog) {
        let (log, kept) = match &self.store {
            None => (log, None),
            Some(store) => match store.attach(id, log) {
                Ok((log, store)) => (log, Some(store)),
                Err(e) => {
                    // A member without its log on disk could vote twice after a restart.
                    tracing::error!(error = %e, "cannot keep the topology log; not joining");
                    return;
                }
            },
        };
        tracing::info!(group = %id, "in the topology group");
        self.group = Some(Group { id, log, kept });
        self.raft_clock_ms = now_ms;
    }

    pub(super) fn receive(
        &mut self,
        now_ms: u64,
        from: NodeId,
        group: NodeId,
        data: &[u8],
        t: &Topology,
    ) {
        if self.group.is_none() {
            // Only a member we know (handshake done) can bring this node into its group.
            let known = t
                .index_of(&from)
                .is_some_and(|i| !t.nodes[i as usize].flags.has(bit::HANDSHAKE));
            if !known {
                return;
            }
            match TopologyLog::new(self.me, &[], &[], self.seed) {
                Ok(log) => {
                    let me = t.myself();
                    self.prejoin = Some(PreJoin {
                        primary: me.primary.filter(|_| me.is_replica()),
                        slots: t.slots.ranges_of(t.myself_index()),
                    });
                    self.enter(now_ms, group, log)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot join the topology group");
                    return;
                }
            }
        }
        let Some(g) = &mut self.group else { return };
        if g.id != group {
            tracing::debug!(%from, %group, ours = %g.id, "raft message of another group dropped");
            return;
        }
        if let Err(e) = g.log.step(&from, data) {
            tracing::debug!(%from, error = %e, "raft message refused");
            if e == LogError::Poisoned {
                self.drop_poisoned();
            }
        }
    }

    pub(super) fn forwarded(&mut self, from: NodeId, group: NodeId, seq: u64, command: &[u8]) {
        let Some(g) = &mut self.group else { return };
        if g.id != group || !g.log.is_leader() {
            // The proposer times out and its command answers with an error.
            return;
        }
        let command = match TopologyCommand::decode(command) {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(%from, error = %e, "undecodable forwarded topology change");
                return;
            }
        };
        if let Err(e) = g.log.propose_as(&from, ProposalId(seq), &command) {
            tracing::debug!(%from, error = %e, "forwarded topology change not proposed");
        }
    }

    pub(super) fn propose(&mut self, now_ms: u64, command: TopologyCommand, waiter: W) {
        if self.pending.is_full() || self.parked.len() >= PARKED_MAX {
            let n = self.pending.len() + self.parked.len();
            return self.reply(waiter, Err(ProposeError::Busy(n)));
        }
        let deadline = now_ms + self.settings.proposal_timeout_ms;
        self.propose_by(command, waiter, deadline);
    }

    /// Proposes now if a leader is known; else parks the change until one is (a group
    /// being founded, or between two leaders) or its deadline passes.
    fn propose_by(&mut self, command: TopologyCommand, waiter: W, deadline: u64) {
        let Some(g) = &mut self.group else {
            return self.reply(waiter, Err(ProposeError::NotInGroup));
        };
        if g.log.is_leader() {
            match g.log.propose(&command) {
                Ok(id) => self.pending.insert(id, waiter, deadline),
                Err(e) => self.reply(waiter, Err(ProposeError::Log(e))),
            }
            return;
        }
        let Some(leader) = g.log.leader() else {
            self.parked.push_back((command, waiter, deadline));
            return;
        };
        let bytes = match command.encode() {
            Ok(b) => b,
            Err(e) => return self.reply(waiter, Err(ProposeError::Log(LogError::Encode(e)))),
        };
        let id = g.log.reserve_proposal();
        let group = g.id;
        self.pending.insert(id, waiter, deadline);
        self.out.push(AgentAction::Forward {
            to: leader,
            group,
            seq: id.0,
            command: bytes,
        });
    }

    /// Parked changes go out once a leader is known; those past their deadline are answered
    /// "no leader". True if any went out (the log then has a turn to take).
    pub(super) fn release_parked(&mut self, now_ms: u64) -> bool {
        if self.parked.is_empty() {
            return false;
        }
        let leader_known = self
            .group
            .as_ref()
            .is_some_and(|g| g.log.is_leader() || g.log.leader().is_some());
        let mut released = false;
        for (command, waiter, deadline) in std::mem::take(&mut self.parked) {
            if deadline <= now_ms {
                self.reply(waiter, Err(ProposeError::NoLeader));
            } else if leader_known || self.group.is_none() {
                self.propose_by(command, waiter, deadline);
                released = true;
            } else {
                self.parked.push_back((command, waiter, deadline));
            }
        }
        released
    }

    /// Ready turns until the log has nothing more: messages out, committed changes into
    /// `t`, waiting commands answered.
    pub(super) fn turn(&mut self, now_ms: u64, t: &mut Topology) {
        for _ in 0..TURNS_PER_STEP_MAX {
            let Some(g) = &mut self.group else { return };
            let out = match g.log.ready() {
                Ok(out) => out,
                Err(e) => {
                    tracing::warn!(error = %e, "topology log turn failed");
                    if e == LogError::Poisoned {
                        self.drop_poisoned();
                    }
                    return;
                }
            };
            if out.is_empty() {
                return;
            }
            // Durable before any message of the turn leaves or anything of it is applied.
            if let (Some(persist), Some(kept)) = (&out.persist, g.kept.as_deref_mut()) {
                if let Err(e) = log_store::save(&mut g.log, kept, persist) {
                    tracing::warn!(error = %e, "topology log turn failed");
                    self.drop_poisoned();
                    return;
                }
            }
            let group = g.id;
            for (to, data) in out.messages.iter().cloned() {
                self.out.push(AgentAction::Raft { to, group, data });
            }
            let forgotten: Vec<(NodeId, String)> = out
                .committed
                .iter()
                .filter_map(|c| match &c.command {
                    Ok(TopologyCommand::ForgetNode { id }) => t
                        .index_of(id)
                        .map(|i| (*id, t.nodes[i as usize].bus_addr.clone())),
                    _ => None,
                })
                .collect();
            let outcomes = out.apply_to(t);
            self.failovers.settle(now_ms, &out.committed);
            for (id, addr) in forgotten {
                if t.index_of(&id).is_none() {
                    self.out.push(AgentAction::Forgotten { id, addr });
                }
            }
            let restored = out.restore.is_some();
            if out.applied.is_some() || out.restore.is_some() {
                self.save = true;
            }
            if out.snapshot_due {
                match g.log.compact(t) {
                    Ok(Some(persist)) => {
                        if let Some(kept) = g.kept.as_deref_mut() {
                            // The log is poisoned now; the next turn reopens it.
                            if let Err(e) = log_store::save(&mut g.log, kept, &persist) {
                                tracing::warn!(error = %e, "topology snapshot not kept");
                            }
                        }
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "topology snapshot not taken"),
                }
            }
            for entry in &out.committed {
                let Some(id) = entry.proposal else { continue };
                let Some(waiter) = self.pending.take(id) else {
                    continue;
                };
                let result = match outcomes.iter().find(|(i, _)| *i == entry.index) {
                    Some((_, Err(ApplyError::AlreadyApplied { .. }))) | Some((_, Ok(()))) => Ok(()),
                    Some((_, Err(e))) => Err(ProposeError::Refused(e.clone())),
                    None => Ok(()),
                };
                self.reply(waiter, result);
            }
            if restored {
                if let Some(prejoin) = self.prejoin.take() {
                    self.reassert(prejoin, t);
                }
            }
            let removed = out
                .membership
                .iter()
                .any(|m| m.applied && m.role == MemberRole::Removed && m.node == Some(self.me));
            if removed {
                tracing::warn!("removed from the topology group");
                self.leave();
                return;
            }
        }
    }

    /// Proposes again what this node had made of itself before joining, where the group's
    /// snapshot lacks it: following its primary, or else its slots nobody owns.
    fn reassert(&mut self, prejoin: PreJoin, t: &Topology) {
        let me = t.myself();
        let mut wanted = Vec::new();
        if let Some(p) = prejoin.primary {
            if t.consensus.nodes.contains(&p) && me.primary != Some(p) {
                wanted.push(TopologyCommand::SetReplicaOf {
                    replica: self.me,
                    primary: p,
                });
            }
        } else if me.is_primary() {
            let free: Vec<(u16, u16)> = prejoin
                .slots
                .iter()
                .flat_map(|&(s, e)| s..=e)
                .filter(|&slot| t.slots.owner(slot).is_none())
                .fold(Vec::new(), |mut runs: Vec<(u16, u16)>, slot| {
                    match runs.last_mut() {
                        Some(last) if last.1 + 1 == slot => last.1 = slot,
                        _ => runs.push((slot, slot)),
                    }
                    runs
                });
            if !free.is_empty() {
                wanted.push(TopologyCommand::AssignSlots {
                    node: self.me,
                    ranges: free,
                });
            }
        }
        for command in wanted {
            tracing::info!(
                ?command,
                "proposing again what this node held before joining"
            );
            self.propose_unattended(command);
        }
    }

    /// A proposal nobody waits for: proposed if this node leads, else handed to the leader
    /// (lost if there is none; the next join or the leader's upkeep covers it).
    fn propose_unattended(&mut self, command: TopologyCommand) {
        let Some(g) = &mut self.group else { return };
        if g.log.is_leader() {
            if let Err(e) = g.log.propose(&command) {
                tracing::debug!(error = %e, "proposal not made");
            }
            return;
        }
        let (Some(leader), Ok(bytes)) = (g.log.leader(), command.encode()) else {
            return;
        };
        let id = g.log.reserve_proposal();
        self.out.push(AgentAction::Forward {
            to: leader,
            group: g.id,
            seq: id.0,
            command: bytes,
        });
    }

    /// raft-rs failed inside a call: the log is dropped, and the leader's next message
    /// starts a fresh one that catches up by snapshot.
    fn drop_poisoned(&mut self) {
        let group = self.group.take();
        if let (Some(store), Some(g)) = (&self.store, group) {
            match store.open(self.me, self.seed ^ g.log.term(), 0) {
                Ok(Some((id, log, store))) => {
                    tracing::error!("topology log poisoned; reopened from its file");
                    self.group = Some(Group {
                        id,
                        log,
                        kept: Some(store),
                    });
                    return;
                }
                Ok(None) => {}
                Err(e) => tracing::error!(error = %e, "topology log file unusable"),
            }
        }
        tracing::error!("topology log poisoned; rejoining the group from a snapshot");
        for waiter in self.pending.drain() {
            self.reply(waiter, Err(ProposeError::Log(LogError::Poisoned)));
        }
    }
}
