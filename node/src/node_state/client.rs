//! A client connection's state: the part only its connection touches ([`Client`]) and the
//! part other connections may read or poke ([`ClientShared`]: CLIENT LIST/KILL, pub/sub
//! deliveries, wake-ups of blocked clients).

use bytes::BytesMut;
use parking_lot::Mutex;
use proto::resp::ProtocolVersion;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;

/// Most bytes of undelivered pub/sub messages a client may have queued before it is
/// disconnected (Redis's `client-output-buffer-limit pubsub 32mb` hard limit).
pub const PUSH_QUEUE_LIMIT: usize = 32 * 1024 * 1024;
/// Longest client name accepted by CLIENT SETNAME / HELLO SETNAME.
pub const MAX_CLIENT_NAME_LEN: usize = 1024;

pub struct ClientShared {
    pub id: u64,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub created: Instant,
    pub name: Mutex<Option<String>>,
    pub lib_name: Mutex<Option<String>>,
    pub lib_ver: Mutex<Option<String>>,
    pub last_command: Mutex<&'static str>,
    /// Milliseconds since `created` of the last command (for idle time and `timeout`).
    pub last_active_ms: AtomicU64,
    pub protocol: AtomicU8,
    pub subscriptions: AtomicUsize,
    pub pattern_subscriptions: AtomicUsize,
    pub shard_subscriptions: AtomicUsize,
    pub in_multi: AtomicBool,
    pub blocked: AtomicBool,
    /// Its command is held by CLIENT PAUSE (CLIENT UNPAUSE wakes such clients).
    pub paused: AtomicBool,
    /// CLIENT UNBLOCK's requests to end its wait.
    pub unblock: super::client_unblock::UnblockSlot,
    pub query_buffer: AtomicUsize,
    /// The database SELECT chose (CLIENT LIST `db=`), mirrored from `Client::db`.
    pub db: AtomicUsize,
    /// Set by CLIENT KILL, the idle timeout or an overflowing push queue.
    pub killed: AtomicBool,
    /// Pub/sub messages encoded for this client, waiting for its connection to send them.
    pub pushes: Mutex<BytesMut>,
    /// Wakes the connection: pushes queued, killed, or a blocked key became ready. Private:
    /// every wake-up goes through [`ClientShared::wake`], which also sets `wake_pending`.
    wakeup: Notify,
    /// Set with every wake-up, before `wakeup` is notified: a busy-polling fabric poller
    /// checks this flag on every turn (an atomic load, [`ClientShared::take_wakeup`]) instead
    /// of polling a `Notified`, which takes the Notify's lock twice and was a fifth of the
    /// poller's CPU.
    wake_pending: AtomicBool,
    /// A replica's session executing its primary's stream (CLIENT LIST/KILL TYPE master).
    pub primary_link: AtomicBool,
    /// CLIENT TRACKING: its mode and redirect, read by whoever invalidates its keys.
    pub tracking: super::tracking::client_state::SharedTracking,
    /// CLIENT NO-EVICT on (CLIENT LIST flag `e`; this node never evicts clients).
    pub no_evict: AtomicBool,
    /// The user it authenticated as (None: `default`), for CLIENT LIST and for ACL DELUSER,
    /// ACL LOAD and channel revocations, which disconnect a user's clients.
    pub user: Mutex<Option<Arc<super::acl::User>>>,
    /// The connection serves the replication stream after SYNC/PSYNC on the client port
    /// (CLIENT LIST flag `S`, CLIENT LIST/KILL TYPE replica, as Redis shows its replicas).
    pub stream_consumer: AtomicBool,
    /// The doorbell of the fabric poller serving it (set once, when the poller takes it in):
    /// a wake-up rings it, so a poller blocked while idle runs the woken client at once.
    poller_bell: std::sync::OnceLock<Arc<bus::idle::Doorbell>>,
}

impl ClientShared {
    pub fn new(id: u64, peer: SocketAddr, local: SocketAddr) -> Self {
        ClientShared {
            id,
            peer,
            local,
            created: Instant::now(),
            name: Mutex::new(None),
            lib_name: Mutex::new(None),
            lib_ver: Mutex::new(None),
            last_command: Mutex::new("NULL"),
            last_active_ms: AtomicU64::new(0),
            protocol: AtomicU8::new(2),
            subscriptions: AtomicUsize::new(0),
            pattern_subscriptions: AtomicUsize::new(0),
            shard_subscriptions: AtomicUsize::new(0),
            in_multi: AtomicBool::new(false),
            blocked: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            unblock: Default::default(),
            query_buffer: AtomicUsize::new(0),
            db: AtomicUsize::new(0),
            killed: AtomicBool::new(false),
            pushes: Mutex::new(BytesMut::new()),
            wakeup: Notify::new(),
            wake_pending: AtomicBool::new(false),
            primary_link: AtomicBool::new(false),
            tracking: Default::default(),
            no_evict: AtomicBool::new(false),
            user: Mutex::new(None),
            stream_consumer: AtomicBool::new(false),
            poller_bell: std::sync::OnceLock::new(),
        }
    }

    /// The name of the user it is authenticated as.
    pub fn username(&self) -> String {
        self.user
            .lock()
            .as_ref()
            .map_or_else(|| super::acl::DEFAULT_USER.to_string(), |u| u.name.clone())
    }

    /// Whether it is authenticated as `user` (the very user, not one of the same name
    /// created after it was deleted).
    pub fn is_user(&self, user: &Arc<super::acl::User>) -> bool {
        self.user
            .lock()
            .as_ref()
            .is_some_and(|u| Arc::ptr_eq(u, user))
    }

    pub fn kill(&self) {
        self.killed.store(true, Relaxed);
        self.wake();
    }

    /// Wakes the connection (its loop or its fabric poller).
    pub fn wake(&self) {
        self.wake_pending
            .store(true, std::sync::atomic::Ordering::Release);
        self.wakeup.notify_one();
        // After the flag: a poller that drained its bell looks at the flag before blocking.
        if let Some(bell) = self.poller_bell.get() {
            bell.ring();
        }
    }

    /// A fabric poller took the client in: its wake-ups ring `bell` from now on.
    pub fn attach_poller_bell(&self, bell: &Arc<bus::idle::Doorbell>) {
        let _ = self.poller_bell.set(Arc::clone(bell));
    }

    /// Whether a wake-up waits to be taken (a poller's last look before it blocks).
    pub fn wake_pending(&self) -> bool {
        self.wake_pending.load(std::sync::atomic::Ordering::Acquire)
    }

    /// What a TCP connection's loop awaits to be woken.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.wakeup.notified()
    }

    /// Takes a pending wake-up without waiting (a fabric poller's turn): the flag first (a
    /// plain load in the common "nothing" case, the swap only when set), then the Notify's
    /// permit, so that it does not outlive the flag.
    pub fn take_wakeup(&self) -> bool {
        use std::future::Future;
        use std::sync::atomic::Ordering::{AcqRel, Acquire};
        use std::task::{Context, Waker};
        if !self.wake_pending.load(Acquire) || !self.wake_pending.swap(false, AcqRel) {
            return false;
        }
        let notified = std::pin::pin!(self.wakeup.notified());
        let _ = notified.poll(&mut Context::from_waker(Waker::noop()));
        true
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Relaxed)
    }

    pub fn protocol(&self) -> ProtocolVersion {
        if self.protocol.load(Relaxed) == 3 {
            ProtocolVersion::Resp3
        } else {
            ProtocolVersion::Resp2
        }
    }

    /// Queues an encoded push for this client; kills it if its queue is over the limit.
    pub fn push(&self, encoded: &[u8]) {
        self.push_when(|| true, encoded);
    }

    /// Queues an encoded push only if `wanted` still holds, checked under the queue's lock.
    /// An unsubscribe clears its subscription's flag and then drains the queue, so a message
    /// a concurrent publisher delivers late can never land behind the unsubscribe's reply.
    pub fn push_if(&self, wanted: &AtomicBool, encoded: &[u8]) {
        self.push_when(|| wanted.load(Relaxed), encoded);
    }

    fn push_when(&self, wanted: impl FnOnce() -> bool, encoded: &[u8]) {
        let mut q = self.pushes.lock();
        if !wanted() {
            return;
        }
        if q.len() + encoded.len() > PUSH_QUEUE_LIMIT {
            drop(q);
            tracing::warn!(
                client = self.id,
                "pub/sub output over {PUSH_QUEUE_LIMIT} bytes; closing the client"
            );
            self.kill();
            return;
        }
        q.extend_from_slice(encoded);
        drop(q);
        self.wake();
    }

    pub fn idle_secs(&self) -> u64 {
        let now = self.created.elapsed().as_millis() as u64;
        now.saturating_sub(self.last_active_ms.load(Relaxed)) / 1000
    }

    pub fn subscription_count(&self) -> usize {
        self.subscriptions.load(Relaxed)
            + self.pattern_subscriptions.load(Relaxed)
            + self.shard_subscriptions.load(Relaxed)
    }
}

/// Most commands one MULTI may queue. The queue waits in memory until EXEC; Redis bounds it
/// only by maxmemory, which a node may not have set.
pub const MAX_QUEUED_COMMANDS: usize = 1_000_000;
/// Most bytes one MULTI may queue (arguments plus a per-argument overhead): 1 GiB, Redis's
/// default `client-query-buffer-limit`, the most a client may make a server hold unprocessed.
pub const MAX_QUEUED_BYTES: usize = 1024 * 1024 * 1024;
/// Bookkeeping bytes counted per queued argument (its Vec header and allocation slack).
const QUEUED_ARG_OVERHEAD: usize = 32;

/// State of a MULTI block being queued.
#[derive(Default)]
pub struct MultiState {
    pub queued: Vec<Vec<Vec<u8>>>,
    /// A queued command was rejected (unknown, wrong arity...): EXEC answers EXECABORT.
    pub errored: bool,
    /// A queued command may grow memory (DENYOOM): EXEC checks maxmemory first, as Redis.
    pub denyoom: bool,
    /// Bytes held by `queued`, as counted against [`MAX_QUEUED_BYTES`].
    pub bytes: usize,
    /// A queued command writes: EXEC is a write for `min-replicas-to-write`.
    pub write: bool,
}

/// A command that would take a MULTI queue past its limits (the client gets this error).
#[derive(Debug, thiserror::Error)]
#[error(
    "ERR transaction too large (at most {MAX_QUEUED_COMMANDS} commands, {MAX_QUEUED_BYTES} bytes)"
)]
pub struct TransactionTooLarge;

impl MultiState {
    /// Queues a command for EXEC. Past the limits the command is refused and the transaction
    /// doomed (EXEC answers EXECABORT), as for any command rejected while queueing.
    pub fn queue(&mut self, args: &[&[u8]], denyoom: bool) -> Result<(), TransactionTooLarge> {
        let size: usize = args.iter().map(|a| a.len() + QUEUED_ARG_OVERHEAD).sum();
        if self.queued.len() >= MAX_QUEUED_COMMANDS || self.bytes + size > MAX_QUEUED_BYTES {
            self.errored = true;
            return Err(TransactionTooLarge);
        }
        self.bytes += size;
        self.denyoom |= denyoom;
        self.queued.push(args.iter().map(|a| a.to_vec()).collect());
        Ok(())
    }
}

/// State only the client's own connection touches.
pub struct Client {
    pub shared: Arc<ClientShared>,
    pub protocol: ProtocolVersion,
    pub authenticated: bool,
    pub multi: Option<MultiState>,
    /// Keys this client WATCHes, with the registry's handle for EXEC to check.
    pub watch: Option<super::watch::WatchHandle>,
    /// RESP2 clients with subscriptions may only run (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PING,
    /// QUIT and RESET.
    pub subscribed: bool,
    pub channels: std::collections::HashSet<Box<[u8]>>,
    pub patterns: std::collections::HashSet<Box<[u8]>>,
    pub shard_channels: std::collections::HashSet<Box<[u8]>>,
    /// Cluster mode: ASKING was sent (serves one command of an importing slot).
    pub cluster_asking: bool,
    /// Cluster mode: READONLY was sent (a replica serves reads of its primary's slots).
    pub cluster_readonly: bool,
    /// CLUSTER MIGRATION-LINK made this connection the link of an atomic slot migration
    /// into this node: its commands write the migration's moving slots, which this node
    /// does not own yet (and nothing else).
    pub import_link: Option<u64>,
    /// The replication offset just past this client's last write (Redis's `woff`): what WAIT
    /// waits for replicas to acknowledge.
    pub repl_offset: u64,
    /// The AOF offset its replies wait for (under `appendfsync always`, until it is
    /// fsynced): the log's end after its last command.
    pub log_offset: u64,
    /// This is a replica's link to its primary executing the replication stream: its writes
    /// are allowed although the node is a read-only replica.
    pub primary_link: bool,
    /// Its commands' "now" and durations, read once per command (see the module).
    pub clock: crate::node_state::command_clock::CommandClock,
    /// Where the outcome of the topology change its blocked command waits for arrives.
    pub pending_topology: Option<crate::cluster::shared::PendingChange>,
    /// Where the outcome of the SHUTDOWN its parked command waits for arrives.
    pub pending_shutdown:
        Option<std::sync::mpsc::Receiver<crate::node_state::services::shutdown::ShutdownOutcome>>,
    /// Cluster mode: the challenge `REPLCONF RDMA-PORT` gave this connection, which its
    /// `REPLCONF RDMA-LINK` must prove the cluster secret over (used once).
    pub repl_link_challenge: Option<[u8; proto::bus::link_proof::CHALLENGE_LEN]>,
    /// CLIENT REPLY: whether its replies are sent, and the mode the running command set.
    pub reply_mode: super::reply_mode::ReplyMode,
    pub reply_mode_set: Option<super::reply_mode::ReplyMode>,
    /// Bytes of its input from the running command's first byte on (CLIENT LIST `qbuf` of
    /// the client asking: Redis counts the command being run).
    pub input_from_command: usize,
    /// CLIENT TRACKING: its CLIENT CACHING choice and its BCAST prefixes.
    pub tracking: super::tracking::client_state::LocalTracking,
    /// The user its commands are checked against (None: `default`, reached through
    /// `NodeState::acl` without a lock); kept in step with `shared.user`.
    pub user: Option<Arc<super::acl::User>>,
    /// Memory was over `maxmemory` (and could not be freed) when the running script started:
    /// its first write that may grow memory is refused with OOM (Redis's
    /// `pre_command_oom_state`).
    pub oom_before_script: bool,
    /// A script of this client is running the command (SORT then orders a set's members,
    /// as Redis does for scripts).
    pub in_script: bool,
    /// The database its commands run in (SELECT; 0 in cluster mode). Set through
    /// [`Client::select`].
    pub db: usize,
    /// What `shared.last_command` holds, so that a pipeline of one command takes its lock
    /// once rather than per command (see [`Client::note_command`]).
    last_command_shown: &'static str,
}

impl Client {
    /// The command it runs now, for CLIENT LIST's `cmd`: the shared field's lock is taken
    /// only when the name changes (names are the command table's statics, compared by
    /// address).
    pub fn note_command(&mut self, name: &'static str) {
        if !std::ptr::eq(self.last_command_shown, name) {
            *self.shared.last_command.lock() = name;
            self.last_command_shown = name;
        }
    }

    pub fn new(shared: Arc<ClientShared>, authenticated: bool) -> Self {
        Client {
            shared,
            protocol: ProtocolVersion::Resp2,
            authenticated,
            multi: None,
            watch: None,
            subscribed: false,
            primary_link: false,
            channels: Default::default(),
            patterns: Default::default(),
            shard_channels: Default::default(),
            cluster_asking: false,
            cluster_readonly: false,
            import_link: None,
            repl_offset: 0,
            log_offset: 0,
            clock: Default::default(),
            pending_topology: None,
            pending_shutdown: None,
            repl_link_challenge: None,
            reply_mode: Default::default(),
            reply_mode_set: None,
            input_from_command: 0,
            tracking: Default::default(),
            user: None,
            oom_before_script: false,
            last_command_shown: "NULL",
            in_script: false,
            db: 0,
        }
    }

    /// Makes `db` the database of its next commands.
    pub fn select(&mut self, db: usize) {
        self.db = db;
        self.shared
            .db
            .store(db, std::sync::atomic::Ordering::Relaxed);
    }

    /// Authenticates the client as `user`.
    pub fn log_in(&mut self, user: Arc<super::acl::User>) {
        let user = (user.name != super::acl::DEFAULT_USER).then_some(user);
        *self.shared.user.lock() = user.clone();
        self.user = user;
        self.authenticated = true;
    }

    pub fn id(&self) -> u64 {
        self.shared.id
    }

    pub fn set_protocol(&mut self, v: ProtocolVersion) {
        self.protocol = v;
        self.shared
            .protocol
            .store(if v == ProtocolVersion::Resp3 { 3 } else { 2 }, Relaxed);
    }
}

impl crate::cluster::shared::LeaseWaiter for ClientShared {
    fn still_waiting(&self) -> bool {
        self.blocked.load(Relaxed) && !self.is_killed()
    }

    fn wake(&self) {
        ClientShared::wake(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::{Context, Waker};

    /// A wake-up is taken exactly once, and the Notify's permit with it.
    #[test]
    fn take_wakeup_consumes_one_wakeup() {
        let addr = "127.0.0.1:1".parse().unwrap();
        let c = ClientShared::new(1, addr, addr);
        assert!(!c.take_wakeup());
        c.wake();
        assert!(c.take_wakeup());
        assert!(!c.take_wakeup());
        // The permit went with it: a fresh Notified is not ready.
        let notified = std::pin::pin!(c.notified());
        assert!(notified
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending());
    }
}
