//! `TopologyLog`: a raft-rs `RawNode` over in-memory storage, fed ticks and peer bytes,
//! handing back bytes to send, committed topology commands, and what must be made durable
//! before either leaves (raft-rs's Ready loop; the driver writes it through a
//! [`LogStore`](super::log_store::LogStore)). It does no I/O. Up to [`VOTERS_MAX`] voters
//! decide; every other node follows as a learner.

use super::command::TopologyCommand;
use super::image::TopologyImage;
use super::log_error::LogError;
use super::log_store::Persist;
use super::output::{Committed, LeaderChange, MemberRole, MembershipChange, Output, ProposalId};
use super::raft_id::{raft_id, Directory};
use super::slog_bridge;
use super::snapshot::{SnapshotPayload, SNAPSHOT_BYTES_MAX};
use super::storage::TopologyStorage;
use crate::cluster::id::NodeId;
use crate::cluster::topology::Topology;
use protobuf::Message as _;
use raft::prelude::{ConfChangeType, ConfState, Entry, EntryType, Message, MessageType, Snapshot};
use raft::{Config, RawNode, SnapshotStatus, StateRole, Storage};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Most voters: five tolerate two failures; more only slow commits down.
pub const VOTERS_MAX: usize = 5;
/// Suggested wall time per [`TopologyLog::tick`]; the driver owns the clock.
pub const TICK_MS: u64 = 100;
/// Ticks without a leader before a follower campaigns (at least; up to twice as many).
pub const ELECTION_TICKS: usize = 10;
/// Ticks between a leader's heartbeats.
pub const HEARTBEAT_TICKS: usize = 2;
/// Bytes of entries per append message: a couple of commands, so a message stays small
/// enough for the bus (one entry always goes, up to COMMAND_BYTES_MAX).
pub const APPEND_BYTES_MAX: u64 = 64 * 1024;
/// Appends in flight per follower before the leader waits for acknowledgements.
pub const INFLIGHT_MAX: usize = 64;
/// Uncommitted proposal bytes a leader holds before it drops new proposals: a leader cut off
/// from its followers must not buffer without end.
pub const UNCOMMITTED_BYTES_MAX: u64 = 4 * 1024 * 1024;
/// Committed entry bytes handed out per turn; the rest come next turn.
pub const COMMITTED_BYTES_PER_TURN_MAX: u64 = 1024 * 1024;
/// Largest peer message accepted by [`TopologyLog::step`]: a snapshot plus raft's framing.
pub const STEP_BYTES_MAX: usize = SNAPSHOT_BYTES_MAX + 64 * 1024;
/// The bootstrap snapshot's index: a group starts from a snapshot at this index holding its
/// members and an empty topology, so a node that joins later catches up by snapshot first
/// (raft-rs's advice) and never needs a log that starts before any member knew the group.
pub const BOOTSTRAP_INDEX: u64 = 1;
const BOOTSTRAP_TERM: u64 = 1;

/// Applied entries kept past the last snapshot before a new one is due. It bounds the log's
/// memory (topology changes are rare and mostly small; the worst case is this many
/// COMMAND_BYTES_MAX entries, under 100 MiB) while sparing a snapshot per change.
pub const LOG_ENTRIES_MAX: u64 = 1000;

/// Bytes of a proposal's context: the proposer's raft id and its sequence number.
const CONTEXT_LEN: usize = 16;

pub struct TopologyLog {
    raw: RawNode<TopologyStorage>,
    me: NodeId,
    directory: Directory,
    /// Seeded source of election timeouts (raft-rs draws its own from the thread's rng; we
    /// overwrite each draw so that a simulation replays from its seed).
    rng: SmallRng,
    next_proposal: u64,
    /// Last index handed out as applied.
    applied: u64,
    /// (term, role) when the election timeout was last drawn.
    timeout_drawn_for: (u64, StateRole),
    /// (leader raft id, term) last reported.
    leader_reported: (u64, u64),
    poisoned: bool,
    /// The highest commit index a peer's message carried: a joiner still waiting for its
    /// snapshot learns from it that the group did start (see [`Self::group_started`]).
    commit_seen: u64,
    /// Set when reopened from a file: the snapshot image (and its index) the first turn hands
    /// out, so that a topology starting empty reaches the snapshot before the entries after
    /// it are applied again.
    reopened: Option<(u64, TopologyImage)>,
}

impl std::fmt::Debug for TopologyLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopologyLog")
            .field("me", &self.me)
            .field("term", &self.raw.raft.term)
            .field("role", &self.raw.raft.state)
            .field("applied", &self.applied)
            .finish()
    }
}

impl TopologyLog {
    /// A member of a group. Every founding member is started with the same `voters` and
    /// `learners` (the group's bootstrap state); a node joining an existing group passes
    /// both empty, waits for the leader to add it and catches up by snapshot. `seed` drives
    /// the election timeouts.
    pub fn new(
        me: NodeId,
        voters: &[NodeId],
        learners: &[NodeId],
        seed: u64,
    ) -> Result<Self, LogError> {
        Self::bootstrap(me, voters, learners, TopologyImage::default(), seed)
    }

    /// Founds a group whose bootstrap snapshot holds `image` (what the founder's nodes
    /// agreed before the group existed), so that every member starts from it, not from an
    /// empty topology. The image's version becomes [`BOOTSTRAP_INDEX`]; the founder sets its
    /// own topology to it (ready() hands out no snapshot a log started from).
    pub fn found(
        me: NodeId,
        voters: &[NodeId],
        learners: &[NodeId],
        image: TopologyImage,
        seed: u64,
    ) -> Result<Self, LogError> {
        Self::bootstrap(me, voters, learners, image, seed)
    }

    fn bootstrap(
        me: NodeId,
        voters: &[NodeId],
        learners: &[NodeId],
        image: TopologyImage,
        seed: u64,
    ) -> Result<Self, LogError> {
        if voters.len() > VOTERS_MAX {
            return Err(LogError::TooManyVoters {
                count: voters.len(),
                max: VOTERS_MAX,
            });
        }
        let mut directory = Directory::default();
        for node in voters.iter().chain(learners).chain([&me]) {
            directory.check(node)?;
            directory.learn(node);
        }
        if let Some(both) = learners.iter().find(|l| voters.contains(l)) {
            return Err(LogError::NotAMember(*both));
        }
        let joining = voters.is_empty() && learners.is_empty();
        let storage = if joining {
            TopologyStorage::empty()
        } else {
            if !voters.contains(&me) && !learners.contains(&me) {
                return Err(LogError::NotAMember(me));
            }
            TopologyStorage::from_snapshot(bootstrap_snapshot(voters, learners, image)?)?
        };
        let applied = if joining { 0 } else { BOOTSTRAP_INDEX };
        Self::start(me, directory, storage, applied, seed)
    }

    /// A log over `storage`, whose entries up to `applied` the topology already holds.
    pub(super) fn start(
        me: NodeId,
        directory: Directory,
        storage: TopologyStorage,
        applied: u64,
        seed: u64,
    ) -> Result<Self, LogError> {
        let config = Config {
            id: raft_id(&me),
            election_tick: ELECTION_TICKS,
            heartbeat_tick: HEARTBEAT_TICKS,
            applied,
            max_size_per_msg: APPEND_BYTES_MAX,
            max_inflight_msgs: INFLIGHT_MAX,
            // A leader cut off from a majority steps down; a rejoining node does not disrupt
            // a working leader (pre-vote).
            check_quorum: true,
            pre_vote: true,
            max_uncommitted_size: UNCOMMITTED_BYTES_MAX,
            max_committed_size_per_ready: COMMITTED_BYTES_PER_TURN_MAX,
            ..Config::default()
        };
        config.validate()?;
        let logger = slog::Logger::new(&slog_bridge::logger(), slog::o!());
        let raw = RawNode::new(&config, storage, &logger)?;
        let mut log = TopologyLog {
            timeout_drawn_for: (raw.raft.term, raw.raft.state),
            raw,
            me,
            directory,
            rng: SmallRng::seed_from_u64(seed),
            next_proposal: 0,
            applied,
            leader_reported: (0, 0),
            poisoned: false,
            commit_seen: 0,
            reopened: None,
        };
        log.draw_election_timeout();
        Ok(log)
    }

    pub fn me(&self) -> NodeId {
        self.me
    }

    /// Whether the group committed anything past its bootstrap, as far as this member
    /// knows: it applied such an entry, or a peer's message said one was committed (a
    /// joiner that has only the bootstrap snapshot so far is in a group that works).
    pub fn group_started(&self) -> bool {
        self.applied > BOOTSTRAP_INDEX || self.commit_seen > BOOTSTRAP_INDEX
    }

    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// The leader this node believes in.
    pub fn leader(&self) -> Option<NodeId> {
        self.directory.node(self.raw.raft.leader_id)
    }

    /// Last index handed out as applied (the topology version this log brought it to).
    /// The index of the last entry the log holds (or of its snapshot when it holds none).
    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Index of the newest snapshot held (bootstrap, compaction or received).
    pub fn snapshot_index(&self) -> u64 {
        self.raw.store().snapshot_index()
    }

    /// Current voters and learners, as node ids where known.
    pub fn members(&self) -> (Vec<NodeId>, Vec<NodeId>) {
        let cs = self.raw.raft.prs().conf().to_conf_state();
        let names = |ids: &[u64]| -> Vec<NodeId> {
            let mut out: Vec<NodeId> = ids.iter().filter_map(|&i| self.directory.node(i)).collect();
            out.sort();
            out
        };
        (names(cs.get_voters()), names(cs.get_learners()))
    }

    /// One logical tick ([`TICK_MS`] of wall time in a running node).
    pub fn tick(&mut self) -> Result<(), LogError> {
        self.guarded(|raw| {
            raw.tick();
            Ok(())
        })
    }

    /// Feeds bytes a peer (`from`) sent. Anything malformed, misaddressed or inconsistent is
    /// an error and leaves the log unchanged.
    pub fn step(&mut self, from: &NodeId, bytes: &[u8]) -> Result<(), LogError> {
        if self.poisoned {
            return Err(LogError::Poisoned);
        }
        let message = self.check_message(from, bytes)?;
        self.commit_seen = self.commit_seen.max(message.commit);
        self.directory.learn(from);
        self.guarded(|raw| raw.step(message).map_err(LogError::from))
    }

    /// Proposes a command; only the leader accepts. It is committed (or lost to a change of
    /// leader) later: watch [`Output::committed`] for the returned id.
    pub fn propose(&mut self, command: &TopologyCommand) -> Result<ProposalId, LogError> {
        if self.poisoned {
            return Err(LogError::Poisoned);
        }
        self.require_leader()?;
        let data = command.encode().map_err(LogError::Encode)?;
        let id = ProposalId(self.next_proposal);
        let mut context = Vec::with_capacity(CONTEXT_LEN);
        context.extend_from_slice(&self.raw.raft.id.to_be_bytes());
        context.extend_from_slice(&id.0.to_be_bytes());
        self.guarded(|raw| raw.propose(context, data).map_err(LogError::from))?;
        self.next_proposal += 1;
        Ok(id)
    }

    /// Names a proposal this node will hand to the leader itself ([`Self::propose_as`] on
    /// the leader): when the entry commits, [`Committed::proposal`] carries this id here.
    pub fn reserve_proposal(&mut self) -> ProposalId {
        let id = ProposalId(self.next_proposal);
        self.next_proposal += 1;
        id
    }

    /// Proposes a command on behalf of `origin`, which named it `id` (a follower's
    /// proposal forwarded over the bus); only the leader accepts. The entry carries the
    /// origin's raft id, so the origin recognises it when it commits.
    pub fn propose_as(
        &mut self,
        origin: &NodeId,
        id: ProposalId,
        command: &TopologyCommand,
    ) -> Result<(), LogError> {
        if self.poisoned {
            return Err(LogError::Poisoned);
        }
        self.require_leader()?;
        let data = command.encode().map_err(LogError::Encode)?;
        let mut context = Vec::with_capacity(CONTEXT_LEN);
        context.extend_from_slice(&raft_id(origin).to_be_bytes());
        context.extend_from_slice(&id.0.to_be_bytes());
        self.guarded(|raw| raw.propose(context, data).map_err(LogError::from))
    }

    /// Starts an election now instead of after the election timeout (a group's founder,
    /// alone, leads at once).
    pub fn campaign(&mut self) -> Result<(), LogError> {
        self.guarded(|raw| raw.campaign().map_err(LogError::from))
    }

    /// Adds a voter (refused past [`VOTERS_MAX`]) or promotes a learner.
    pub fn propose_add_voter(&mut self, node: &NodeId) -> Result<(), LogError> {
        let voters = self
            .raw
            .raft
            .prs()
            .conf()
            .to_conf_state()
            .get_voters()
            .len();
        if voters >= VOTERS_MAX {
            return Err(LogError::VotersFull { max: VOTERS_MAX });
        }
        self.propose_conf_change(node, ConfChangeType::AddNode)
    }

    pub fn propose_add_learner(&mut self, node: &NodeId) -> Result<(), LogError> {
        self.propose_conf_change(node, ConfChangeType::AddLearnerNode)
    }

    pub fn propose_remove(&mut self, node: &NodeId) -> Result<(), LogError> {
        self.propose_conf_change(node, ConfChangeType::RemoveNode)
    }

    /// The bus could not reach `node`: the leader stops streaming to it until it answers.
    pub fn report_unreachable(&mut self, node: &NodeId) {
        let id = raft_id(node);
        let _ = self.guarded(|raw| {
            raw.report_unreachable(id);
            Ok(())
        });
    }

    /// Takes a snapshot of `topology` (which this log brought to [`Self::applied`]) and drops
    /// the log entries before it. Later, a follower that needs them gets the snapshot.
    /// Returns what the driver must persist (a rewrite from the snapshot), None when the
    /// snapshot is already as fresh.
    #[must_use = "a compaction must be persisted"]
    pub fn compact(&mut self, topology: &Topology) -> Result<Option<Persist>, LogError> {
        if self.poisoned {
            return Err(LogError::Poisoned);
        }
        if topology.consensus.version != self.applied {
            return Err(LogError::StaleTopology {
                version: topology.consensus.version,
                applied: self.applied,
            });
        }
        if self.applied <= self.snapshot_index() {
            return Ok(None);
        }
        let store = self.raw.store();
        let payload = SnapshotPayload {
            members: self.member_ids(&store.conf_state()),
            image: TopologyImage::capture(topology),
        };
        let mut snapshot = Snapshot {
            data: payload.encode().map_err(LogError::Encode)?.into(),
            ..Snapshot::default()
        };
        let meta = snapshot.mut_metadata();
        meta.index = self.applied;
        meta.term = store.term(self.applied)?;
        meta.set_conf_state(store.conf_state());
        self.raw.mut_store().compact(snapshot)?;
        Ok(Some(Persist::Rewrite))
    }

    /// One turn of raft-rs's Ready loop: the new entries and hard state go into the
    /// in-memory storage and into [`Output::persist`], the messages, snapshot and committed
    /// entries into the output, and raft advances. The driver makes `persist` durable before
    /// it sends or applies anything of the output (raft's rule: what acknowledges entries or
    /// a vote leaves only once they are on disk); if it cannot, it calls
    /// [`Self::persist_failed`] and drops the output.
    pub fn ready(&mut self) -> Result<Output, LogError> {
        if self.poisoned {
            return Err(LogError::Poisoned);
        }
        let mut out = Output::default();
        if let Some((index, image)) = self.reopened.take() {
            out.applied = Some(index);
            out.restore = Some(image);
        }
        if self.raw.has_ready() {
            let result = catch_unwind(AssertUnwindSafe(|| self.ready_turn(&mut out)));
            match result {
                Ok(r) => r?,
                Err(_) => {
                    self.poisoned = true;
                    return Err(LogError::Poisoned);
                }
            }
        }
        self.redraw_if_needed();
        out.snapshot_due = self.raw.store().take_wanted()
            || self.applied.saturating_sub(self.snapshot_index()) > LOG_ENTRIES_MAX;
        let leader = (self.raw.raft.leader_id, self.raw.raft.term);
        if leader != self.leader_reported {
            self.leader_reported = leader;
            out.leader = Some(LeaderChange {
                leader: self.directory.node(leader.0),
                term: leader.1,
            });
        }
        Ok(out)
    }

    fn ready_turn(&mut self, out: &mut Output) -> Result<(), LogError> {
        let mut rd = self.raw.ready();
        let mut snapshots_sent = Vec::new();
        self.send(rd.take_messages(), out, &mut snapshots_sent);
        let installed = !rd.snapshot().is_empty();
        if installed {
            let snapshot = rd.snapshot().clone();
            let payload = SnapshotPayload::decode(&snapshot.data).map_err(LogError::BadSnapshot)?;
            for m in &payload.members {
                self.directory.learn(m);
            }
            let index = snapshot.get_metadata().index;
            self.raw.mut_store().install(snapshot)?;
            self.applied = index;
            out.applied = Some(index);
            out.restore = Some(payload.image);
        }
        self.apply_entries(rd.take_committed_entries(), out)?;
        if !rd.entries().is_empty() {
            self.raw.mut_store().mem.wl().append(rd.entries())?;
        }
        if let Some(hs) = rd.hs() {
            self.raw.mut_store().mem.wl().set_hardstate(hs.clone());
        }
        // Raft's rule: what acknowledges these entries or this vote leaves once they are on
        // disk. The driver persists before it sends anything of this output.
        let mut persist =
            (installed || !rd.entries().is_empty() || rd.hs().is_some()).then(|| Persist::Turn {
                snapshot_installed: installed,
                entries: rd.entries().to_vec(),
                hard_state: rd.hs().cloned(),
                commit_learned: None,
            });
        self.send(rd.take_persisted_messages(), out, &mut snapshots_sent);
        let mut light = self.raw.advance(rd);
        if let Some(commit) = light.commit_index() {
            self.raw
                .mut_store()
                .mem
                .wl()
                .mut_hard_state()
                .set_commit(commit);
            let hard_state = self.raw.store().mem.rl().hard_state().clone();
            match persist.as_mut() {
                Some(Persist::Turn { commit_learned, .. }) => *commit_learned = Some(hard_state),
                _ => {
                    persist = Some(Persist::Turn {
                        snapshot_installed: false,
                        entries: Vec::new(),
                        hard_state: None,
                        commit_learned: Some(hard_state),
                    })
                }
            }
        }
        out.persist = persist;
        self.send(light.take_messages(), out, &mut snapshots_sent);
        self.apply_entries(light.take_committed_entries(), out)?;
        self.raw.advance_apply();
        // The bus gives no delivery reports: count a snapshot as delivered once sent. If it
        // was lost, the follower's next answer shows it still lags and a new one goes out.
        for to in snapshots_sent {
            self.raw.report_snapshot(to, SnapshotStatus::Finish);
        }
        Ok(())
    }

    fn send(&self, messages: Vec<Message>, out: &mut Output, snapshots: &mut Vec<u64>) {
        for m in messages {
            let Some(to) = self.directory.node(m.to) else {
                tracing::warn!(to = m.to, "raft message for a peer with no known node id");
                continue;
            };
            if m.get_msg_type() == MessageType::MsgSnapshot {
                snapshots.push(m.to);
            }
            match m.write_to_bytes() {
                Ok(bytes) => out.messages.push((to, bytes)),
                Err(e) => tracing::warn!(error = %e, "raft message not encodable"),
            }
        }
    }

    fn apply_entries(&mut self, entries: Vec<Entry>, out: &mut Output) -> Result<(), LogError> {
        for entry in entries {
            let index = entry.index;
            match entry.get_entry_type() {
                EntryType::EntryNormal if entry.data.is_empty() => {}
                EntryType::EntryNormal => out.committed.push(Committed {
                    index,
                    command: TopologyCommand::decode(&entry.data),
                    proposal: self.own_proposal(&entry.context),
                }),
                EntryType::EntryConfChange => {
                    let change = self.apply_conf_change(&entry);
                    out.membership.push(change);
                }
                // Never proposed by this code; refused alike on every node.
                EntryType::EntryConfChangeV2 => out.membership.push(MembershipChange {
                    index,
                    node: None,
                    role: MemberRole::Removed,
                    applied: false,
                }),
            }
            self.applied = index;
            out.applied = Some(index);
        }
        Ok(())
    }

    pub(super) fn own_proposal(&self, context: &[u8]) -> Option<ProposalId> {
        if context.len() != CONTEXT_LEN {
            return None;
        }
        let word = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&context[at..at + 8]);
            u64::from_be_bytes(b)
        };
        (word(0) == self.raw.raft.id).then(|| ProposalId(word(8)))
    }

    fn require_leader(&self) -> Result<(), LogError> {
        if self.is_leader() {
            Ok(())
        } else {
            Err(LogError::NotLeader {
                leader: self.leader(),
            })
        }
    }

    fn member_ids(&self, cs: &ConfState) -> Vec<NodeId> {
        let mut ids: Vec<NodeId> = cs
            .get_voters()
            .iter()
            .chain(cs.get_learners())
            .filter_map(|&i| self.directory.node(i))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Runs a raft-rs call. raft-rs panics on states it deems impossible (a message that
    /// contradicts its log, for instance); a peer's bytes must not take the node down, so
    /// the panic is caught and the log marked unusable instead.
    fn guarded<T>(
        &mut self,
        call: impl FnOnce(&mut RawNode<TopologyStorage>) -> Result<T, LogError>,
    ) -> Result<T, LogError> {
        if self.poisoned {
            return Err(LogError::Poisoned);
        }
        let raw = &mut self.raw;
        match catch_unwind(AssertUnwindSafe(|| call(raw))) {
            Ok(result) => {
                self.redraw_if_needed();
                result
            }
            Err(_) => {
                self.poisoned = true;
                tracing::error!("raft-rs panicked; the topology log must be rebuilt");
                Err(LogError::Poisoned)
            }
        }
    }

    /// raft-rs redraws the election timeout from the thread's rng whenever the term or role
    /// changes; replace that draw with one from our seeded source.
    fn redraw_if_needed(&mut self) {
        let now = (self.raw.raft.term, self.raw.raft.state);
        if now != self.timeout_drawn_for {
            self.timeout_drawn_for = now;
            self.draw_election_timeout();
        }
    }

    fn draw_election_timeout(&mut self) {
        let t = self.rng.gen_range(ELECTION_TICKS..2 * ELECTION_TICKS);
        self.raw.raft.set_randomized_election_timeout(t);
    }

    /// The driver could not make a turn's [`Persist`] durable: raft believes something is on
    /// disk that may not be, so this log must not answer peers any more (drop it and reopen
    /// it from its store).
    pub fn persist_failed(&mut self) {
        self.poisoned = true;
    }

    /// The in-memory storage a [`LogStore`](super::log_store::LogStore) reads a rewrite from.
    pub fn storage(&self) -> &TopologyStorage {
        self.raw.store()
    }

    /// A log brought back from its store (see [`super::log_file`]): `reopened` as the field
    /// says, `next_proposal` past the proposal ids the stored entries already carry.
    pub(super) fn reopened_from_store(
        &mut self,
        reopened: Option<(u64, TopologyImage)>,
        next_proposal: u64,
    ) {
        self.reopened = reopened;
        self.next_proposal = self.next_proposal.max(next_proposal);
    }

    pub(super) fn raw(&self) -> &RawNode<TopologyStorage> {
        &self.raw
    }

    pub(super) fn raw_mut(&mut self) -> &mut RawNode<TopologyStorage> {
        &mut self.raw
    }

    pub(super) fn directory(&self) -> &Directory {
        &self.directory
    }

    pub(super) fn directory_mut(&mut self) -> &mut Directory {
        &mut self.directory
    }

    pub(super) fn guarded_call<T>(
        &mut self,
        call: impl FnOnce(&mut RawNode<TopologyStorage>) -> Result<T, LogError>,
    ) -> Result<T, LogError> {
        self.guarded(call)
    }
}

/// The snapshot every founding member starts from: the members and the founder's image
/// (empty in tests that start groups with `new`).
fn bootstrap_snapshot(
    voters: &[NodeId],
    learners: &[NodeId],
    image: TopologyImage,
) -> Result<Snapshot, LogError> {
    let mut members: Vec<NodeId> = voters.iter().chain(learners).copied().collect();
    members.sort();
    members.dedup();
    let payload = SnapshotPayload {
        members,
        image: TopologyImage {
            version: BOOTSTRAP_INDEX,
            ..image
        },
    };
    let mut snapshot = Snapshot {
        data: payload.encode().map_err(LogError::Encode)?.into(),
        ..Snapshot::default()
    };
    let meta = snapshot.mut_metadata();
    meta.index = BOOTSTRAP_INDEX;
    meta.term = BOOTSTRAP_TERM;
    meta.set_conf_state(ConfState::from((
        voters.iter().map(raft_id),
        learners.iter().map(raft_id),
    )));
    Ok(snapshot)
}
