//! Replication as the running node holds it: the replication ids, the backlog every write is
//! appended to once it exists, the replicas' acknowledgements and the clients waiting on them
//! (WAIT). The no-I/O cores live in [`crate::replication`]; this is the shared state that the
//! dispatcher feeds and the shipper (which moves backlog bytes to replicas) reads.
//!
//! The backlog is created lazily, as Redis's `createReplicationBacklog` at the first replica's
//! attach, by [`Replication::ensure_backlog`], and then kept: from then on every write feeds
//! it. The stream of executed writes has one other consumer, the append-only file
//! ([`Replication::set_log_consumer`]). While neither takes it the dispatcher pays one
//! relaxed atomic load per command and nothing else ([`Replication::active`]).
//! `repl-backlog-eager yes` creates the backlog at start (or when set), for nodes that
//! expect replicas and for tests that watch the stream.
//!
//! Lock order: keyspace shards, then this state's mutex. The dispatcher feeds while it still
//! holds the command's shards, so the stream's order is the order writes touched each key.

use super::client::ClientShared;
use crate::cluster::id::NodeId;
use crate::node_state::identity::{Identity, IdentityStore, RunState, Succession};
use crate::replication::ack::ReplicaAcks;
use crate::replication::backlog::{Backlog, BacklogError, BacklogRange};
use crate::replication::ids::{ReplId, ReplicationIds};
use crate::replication::outgoing::Outgoing;
use crate::replication::psync::{self, HeldHistory, HistoryClaim, PsyncDecision, PsyncRequest};
use crate::replication::report::{self, PrimaryLink, ReplicaLine, Role};
use crate::replication::wait::{WaitError, WaitQueue, Waiter};
use parking_lot::{Condvar, Mutex};
use proto::resp::Frame;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// The key the shipper names a replica by (its link), chosen by whoever attaches it.
pub type ReplicaId = u64;

/// Where the stream stood at one instant, for a save that wants to know whether the dataset
/// it wrote is exactly the history `replid` up to `offset` (see [`Replication::mark`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryMark {
    pub replid: ReplId,
    pub offset: u64,
    /// The database the stream is in at `offset` (Redis's `repl-stream-db`): a replica that
    /// restarts from the save continues executing there.
    pub stream_db: usize,
    /// Unfed writes begun so far (see [`Replication::unfed_write`]).
    unfed_begun: u64,
}

/// Held by a writer that changes the dataset before its bytes reach the stream (a replica
/// executes its primary's commands, then mirrors them): a save running meanwhile is not
/// exact. Dropping it ends the write.
pub struct UnfedWrite<'a>(&'a Replication);

impl Drop for UnfedWrite<'_> {
    fn drop(&mut self) {
        self.0.unfed_in_flight.fetch_sub(1, SeqCst);
    }
}

/// A client blocked in WAIT, compared by client id.
#[derive(Clone)]
pub struct WaitingClient(pub Arc<ClientShared>);

impl PartialEq for WaitingClient {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

/// Where a replica listens (INFO `slaveN:ip=..,port=..`, ROLE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaAddr {
    pub ip: String,
    pub port: u16,
}

struct State {
    ids: ReplicationIds,
    backlog: Option<Backlog>,
    /// The size the backlog has or will be created with (`repl-backlog-size`).
    backlog_size: usize,
    /// One request's stream bytes, encoded here and appended: reused so that feeding does not
    /// allocate once it has grown to the largest request seen.
    scratch: Vec<u8>,
    /// The database the stream is in at `offset`: what the last SELECT in it selected,
    /// mirrored or written (None: unknown, so the next write selects its own database):
    /// Redis's `slaveseldb`. A request in it is not preceded by a SELECT; where a reader
    /// starts afresh (a full sync's offset, a new backlog, a start) it becomes None. A
    /// replica's applier continues in it across reconnects and restarts.
    selected_db: Option<usize>,
    acks: ReplicaAcks<ReplicaId>,
    addrs: BTreeMap<ReplicaId, ReplicaAddr>,
    waiters: WaitQueue<WaitingClient>,
    /// The node whose stream the history is (this node while it is a primary) and its
    /// config epoch then: written into the identity file.
    history_primary: Option<NodeId>,
    history_epoch: u64,
    /// Set when the current history began from a complete replay of another (identity
    /// `succeeds`); it speaks for the history `new` names only.
    succession: Option<Succession>,
    /// Clients following the stream over the client port, listed with the replicas.
    stream_consumers: super::stream_consumers::StreamConsumers,
}

/// Where the identity is written (the file, through the layer that owns files), and as
/// which node (set once at start).
struct IdentityFile {
    store: Box<dyn IdentityStore>,
    node: Option<NodeId>,
    /// The final `stopped` identity was written: nothing may overwrite it any more.
    stopped: bool,
    /// The file keeps the previous run's identity (a fenced restart, until the topology
    /// decides): a second crash meanwhile must still find the history it acknowledged, and
    /// a clean stop must not make the lossy dataset look complete.
    held: bool,
}

/// Bits of [`Replication::consumers`].
const BACKLOG: u8 = 1;
const LOG: u8 = 2;
const MIGRATION: u8 = 4;

pub struct Replication {
    /// Who takes the stream of executed writes: a backlog exists (`BACKLOG`), the AOF logs
    /// (`LOG`). Non-zero: every write is encoded. The one check on the hot path.
    consumers: AtomicU8,
    /// `master_repl_offset`, mirrored for lock-free readers (shippers polling for new bytes).
    offset: AtomicU64,
    state: Mutex<State>,
    /// Signalled after every append, for shipper threads that sleep until bytes arrive.
    new_bytes: Condvar,
    /// Clients' writes are refused until this unix time (ms): a replica is catching up for a
    /// manual failover (CLUSTER FAILOVER), Redis's `clientsPause` for it.
    writes_paused_until_ms: AtomicU64,
    /// Writes that change the dataset before they are fed ([`UnfedWrite`]): how many began
    /// so far, and how many are running now. A save compares them before and after.
    unfed_begun: AtomicU64,
    unfed_in_flight: AtomicU64,
    /// The identity file, once the start has loaded what the previous run left. Lock order:
    /// this, then `state` (it is never taken while `state` is held).
    identity_file: Mutex<Option<IdentityFile>>,
}

/// The largest scratch buffer kept between requests; a huge request's buffer is released.
const SCRATCH_KEEP_MAX: usize = 1 << 20;

impl Replication {
    pub fn new(ids: ReplicationIds, backlog_size: usize) -> Self {
        Replication {
            consumers: AtomicU8::new(0),
            offset: AtomicU64::new(0),
            state: Mutex::new(State {
                ids,
                backlog: None,
                backlog_size,
                scratch: Vec::new(),
                selected_db: None,
                acks: ReplicaAcks::default(),
                addrs: BTreeMap::new(),
                waiters: WaitQueue::default(),
                history_primary: None,
                history_epoch: 0,
                succession: None,
                stream_consumers: Default::default(),
            }),
            new_bytes: Condvar::new(),
            writes_paused_until_ms: AtomicU64::new(0),
            unfed_begun: AtomicU64::new(0),
            unfed_in_flight: AtomicU64::new(0),
            identity_file: Mutex::new(None),
        }
    }

    /// A restart loaded a dataset that is exactly `ids`' history up to `offset`: it continues
    /// from there, with a backlog that starts empty at `offset` (so a replica at `offset`
    /// continues without a full sync).
    /// `stream_db`: the database the history is in at `offset` (what the save recorded).
    pub fn restore(
        &self,
        ids: ReplicationIds,
        offset: u64,
        stream_db: usize,
    ) -> Result<(), BacklogError> {
        let mut s = self.state.lock();
        s.backlog = Some(Backlog::new(s.backlog_size, offset)?);
        s.selected_db = Some(stream_db);
        s.ids = ids;
        self.offset.store(offset, Relaxed);
        self.consumers.fetch_or(BACKLOG, Relaxed);
        tracing::info!(replid = %ids.replid(), offset, "replication history restored");
        Ok(())
    }

    /// The node whose stream this history is, and its config epoch (the identity file's
    /// `primary` and `epoch`). Rewrites the file when they changed.
    pub fn set_history_primary(&self, primary: Option<NodeId>, epoch: u64) {
        {
            let mut s = self.state.lock();
            if s.history_primary == primary && s.history_epoch == epoch {
                return;
            }
            s.history_primary = primary;
            s.history_epoch = epoch;
        }
        self.write_identity();
    }

    /// The node whose stream this history is.
    pub fn history_primary(&self) -> Option<NodeId> {
        self.state.lock().history_primary
    }

    /// Records that the current history began from a complete replay of another (see
    /// `identity::Succession`); rewrites the identity file.
    pub fn set_succession(&self, succession: Option<Succession>) {
        {
            let mut s = self.state.lock();
            if s.succession == succession {
                return;
            }
            s.succession = succession;
        }
        self.write_identity();
    }

    /// The history as a replica's full-sync check needs it (`psync::full_sync_allowed`).
    pub fn held_history(&self) -> HeldHistory {
        let s = self.state.lock();
        HeldHistory {
            replid: s.ids.replid(),
            offset: self.offset.load(Relaxed),
            primary: s.history_primary,
            epoch: s.history_epoch,
        }
    }

    /// What this node's full syncs say of its history (`psync::HistoryClaim`): the config
    /// epoch of the promotion that made it its own stream (0 when the history is not its own
    /// or began without one, at a restart or on a fresh node, so that a replica holding more
    /// never takes it for a newer decision), and the history a complete replay of which
    /// began it.
    pub fn history_claim(&self) -> HistoryClaim {
        let myself = self.identity_file.lock().as_ref().and_then(|f| f.node);
        let s = self.state.lock();
        let promoted_in = match (s.history_primary, myself) {
            (Some(owner), Some(me)) if owner == me => s.history_epoch,
            _ => 0,
        };
        HistoryClaim {
            promoted_in,
            succeeds: s
                .succession
                .filter(|x| x.new == s.ids.replid())
                .map(|x| x.old),
        }
    }

    /// From now on the identity in `store` follows every change of the ids; writes it now
    /// (`running`). `node` is this node's cluster id (None outside cluster mode).
    pub fn persist_identity(
        &self,
        store: Box<dyn IdentityStore>,
        node: Option<NodeId>,
    ) -> std::io::Result<()> {
        let mut file = self.identity_file.lock();
        let f = file.insert(IdentityFile {
            store,
            node,
            stopped: false,
            held: false,
        });
        f.store.save(&self.identity_now(f, RunState::Running))
    }

    /// As [`Replication::persist_identity`], but the file keeps `previous` (marked
    /// `running`) instead of this run's ids until [`Replication::release_identity`].
    pub fn persist_identity_held(
        &self,
        store: Box<dyn IdentityStore>,
        node: Option<NodeId>,
        previous: &Identity,
    ) -> std::io::Result<()> {
        let mut file = self.identity_file.lock();
        let f = file.insert(IdentityFile {
            store,
            node,
            stopped: false,
            held: true,
        });
        let running = Identity {
            state: RunState::Running,
            ..*previous
        };
        f.store.save(&running)
    }

    /// The identity file follows this run's ids again (the fence was lifted); writes it.
    pub fn release_identity(&self) {
        if let Some(f) = self.identity_file.lock().as_mut() {
            f.held = false;
        }
        self.write_identity();
    }

    fn identity_now(&self, file: &IdentityFile, state: RunState) -> Identity {
        let s = self.state.lock();
        Identity {
            node: file.node,
            ids: s.ids,
            offset: self.offset.load(Relaxed),
            primary: s.history_primary,
            epoch: s.history_epoch,
            succeeds: s.succession.filter(|x| x.new == s.ids.replid()),
            state,
            stream_db: s.selected_db.unwrap_or(0),
        }
    }

    /// Rewrites the identity file (`running`) after the ids changed. A failure is logged:
    /// the next change or the final stop writes again.
    fn write_identity(&self) {
        let file = self.identity_file.lock();
        let Some(f) = file.as_ref().filter(|f| !f.stopped && !f.held) else {
            return;
        };
        if let Err(e) = f.store.save(&self.identity_now(f, RunState::Running)) {
            tracing::error!(path = %f.store.describe(), error = %e, "cannot write the replication identity");
        }
    }

    /// The process stops after its final save: the identity file says `stopped` at the last
    /// offset, and is not written again by this process.
    pub fn write_identity_stopped(&self) {
        let mut file = self.identity_file.lock();
        let Some(f) = file.as_mut().filter(|f| !f.stopped && !f.held) else {
            return;
        };
        f.stopped = true;
        let identity = self.identity_now(f, RunState::Stopped);
        match f.store.save(&identity) {
            Ok(()) => tracing::info!(
                replid = %identity.ids.replid(),
                offset = identity.offset,
                "replication identity saved (stopped)"
            ),
            Err(e) => {
                tracing::error!(path = %f.store.describe(), error = %e, "cannot write the replication identity")
            }
        }
    }

    /// Where the stream stands now, for a save: `None` when no backlog exists (writes are
    /// not fed, so the offset says nothing about the dataset) or an unfed write is running.
    /// A save takes a mark before its first key and one after its last; if both are equal
    /// ([`HistoryMark`]'s `==`), no write went into the stream or the dataset in between
    /// that the save could have half-seen: writers feed while they still hold their shards,
    /// and unfed writers are counted.
    pub fn mark(&self) -> Option<HistoryMark> {
        // Begun before in flight: an unfed write that starts between the two reads shows
        // in the count of the mark taken after the save.
        let unfed_begun = self.unfed_begun.load(SeqCst);
        if self.unfed_in_flight.load(SeqCst) != 0 || !self.has_backlog() {
            return None;
        }
        let s = self.state.lock();
        Some(HistoryMark {
            replid: s.ids.replid(),
            offset: self.offset.load(SeqCst),
            stream_db: s.selected_db.unwrap_or(0),
            unfed_begun,
        })
    }

    /// A write that changes the dataset before it is fed begins; it ends when the guard
    /// drops, after the feed.
    pub fn unfed_write(&self) -> UnfedWrite<'_> {
        self.unfed_in_flight.fetch_add(1, SeqCst);
        self.unfed_begun.fetch_add(1, SeqCst);
        UnfedWrite(self)
    }

    /// Refuses clients' writes until `until_ms` (a manual failover's pause).
    pub fn pause_writes(&self, until_ms: u64) {
        self.writes_paused_until_ms.store(until_ms, Relaxed);
    }

    /// Whether clients' writes are paused now (one relaxed load on the write path).
    #[inline]
    pub fn writes_paused(&self, now_ms: u64) -> bool {
        self.writes_paused_until_ms.load(Relaxed) > now_ms
    }

    /// Whether writes are encoded into the stream: a backlog or the AOF takes it (one
    /// relaxed load: the dispatcher's check).
    #[inline]
    pub fn active(&self) -> bool {
        self.consumers.load(Relaxed) != 0
    }

    /// Whether a backlog exists (the stream is fed to it).
    #[inline]
    pub fn has_backlog(&self) -> bool {
        self.consumers.load(Relaxed) & BACKLOG != 0
    }

    /// The AOF starts or stops taking the stream. It starts at a moment when every shard
    /// is held, and the dispatcher reads [`Replication::active`] with its shards held, so a
    /// write either sees it or finished before.
    pub fn set_log_consumer(&self, on: bool) {
        if on {
            self.consumers.fetch_or(LOG, Relaxed);
        } else {
            self.consumers.fetch_and(!LOG, Relaxed);
        }
    }

    /// A slot migration's link starts or stops taking the stream (its slots' writes). Set
    /// with the slot's shard held, as [`Replication::set_log_consumer`] is with every shard.
    pub fn set_migration_consumer(&self, on: bool) {
        if on {
            self.consumers.fetch_or(MIGRATION, Relaxed);
        } else {
            self.consumers.fetch_and(!MIGRATION, Relaxed);
        }
    }

    /// Creates the backlog if there is none (a replica attaches; `repl-backlog-eager`). It
    /// continues at the current `master_repl_offset`. Idempotent.
    pub fn ensure_backlog(&self) -> Result<(), BacklogError> {
        let mut s = self.state.lock();
        if s.backlog.is_none() {
            let offset = self.offset.load(Relaxed);
            s.backlog = Some(Backlog::new(s.backlog_size, offset)?);
            s.selected_db = None;
            self.consumers.fetch_or(BACKLOG, Relaxed);
            tracing::info!(size = s.backlog_size, offset, "replication backlog created");
        }
        Ok(())
    }

    /// `repl-backlog-size` changed: the backlog (if any) keeps its newest bytes that fit.
    pub fn set_backlog_size(&self, size: usize) -> Result<(), BacklogError> {
        let mut s = self.state.lock();
        if let Some(b) = s.backlog.as_mut().filter(|b| b.size() != size) {
            b.resize(size)?;
        }
        s.backlog_size = size;
        Ok(())
    }

    /// Appends what one request wrote to the backlog and returns the new `master_repl_offset`
    /// (the request's write offset, which WAIT waits for). Call while the request's shards
    /// are still locked. Wakes shippers.
    pub fn feed(&self, outgoing: &mut Outgoing) -> u64 {
        let mut s = self.state.lock();
        let s = &mut *s;
        let mut scratch = std::mem::take(&mut s.scratch);
        scratch.clear();
        outgoing.finish_into(&mut scratch, &mut s.selected_db);
        let offset = match s.backlog.as_mut() {
            Some(b) => b.append(&scratch),
            // No backlog (never here when `has_backlog`): the stream has no reader to keep it for.
            None => self.offset.load(Relaxed),
        };
        if scratch.capacity() <= SCRATCH_KEEP_MAX {
            s.scratch = scratch;
        }
        self.offset.store(offset, Relaxed);
        self.new_bytes.notify_all();
        offset
    }

    /// The database the stream is in at `master_repl_offset` (0 when unknown: the next
    /// write selects): where a replica's applier continues executing.
    pub fn stream_db(&self) -> usize {
        self.state.lock().selected_db.unwrap_or(0)
    }

    /// A reader starts afresh at the current offset (a full sync's snapshot, taken with
    /// every shard held): the next write selects its database, whatever it is (Redis sets
    /// `slaveseldb` to -1 when a replica attaches).
    pub fn reselect(&self) {
        self.state.lock().selected_db = None;
    }

    /// A replica mirrors its primary's stream: `bytes` (whole commands outside transactions,
    /// exactly as the primary sent them) extend this node's history at the primary's offsets,
    /// so that once promoted its replicas can continue from its backlog. Returns the new
    /// `master_repl_offset`.
    /// `stream_db`: the database the primary's stream is in after them (the applier's).
    pub fn feed_raw(&self, bytes: &[u8], stream_db: usize) -> u64 {
        if bytes.is_empty() {
            return self.offset.load(Relaxed);
        }
        let mut s = self.state.lock();
        // The primary's SELECTs are in these bytes: this node's readers followed them, and
        // its own next write (once promoted) selects only if its database differs.
        s.selected_db = Some(stream_db);
        let offset = match s.backlog.as_mut() {
            Some(b) => b.append(bytes),
            None => self.offset.load(Relaxed) + bytes.len() as u64,
        };
        self.offset.store(offset, Relaxed);
        self.new_bytes.notify_all();
        offset
    }

    /// A replica's dataset is now its primary's history `replid` up to `offset` (a full
    /// sync loaded; Redis's `replicationCreateMasterClient` after `+FULLRESYNC`): the ids
    /// become the primary's and the backlog starts empty at `offset`.
    pub fn adopt_history(&self, replid: ReplId, offset: u64) {
        {
            let mut s = self.state.lock();
            s.ids = ReplicationIds::with_replid(replid);
            s.selected_db = None;
            let size = s.backlog_size;
            match Backlog::new(size, offset) {
                Ok(b) => {
                    s.backlog = Some(b);
                    self.consumers.fetch_or(BACKLOG, Relaxed);
                }
                Err(e) => tracing::error!(error = %e, "cannot create the replication backlog"),
            }
            self.offset.store(offset, Relaxed);
        }
        self.write_identity();
    }

    /// A partial resync continued this node's history under the primary's `new_replid`
    /// (`+CONTINUE <id>` from a primary that was promoted): the old id stays valid as
    /// `replid2` up to the current offset, as on the primary.
    pub fn continue_under(&self, new_replid: ReplId) {
        {
            let mut s = self.state.lock();
            let offset = self.offset.load(Relaxed);
            s.ids.shift_to(new_replid, offset);
        }
        self.write_identity();
    }

    /// The dataset is about to be replaced (a full sync starts loading): no replica may
    /// continue this history any more. `rng` draws the new id (the caller's random source:
    /// this state reads none itself).
    pub fn forget_history(&self, rng: &mut impl rand::Rng) {
        {
            let mut s = self.state.lock();
            s.ids.restart(rng);
            // Nobody's stream until the load is whole and adopted.
            s.history_primary = None;
        }
        self.write_identity();
    }

    /// A node that may have written past its loaded offset under its current id (it restarted
    /// without everything it had) serves on: a new id starts at the current offset, the old
    /// one stays valid up to it. A replica that holds more of the old id then gets no
    /// `+CONTINUE` into a diverging stream; one that holds less continues. `rng` draws the
    /// new id.
    pub fn shift_id(&self, rng: &mut impl rand::Rng) {
        {
            let mut s = self.state.lock();
            let offset = self.offset.load(Relaxed);
            s.ids.shift_on_promotion(offset, rng);
            tracing::info!(replid = %s.ids.replid(), offset, "replication id shifted: the history before may have had more");
        }
        self.write_identity();
    }

    /// This replica becomes a primary (REPLICAOF NO ONE, a failover): a new id starts at the
    /// current offset and the old one stays valid up to it, so the other replicas of the old
    /// primary continue from this node's backlog (Redis's `shiftReplicationId`). `epoch`
    /// is the config epoch the topology granted the promotion (0 outside cluster mode);
    /// `rng` draws the new id.
    pub fn promote(&self, epoch: u64, rng: &mut impl rand::Rng) {
        let myself = self.identity_file.lock().as_ref().and_then(|f| f.node);
        {
            let mut s = self.state.lock();
            let offset = self.offset.load(Relaxed);
            s.ids.shift_on_promotion(offset, rng);
            // The history is this node's own stream from here on, made so by this promotion.
            s.history_primary = myself;
            s.history_epoch = epoch;
            tracing::info!(replid = %s.ids.replid(), offset, "replication id shifted on promotion");
        }
        self.write_identity();
    }

    /// The history a replica names in PSYNC: its ids' current id and the last byte held.
    pub fn history(&self) -> (ReplId, u64) {
        let s = self.state.lock();
        (s.ids.replid(), self.offset.load(Relaxed))
    }

    /// `master_repl_offset`: the number of the last stream byte written.
    pub fn master_repl_offset(&self) -> u64 {
        self.offset.load(Relaxed)
    }

    /// For a shipper thread: sleeps until the stream has passed `offset` or `timeout` passes;
    /// returns `master_repl_offset`.
    pub fn wait_for_bytes(&self, offset: u64, timeout: Duration) -> u64 {
        let mut s = self.state.lock();
        if self.offset.load(Relaxed) <= offset {
            let _ = self.new_bytes.wait_for(&mut s, timeout);
        }
        self.offset.load(Relaxed)
    }

    /// Reads the backlog from `from_offset` (the first byte wanted) under its lock: `f` gets
    /// `None` when there is no backlog or those bytes are no longer (or not yet) held, which
    /// means the replica needs a full sync. Writers wait while `f` runs: copy, do not block,
    /// and never lock keyspace shards in `f` (writers hold shards while they take this lock).
    pub fn read_backlog<R>(
        &self,
        from_offset: u64,
        f: impl FnOnce(Option<BacklogRange<'_>>) -> R,
    ) -> R {
        let s = self.state.lock();
        f(s.backlog.as_ref().and_then(|b| b.range(from_offset)))
    }

    /// The replication ids (`+FULLRESYNC <id> <offset>`, INFO).
    pub fn ids(&self) -> ReplicationIds {
        self.state.lock().ids
    }

    /// The primary's answer to a replica's PSYNC, decided against the ids and backlog as they
    /// are now (one lock, so the offset and the held range agree).
    pub fn psync(&self, req: &PsyncRequest) -> PsyncDecision {
        let s = self.state.lock();
        psync::decide(&s.ids, s.backlog.as_ref(), self.offset.load(Relaxed), req)
    }

    /// A replica attached at `offset` (being synced, not yet online). Creates the backlog.
    pub fn attach_replica(
        &self,
        id: ReplicaId,
        addr: ReplicaAddr,
        offset: u64,
        now_ms: u64,
    ) -> Result<(), crate::replication::ack::AckError> {
        if let Err(e) = self.ensure_backlog() {
            tracing::error!(error = %e, "cannot create the replication backlog");
        }
        let mut s = self.state.lock();
        s.acks.attach(id, offset, now_ms)?;
        s.addrs.insert(id, addr);
        Ok(())
    }

    /// The replica finished its sync and streams.
    pub fn replica_online(&self, id: ReplicaId, now_ms: u64) {
        let mut s = self.state.lock();
        s.acks.set_online(&id, now_ms);
        self.answer_waiters(&mut s, now_ms);
    }

    /// The replica's ack word read `acked`: counts for WAIT and `min-replicas-to-write`, and
    /// wakes the clients whose WAIT it satisfies.
    pub fn observe_ack(&self, id: ReplicaId, acked: u64, now_ms: u64) {
        let mut s = self.state.lock();
        let offset = self.offset.load(Relaxed);
        s.acks.observe(&id, acked, offset, now_ms);
        self.answer_waiters(&mut s, now_ms);
    }

    /// Gossip hears the replica (`true`) or suspects it (`false`, PFAIL): only live
    /// replicas count for WAIT, `min-replicas-*`, `repl-sync-acks` and the shutdown wait.
    pub fn set_live(&self, id: ReplicaId, live: bool, now_ms: u64) {
        let mut s = self.state.lock();
        if s.acks.set_live(&id, live) {
            tracing::info!(replica = id, live, "replica liveness changed (gossip)");
            if live {
                self.answer_waiters(&mut s, now_ms);
            }
        }
    }

    pub fn detach_replica(&self, id: ReplicaId) {
        let mut s = self.state.lock();
        s.acks.detach(&id);
        s.addrs.remove(&id);
    }

    fn answer_waiters(&self, s: &mut State, now_ms: u64) {
        if s.waiters.is_empty() {
            return;
        }
        for done in s.waiters.poll(&s.acks, now_ms) {
            // The client runs WAIT again and finds its count (see `wait`).
            done.client.0.wake();
        }
    }

    /// Replicas streaming now (not loading a full sync).
    pub fn online_replicas(&self) -> usize {
        self.state.lock().acks.online_count()
    }

    /// Whether every online replica acknowledged `offset` (a primary's shutdown waits
    /// for it).
    pub fn all_online_acked(&self, offset: u64) -> bool {
        let s = self.state.lock();
        s.acks.count_acked(offset) == s.acks.online_count()
    }

    /// Online replicas that acknowledged `offset` (WAIT's count).
    pub fn count_acked(&self, offset: u64) -> usize {
        self.state.lock().acks.count_acked(offset)
    }

    /// WAIT: the count now if it reaches `numreplicas` (`Ok(Ok(n))`), else the client is
    /// queued until acknowledgements satisfy it (`Ok(Err(n))`, the count so far). A client
    /// queued again replaces its previous entry. The caller times the wait out.
    pub fn wait(
        &self,
        client: &Arc<ClientShared>,
        offset: u64,
        numreplicas: usize,
    ) -> Result<Result<usize, usize>, WaitError> {
        let mut s = self.state.lock();
        let s = &mut *s;
        let waiting = WaitingClient(client.clone());
        s.waiters.cancel(&waiting);
        let waiter = Waiter {
            client: waiting,
            offset,
            numreplicas,
            deadline_ms: None,
        };
        Ok(match s.waiters.wait(waiter, &s.acks)? {
            Some(done) => Ok(done.acked),
            None => Err(s.acks.count_acked(offset)),
        })
    }

    /// The client stopped waiting (answered, timed out, gone).
    pub fn cancel_wait(&self, client: &Arc<ClientShared>) {
        let mut s = self.state.lock();
        if !s.waiters.is_empty() {
            s.waiters.cancel(&WaitingClient(client.clone()));
        }
    }

    /// `min-replicas-to-write` / `min-replicas-max-lag`: whether a write may run now.
    pub fn writes_allowed(&self, now_ms: u64, min_to_write: usize, max_lag_secs: u64) -> bool {
        self.state
            .lock()
            .acks
            .writes_allowed(now_ms, min_to_write, max_lag_secs)
    }

    fn replica_lines(s: &State, now_ms: u64) -> Vec<ReplicaLine> {
        s.acks
            .iter()
            .map(|(id, ack)| {
                let addr = s.addrs.get(id);
                ReplicaLine {
                    ip: addr.map(|a| a.ip.clone()).unwrap_or_default(),
                    port: addr.map_or(0, |a| a.port),
                    online: ack.online,
                    offset: ack.offset,
                    lag_secs: ack.lag_secs(now_ms),
                }
            })
            .chain(s.stream_consumers.lines(now_ms))
            .collect()
    }

    /// A client (`client` id, at `ip`:`port`) began following the stream over the client
    /// port: listed with the replicas until [`Self::stream_consumer_detached`].
    pub fn stream_consumer_attached(&self, client: u64, ip: String, port: u16, now_ms: u64) {
        let mut s = self.state.lock();
        s.stream_consumers.attach(client, ip, port, now_ms);
    }

    /// The stream consumer `client` has been sent the stream up to `offset`.
    pub fn stream_consumer_sent(&self, client: u64, offset: u64, now_ms: u64) {
        let mut s = self.state.lock();
        s.stream_consumers.sent(client, offset, now_ms);
    }

    pub fn stream_consumer_detached(&self, client: u64) {
        self.state.lock().stream_consumers.detach(client);
    }

    /// Every attached replica as INFO describes it (address, state, offset, lag).
    pub fn replicas(&self, now_ms: u64) -> Vec<ReplicaLine> {
        Self::replica_lines(&self.state.lock(), now_ms)
    }

    /// INFO's `# Replication` fields, in Redis 7's order.
    pub fn info_fields(&self, link: Option<&PrimaryLink>, now_ms: u64) -> Vec<(String, String)> {
        let s = self.state.lock();
        let replicas = Self::replica_lines(&s, now_ms);
        let role = link.map_or(Role::Primary, Role::Replica);
        let mut fields = report::info_fields(
            &role,
            &s.ids,
            s.backlog.as_ref(),
            self.offset.load(Relaxed),
            &replicas,
        );
        if s.backlog.is_none() {
            // Without a backlog INFO still shows the size one would be created with.
            if let Some(f) = fields.iter_mut().find(|(k, _)| k == "repl_backlog_size") {
                f.1 = s.backlog_size.to_string();
            }
        }
        fields
    }

    /// The ROLE reply.
    pub fn role_reply(&self, link: Option<&PrimaryLink>, now_ms: u64) -> Frame {
        let s = self.state.lock();
        let replicas = Self::replica_lines(&s, now_ms);
        let role = link.map_or(Role::Primary, Role::Replica);
        report::role_reply(&role, self.offset.load(Relaxed), &replicas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::propagate::WriteEffect;
    use rand::SeedableRng;

    fn replication() -> Replication {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        Replication::new(ReplicationIds::new(&mut rng), 1 << 10)
    }

    fn feed_set(r: &Replication, key: &[u8]) -> u64 {
        let mut out = Outgoing::default();
        out.command(0, &[b"SET", key, b"v"], &WriteEffect::None)
            .unwrap();
        r.feed(&mut out)
    }

    #[test]
    fn inactive_until_a_backlog_exists_then_offsets_move() {
        let r = replication();
        assert!(!r.active());
        r.ensure_backlog().unwrap();
        assert!(r.active());
        // A new backlog's reader knows no database: its first write selects one, the next
        // in the same database does not.
        let select = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n".len() as u64;
        let first = feed_set(&r, b"k");
        let len = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n".len() as u64;
        assert_eq!(first, select + len);
        assert_eq!(feed_set(&r, b"k"), select + 2 * len);
        assert_eq!(r.master_repl_offset(), select + 2 * len);
        let held = r.read_backlog(select + len + 1, |range| range.map(|r| r.to_vec()));
        assert_eq!(
            held.as_deref(),
            Some(&b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"[..])
        );
        assert!(r.read_backlog(0, |range| range.is_none()));
        // Idempotent: a second call keeps the history.
        r.ensure_backlog().unwrap();
        assert_eq!(r.master_repl_offset(), select + 2 * len);
        // A replica that has the first SET continues from the second; one with an unknown
        // history syncs fully at the current offset.
        let replid = r.ids().replid();
        let known = PsyncRequest {
            history: Some((replid, select + len + 1)),
        };
        assert_eq!(
            r.psync(&known),
            PsyncDecision::Continue {
                from: select + len + 1,
                new_replid: None
            }
        );
        let stranger = PsyncRequest { history: None };
        assert!(matches!(
            r.psync(&stranger),
            PsyncDecision::FullResync { offset, .. } if offset == select + 2 * len
        ));
    }

    #[test]
    fn reselect_makes_the_next_write_select_and_mirroring_keeps_the_database() {
        let r = replication();
        r.ensure_backlog().unwrap();
        let select = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n".len() as u64;
        let len = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n".len() as u64;
        let first = feed_set(&r, b"k");
        assert_eq!(first, select + len);
        assert_eq!(r.stream_db(), 0);
        r.reselect();
        assert_eq!(feed_set(&r, b"k"), first + select + len, "selected again");
        // A replica mirrors its primary's bytes and the database they end in.
        r.feed_raw(b"*2\r\n$6\r\nSELECT\r\n$1\r\n4\r\n", 4);
        assert_eq!(r.stream_db(), 4);
        let mark = r.mark().unwrap();
        assert_eq!(mark.stream_db, 4, "a save records it");
    }

    #[test]
    fn wait_counts_acks_and_wakes_the_waiter() {
        let r = replication();
        let addr = "127.0.0.1:1".parse().unwrap();
        let client = Arc::new(ClientShared::new(9, addr, addr));
        let at = ReplicaAddr {
            ip: "10.0.0.2".into(),
            port: 7001,
        };
        r.attach_replica(1, at, 0, 0).unwrap();
        let offset = feed_set(&r, b"k");
        // Not online yet: counts for nothing.
        assert_eq!(r.wait(&client, offset, 1).unwrap(), Err(0));
        r.replica_online(1, 10);
        r.observe_ack(1, offset - 1, 20);
        assert_eq!(r.count_acked(offset), 0);
        r.observe_ack(1, offset, 30);
        assert_eq!(r.count_acked(offset), 1);
        assert_eq!(r.wait(&client, offset, 1).unwrap(), Ok(1));
        r.cancel_wait(&client);
        let info = r.info_fields(None, 30);
        let get = |k: &str| info.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("connected_slaves").as_deref(), Some("1"));
        assert_eq!(
            get("slave0").as_deref(),
            Some(format!("ip=10.0.0.2,port=7001,state=online,offset={offset},lag=0").as_str())
        );
        assert!(r.writes_allowed(30, 1, 10));
        assert!(!r.writes_allowed(30_000, 1, 10));
        r.detach_replica(1);
        assert!(!r.writes_allowed(30, 1, 10));
    }
}
