//! Every configuration parameter the node understands, in one table. The same entries parse
//! config files and flags, answer `CONFIG GET` and `CONFIG SET`, and write `CONFIG REWRITE`.

use super::units::{format_bool, parse_bool, parse_memory};
use crate::tls::settings::{parse_protocols, parse_tls13_suites, TlsAuthClients, TlsConfig};
use proto::resp::limits::DEFAULT_MAX_BULK_LEN;
use std::path::PathBuf;

pub use crate::db::eviction::EvictionPolicy;

/// Which fabric provider serves `rdma-port` (`fabric-provider`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricProvider {
    /// verbs if an RDMA device is present, else ofi tcp.
    Auto,
    Verbs,
    OfiTcp,
    OfiShm,
    OfiEfa,
}

impl FabricProvider {
    const NAMES: [(FabricProvider, &'static str); 5] = [
        (FabricProvider::Auto, "auto"),
        (FabricProvider::Verbs, "verbs"),
        (FabricProvider::OfiTcp, "ofi:tcp"),
        (FabricProvider::OfiShm, "ofi:shm"),
        (FabricProvider::OfiEfa, "ofi:efa"),
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(p, _)| *p == self)
            .map(|(_, n)| *n)
            .unwrap_or("auto")
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(s))
            .map(|(p, _)| *p)
    }
}

/// Settings of the fabric listener for clients. Names and ranges of `rdma-port`, `rdma-bind`
/// and `rdma-rx-size` follow Valkey 8.1; the queue settings are ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricConfig {
    /// 0 disables the fabric listener.
    pub port: u16,
    /// Empty (the default): the client `bind` addresses (see [`Config::fabric_bind`]).
    pub bind: Vec<String>,
    /// The most a connection's receive buffer (which the peer writes into) and its reply
    /// staging grow to; both start at 64 KiB and grow with the client's traffic.
    pub rx_size: u64,
    pub provider: FabricProvider,
    pub max_inline: u64,
    pub send_wr: u64,
    pub recv_wr: u64,
    /// Completion queue entries per connection; 0 means send depth + the larger of the recv
    /// depth and `srq_depth` (the least that holds every outstanding request).
    pub cq_size: u64,
    /// `rdma-srq-depth`: receives in the one pool (a verbs shared receive queue) that every
    /// client connection of the fabric listener takes its messages from; 0 gives each
    /// connection a receive queue of its own (`rdma-recv-wr` deep).
    pub srq_depth: u64,
    /// Busy-polling threads serving fabric connections.
    pub poll_threads: usize,
    /// How long an idle polling thread keeps polling (yielding the core between turns) before
    /// it backs off to sleeps.
    pub busy_poll_us: u64,
    /// `rdma-unauthenticated-max`: fabric clients allowed to wait for AUTH at once while a
    /// password is set; a new one closes the oldest (see `fabric/preauth.rs`).
    pub unauthenticated_max: u64,
}

impl Default for FabricConfig {
    fn default() -> Self {
        FabricConfig {
            port: 0,
            bind: Vec::new(),
            rx_size: 1 << 20,
            provider: FabricProvider::Auto,
            max_inline: 256,
            send_wr: bus::config::WR_DEFAULT as u64,
            recv_wr: bus::config::WR_DEFAULT as u64,
            cq_size: 0,
            srq_depth: RDMA_SRQ_DEPTH_DEFAULT,
            poll_threads: 1,
            busy_poll_us: 50,
            unauthenticated_max: 64,
        }
    }
}

/// `rdma-rx-size` bounds, as Valkey: below 64 KiB a pipeline stalls on every re-advertise;
/// above 16 MiB each connection pins too much registered memory.
pub const RDMA_RX_SIZE_MIN: u64 = 64 * 1024;
pub const RDMA_RX_SIZE_MAX: u64 = 16 * 1024 * 1024;
/// `rdma-srq-depth` default: a request-reply client has one or two messages in flight, a
/// pipelining one a few, so 255 serves dozens of busy clients at once (more meet RNR NAKs,
/// retried). Every client's CQ must hold the whole pool (a CQ that overflowed would lose a
/// pool receive), so with `rdma-cq-size` left at 0 the CQ is sized send depth + the larger of
/// `rdma-recv-wr` and this: at 255 the same 510 entries as with a receive queue per client.
pub const RDMA_SRQ_DEPTH_DEFAULT: u64 = 255;
/// Most polling threads: each one spins a core while busy.
pub const MAX_RDMA_POLL_THREADS: usize = 64;
/// `repl-backlog-size` default: 1 MiB, as Redis (Valkey ships 10 MiB).
pub const REPL_BACKLOG_SIZE_DEFAULT: usize = 1 << 20;
/// Largest backlog accepted: 16 GiB. The backlog is ordinary process memory that lives as long
/// as the node; past this a typo in the config would take the host's memory.
pub const REPL_BACKLOG_SIZE_MAX: usize = 1 << 34;
/// The upper bound of `io-busy-poll-us`: 10 ms of polling after each read is already far
/// beyond any gap between the requests of a busy client.
pub const IO_BUSY_POLL_US_MAX: u64 = 10_000;
/// Longest spin before backing off: beyond a millisecond spinning only burns the core.
pub const MAX_BUSY_POLL_US: u64 = 1000;
/// Most fabric clients waiting for AUTH at once: each pins its pre-auth window (about 45
/// KiB) and, on `ofi:tcp`, its own libfabric endpoint (tens of MiB).
pub const MAX_RDMA_UNAUTHENTICATED: u64 = 10_000;

/// Most acknowledgements a write may wait for: more replicas than any shard has.
pub const REPL_SYNC_ACKS_MAX: u64 = 64;
/// Longest wait of a synchronous write: a minute covers any failover; longer only holds
/// clients on a shard that lost its replicas.
pub const REPL_SYNC_TIMEOUT_MS_MAX: u64 = 60_000;

/// The admin gRPC API (`admin-*`, ours: Redis has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminConfig {
    /// `admin-port`: 0 (the default) serves no admin API.
    pub port: u16,
    /// `admin-bind`: the addresses it listens on, read as `bind` entries.
    pub bind: Vec<String>,
    /// `admin-token`: callers send `authorization: Bearer <token>`; empty accepts any
    /// caller, which only a loopback `admin-bind` allows.
    pub token: String,
    /// `admin-tls-cert-file` and `admin-tls-key-file`: both set, the admin API speaks only
    /// TLS (gRPC over HTTP/2 with ALPN `h2`); both empty, plain HTTP/2.
    pub tls_cert_file: String,
    pub tls_key_file: String,
    /// `admin-tls-ca-cert-file`: set, callers must present a certificate this CA signed
    /// (mutual TLS), checked before the token.
    pub tls_ca_cert_file: String,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            port: 0,
            bind: vec!["127.0.0.1".into()],
            token: String::new(),
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
            tls_ca_cert_file: String::new(),
        }
    }
}

/// Longest `admin-token`: a key, not a document.
pub const ADMIN_TOKEN_MAX: usize = 1024;

/// Prometheus metrics over HTTP (`metrics-*`, ours: Redis has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `metrics-port`: 0 (the default) serves no metrics.
    pub port: u16,
    /// `metrics-bind`: the addresses it listens on, read as `bind` entries.
    pub bind: Vec<String>,
    /// `metrics-token`: scrapers send `Authorization: Bearer <token>`; empty accepts any
    /// caller, which only a loopback `metrics-bind` allows.
    pub token: String,
    /// `metrics-slot-detail`: also one series per slot this node holds keys in (keys,
    /// ops/s); off by default, as it is up to 16384 series per metric.
    pub slot_detail: bool,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            port: 0,
            bind: vec!["127.0.0.1".into()],
            token: String::new(),
            slot_detail: false,
        }
    }
}

impl Config {
    /// Whether an `admin-bind` entry reaches beyond the loopback interface (a wildcard
    /// counts, an unreadable entry too).
    pub fn admin_beyond_loopback(&self) -> bool {
        beyond_loopback(&self.admin.bind)
    }

    /// Whether a `metrics-bind` entry reaches beyond the loopback interface.
    pub fn metrics_beyond_loopback(&self) -> bool {
        beyond_loopback(&self.metrics.bind)
    }
}

/// Whether a bind list reaches beyond loopback (a wildcard counts, an unreadable entry too).
fn beyond_loopback(bind: &[String]) -> bool {
    bind.iter()
        .any(|s| super::bind_addr::parse(s).is_none_or(|b| b.beyond_loopback()))
}

/// Cluster mode settings (`cluster-*`, redis.conf names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `cluster-enabled`: run as a cluster node (fixed at start).
    pub enabled: bool,
    /// `cluster-config-file`: where the node keeps its identity and topology, in `dir`.
    pub config_file: String,
    /// `cluster-node-timeout` in ms. 2000 rather than Redis's 15000: heartbeats on the
    /// fabric are cheap, so failures can be detected sooner.
    pub node_timeout_ms: u64,
    /// `cluster-secret`: the key that authenticates every bus message (HMAC-SHA256). Nodes
    /// of one cluster must share it; a node with another secret cannot join, vote or report.
    pub secret: String,
    /// `cluster-announce-ip`: the client ip this node gives its peers (else learned from the
    /// address a peer reached its bus port at).
    pub announce_ip: String,
    /// `cluster-announce-port` / `cluster-announce-bus-port`: the client and bus ports this
    /// node gives its peers (and so clients' MOVED/ASK) when they differ from the ones it
    /// listens on (NAT, containers); 0: the real ones.
    pub announce_port: u16,
    pub announce_bus_port: u16,
    /// `cluster-require-full-coverage`: an unserved slot puts the whole cluster down.
    pub require_full_coverage: bool,
    /// `cluster-allow-reads-when-down`: a down cluster still answers reads.
    pub allow_reads_when_down: bool,
    /// `cluster-allow-replica-migration` (Redis 7): a primary that an atomic slot migration
    /// empties of its last slot becomes a replica of the node that took it (its replicas
    /// follow that node too); `no` leaves it an empty primary.
    pub allow_replica_migration: bool,
    /// `cluster-migration-debug-hold` (ours, for tests): a migration this node is the
    /// source of holds once its batch is copied, before its write pause, while this is set
    /// (the link keeps streaming writes; the target keeps its copy hidden). Set it back to
    /// `no` and the migration goes on. Never needed in production.
    pub migration_debug_hold: bool,
    /// `cluster-migration-slots-per-batch` (ours): slots a migration moves per batch (one
    /// copy, write pause and commit each). Read when a migration starts.
    pub migration_slots_per_batch: usize,
    /// `cluster-migration-queue-max` (ours): most bytes a migration link holds unsent. The
    /// copy waits above a quarter of it; client writes past it fail the migration.
    pub migration_queue_max: u64,
    /// `cluster-migration-link` (ours): what carries a migration's data to its target.
    /// Read when a batch opens its link.
    pub migration_link: super::migration_link::MigrationLink,
}

/// `cluster-migration-slots-per-batch` by default (docs/atomic-migration.md has the
/// measurements behind it).
pub const MIGRATION_SLOTS_PER_BATCH_DEFAULT: usize = 1024;
/// `cluster-migration-queue-max` by default.
pub const MIGRATION_QUEUE_DEFAULT: u64 = 256 << 20;
/// Most slots `cluster-migration-slots-per-batch` takes: all of them.
pub const MIGRATION_SLOTS_PER_BATCH_MAX: usize = proto::slot::SLOT_COUNT;
/// Bounds of `cluster-migration-queue-max`: below 64 KiB a batch's copy is mostly waits;
/// above 4 GiB one migration could hold a large share of a node's memory.
pub const MIGRATION_QUEUE_MIN: u64 = 64 << 10;
pub const MIGRATION_QUEUE_MAX: u64 = 4 << 30;

/// Longest `cluster-secret`: a key, not a document.
pub const CLUSTER_SECRET_MAX: usize = 1024;

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            enabled: false,
            config_file: "nodes.conf".into(),
            node_timeout_ms: 2000,
            secret: String::new(),
            announce_ip: String::new(),
            announce_port: 0,
            announce_bus_port: 0,
            require_full_coverage: true,
            allow_reads_when_down: false,
            allow_replica_migration: true,
            migration_debug_hold: false,
            migration_slots_per_batch: MIGRATION_SLOTS_PER_BATCH_DEFAULT,
            migration_queue_max: MIGRATION_QUEUE_DEFAULT,
            migration_link: super::migration_link::MigrationLink::Auto,
        }
    }
}

/// `appendfsync`: when the append-only file is fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Before any reply to a write leaves the node (group commit).
    Always,
    /// By a background thread once a second.
    EverySec,
    /// When the OS decides.
    No,
}

impl FsyncPolicy {
    const NAMES: [(FsyncPolicy, &'static str); 3] = [
        (FsyncPolicy::Always, "always"),
        (FsyncPolicy::EverySec, "everysec"),
        (FsyncPolicy::No, "no"),
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(p, _)| *p == self)
            .map(|(_, n)| *n)
            .unwrap_or("everysec")
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(s))
            .map(|(p, _)| *p)
    }
}

/// The append-only file (redis.conf names: `appendonly`, `appendfilename`, `appenddirname`,
/// `appendfsync`, `auto-aof-rewrite-*`, `aof-load-truncated`, `no-appendfsync-on-rewrite`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AofConfig {
    /// `appendonly`: log every write; at start, load from the log instead of the snapshot.
    pub enabled: bool,
    /// `appendfilename`: the prefix of the log's files (fixed at start).
    pub filename: String,
    /// `appenddirname`: the folder in `dir` holding them (fixed at start).
    pub dirname: String,
    pub fsync: FsyncPolicy,
    /// `auto-aof-rewrite-percentage`: rewrite once the log grew by this much over its base
    /// (0: never on its own).
    pub rewrite_percentage: u64,
    /// `auto-aof-rewrite-min-size`: no automatic rewrite below this size.
    pub rewrite_min_size: u64,
    /// `aof-load-truncated`: a record cut short at the very end loads (with a warning).
    pub load_truncated: bool,
    /// `no-appendfsync-on-rewrite`: accepted for compatibility; a rewrite here runs no fsync
    /// of its own that the log's could wait behind until the base is complete.
    pub no_fsync_on_rewrite: bool,
}

impl Default for AofConfig {
    fn default() -> Self {
        AofConfig {
            enabled: false,
            filename: "appendonly.aof".into(),
            dirname: "appendonlydir".into(),
            fsync: FsyncPolicy::EverySec,
            rewrite_percentage: 100,
            rewrite_min_size: 64 << 20,
            load_truncated: true,
            no_fsync_on_rewrite: false,
        }
    }
}

/// A file or folder name given where a path would escape `dir`.
fn plain_name(v: &str, what: &str) -> Result<String, String> {
    if v.is_empty() || v.contains('/') || v == "." || v == ".." {
        return Err(format!("{what} can't be a path, just a {what}"));
    }
    Ok(v.to_string())
}

/// Highest client port in cluster mode: the bus port is the client port + 10000.
pub const CLUSTER_PORT_MAX: u16 = 65535 - 10000;

/// A `save <seconds> <changes>` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaveRule {
    pub seconds: u64,
    pub changes: u64,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub port: u16,
    pub bind: Vec<String>,
    pub protected_mode: bool,
    pub requirepass: Option<String>,
    /// `masterauth` / `masteruser`: what a replica sends in AUTH to a primary that has
    /// `requirepass` (before REPLCONF, as Redis replicas do).
    pub masterauth: Option<String>,
    pub masteruser: Option<String>,
    /// `shutdown-timeout`: seconds a stopping primary waits for its replicas (0: no wait).
    pub shutdown_timeout: u64,
    /// Close idle clients after this many seconds (0: never).
    pub timeout: u64,
    pub maxclients: u64,
    pub io_threads: usize,
    /// Microseconds the single io-thread keeps polling its sockets after a read (0: off).
    pub io_busy_poll_us: u64,
    pub tcp_backlog: u32,
    pub tcp_keepalive: u64,
    pub dir: PathBuf,
    pub dbfilename: String,
    pub save: Vec<SaveRule>,
    pub maxmemory: u64,
    pub maxmemory_policy: EvictionPolicy,
    pub maxmemory_samples: u32,
    /// `lfu-log-factor` and `lfu-decay-time`: the LFU counters' growth and decay.
    pub lfu: crate::db::frequency::LfuParams,
    pub proto_max_bulk_len: u64,
    /// Size past which a sparse HyperLogLog is converted to dense (Redis's default 3000).
    pub hll_sparse_max_bytes: u64,
    /// `notify-keyspace-events`, as [`super::keyspace_events`] bits (0, the default: off).
    pub notify_keyspace_events: u32,
    pub client_query_buffer_limit: u64,
    pub loglevel: String,
    pub logfile: String,
    pub pidfile: String,
    pub hz: u32,
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    /// Keys the CLIENT TRACKING table may hold (0: `node_state::tracking::TABLE_KEYS_CEILING`).
    pub tracking_table_max_keys: u64,
    /// `aclfile`: where ACL SAVE writes users and ACL LOAD (and the start) reads them;
    /// empty: no file.
    pub aclfile: String,
    /// `acllog-max-len`: ACL LOG entries kept.
    pub acllog_max_len: u64,
    /// `acl-pubsub-default`: whether a new user starts with every channel
    /// (`allchannels`) or none (`resetchannels`, Redis 7.0's default).
    pub acl_pubsub_all_channels: bool,
    /// `databases`: how many numbered databases SELECT reaches in standalone mode (cluster
    /// mode has database 0 only). Fixed at start, as in Redis.
    pub databases: u32,
    pub rdbchecksum: bool,
    /// `repl-backlog-size`: bytes of the replication stream kept for partial resyncs.
    pub repl_backlog_size: u64,
    /// `repl-backlog-eager` (ours): create the backlog at start instead of at the first
    /// replica's attach, so that the stream is recorded from the first write.
    pub repl_backlog_eager: bool,
    /// `min-replicas-to-write` / `min-replicas-max-lag` (0 disables the check).
    pub min_replicas_to_write: u64,
    pub min_replicas_max_lag: u64,
    /// `repl-sync-acks` (ours): a write is answered only once this many replicas have
    /// acknowledged its offset (0, the default: answered at once, as Redis). An answered write
    /// then survives the loss of its primary: failover promotes the replica that holds most.
    /// In cluster mode replicas the cluster holds FAIL are not waited for (server/sync_acks.rs).
    pub repl_sync_acks: u64,
    /// `repl-sync-timeout` (ours, ms): how long such a write waits for its acknowledgements
    /// before it is answered `-NOREPLICAS` (it was applied here and may survive or not).
    pub repl_sync_timeout_ms: u64,
    /// `repl-fabric-port` (ours): where a primary accepts replicas' replication links on the
    /// fabric (`fabric-provider`); 0 (the default) accepts none, and REPLICAOF against this
    /// node fails its handshake, except in cluster mode, where 0 listens on a free port.
    pub repl_fabric_port: u16,
    /// `repl-ring-size` (ours): the data bytes of the ring a replica registers for its
    /// primary's WRITEs.
    pub repl_ring_size: u64,
    /// `repl-timeout` (seconds, Redis's name and default 60): a replica that hears nothing from
    /// its primary (no record, no ping) for this long drops the link and reconnects; a primary
    /// drops a replica that acknowledges nothing shipped to it for this long.
    pub repl_timeout_secs: u64,
    /// `replicaof <host> <port>`: start as a replica of that primary ("" when none).
    pub replicaof: String,
    /// Client traffic over the fabric (`rdma-*`, `fabric-provider`).
    pub fabric: FabricConfig,
    pub cluster: ClusterConfig,
    /// The admin gRPC API (`admin-*`).
    pub admin: AdminConfig,
    pub metrics: MetricsConfig,
    /// The TLS listener for clients (`tls-*`).
    pub tls: TlsConfig,
    pub aof: AofConfig,
    /// `repl-ping-replica-period`: accepted, no effect (see its entry in PARAMS).
    pub repl_ping_replica_period: u64,
    /// `busy-reply-threshold` (`lua-time-limit`), ms: how long a script runs before other
    /// clients are answered BUSY (and SCRIPT KILL may stop it).
    pub busy_reply_threshold: u64,
    /// `replica-serve-stale-data`: a replica whose link to its primary is down still answers
    /// (yes, the default) or refuses all but the commands flagged `stale` with MASTERDOWN.
    pub replica_serve_stale_data: bool,
    /// Redis's encoding thresholds, kept for CONFIG GET/SET (see `encodings.rs`).
    pub encodings: super::encodings::EncodingLimits,
    pub latency: super::latency::LatencyConfig,
    /// The file this configuration came from (for CONFIG REWRITE).
    pub file: Option<PathBuf>,
}

/// Defaults follow redis-server's, except `io-threads` which defaults to min(cores/2, 8) and
/// `bind`, which is the loopback addresses (as the redis.conf Redis ships says, not as a
/// redis-server without a config file does): a node shares its host with other users' jobs,
/// so nothing listens beyond it unless asked.
impl Default for Config {
    fn default() -> Self {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Config {
            port: 6379,
            bind: vec!["127.0.0.1".into(), "-::1".into()],
            protected_mode: true,
            requirepass: None,
            masterauth: None,
            masteruser: None,
            shutdown_timeout: 10,
            timeout: 0,
            maxclients: 10000,
            io_threads: (cores / 2).clamp(1, 8),
            io_busy_poll_us: DEFAULT_BUSY_POLL_US,
            tcp_backlog: 511,
            tcp_keepalive: 300,
            dir: PathBuf::from("."),
            dbfilename: "dump.snap".into(),
            save: vec![
                SaveRule {
                    seconds: 3600,
                    changes: 1,
                },
                SaveRule {
                    seconds: 300,
                    changes: 100,
                },
                SaveRule {
                    seconds: 60,
                    changes: 10000,
                },
            ],
            maxmemory: 0,
            maxmemory_policy: EvictionPolicy::NoEviction,
            maxmemory_samples: 5,
            lfu: Default::default(),
            proto_max_bulk_len: DEFAULT_MAX_BULK_LEN as u64,
            hll_sparse_max_bytes: 3000,
            notify_keyspace_events: 0,
            client_query_buffer_limit: 1 << 30,
            loglevel: "notice".into(),
            logfile: String::new(),
            pidfile: String::new(),
            hz: 10,
            slowlog_log_slower_than: 10000,
            slowlog_max_len: 128,
            tracking_table_max_keys: 1_000_000,
            aclfile: String::new(),
            acllog_max_len: 128,
            acl_pubsub_all_channels: false,
            databases: 16,
            rdbchecksum: true,
            repl_backlog_size: REPL_BACKLOG_SIZE_DEFAULT as u64,
            repl_backlog_eager: false,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            repl_sync_acks: 0,
            repl_sync_timeout_ms: 5000,
            repl_fabric_port: 0,
            repl_ring_size: REPL_RING_SIZE_DEFAULT,
            repl_timeout_secs: REPL_TIMEOUT_DEFAULT_SECS,
            replicaof: String::new(),
            fabric: FabricConfig::default(),
            cluster: ClusterConfig::default(),
            admin: AdminConfig::default(),
            metrics: MetricsConfig::default(),
            tls: TlsConfig::default(),
            aof: AofConfig::default(),
            encodings: super::encodings::EncodingLimits::default(),
            repl_ping_replica_period: 10,
            busy_reply_threshold: 5000,
            replica_serve_stale_data: true,
            latency: super::latency::LatencyConfig::default(),
            file: None,
        }
    }
}

/// Most bytes one client may have buffered for an incomplete command. The parser keeps u32
/// offsets, so this cannot exceed 4 GiB; Redis's default is 1 GiB.
pub const MAX_QUERY_BUFFER_LIMIT: u64 = u32::MAX as u64;
/// Most io-threads: more buy nothing on the machines this runs on and cost memory.
pub const MAX_IO_THREADS: usize = 128;
/// See `server::busy_poll`: long enough to bridge the gap between the requests of clients
/// that keep a server busy, short enough that a lone request costs little CPU after it.
pub const DEFAULT_BUSY_POLL_US: u64 = 50;
/// Smallest `repl-backlog-size`: Redis's `CONFIG_REPL_BACKLOG_MIN_SIZE` (16 KiB).
pub const REPL_BACKLOG_SIZE_MIN: u64 = 16 * 1024;
/// `repl-ring-size`: 1 MiB holds a few thousand typical commands in flight per replica.
pub const REPL_RING_SIZE_DEFAULT: u64 = 1 << 20;
/// `repl-timeout` default, as Redis.
pub const REPL_TIMEOUT_DEFAULT_SECS: u64 = 60;
/// Largest `repl-timeout`: a day; beyond it a dead primary would never be noticed.
pub const REPL_TIMEOUT_MAX_SECS: u64 = 86_400;
/// Smallest ring: a record must fit a useful share of a command.
pub const REPL_RING_SIZE_MIN: u64 = 64 * 1024;
/// Largest ring: registered memory per replica is pinned.
pub const REPL_RING_SIZE_MAX: u64 = 1 << 30;
/// Most clients a node accepts; each costs at least a socket and two buffers.
pub const MAX_MAXCLIENTS: u64 = 1_000_000;

type Getter = fn(&Config) -> String;
type Setter = fn(&mut Config, &str) -> Result<(), String>;

pub struct Param {
    pub name: &'static str,
    pub get: Getter,
    pub set: Setter,
    /// Whether CONFIG SET may change it on a running node.
    pub runtime: bool,
}

fn num<T>(v: &str, min: T, max: T) -> Result<T, String>
where
    T: TryFrom<i128> + TryInto<i128> + std::fmt::Display + Copy,
{
    let n: i128 = v
        .trim()
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    let (lo, hi): (i128, i128) = (
        min.try_into().unwrap_or(i128::MIN),
        max.try_into().unwrap_or(i128::MAX),
    );
    if n < lo || n > hi {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    T::try_from(n).map_err(|_| format!("argument must be between {min} and {max} inclusive"))
}

fn boolean(v: &str) -> Result<bool, String> {
    parse_bool(v).ok_or_else(|| "argument must be 'yes' or 'no'".to_string())
}

fn memory(v: &str, max: u64) -> Result<u64, String> {
    let n = parse_memory(v).ok_or_else(|| "argument must be a memory value".to_string())?;
    if n > max {
        return Err(format!(
            "argument must be a memory value of at most {max} bytes"
        ));
    }
    Ok(n)
}

fn save_rules(v: &str) -> Result<Vec<SaveRule>, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.is_empty() || (words.len() == 1 && words[0].is_empty()) {
        return Ok(Vec::new());
    }
    if !words.len().is_multiple_of(2) {
        return Err("Invalid save parameters".into());
    }
    words
        .chunks(2)
        .map(|c| match (c[0].parse::<u64>(), c[1].parse::<u64>()) {
            (Ok(seconds), Ok(changes)) => Ok(SaveRule { seconds, changes }),
            _ => Err("Invalid save parameters".into()),
        })
        .collect()
}

macro_rules! param {
    ($name:literal, $runtime:expr, |$c:ident| $get:expr, |$cs:ident, $v:ident| $set:expr) => {
        Param {
            name: $name,
            runtime: $runtime,
            get: |$c: &Config| $get,
            set: |$cs: &mut Config, $v: &str| $set,
        }
    };
}

pub static PARAMS: &[Param] = &[
    param!("port", false, |c| c.port.to_string(), |c, v| {
        c.port = num(v, 0, 65535)?;
        Ok(())
    }),
    param!("bind", false, |c| c.bind.join(" "), |c, v| {
        c.bind = v.split_whitespace().map(String::from).collect();
        if c.bind.is_empty() {
            return Err("at least one bind address is needed".into());
        }
        Ok(())
    }),
    param!("aclfile", false, |c| c.aclfile.clone(), |c, v| {
        c.aclfile = v.to_string();
        Ok(())
    }),
    param!(
        "acllog-max-len",
        true,
        |c| c.acllog_max_len.to_string(),
        |c, v| {
            c.acllog_max_len = num(v, 0, 1_000_000)?;
            Ok(())
        }
    ),
    param!(
        "acl-pubsub-default",
        true,
        |c| if c.acl_pubsub_all_channels {
            "allchannels".into()
        } else {
            "resetchannels".into()
        },
        |c, v| {
            c.acl_pubsub_all_channels = match v.to_ascii_lowercase().as_str() {
                "allchannels" => true,
                "resetchannels" => false,
                _ => return Err("argument must be one of 'allchannels' or 'resetchannels'".into()),
            };
            Ok(())
        }
    ),
    param!(
        "protected-mode",
        true,
        |c| format_bool(c.protected_mode),
        |c, v| {
            c.protected_mode = boolean(v)?;
            Ok(())
        }
    ),
    param!(
        "requirepass",
        true,
        |c| c.requirepass.clone().unwrap_or_default(),
        |c, v| {
            c.requirepass = if v.is_empty() {
                None
            } else {
                Some(v.to_string())
            };
            Ok(())
        }
    ),
    param!(
        "masterauth",
        true,
        |c| c.masterauth.clone().unwrap_or_default(),
        |c, v| {
            c.masterauth = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        }
    ),
    param!(
        "masteruser",
        true,
        |c| c.masteruser.clone().unwrap_or_default(),
        |c, v| {
            c.masteruser = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        }
    ),
    param!(
        "shutdown-timeout",
        true,
        |c| c.shutdown_timeout.to_string(),
        |c, v| {
            c.shutdown_timeout = num(v, 0, i32::MAX as u64)?;
            Ok(())
        }
    ),
    param!("timeout", true, |c| c.timeout.to_string(), |c, v| {
        c.timeout = num(v, 0, i32::MAX as u64)?;
        Ok(())
    }),
    param!("maxclients", true, |c| c.maxclients.to_string(), |c, v| {
        c.maxclients = num(v, 1, MAX_MAXCLIENTS)?;
        Ok(())
    }),
    param!("io-threads", false, |c| c.io_threads.to_string(), |c, v| {
        c.io_threads = num(v, 1, MAX_IO_THREADS)?;
        Ok(())
    }),
    param!(
        "io-busy-poll-us",
        true,
        |c| c.io_busy_poll_us.to_string(),
        |c, v| {
            c.io_busy_poll_us = num(v, 0, IO_BUSY_POLL_US_MAX)?;
            Ok(())
        }
    ),
    param!(
        "tcp-backlog",
        false,
        |c| c.tcp_backlog.to_string(),
        |c, v| {
            c.tcp_backlog = num(v, 0, 65535)?;
            Ok(())
        }
    ),
    param!(
        "tcp-keepalive",
        true,
        |c| c.tcp_keepalive.to_string(),
        |c, v| {
            c.tcp_keepalive = num(v, 0, i32::MAX as u64)?;
            Ok(())
        }
    ),
    param!("dir", true, |c| c.dir.display().to_string(), |c, v| {
        let p = PathBuf::from(v);
        if !p.is_dir() {
            return Err(format!("No such directory: {v}"));
        }
        c.dir = p;
        Ok(())
    }),
    param!("dbfilename", true, |c| c.dbfilename.clone(), |c, v| {
        if v.is_empty() || v.contains('/') {
            return Err("dbfilename can't be a path, just a filename".into());
        }
        c.dbfilename = v.to_string();
        Ok(())
    }),
    param!(
        "save",
        true,
        |c| c
            .save
            .iter()
            .map(|r| format!("{} {}", r.seconds, r.changes))
            .collect::<Vec<_>>()
            .join(" "),
        |c, v| {
            c.save = save_rules(v)?;
            Ok(())
        }
    ),
    param!("maxmemory", true, |c| c.maxmemory.to_string(), |c, v| {
        c.maxmemory = memory(v, u64::MAX)?;
        Ok(())
    }),
    param!(
        "maxmemory-policy",
        true,
        |c| c.maxmemory_policy.name().to_string(),
        |c, v| {
            c.maxmemory_policy =
                EvictionPolicy::parse(v).ok_or_else(EvictionPolicy::parse_error)?;
            Ok(())
        }
    ),
    param!(
        "maxmemory-samples",
        true,
        |c| c.maxmemory_samples.to_string(),
        |c, v| {
            c.maxmemory_samples = num(v, 1, 64)?;
            Ok(())
        }
    ),
    param!(
        "lfu-log-factor",
        true,
        |c| c.lfu.log_factor.to_string(),
        |c, v| {
            c.lfu.log_factor = num(v, 0, i32::MAX as u32)?;
            Ok(())
        }
    ),
    param!(
        "lfu-decay-time",
        true,
        |c| c.lfu.decay_minutes.to_string(),
        |c, v| {
            c.lfu.decay_minutes = num(v, 0, i32::MAX as u32)?;
            Ok(())
        }
    ),
    param!(
        "hll-sparse-max-bytes",
        true,
        |c| c.hll_sparse_max_bytes.to_string(),
        |c, v| {
            c.hll_sparse_max_bytes = memory(v, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "notify-keyspace-events",
        true,
        |c| super::keyspace_events::format(c.notify_keyspace_events),
        |c, v| {
            c.notify_keyspace_events = super::keyspace_events::parse(v)
                .ok_or_else(|| super::keyspace_events::INVALID_CLASS.to_string())?;
            Ok(())
        }
    ),
    param!(
        "proto-max-bulk-len",
        true,
        |c| c.proto_max_bulk_len.to_string(),
        |c, v| {
            c.proto_max_bulk_len = memory(v, 1 << 32)?.max(1024 * 1024);
            Ok(())
        }
    ),
    param!(
        "client-query-buffer-limit",
        true,
        |c| c.client_query_buffer_limit.to_string(),
        |c, v| {
            c.client_query_buffer_limit = memory(v, MAX_QUERY_BUFFER_LIMIT)?.max(1024 * 1024);
            Ok(())
        }
    ),
    param!("loglevel", true, |c| c.loglevel.clone(), |c, v| {
        let v = v.to_ascii_lowercase();
        if !["debug", "verbose", "notice", "warning", "nothing"].contains(&v.as_str()) {
            return Err("argument(s) must be one of the following: debug, verbose, notice, warning, nothing".into());
        }
        c.loglevel = v;
        Ok(())
    }),
    param!("logfile", false, |c| c.logfile.clone(), |c, v| {
        c.logfile = v.to_string();
        Ok(())
    }),
    param!("pidfile", false, |c| c.pidfile.clone(), |c, v| {
        c.pidfile = v.to_string();
        Ok(())
    }),
    param!("hz", true, |c| c.hz.to_string(), |c, v| {
        c.hz = num(v, 1, 500)?;
        Ok(())
    }),
    param!(
        "slowlog-log-slower-than",
        true,
        |c| c.slowlog_log_slower_than.to_string(),
        |c, v| {
            c.slowlog_log_slower_than = num(v, -1, i64::MAX)?;
            Ok(())
        }
    ),
    param!(
        "slowlog-max-len",
        true,
        |c| c.slowlog_max_len.to_string(),
        |c, v| {
            c.slowlog_max_len = num(v, 0, 1_000_000)?;
            Ok(())
        }
    ),
    param!(
        "tracking-table-max-keys",
        true,
        |c| c.tracking_table_max_keys.to_string(),
        |c, v| {
            c.tracking_table_max_keys = num(v, 0, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!("databases", false, |c| c.databases.to_string(), |c, v| {
        c.databases = num(v, 1, crate::db::databases::MAX_DATABASES as u32)?;
        Ok(())
    }),
    param!(
        "rdbchecksum",
        true,
        |c| format_bool(c.rdbchecksum),
        |c, v| {
            c.rdbchecksum = boolean(v)?;
            Ok(())
        }
    ),
    param!("admin-port", false, |c| c.admin.port.to_string(), |c, v| {
        c.admin.port = num(v, 0, 65535)?;
        Ok(())
    }),
    param!("admin-bind", false, |c| c.admin.bind.join(" "), |c, v| {
        let bind: Vec<String> = v.split_whitespace().map(String::from).collect();
        if bind.is_empty() {
            return Err("at least one admin-bind address is needed".into());
        }
        if let Err(bad) = super::bind_addr::parse_all(&bind) {
            return Err(format!("admin-bind '{bad}' is not an address"));
        }
        c.admin.bind = bind;
        Ok(())
    }),
    param!(
        "admin-tls-cert-file",
        false,
        |c| c.admin.tls_cert_file.clone(),
        |c, v| {
            c.admin.tls_cert_file = v.to_string();
            Ok(())
        }
    ),
    param!(
        "admin-tls-key-file",
        false,
        |c| c.admin.tls_key_file.clone(),
        |c, v| {
            c.admin.tls_key_file = v.to_string();
            Ok(())
        }
    ),
    param!(
        "admin-tls-ca-cert-file",
        false,
        |c| c.admin.tls_ca_cert_file.clone(),
        |c, v| {
            c.admin.tls_ca_cert_file = v.to_string();
            Ok(())
        }
    ),
    // Not changed at run time: emptying it would open a non-loopback admin port to anyone.
    param!("admin-token", false, |c| c.admin.token.clone(), |c, v| {
        if v.len() > ADMIN_TOKEN_MAX {
            return Err(format!(
                "admin-token is longer than {ADMIN_TOKEN_MAX} bytes"
            ));
        }
        c.admin.token = v.to_string();
        Ok(())
    }),
    param!(
        "metrics-port",
        false,
        |c| c.metrics.port.to_string(),
        |c, v| {
            c.metrics.port = num(v, 0, 65535)?;
            Ok(())
        }
    ),
    param!(
        "metrics-bind",
        false,
        |c| c.metrics.bind.join(" "),
        |c, v| {
            let bind: Vec<String> = v.split_whitespace().map(String::from).collect();
            if bind.is_empty() {
                return Err("at least one metrics-bind address is needed".into());
            }
            if let Err(bad) = super::bind_addr::parse_all(&bind) {
                return Err(format!("metrics-bind '{bad}' is not an address"));
            }
            c.metrics.bind = bind;
            Ok(())
        }
    ),
    // Not changed at run time, as admin-token.
    param!(
        "metrics-token",
        false,
        |c| c.metrics.token.clone(),
        |c, v| {
            if v.len() > ADMIN_TOKEN_MAX {
                return Err(format!(
                    "metrics-token is longer than {ADMIN_TOKEN_MAX} bytes"
                ));
            }
            c.metrics.token = v.to_string();
            Ok(())
        }
    ),
    param!(
        "metrics-slot-detail",
        true,
        |c| format_bool(c.metrics.slot_detail),
        |c, v| {
            c.metrics.slot_detail = boolean(v)?;
            Ok(())
        }
    ),
    param!("rdma-port", false, |c| c.fabric.port.to_string(), |c, v| {
        c.fabric.port = num(v, 0, 65535)?;
        Ok(())
    }),
    // Empty: the fabric listeners, the replication listener and the bus endpoint follow
    // `bind`.
    param!("rdma-bind", false, |c| c.fabric.bind.join(" "), |c, v| {
        c.fabric.bind = v.split_whitespace().map(String::from).collect();
        Ok(())
    }),
    param!(
        "rdma-rx-size",
        false,
        |c| c.fabric.rx_size.to_string(),
        |c, v| {
            c.fabric.rx_size = memory(v, RDMA_RX_SIZE_MAX)?;
            if c.fabric.rx_size < RDMA_RX_SIZE_MIN {
                return Err(format!(
                    "argument must be a memory value between {RDMA_RX_SIZE_MIN} and {RDMA_RX_SIZE_MAX}"
                ));
            }
            Ok(())
        }
    ),
    param!(
        "fabric-provider",
        false,
        |c| c.fabric.provider.name().to_string(),
        |c, v| {
            c.fabric.provider = FabricProvider::parse(v).ok_or_else(|| {
                "argument(s) must be one of the following: auto, verbs, ofi:tcp, ofi:shm, ofi:efa"
                    .to_string()
            })?;
            Ok(())
        }
    ),
    param!(
        "rdma-max-inline",
        false,
        |c| c.fabric.max_inline.to_string(),
        |c, v| {
            c.fabric.max_inline = num(v, 0, bus::config::MAX_INLINE_LIMIT as u64)?;
            Ok(())
        }
    ),
    param!(
        "rdma-send-wr",
        false,
        |c| c.fabric.send_wr.to_string(),
        |c, v| {
            // A client's Stream keeps this many sends in flight: less would refuse its posts.
            let least = bus::stream::SEND_WR_NEEDED as u64;
            c.fabric.send_wr = num(v, least, bus::config::WR_MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "rdma-recv-wr",
        false,
        |c| c.fabric.recv_wr.to_string(),
        |c, v| {
            // A client's Stream posts this many receives: less would fail every connection.
            let least = bus::stream::RECV_WR_NEEDED as u64;
            c.fabric.recv_wr = num(v, least, bus::config::WR_MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "rdma-cq-size",
        false,
        |c| c.fabric.cq_size.to_string(),
        |c, v| {
            c.fabric.cq_size = num(v, 0, bus::config::CQ_MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "rdma-srq-depth",
        false,
        |c| c.fabric.srq_depth.to_string(),
        |c, v| {
            let depth = num(v, 0, bus::config::WR_MAX as u64)?;
            if depth != 0 && depth < bus::config::WR_MIN as u64 {
                return Err(format!(
                    "must be 0 (a receive queue per connection) or {}..={}",
                    bus::config::WR_MIN,
                    bus::config::WR_MAX
                ));
            }
            c.fabric.srq_depth = depth;
            Ok(())
        }
    ),
    param!(
        "rdma-poll-threads",
        false,
        |c| c.fabric.poll_threads.to_string(),
        |c, v| {
            c.fabric.poll_threads = num(v, 1, MAX_RDMA_POLL_THREADS)?;
            Ok(())
        }
    ),
    param!(
        "rdma-unauthenticated-max",
        true,
        |c| c.fabric.unauthenticated_max.to_string(),
        |c, v| {
            c.fabric.unauthenticated_max = num(v, 1, MAX_RDMA_UNAUTHENTICATED)?;
            Ok(())
        }
    ),
    param!(
        "rdma-busy-poll-us",
        true,
        |c| c.fabric.busy_poll_us.to_string(),
        |c, v| {
            c.fabric.busy_poll_us = num(v, 0, MAX_BUSY_POLL_US)?;
            Ok(())
        }
    ),
    param!(
        "cluster-enabled",
        false,
        |c| format_bool(c.cluster.enabled),
        |c, v| {
            c.cluster.enabled = boolean(v)?;
            Ok(())
        }
    ),
    param!(
        "cluster-config-file",
        false,
        |c| c.cluster.config_file.clone(),
        |c, v| {
            if v.is_empty() {
                return Err("cluster-config-file can't be empty".into());
            }
            c.cluster.config_file = v.to_string();
            Ok(())
        }
    ),
    // Fixed at start (Redis lets CONFIG SET change it): the gossip core's failure detection
    // and the serving lease are set up with it once, and the lease's safety rests on every
    // node of a cluster using the same value.
    param!(
        "cluster-node-timeout",
        false,
        |c| c.cluster.node_timeout_ms.to_string(),
        |c, v| {
            c.cluster.node_timeout_ms = num(v, 0, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "cluster-require-full-coverage",
        true,
        |c| format_bool(c.cluster.require_full_coverage),
        |c, v| {
            c.cluster.require_full_coverage = boolean(v)?;
            Ok(())
        }
    ),
    param!(
        "cluster-allow-reads-when-down",
        true,
        |c| format_bool(c.cluster.allow_reads_when_down),
        |c, v| {
            c.cluster.allow_reads_when_down = boolean(v)?;
            Ok(())
        }
    ),
    param!(
        "cluster-allow-replica-migration",
        true,
        |c| format_bool(c.cluster.allow_replica_migration),
        |c, v| {
            c.cluster.allow_replica_migration = boolean(v)?;
            Ok(())
        }
    ),
    param!(
        "cluster-migration-debug-hold",
        true,
        |c| format_bool(c.cluster.migration_debug_hold),
        |c, v| {
            c.cluster.migration_debug_hold = boolean(v)?;
            Ok(())
        }
    ),
    param!(
        "cluster-migration-slots-per-batch",
        true,
        |c| c.cluster.migration_slots_per_batch.to_string(),
        |c, v| {
            c.cluster.migration_slots_per_batch = num(v, 1, MIGRATION_SLOTS_PER_BATCH_MAX)?;
            Ok(())
        }
    ),
    param!(
        "cluster-migration-queue-max",
        true,
        |c| c.cluster.migration_queue_max.to_string(),
        |c, v| {
            c.cluster.migration_queue_max =
                memory(v, MIGRATION_QUEUE_MAX)?.max(MIGRATION_QUEUE_MIN);
            Ok(())
        }
    ),
    param!(
        "cluster-migration-link",
        true,
        |c| c.cluster.migration_link.name().to_string(),
        |c, v| {
            c.cluster.migration_link =
                super::migration_link::MigrationLink::parse(v).ok_or_else(|| {
                    "argument(s) must be one of the following: auto, fabric, tcp".to_string()
                })?;
            Ok(())
        }
    ),
    param!(
        "cluster-secret",
        false,
        |c| c.cluster.secret.clone(),
        |c, v| {
            if v.len() > CLUSTER_SECRET_MAX {
                return Err(format!(
                    "cluster-secret is longer than {CLUSTER_SECRET_MAX} bytes"
                ));
            }
            c.cluster.secret = v.to_string();
            Ok(())
        }
    ),
    param!(
        "cluster-announce-ip",
        false,
        |c| c.cluster.announce_ip.clone(),
        |c, v| {
            if !v.is_empty() && v.parse::<std::net::IpAddr>().is_err() {
                return Err(format!("cluster-announce-ip '{v}' is not an ip address"));
            }
            c.cluster.announce_ip = v.to_string();
            Ok(())
        }
    ),
    param!(
        "cluster-announce-port",
        false,
        |c| c.cluster.announce_port.to_string(),
        |c, v| {
            c.cluster.announce_port = num(v, 0, 65535)?;
            Ok(())
        }
    ),
    param!(
        "cluster-announce-bus-port",
        false,
        |c| c.cluster.announce_bus_port.to_string(),
        |c, v| {
            c.cluster.announce_bus_port = num(v, 0, 65535)?;
            Ok(())
        }
    ),
    param!(
        "repl-backlog-size",
        true,
        |c| c.repl_backlog_size.to_string(),
        |c, v| {
            // Redis raises anything smaller to its 16 KiB minimum rather than refusing it.
            c.repl_backlog_size =
                memory(v, REPL_BACKLOG_SIZE_MAX as u64)?.max(REPL_BACKLOG_SIZE_MIN);
            Ok(())
        }
    ),
    param!(
        "repl-fabric-port",
        false,
        |c| c.repl_fabric_port.to_string(),
        |c, v| {
            c.repl_fabric_port = num::<u16>(v, 0, 65535)?;
            Ok(())
        }
    ),
    param!(
        "repl-ring-size",
        true,
        |c| c.repl_ring_size.to_string(),
        |c, v| {
            // The ring's data area must be a multiple of its record alignment.
            let bytes = memory(v, REPL_RING_SIZE_MAX)?.max(REPL_RING_SIZE_MIN);
            c.repl_ring_size = bytes / 64 * 64;
            Ok(())
        }
    ),
    param!(
        "repl-timeout",
        true,
        |c| c.repl_timeout_secs.to_string(),
        |c, v| {
            c.repl_timeout_secs = num::<u64>(v, 1, REPL_TIMEOUT_MAX_SECS)?;
            Ok(())
        }
    ),
    param!("replicaof", false, |c| c.replicaof.clone(), |c, v| {
        let v = v.trim();
        if !v.is_empty() {
            let mut parts = v.split_whitespace();
            let (Some(_host), Some(port), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(format!("replicaof '{v}' is not '<host> <port>'"));
            };
            num::<u16>(port, 1, 65535)?;
        }
        c.replicaof = v.to_string();
        Ok(())
    }),
    param!(
        "repl-backlog-eager",
        true,
        |c| format_bool(c.repl_backlog_eager),
        |c, v| {
            c.repl_backlog_eager = boolean(v)?;
            Ok(())
        }
    ),
    param!(
        "min-replicas-to-write",
        true,
        |c| c.min_replicas_to_write.to_string(),
        |c, v| {
            c.min_replicas_to_write = num(v, 0, i32::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "repl-sync-acks",
        true,
        |c| c.repl_sync_acks.to_string(),
        |c, v| {
            c.repl_sync_acks = num(v, 0, REPL_SYNC_ACKS_MAX)?;
            Ok(())
        }
    ),
    param!(
        "repl-sync-timeout",
        true,
        |c| c.repl_sync_timeout_ms.to_string(),
        |c, v| {
            c.repl_sync_timeout_ms = num(v, 1, REPL_SYNC_TIMEOUT_MS_MAX)?;
            Ok(())
        }
    ),
    param!(
        "min-replicas-max-lag",
        true,
        |c| c.min_replicas_max_lag.to_string(),
        |c, v| {
            c.min_replicas_max_lag = num(v, 0, i32::MAX as u64)?;
            Ok(())
        }
    ),
    // TLS for clients. All fixed at start: the certificate, key and CA are read once, when
    // the TLS listener is set up (Redis reloads them on CONFIG SET; this node does not).
    param!("tls-port", false, |c| c.tls.port.to_string(), |c, v| {
        c.tls.port = num(v, 0, 65535)?;
        Ok(())
    }),
    param!(
        "tls-cert-file",
        false,
        |c| c.tls.cert_file.clone(),
        |c, v| {
            c.tls.cert_file = v.to_string();
            Ok(())
        }
    ),
    param!("tls-key-file", false, |c| c.tls.key_file.clone(), |c, v| {
        c.tls.key_file = v.to_string();
        Ok(())
    }),
    param!("tls-key-file-pass", false, |_c| String::new(), |_c, v| {
        if !v.is_empty() {
            return Err("tls-key-file-pass is not supported: encrypted private keys cannot be read; give tls-key-file an unencrypted key (openssl pkey -in enc.key -out plain.key)".into());
        }
        Ok(())
    }),
    param!(
        "tls-ca-cert-file",
        false,
        |c| c.tls.ca_cert_file.clone(),
        |c, v| {
            c.tls.ca_cert_file = v.to_string();
            Ok(())
        }
    ),
    param!(
        "tls-ca-cert-dir",
        false,
        |c| c.tls.ca_cert_dir.clone(),
        |c, v| {
            c.tls.ca_cert_dir = v.to_string();
            Ok(())
        }
    ),
    param!(
        "tls-auth-clients",
        false,
        |c| c.tls.auth_clients.name().to_string(),
        |c, v| {
            c.tls.auth_clients = TlsAuthClients::parse(v).ok_or_else(|| {
                "argument(s) must be one of the following: no, yes, optional".to_string()
            })?;
            Ok(())
        }
    ),
    param!(
        "tls-protocols",
        false,
        |c| c
            .tls
            .protocols
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(" "),
        |c, v| {
            c.tls.protocols = parse_protocols(v)?;
            Ok(())
        }
    ),
    param!(
        "tls-ciphersuites",
        false,
        |c| c
            .tls
            .ciphersuites
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(":"),
        |c, v| {
            c.tls.ciphersuites = parse_tls13_suites(v)?;
            Ok(())
        }
    ),
    param!("tls-ciphers", false, |c| c.tls.ciphers.clone(), |c, v| {
        c.tls.ciphers = v.to_string();
        Ok(())
    }),
    param!(
        "tls-prefer-server-ciphers",
        false,
        |c| format_bool(c.tls.prefer_server_ciphers),
        |c, v| {
            c.tls.prefer_server_ciphers = boolean(v)?;
            Ok(())
        }
    ),
    param!("tls-replication", false, |_c| "no".into(), |_c, v| {
        if boolean(v)? {
            return Err(
                "tls-replication is not supported: replication links run on the fabric".into(),
            );
        }
        Ok(())
    }),
    param!("tls-cluster", false, |_c| "no".into(), |_c, v| {
        if boolean(v)? {
            return Err("tls-cluster is not supported: the cluster bus runs on the fabric, its messages authenticated by cluster-secret".into());
        }
        Ok(())
    }),
    param!(
        "appendonly",
        true,
        |c| format_bool(c.aof.enabled),
        |c, v| {
            c.aof.enabled = boolean(v)?;
            Ok(())
        }
    ),
    // Fixed at start, as in Redis: the running log's files keep their names.
    param!(
        "appendfilename",
        false,
        |c| c.aof.filename.clone(),
        |c, v| {
            // The manifest lists the files by names made from it, one word each.
            if !v.bytes().all(|b| b.is_ascii_graphic()) {
                return Err("appendfilename must be printable ASCII without spaces".into());
            }
            c.aof.filename = plain_name(v, "appendfilename")?;
            Ok(())
        }
    ),
    param!("appenddirname", false, |c| c.aof.dirname.clone(), |c, v| {
        c.aof.dirname = plain_name(v, "appenddirname")?;
        Ok(())
    }),
    param!(
        "appendfsync",
        true,
        |c| c.aof.fsync.name().to_string(),
        |c, v| {
            c.aof.fsync = FsyncPolicy::parse(v).ok_or_else(|| {
                "argument(s) must be one of the following: always, everysec, no".to_string()
            })?;
            Ok(())
        }
    ),
    param!(
        "auto-aof-rewrite-percentage",
        true,
        |c| c.aof.rewrite_percentage.to_string(),
        |c, v| {
            c.aof.rewrite_percentage = num(v, 0, i32::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "auto-aof-rewrite-min-size",
        true,
        |c| c.aof.rewrite_min_size.to_string(),
        |c, v| {
            c.aof.rewrite_min_size = memory(v, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "aof-load-truncated",
        true,
        |c| format_bool(c.aof.load_truncated),
        |c, v| {
            c.aof.load_truncated = boolean(v)?;
            Ok(())
        }
    ),
    param!(
        "no-appendfsync-on-rewrite",
        true,
        |c| format_bool(c.aof.no_fsync_on_rewrite),
        |c, v| {
            c.aof.no_fsync_on_rewrite = boolean(v)?;
            Ok(())
        }
    ),
    param!("daemonize", false, |_c| "no".into(), |_c, v| {
        if boolean(v)? {
            return Err("daemonize yes is not supported: run under a supervisor".into());
        }
        Ok(())
    }),
    // Accepted for Redis's tools and tests, no effect: replicas here are watched through
    // their ring link's acknowledgements, with no PING interval to set.
    param!(
        "repl-ping-replica-period",
        true,
        |c| c.repl_ping_replica_period.to_string(),
        |c, v| {
            c.repl_ping_replica_period = num(v, 1, i32::MAX as u64)?;
            Ok(())
        }
    ),
    // Encoding thresholds: kept and shown, no effect here (see config/encodings.rs).
    param!(
        "hash-max-listpack-entries",
        true,
        |c| c.encodings.hash_max_listpack_entries.to_string(),
        |c, v| {
            c.encodings.hash_max_listpack_entries = num(v, 0, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "hash-max-listpack-value",
        true,
        |c| c.encodings.hash_max_listpack_value.to_string(),
        |c, v| {
            c.encodings.hash_max_listpack_value = num(v, 0, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "list-max-listpack-size",
        true,
        |c| c.encodings.list_max_listpack_size.to_string(),
        |c, v| {
            c.encodings.list_max_listpack_size = num(v, i32::MIN as i64, i32::MAX as i64)?;
            Ok(())
        }
    ),
    param!(
        "replica-serve-stale-data",
        true,
        |c| format_bool(c.replica_serve_stale_data),
        |c, v| {
            c.replica_serve_stale_data = boolean(v)?;
            Ok(())
        }
    ),
    param!(
        "busy-reply-threshold",
        true,
        |c| c.busy_reply_threshold.to_string(),
        |c, v| {
            c.busy_reply_threshold = num(v, 0, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "list-compress-depth",
        true,
        |c| c.encodings.list_compress_depth.to_string(),
        |c, v| {
            c.encodings.list_compress_depth = num(v, 0, i32::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "set-max-intset-entries",
        true,
        |c| c.encodings.set_max_intset_entries.to_string(),
        |c, v| {
            c.encodings.set_max_intset_entries = num(v, 0, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "set-max-listpack-entries",
        true,
        |c| c.encodings.set_max_listpack_entries.to_string(),
        |c, v| {
            c.encodings.set_max_listpack_entries = num(v, 0, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "set-max-listpack-value",
        true,
        |c| c.encodings.set_max_listpack_value.to_string(),
        |c, v| {
            c.encodings.set_max_listpack_value = num(v, 0, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "zset-max-listpack-entries",
        true,
        |c| c.encodings.zset_max_listpack_entries.to_string(),
        |c, v| {
            c.encodings.zset_max_listpack_entries = num(v, 0, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "zset-max-listpack-value",
        true,
        |c| c.encodings.zset_max_listpack_value.to_string(),
        |c, v| {
            c.encodings.zset_max_listpack_value = num(v, 0, i64::MAX as u64)?;
            Ok(())
        }
    ),
    // Stream node limits: these do shape streams (see db/stream.rs).
    param!(
        "stream-node-max-entries",
        true,
        |c| c.encodings.stream_node_max_entries.to_string(),
        |c, v| {
            c.encodings.stream_node_max_entries = num(v, 0, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "stream-node-max-bytes",
        true,
        |c| c.encodings.stream_node_max_bytes.to_string(),
        |c, v| {
            c.encodings.stream_node_max_bytes = memory(v, i64::MAX as u64)?;
            Ok(())
        }
    ),
    param!(
        "latency-tracking",
        true,
        |c| format_bool(c.latency.tracking),
        |c, v| {
            c.latency.tracking = boolean(v)?;
            Ok(())
        }
    ),
    param!(
        "latency-tracking-info-percentiles",
        true,
        |c| super::latency::format_percentiles(&c.latency.info_percentiles),
        |c, v| {
            c.latency.info_percentiles = super::latency::parse_percentiles(v)?;
            Ok(())
        }
    ),
    param!(
        "latency-monitor-threshold",
        true,
        |c| c.latency.monitor_threshold_ms.to_string(),
        |c, v| {
            c.latency.monitor_threshold_ms = num(v, 0, i64::MAX as u64)?;
            Ok(())
        }
    ),
];

/// Old names Redis still accepts for a parameter (`slaveof` for `replicaof`...): CONFIG
/// GET/SET and config files take either.
pub const ALIASES: &[(&str, &str)] = &[
    ("slaveof", "replicaof"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("lua-time-limit", "busy-reply-threshold"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
];

/// The parameter's own name for `name` (itself unless it is an alias).
pub fn canonical_name(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .map_or(name, |(_, canonical)| canonical)
}

pub fn find(name: &str) -> Option<&'static Param> {
    let name = canonical_name(name);
    PARAMS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

impl Config {
    /// Sets one parameter from its text form (config line, flag or CONFIG SET value).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let param = find(name).ok_or_else(|| {
            format!("Unknown option or number of arguments for CONFIG SET - '{name}'")
        })?;
        (param.set)(self, value)
    }

    pub fn get(&self, name: &str) -> Option<String> {
        find(name).map(|p| (p.get)(self))
    }

    /// The addresses fabric endpoints listen on: `rdma-bind`, or `bind` when it is unset.
    pub fn fabric_bind(&self) -> &[String] {
        if self.fabric.bind.is_empty() {
            &self.bind
        } else {
            &self.fabric.bind
        }
    }

    /// The address a node's single-address fabric endpoints (the replication listener, the
    /// bus endpoint) bind: the first `rdma-bind` (or `bind`) entry, skipping optional IPv6
    /// ones (the providers listen on IPv4). None if no entry is an address.
    pub fn fabric_bind_ip(&self) -> Option<std::net::IpAddr> {
        self.fabric_bind()
            .iter()
            .filter_map(|s| super::bind_addr::parse(s))
            .find(|b| !(b.optional && b.ip.is_ipv6()))
            .map(|b| b.ip)
    }

    /// Whether anything of this node listens beyond the loopback interface (a wildcard or
    /// another address in `bind` or `rdma-bind`; an unreadable entry counts too).
    pub fn listens_beyond_loopback(&self) -> bool {
        self.bind
            .iter()
            .chain(self.fabric_bind())
            .any(|s| super::bind_addr::parse(s).is_none_or(|b| b.beyond_loopback()))
    }

    /// The address of the cluster config file.
    pub fn cluster_config_path(&self) -> PathBuf {
        self.dir.join(&self.cluster.config_file)
    }

    /// The folder of the append-only file's parts (`dir/appenddirname`).
    pub fn aof_dir(&self) -> PathBuf {
        self.dir.join(&self.aof.dirname)
    }

    /// The address of the snapshot file.
    pub fn snapshot_path(&self) -> PathBuf {
        self.dir.join(&self.dbfilename)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The append-only file's parameters take Redis's names, defaults and values, and its
    /// file and folder names cannot leave `dir`.
    #[test]
    fn aof_params_parse_and_bound() {
        let mut c = Config::default();
        for (name, default) in [
            ("appendonly", "no"),
            ("appendfilename", "appendonly.aof"),
            ("appenddirname", "appendonlydir"),
            ("appendfsync", "everysec"),
            ("auto-aof-rewrite-percentage", "100"),
            ("auto-aof-rewrite-min-size", "67108864"),
            ("aof-load-truncated", "yes"),
            ("no-appendfsync-on-rewrite", "no"),
        ] {
            assert_eq!(c.get(name).as_deref(), Some(default), "{name}");
        }
        c.set("appendonly", "yes").unwrap();
        c.set("appendfsync", "ALWAYS").unwrap();
        c.set("auto-aof-rewrite-min-size", "1mb").unwrap();
        assert!(c.aof.enabled);
        assert_eq!(c.aof.fsync, FsyncPolicy::Always);
        assert_eq!(c.aof.rewrite_min_size, 1 << 20);
        for (name, bad) in [
            ("appendonly", "maybe"),
            ("appendfsync", "sometimes"),
            ("appendfilename", "../x.aof"),
            ("appendfilename", "my log.aof"),
            ("appenddirname", ".."),
            ("appenddirname", ""),
            ("auto-aof-rewrite-percentage", "-1"),
        ] {
            assert!(c.set(name, bad).is_err(), "{name} {bad} accepted");
        }
    }

    /// The fabric settings take Valkey's names and ranges and refuse values outside them.
    #[test]
    fn fabric_params_parse_and_bound() {
        let mut c = Config::default();
        assert_eq!(c.get("rdma-port").as_deref(), Some("0"));
        assert_eq!(c.get("rdma-rx-size").as_deref(), Some("1048576"));
        assert_eq!(c.get("fabric-provider").as_deref(), Some("auto"));
        assert_eq!(c.get("rdma-send-wr").as_deref(), Some("255"));
        assert_eq!(c.get("rdma-recv-wr").as_deref(), Some("255"));
        assert_eq!(c.get("rdma-srq-depth").as_deref(), Some("255"));
        c.set("rdma-srq-depth", "0").unwrap();
        c.set("rdma-srq-depth", "16").unwrap();
        assert_eq!(c.fabric.srq_depth, 16);
        c.set("rdma-send-wr", "224").unwrap();
        c.set("rdma-recv-wr", "224").unwrap();
        c.set("rdma-port", "16379").unwrap();
        c.set("rdma-rx-size", "64kb").unwrap();
        c.set("fabric-provider", "OFI:SHM").unwrap();
        c.set("rdma-bind", "127.0.0.1 10.0.0.1").unwrap();
        assert_eq!(c.fabric.port, 16379);
        assert_eq!(c.fabric.rx_size, 65536);
        assert_eq!(c.fabric.provider, FabricProvider::OfiShm);
        assert_eq!(c.get("rdma-bind").as_deref(), Some("127.0.0.1 10.0.0.1"));
        for (name, bad) in [
            ("rdma-rx-size", "32kb"),
            ("rdma-rx-size", "17mb"),
            ("fabric-provider", "ib"),
            ("rdma-max-inline", "4096"),
            ("rdma-send-wr", "8"),
            // One under what a client's Stream keeps in flight / posts.
            ("rdma-send-wr", "223"),
            ("rdma-recv-wr", "223"),
            ("rdma-recv-wr", "100000"),
            ("rdma-cq-size", "100000000"),
            ("rdma-srq-depth", "8"),
            ("rdma-srq-depth", "16385"),
            ("rdma-poll-threads", "0"),
            ("rdma-port", "70000"),
        ] {
            assert!(c.set(name, bad).is_err(), "{name} {bad} accepted");
        }
    }

    /// Nothing listens beyond the loopback interface unless asked; the fabric follows
    /// `bind` until `rdma-bind` says otherwise.
    #[test]
    fn binds_default_to_loopback_and_the_fabric_follows_them() {
        let mut c = Config::default();
        assert_eq!(c.get("bind").as_deref(), Some("127.0.0.1 -::1"));
        assert_eq!(c.get("rdma-bind").as_deref(), Some(""));
        assert_eq!(c.fabric_bind(), ["127.0.0.1", "-::1"]);
        assert!(!c.listens_beyond_loopback());
        c.set("rdma-bind", "10.0.0.1").unwrap();
        assert_eq!(c.fabric_bind(), ["10.0.0.1"]);
        assert!(c.listens_beyond_loopback());
        c.set("rdma-bind", "").unwrap();
        c.set("bind", "* -::*").unwrap();
        assert_eq!(c.fabric_bind(), ["*", "-::*"]);
        assert!(c.listens_beyond_loopback());
    }
}
