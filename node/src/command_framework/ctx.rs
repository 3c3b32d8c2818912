//! What a command handler works with.

use super::error::CmdError;
use super::key_events::{CommandEvent, WhenGone};
use crate::config::keyspace_events::{GENERIC, NEW};
use crate::db::{Key, Locked};
use crate::node_state::keyspace_events::{self, KeyEvents};
use crate::node_state::{Client, NodeServices, NodeState};
use crate::replication::outgoing::Outgoing;
use crate::replication::propagate::WriteEffect;
use proto::resp::Reply;
use smallvec::SmallVec;

/// A blocking command that found nothing to serve and asks its connection to wait.
pub struct BlockRequest {
    pub keys: Vec<Key>,
    /// None: wait forever.
    pub timeout: Option<std::time::Duration>,
    /// The command to run again when a key is signalled (its owned arguments).
    pub retry: Vec<Vec<u8>>,
    pub timeout_reply: TimeoutReply,
}

/// A synchronous write whose acknowledgements did not come in time. It was applied on this
/// node: whether it survives a failover is unknown, as for a client that lost its connection.
pub const SYNC_ACKS_TIMEOUT_ERROR: &str =
    "NOREPLICAS Not enough replicas acknowledged the write in time (it may or may not persist)";

impl BlockRequest {
    /// Whether the output must stay unwritten while the client waits (a synchronous write).
    pub fn holds_output(&self) -> bool {
        matches!(self.timeout_reply, TimeoutReply::SyncAcks { .. })
    }
}

/// The error of a topology change the group did not make, as `CmdError::from(ClusterError)`
/// words it.
pub fn topology_not_made(why: &str) -> String {
    crate::command_framework::CmdError::from(crate::cluster::ClusterError::Topology(why.into()))
        .to_string()
}

/// What a blocked command answers when its timeout passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutReply {
    /// BLPOP, BRPOP, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP, and also BLMOVE and BRPOPLPUSH
    /// (redis-server 7.0.15 times every list wait out with a null array): `*-1` (RESP3 `_`).
    NullArray,
    /// `$-1` (RESP3 `_`).
    NullBulk,
    /// XREAD, XREADGROUP: a null array, as `NullArray`; the client is woken by every
    /// signal on its keys (a new entry serves every reader; XREADGROUP answers an error
    /// when its key or group goes).
    StreamRead,
    /// WAIT: the count of replicas that acknowledged `offset` when the timeout passed. Only a
    /// caller that can see the acknowledgements answers it truly
    /// (`server::session::Session::time_out_blocked`);
    /// `write` answers 0, what a WAIT that cannot wait finds with no replica attached.
    ReplicaAcks { offset: u64 },
    /// A write under `repl-sync-acks`: its reply (from `held_from` in the output) is held
    /// until `wanted` replicas acknowledged `offset`; at the timeout it is replaced by a
    /// `-NOREPLICAS` error. Transports write no output while such a block lasts.
    SyncAcks {
        offset: u64,
        wanted: usize,
        held_from: usize,
    },
    /// A CLUSTER command whose topology change the group is committing: `+OK` once it
    /// applied here, its error if it failed (the outcome in `Client::pending_topology`);
    /// at the timeout, the error a proposal that never got an answer gets.
    TopologyChange,
    /// A keyed command of this node's slot while its serving lease has lapsed: run again
    /// when the lease holds, CLUSTERDOWN at the timeout (one lease).
    LapsedLease,
    /// A write to a slot whose migration paused its writes: run again when the pause ends,
    /// TRYAGAIN at the timeout.
    MigrationPause,
    /// SHUTDOWN waiting for its own thread (replicas, final save): run again when that
    /// thread wakes it (the outcome in `Client::pending_shutdown`); no timeout.
    Shutdown,
    /// A request held by CLIENT PAUSE, still unexecuted in the client's input (`writes`: it
    /// writes or may replicate). Its timeout is the pause's end; then, or when woken, the
    /// session runs its input again, which holds the request again if a pause still does.
    /// Nothing is answered for it.
    Paused { writes: bool },
}

/// SELECT, MOVE, COPY ... DB and SWAPDB past `databases` (Redis's words).
pub const DB_OUT_OF_RANGE: &str = "ERR DB index is out of range";

/// SHUTDOWN's answer when its final save failed (Redis's words), or when its thread ended
/// without an outcome.
pub const SHUTDOWN_FAILED_ERROR: &str = "ERR Errors trying to SHUTDOWN. Check logs.";

impl TimeoutReply {
    /// Whether CLIENT UNBLOCK may end this wait: a blocking command's wait on keys, or
    /// WAIT's (as Redis's list, sorted set, stream and WAIT blocks), not a pause or the
    /// node's own waits.
    pub fn client_unblock_may_end(&self) -> bool {
        matches!(
            self,
            TimeoutReply::NullArray
                | TimeoutReply::NullBulk
                | TimeoutReply::StreamRead
                | TimeoutReply::ReplicaAcks { .. }
        )
    }

    /// The error this timeout answers, for the kinds that answer one.
    pub fn error_text(&self) -> Option<String> {
        match self {
            TimeoutReply::NullArray
            | TimeoutReply::NullBulk
            | TimeoutReply::StreamRead
            | TimeoutReply::ReplicaAcks { .. } => None,
            TimeoutReply::SyncAcks { .. } => Some(SYNC_ACKS_TIMEOUT_ERROR.to_string()),
            TimeoutReply::LapsedLease => {
                Some(crate::command_framework::redirect::lapsed_lease_error())
            }
            TimeoutReply::Shutdown => Some(SHUTDOWN_FAILED_ERROR.to_string()),
            TimeoutReply::MigrationPause => {
                Some(crate::command_framework::redirect::MIGRATION_PAUSE_ERROR.to_string())
            }
            TimeoutReply::Paused { .. } => None,
            TimeoutReply::TopologyChange => Some(topology_not_made(
                crate::cluster::shared::PROPOSAL_NO_ANSWER,
            )),
        }
    }

    pub fn write(self, reply: &mut Reply<'_>) {
        match self {
            TimeoutReply::NullArray | TimeoutReply::StreamRead => reply.null_array(),
            TimeoutReply::NullBulk => reply.null(),
            TimeoutReply::ReplicaAcks { .. } => reply.integer(0),
            TimeoutReply::Paused { .. } => {}
            other => reply.error(&other.error_text().unwrap_or_default()),
        }
    }
}

/// Side effects of a command that the dispatcher acts on after the handler returns.
#[derive(Default)]
pub struct Effects {
    /// Changes to the dataset (for `save` rules and INFO `rdb_changes_since_last_save`).
    pub dirty: u64,
    /// Keys modified (with their database), recorded only while some client WATCHes keys
    /// or tracking is active.
    pub modified: SmallVec<[(usize, Key); 2]>,
    /// Keys changed by the request, for BCAST tracking clients (recorded only while one
    /// listens): told once the request is done, one message per prefix.
    pub tracking_changes: Vec<crate::node_state::tracking::Change>,
    /// Keys that received elements (with their database), recorded only while some client
    /// is blocked.
    pub ready: SmallVec<[(usize, Key); 2]>,
    /// Set by a blocking command that has to wait.
    pub block: Option<BlockRequest>,
    /// Close the connection once the reply is written (QUIT, protocol errors, CLIENT KILL).
    pub close: bool,
    /// What the write decided that its arguments do not say (an absolute expiry, popped
    /// members), for the replication stream. Set through [`Ctx::replicate`].
    pub repl: WriteEffect,
    /// The replication stream this request produces, fed to the backlog by the dispatcher.
    pub outgoing: Outgoing,
    /// Keyspace events to publish once the keys are unlocked (recorded only while
    /// `notify-keyspace-events` publishes something).
    pub events: KeyEvents,
    /// SYNC or PSYNC: the connection becomes a consumer of the replication stream.
    pub replica_stream: Option<ReplicaStreamAsk>,
}

/// A client's SYNC or PSYNC over TCP: its connection stops taking commands and receives a
/// snapshot and then the replication stream (the server layer's `tcp_replica`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaStreamAsk {
    /// The history named (`None` for SYNC and `PSYNC ? -1`).
    pub psync: crate::replication::psync::PsyncRequest,
    /// PSYNC gets a `+FULLRESYNC`/`+CONTINUE` status line first; SYNC goes straight to the
    /// payload.
    pub status_line: bool,
}

pub struct Ctx<'a> {
    /// The node's shared state.
    pub server: &'a NodeState,
    /// The node's I/O that commands reach (saves, replication links, failover, shutdown).
    pub services: &'a dyn NodeServices,
    pub client: &'a mut Client,
    pub db: Locked<'a>,
    /// Other databases a command holds besides `db` (MOVE, COPY ... DB, SWAPDB, FLUSHALL:
    /// see [`Ctx::hold_dbs`]), released with `db` once the request fed its stream.
    pub held: Vec<Locked<'a>>,
    pub reply: Reply<'a>,
    /// The caller's (the connection's), written in place.
    pub effects: &'a mut Effects,
    /// True while executing the commands of an EXEC (blocking commands do not block).
    pub in_exec: bool,
    /// Writes are fed to a replication backlog (read once per request).
    pub replicating: bool,
    /// The running command's keyspace event, set per command by the dispatcher; None while
    /// notifications are off, so that [`Ctx::modified`] records nothing.
    pub event: Option<CommandEvent>,
}

impl<'a> Ctx<'a> {
    /// Holds databases `dbs` besides the client's (shards `shards` of each, or all), all
    /// taken afresh in ascending database order, the order every multi-database lock
    /// follows; `held` keeps the others, indexed as their database numbers ascend. Call
    /// first thing in a handler: the client's database is let go and taken again, so
    /// nothing read before stays valid. Fails for a database past `databases`.
    pub fn hold_dbs(&mut self, dbs: &[usize], shards: Option<&[usize]>) -> Result<(), CmdError> {
        let current = self.db.db_index();
        let mut wanted: SmallVec<[usize; 4]> = dbs.iter().copied().collect();
        wanted.push(current);
        wanted.sort_unstable();
        wanted.dedup();
        let keyspaces: SmallVec<[&'a crate::db::Keyspace; 4]> = wanted
            .iter()
            .map(|&i| self.server.db(i))
            .collect::<Option<_>>()
            .ok_or_else(|| CmdError::new(DB_OUT_OF_RANGE))?;
        // Inside EXEC or a script the commands after this one reach keys of their own:
        // every shard stays held for them.
        let shards = shards.filter(|_| !self.in_exec && !self.client.in_script);
        self.relock(&keyspaces, shards, current);
        Ok(())
    }

    /// Lets `db` go and takes `keyspaces` (ascending), `current`'s becoming `db`.
    fn relock(
        &mut self,
        keyspaces: &[&'a crate::db::Keyspace],
        shards: Option<&[usize]>,
        current: usize,
    ) {
        self.feed_so_far();
        let (now, lru) = (self.db.now, self.db.lru_clock);
        let keyspace = self.db.keyspace();
        let mut template = Locked::lock(keyspace, &[], now, lru);
        self.db.recording_like(&mut template);
        let old = std::mem::replace(&mut self.db, Locked::lock(keyspace, &[], now, lru));
        drop(old);
        self.held.clear();
        for keyspace in keyspaces {
            let mut locked = match shards {
                Some(s) => Locked::lock(keyspace, s, now, lru),
                None => Locked::lock_all(keyspace, now, lru),
            };
            template.recording_like(&mut locked);
            if keyspace.index() == current {
                self.db = locked;
            } else {
                self.held.push(locked);
            }
        }
    }

    /// The view of database `index` among those [`Ctx::hold_dbs`] took.
    pub fn held_db(&mut self, index: usize) -> Option<&mut Locked<'a>> {
        if self.db.db_index() == index {
            return Some(&mut self.db);
        }
        self.held.iter_mut().find(|l| l.db_index() == index)
    }

    /// SELECT inside EXEC or a script: the rest runs against database `index` with all its
    /// shards held. A database held already (EXEC takes those its SELECTs name up front)
    /// just becomes the current one, and the others stay held: the request's writes reach
    /// the stream together at its end, one transaction. Otherwise what ran so far is fed to
    /// the stream first, with its database still held, so that no later write to those keys
    /// can precede it there, and the new database is taken instead.
    pub fn switch_db(&mut self, index: usize) -> Result<(), CmdError> {
        if let Some(at) = self.held.iter().position(|l| l.db_index() == index) {
            std::mem::swap(&mut self.db, &mut self.held[at]);
            return Ok(());
        }
        let keyspace = self
            .server
            .db(index)
            .ok_or_else(|| CmdError::new(DB_OUT_OF_RANGE))?;
        self.relock(&[keyspace], None, index);
        Ok(())
    }

    /// Before the request lets its shards go mid-way (EXEC or a script changing
    /// databases): what it wrote so far goes to the stream and to WATCHers while they are
    /// still held, so that no later write to those keys can precede it.
    fn feed_so_far(&mut self) {
        if !self.effects.outgoing.is_empty() {
            let fed = self
                .services
                .write_stream()
                .feed(&mut self.effects.outgoing);
            if let Some(offset) = fed.repl {
                self.client.repl_offset = offset;
            }
        }
        if !self.effects.modified.is_empty() {
            self.server.watches.touch_each(&self.effects.modified);
        }
    }

    /// True when this run is a blocked client's retry: its connection marks the client
    /// blocked for as long as it waits, and only a waiting connection runs commands while it
    /// is marked. Blocking pops then pass over a key of another type (Redis 7.0 keeps such a
    /// client waiting) where a first run answers WRONGTYPE.
    pub fn is_block_retry(&self) -> bool {
        self.client
            .shared
            .blocked
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records what the write decided for its replicas. `effect` runs only while writes are
    /// replicated, so a handler pays nothing (no allocation) otherwise.
    pub fn replicate(&mut self, effect: impl FnOnce() -> WriteEffect) {
        if self.replicating {
            self.effects.repl = effect();
        }
    }

    /// Records a change to the dataset for `save` rules, WATCH and CLIENT TRACKING.
    ///
    /// Also signals the key while clients are blocked: a stream reader must see its key
    /// deleted, replaced or its group destroyed (Redis signals every such key); a list or
    /// sorted-set waiter first in line just looks again.
    pub fn modified(&mut self, key: &[u8]) {
        self.effects.dirty += 1;
        if self.server.watches.active() || self.server.tracking.active() {
            self.effects.modified.push((self.db.db_index(), key.into()));
        }
        if self.server.blocking.active() {
            self.effects.ready.push((self.db.db_index(), key.into()));
        }
        if let Some(event) = self.event {
            self.record_event(event, key);
        }
    }

    /// [`Ctx::modified`] for a key of another database the command holds (MOVE, COPY ... DB:
    /// see [`Ctx::hold_dbs`]), with the event `name` if notifications publish its class.
    pub fn modified_in(&mut self, db: usize, key: &[u8], class: u32, name: &'static str) {
        if db == self.db.db_index() {
            return self.modified(key);
        }
        self.effects.dirty += 1;
        if self.server.watches.active() || self.server.tracking.active() {
            self.effects.modified.push((db, key.into()));
        }
        if self.server.blocking.active() {
            self.effects.ready.push((db, key.into()));
        }
        if self.event.is_some() && keyspace_events::wanted(self.server, class) {
            self.effects.events.push(db, class, name, key);
        }
    }

    /// Names the event of the changes reported next by [`Ctx::modified`] (for commands whose
    /// event depends on their arguments or on the key: RENAME's `rename_from`, LMOVE's
    /// ends...). Does nothing while notifications are off.
    pub fn name_event(&mut self, class: u32, name: &'static str, when_gone: WhenGone) {
        if self.event.is_some() {
            self.event = Some(CommandEvent {
                class,
                name,
                when_gone,
            });
        }
    }

    /// Records an event besides the change's own (SET's `expire` for its TTL, XADD's
    /// `xtrim`). Does nothing unless it is published.
    pub fn notify(&mut self, class: u32, name: &'static str, key: &[u8]) {
        if self.event.is_some() && keyspace_events::wanted(self.server, class) {
            self.effects
                .events
                .push(self.db.db_index(), class, name, key);
        }
    }

    /// The event of one change: keys this command created first (`new`), then the event,
    /// or `del` for a key the change deleted (see [`WhenGone`]).
    fn record_event(&mut self, event: CommandEvent, key: &[u8]) {
        for created in self.db.take_created() {
            self.notify(NEW, "new", &created);
        }
        let gone = self
            .db
            .get_shared(key)
            .is_none_or(|e| e.value.is_empty_aggregate());
        if !gone || event.when_gone != WhenGone::Del {
            self.notify(event.class, event.name, key);
        }
        if gone && event.when_gone != WhenGone::Keep {
            self.notify(GENERIC, "del", key);
        }
    }

    /// Signals that `key` received elements (list push, ZADD), waking blocked clients.
    pub fn signal_ready(&mut self, key: &[u8]) {
        if self.server.blocking.active() {
            self.effects.ready.push((self.db.db_index(), key.into()));
        }
    }
}
