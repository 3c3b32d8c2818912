//! Routing applied to commands: the dispatcher asks [`check`] before a command runs or is
//! queued, and a refusal becomes the client's MOVED/ASK/CROSSSLOT/TRYAGAIN/CLUSTERDOWN
//! reply. Also keeps the one-shot ASKING flag.

use crate::cluster::routing::{route, Request, Route};
use crate::command_framework::spec::{flags, CommandSpec};
use crate::command_framework::CmdError;
use crate::db::keyspace::shard_of_slot;
use crate::node_state::{Client, NodeState};
use proto::resp::Reply;
use smallvec::SmallVec;

/// What routing decided for a command this node is to serve.
#[derive(Debug, PartialEq, Eq)]
pub enum Routed {
    Serve,
    /// The slot is this node's but its serving lease has lapsed: the command waits for it
    /// (blocked, see `dispatch`), then runs or answers CLUSTERDOWN.
    WaitForLease,
    /// A write to a slot whose writes are paused for the last step of its migration, or any
    /// keyed command MOVED by a commit the source applied while the pause still holds: the
    /// command waits (blocked) until the pause ends, then runs here or is answered MOVED.
    WaitForMigration {
        slot: u16,
    },
}

/// Decides whether this node runs `args` (Ok) or redirects the client (Err with the reply).
/// Without cluster mode, always Ok(Serve).
///
/// Inlined for that test (see `acl_check::check`).
#[inline]
pub fn check(
    server: &NodeState,
    client: &mut Client,
    spec: &CommandSpec,
    args: &[&[u8]],
    now_ms: u64,
) -> Result<Routed, CmdError> {
    let Some(cluster) = server.cluster.as_ref() else {
        return Ok(Routed::Serve);
    };
    check_in_cluster(server, cluster, client, spec, args, now_ms)
}

/// [`check`] in cluster mode.
fn check_in_cluster(
    server: &NodeState,
    cluster: &crate::cluster::Cluster,
    client: &mut Client,
    spec: &CommandSpec,
    args: &[&[u8]],
    now_ms: u64,
) -> Result<Routed, CmdError> {
    // The primary's stream is executed whatever the slot map says (Redis: the master
    // client is never redirected): the primary decided, and the replica mirrors it.
    if client.primary_link {
        return Ok(Routed::Serve);
    }
    if let Some(id) = client.import_link {
        return import_route(cluster, spec, args, id);
    }
    // Commands flagged `asking` (RESTORE-ASKING) count as preceded by ASKING.
    let asking = client.cluster_asking || spec.has(flags::ASKING);
    // ASKING holds for the next command only (for a whole transaction inside MULTI).
    if spec.name != "asking" && client.multi.is_none() {
        client.cluster_asking = false;
    }
    let mut keys: SmallVec<[&[u8]; 16]> = SmallVec::new();
    let mut write = spec.has(flags::WRITE);
    if spec.name == "exec" {
        let Some(multi) = client.multi.as_ref() else {
            return Ok(Routed::Serve);
        };
        // Every queued command's keys together: a transaction runs on one node.
        for queued in &multi.queued {
            let queued_args: SmallVec<[&[u8]; 8]> = queued.iter().map(|a| a.as_slice()).collect();
            let Ok(queued_spec) = crate::command_framework::dispatch::resolve(&queued_args) else {
                continue;
            };
            write |= queued_spec.has(flags::WRITE);
            keys.extend(
                queued_spec
                    .key_positions(&queued_args)
                    .into_iter()
                    .filter_map(|i| queued.get(i).map(|a| a.as_slice())),
            );
        }
        return decide(
            server,
            cluster,
            &keys,
            Flags {
                write,
                asking,
                readonly: client.cluster_readonly,
                migrate: false,
            },
            now_ms,
        );
    }
    keys.extend(
        spec.key_positions(args)
            .into_iter()
            .filter_map(|i| args.get(i).copied()),
    );
    if keys.is_empty() {
        return Ok(Routed::Serve);
    }
    decide(
        server,
        cluster,
        &keys,
        Flags {
            write,
            asking,
            readonly: client.cluster_readonly,
            migrate: spec.name == "migrate",
        },
        now_ms,
    )
}

/// The request's flags as routing takes them (see [`Request`]).
#[derive(Clone, Copy)]
struct Flags {
    write: bool,
    asking: bool,
    readonly: bool,
    migrate: bool,
}

/// `now`: the command's unix ms.
fn decide(
    server: &NodeState,
    cluster: &crate::cluster::Cluster,
    keys: &[&[u8]],
    flags: Flags,
    now: u64,
) -> Result<Routed, CmdError> {
    let req = Request {
        keys,
        write: flags.write,
        asking: flags.asking,
        readonly: flags.readonly,
        migrate: flags.migrate,
    };
    let mut exists = |key: &[u8]| {
        let slot = proto::slot::key_slot(key);
        let shard = server.keyspace.lock_shard(shard_of_slot(slot));
        shard
            .table(slot)
            .get(key)
            .is_some_and(|e| !e.is_expired(now))
    };
    let topology = cluster.topology.read();
    match route(&topology, &req, &mut exists) {
        // Served here only while this node holds its serving lease: cut off from the
        // majority, a primary stops before a replica can be promoted in its place.
        // The command (EXEC and commands being queued in MULTI too) waits for the lease as
        // a blocked client: its session parks, the connection's thread goes on serving.
        Route::Serve if !cluster.serving_at(now) => {
            drop(topology);
            if cluster.lease_ms() > 0 {
                return Ok(Routed::WaitForLease);
            }
            Err(CmdError::new(
                Route::ClusterDown(crate::cluster::routing::DownKind::State)
                    .error_text()
                    .unwrap_or_default(),
            ))
        }
        Route::Serve => {
            // Every key of a served command is in one slot (CROSSSLOT otherwise).
            let slot = keys.first().map(|key| proto::slot::key_slot(key));
            if let Some(slot) = slot.filter(|_| cluster.slot_ops.counting()) {
                cluster.slot_ops.count(slot);
            }
            match slot {
                Some(slot) if flags.write && cluster.migration_gate.paused(slot) => {
                    Ok(Routed::WaitForMigration { slot })
                }
                _ => Ok(Routed::Serve),
            }
        }
        // The source applied its batch's commit, but the target may not have yet: sent
        // there now, the command would be MOVED straight back here. The source's pause
        // lasts until the target confirms the commit, so the command waits for it (reads
        // too) and is then MOVED once, to a target that serves it.
        Route::Moved(slot, _) if cluster.migration_gate.paused(slot) => {
            Ok(Routed::WaitForMigration { slot })
        }
        other => Err(CmdError::new(other.error_text().unwrap_or_default())),
    }
}

/// A migration link's command: served only when every key is in a slot that migration is
/// moving into this node now (the ledger as this node applied it), so the link can write
/// nothing else, and nothing of a batch that was aborted or moved on.
fn import_route(
    cluster: &crate::cluster::Cluster,
    spec: &CommandSpec,
    args: &[&[u8]],
    id: u64,
) -> Result<Routed, CmdError> {
    let t = cluster.topology.read();
    let me = t.myself().id;
    let ledger = &t.consensus.migrations;
    let id = crate::cluster::migration::MigrationId(id);
    let moving_here = |slot: u16| {
        ledger.moving(slot) == Some(id) && ledger.get(id).is_some_and(|r| r.target == me)
    };
    for i in spec.key_positions(args) {
        let Some(key) = args.get(i) else { continue };
        let slot = proto::slot::key_slot(key);
        if !moving_here(slot) {
            return Err(CmdError::new(format!(
                "ERR slot {slot} is not moving into this node by migration {id}"
            )));
        }
    }
    Ok(Routed::Serve)
}

/// What a write parked on a migration's pause answers if the pause outlasts its wait
/// (the source's bounds end a pause long before).
pub const MIGRATION_PAUSE_ERROR: &str = "TRYAGAIN Writes to this slot are paused for its migration";

/// The answer of a keyed command whose slot is this node's while its lease has lapsed.
pub fn lapsed_lease_error() -> String {
    Route::ClusterDown(crate::cluster::routing::DownKind::State)
        .error_text()
        .unwrap_or_default()
}

/// Answers a redirected command as Redis does: a redirected EXEC discards its transaction;
/// a command refused while queueing dooms the transaction.
pub fn reject(
    server: &NodeState,
    client: &mut Client,
    reply: &mut Reply<'_>,
    spec: &CommandSpec,
    text: &str,
) {
    if spec.name == "exec" {
        crate::command_framework::transaction::discard(server, client);
    } else if let Some(multi) = client.multi.as_mut() {
        multi.errored = true;
    }
    reply.error(text);
}
