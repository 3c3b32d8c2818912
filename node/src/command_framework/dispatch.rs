//! From parsed arguments to an executed command: the protocol rules every command obeys.

use super::args;
use super::ctx::{BlockRequest, Ctx, Effects, TimeoutReply};
use super::error::CmdError;
use super::key_events::{self, CommandEvent, WhenGone};
use super::spec::{flags, CommandSpec, KeySpec};
use super::table;
use crate::clock::{lru_clock, unix_millis};
use crate::command_framework::redirect::Routed;
use crate::config::keyspace_events::{EXPIRED, KEY_MISS, NEW};
use crate::db::keyspace::{shard_of_slot, ALL_SHARDS};
use crate::db::{Key, Locked};
use crate::node_state::acl::log::Context as AclContext;
use crate::node_state::keyspace_events::{self, KeyEvents};
use crate::node_state::stats::LocalStats;
use crate::node_state::{Client, NodeServices, NodeState};
use crate::replication::ack::NOREPLICAS_ERROR;
use bytes::BytesMut;
use proto::resp::Reply;
use smallvec::SmallVec;
use std::sync::atomic::Ordering::Relaxed;

/// Runs one client request (`args[0]` is the command name) and writes its reply to `out`.
pub fn execute(
    node: &dyn NodeServices,
    client: &mut Client,
    out: &mut BytesMut,
    args: &[&[u8]],
    stats: &mut LocalStats,
) -> Effects {
    let mut effects = Effects::default();
    execute_into(node, client, out, args, stats, &mut effects);
    effects
}

/// [`execute`] into the caller's `effects` (default on entry): the connection's path, where
/// returning the struct (~600 bytes) copied it once more per command.
pub fn execute_into(
    node: &dyn NodeServices,
    client: &mut Client,
    out: &mut BytesMut,
    args: &[&[u8]],
    stats: &mut LocalStats,
    effects: &mut Effects,
) {
    let server = node.state();
    stats.commands += 1;
    let mut reply = Reply::new(out, client.protocol);
    client.tracking.pushed_ahead = 0;
    if server.tracking.active() {
        // Before the command, as Redis: its invalidations reach a tracking caller ahead of
        // the reply.
        let max_keys = server.hot.tracking_table_max_keys.load(Relaxed);
        server.tracking.enforce_limit(&server.clients, max_keys);
    }
    invalidations_ahead(client, &mut reply);
    let spec = match resolve(args) {
        Ok(spec) => spec,
        Err(e) => {
            let known = known_spec(args);
            *effects = reject(server, client, &mut reply, args, e, stats, known);
            return;
        }
    };
    if let Err(e) = admit(server, client, spec) {
        *effects = reject(server, client, &mut reply, args, e, stats, Some(spec));
        return;
    }
    // ACL rules, after authentication and before the cluster's redirect, as Redis's
    // `processCommand` orders them. The primary's stream and the AOF (primary links) are
    // exempt: what they replay was allowed when it was first run.
    if !client.primary_link {
        let context = if client.multi.is_some() {
            AclContext::Multi
        } else {
            AclContext::Toplevel
        };
        if let Err(e) = super::acl_check::check(server, client, spec, args, context) {
            *effects = reject(server, client, &mut reply, args, e, stats, Some(spec));
            return;
        }
    }
    if server.running_script.running() && !allowed_while_busy(server, spec, args) {
        let e = CmdError::new(server.running_script.busy_error());
        *effects = reject(server, client, &mut reply, args, e, stats, Some(spec));
        return;
    }
    // Routing in cluster mode uses the command's clock reading too (one per command; see
    // `clock`); `run` starts from the same mark unless time passed outside the command.
    // Only cluster mode routes (and reads the time for it).
    let routing_now = if server.cluster.is_some() {
        client.clock.start().unix_ms
    } else {
        0
    };
    match crate::command_framework::redirect::check(server, client, spec, args, routing_now) {
        Err(e) => {
            client.clock.touch();
            let text = e.to_string();
            stats.error_reply(&server.stats, &text);
            server.command_stats.record_rejected(spec);
            crate::command_framework::redirect::reject(server, client, &mut reply, spec, &text);
            return;
        }
        Ok(Routed::WaitForLease) => {
            if let Some(cluster) = server.cluster.as_ref() {
                *effects = wait_for_lease(cluster, client, args);
                return;
            }
        }
        Ok(Routed::WaitForMigration { slot }) => {
            if let Some(cluster) = server.cluster.as_ref() {
                *effects = wait_for_migration(cluster, client, args, slot);
                return;
            }
        }
        Ok(Routed::Serve) => {}
    }
    if let Err(e) = admit_routed(server, client, spec) {
        *effects = reject(server, client, &mut reply, args, e, stats, Some(spec));
        return;
    }
    if client.multi.is_some() && !spec.has(flags::TXN_CONTROL) {
        // Over maxmemory Redis queues nothing (the queue itself takes memory) and dooms
        // the transaction, whatever the command.
        let room =
            super::eviction::make_room(server, node.write_stream(), || client.clock.instant());
        invalidations_ahead(client, &mut reply);
        if let Some(multi) = client.multi.as_mut() {
            let queued = room.map(|_evicted| ()).and_then(|()| {
                multi
                    .queue(args, spec.has(flags::DENYOOM))
                    .map_err(|e| CmdError::new(e.to_string()))
            });
            if let Err(e) = queued {
                *effects = reject(server, client, &mut reply, args, e, stats, Some(spec));
                return;
            }
            multi.write |= spec.has(flags::WRITE);
            reply.simple(b"QUEUED");
            client.clock.touch();
            return;
        }
    }
    // A script is not refused for memory (it may only read); whether memory was over the
    // limit when it started decides whether its first write may grow memory.
    if is_script(spec) {
        client.oom_before_script = server.hot.maxmemory.load(Relaxed) > 0
            && super::eviction::make_room(server, node.write_stream(), || client.clock.instant())
                .is_err();
    }
    // EXEC of a transaction holding commands that may grow memory is checked like them,
    // before the shards are locked (eviction locks them).
    let exec_denyoom = client.multi.as_ref().is_some_and(|m| m.denyoom) && spec.name == "exec";
    if spec.has(flags::DENYOOM) || exec_denyoom {
        let room =
            super::eviction::make_room(server, node.write_stream(), || client.clock.instant());
        if !matches!(room, Ok(false)) {
            // Evicting may have taken a while; it is not the command's time.
            client.clock.touch();
            invalidations_ahead(client, &mut reply);
        }
        if let Err(e) = room {
            *effects = reject(server, client, &mut reply, args, e, stats, Some(spec));
            return;
        }
    } else if server.hot.maxmemory.load(Relaxed) != 0 {
        // Redis evicts before every command; only those that may grow memory are refused
        // when it cannot make room.
        let room =
            super::eviction::make_room(server, node.write_stream(), || client.clock.instant());
        if !matches!(room, Ok(false)) {
            client.clock.touch();
            invalidations_ahead(client, &mut reply);
        }
    }
    client.note_command(spec.name);
    run(node, client, reply, spec, args, stats, effects)
}

/// Moves a tracking client's queued invalidations (and any other push) into its output
/// ahead of the reply of the command about to run, as Redis writes them when they happen:
/// those of keys evicted before the command (`maxmemory`, the tracking table's limit) come
/// before its reply; those the command itself causes follow it. Counted in
/// `pushed_ahead`, so that a silenced reply (CLIENT REPLY OFF) does not drop them.
#[inline]
fn invalidations_ahead(client: &mut Client, reply: &mut Reply<'_>) {
    if client.shared.tracking.is_on() {
        move_pushes_ahead(client, reply);
    }
}

fn move_pushes_ahead(client: &mut Client, reply: &mut Reply<'_>) {
    let pushes = std::mem::take(&mut *client.shared.pushes.lock());
    reply.raw(&pushes);
    client.tracking.pushed_ahead += pushes.len();
}

/// A keyed command of this node's slot finds the serving lease lapsed: it waits for the
/// lease as a blocked client (like BLPOP, so the connection's thread goes on serving its
/// other clients), runs again when the bus finds the lease held, and answers CLUSTERDOWN
/// if it does not come back within one lease. A lapse of a few milliseconds (a descheduled
/// bus thread or peer) then costs latency instead of a failed write.
fn wait_for_lease(
    cluster: &crate::cluster::Cluster,
    client: &mut Client,
    args: &[&[u8]],
) -> Effects {
    client.clock.touch();
    cluster.wake_when_serving(client.shared.clone(), crate::clock::unix_millis());
    Effects {
        block: Some(BlockRequest {
            keys: Vec::new(),
            timeout: Some(std::time::Duration::from_millis(cluster.lease_ms())),
            retry: args.iter().map(|a| a.to_vec()).collect(),
            timeout_reply: TimeoutReply::LapsedLease,
        }),
        ..Effects::default()
    }
}

/// The slot of the command's first key (of the first keyed queued command, for EXEC): in
/// cluster mode every key of a served command is in that slot.
fn command_slot(spec: &CommandSpec, args: &[&[u8]], client: &Client) -> Option<u16> {
    if spec.name == "exec" {
        let multi = client.multi.as_ref()?;
        return multi.queued.iter().find_map(|queued| {
            let queued_args: SmallVec<[&[u8]; 8]> = queued.iter().map(|a| a.as_slice()).collect();
            let queued_spec = resolve(&queued_args).ok()?;
            let i = *queued_spec.key_positions(&queued_args).first()?;
            queued_args.get(i).map(|key| proto::slot::key_slot(key))
        });
    }
    let i = *spec.key_positions(args).first()?;
    args.get(i).map(|key| proto::slot::key_slot(key))
}

/// How long a write waits for its slot's migration pause to end: the source lifts a pause
/// within its `pause_max_ms`, or within the commit's wait once it proposed the commit.
const MIGRATION_PAUSE_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// A write to a slot whose writes are paused while its migration commits: it waits as a
/// blocked client (the connection's thread goes on serving), then runs again: here if the
/// migration let the slot go on, MOVED to the target if it committed.
fn wait_for_migration(
    cluster: &crate::cluster::Cluster,
    client: &mut Client,
    args: &[&[u8]],
    slot: u16,
) -> Effects {
    client.clock.touch();
    cluster
        .migration_gate
        .wake_when_resumed(slot, client.shared.clone());
    Effects {
        block: Some(BlockRequest {
            keys: Vec::new(),
            timeout: Some(MIGRATION_PAUSE_WAIT),
            retry: args.iter().map(|a| a.to_vec()).collect(),
            timeout_reply: TimeoutReply::MigrationPause,
        }),
        ..Effects::default()
    }
}

/// Answers a command refused before it could run or be queued. Inside MULTI the refusal
/// dooms the transaction; a refused EXEC discards it with EXECABORT (as Redis's
/// `execCommandAbort`, which quotes the reason without its `ERR` code).
fn reject(
    server: &NodeState,
    client: &mut Client,
    reply: &mut Reply<'_>,
    args: &[&[u8]],
    e: CmdError,
    stats: &mut LocalStats,
    spec: Option<&'static CommandSpec>,
) -> Effects {
    client.clock.touch();
    let text = e.to_string();
    stats.error_reply(&server.stats, &text);
    if let Some(spec) = spec {
        server.command_stats.record_rejected(spec);
    }
    if args[0].eq_ignore_ascii_case(b"exec") {
        crate::command_framework::transaction::discard(server, client);
        let reason = text.strip_prefix("ERR ").unwrap_or(&text);
        reply.error(&format!(
            "EXECABORT Transaction discarded because of: {reason}"
        ));
    } else {
        if let Some(multi) = client.multi.as_mut() {
            multi.errored = true;
        }
        reply.error(&text);
    }
    Effects::default()
}

/// The command a refused request named, if it names one (INFO commandstats counts a wrong
/// arity as a rejected call of that command; an unknown command or subcommand counts nowhere,
/// as in Redis).
fn known_spec(args: &[&[u8]]) -> Option<&'static CommandSpec> {
    let spec = table::lookup(args[0])?;
    match args.get(1) {
        Some(sub) if !spec.subcommands.is_empty() => table::lookup_sub(spec, sub),
        _ => Some(spec),
    }
}

/// The spec for `args`, descending into subcommands, with the arity checked.
pub fn resolve(args: &[&[u8]]) -> Result<&'static CommandSpec, CmdError> {
    let Some(mut spec) = table::lookup(args[0]) else {
        return Err(unknown_command(args));
    };
    if !spec.subcommands.is_empty() {
        if args.len() < 2 {
            // A container that also runs bare (COMMAND) admits one argument by its arity.
            if spec.arity_ok(args.len()) {
                return Ok(spec);
            }
            return Err(CmdError::WrongArity(spec.name.to_string()));
        }
        spec = table::lookup_sub(spec, args[1]).ok_or_else(|| {
            CmdError::new(format!(
                "ERR unknown subcommand '{}'. Try {} HELP.",
                clip(args[1]),
                spec.name.to_ascii_uppercase()
            ))
        })?;
    }
    if !spec.arity_ok(args.len()) {
        return Err(CmdError::WrongArity(spec.name.to_string()));
    }
    Ok(spec)
}

/// A write while the primary pauses for a manual failover: cluster clients retry TRYAGAIN,
/// and find the slot moved to the promoted replica (MOVED) once the failover is done.
pub const FAILOVER_PAUSE_ERROR: &str = "TRYAGAIN Writes are paused for a manual failover";

/// Redis's answer while a replica loads its primary's snapshot.
pub const LOADING_ERROR: &str = "LOADING Redis is loading the dataset in memory";

/// Redis's refusal of a normal client's write on a replica.
pub const READONLY_REPLICA_ERROR: &str = "READONLY You can't write against a read only replica.";
/// A replica with `replica-serve-stale-data no` whose link to its primary is down.
pub const MASTERDOWN_ERROR: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// Checks that apply before a command may run or be queued, ahead of the cluster's
/// redirect (Redis's `processCommand` order: authentication, then MULTI's refusals).
pub(super) fn admit(
    server: &NodeState,
    client: &Client,
    spec: &CommandSpec,
) -> Result<(), CmdError> {
    // As Redis's `authRequired`: a client that never authenticated may run commands once
    // the default user needs no password (CONFIG SET requirepass "").
    if !client.authenticated && !spec.has(flags::NO_AUTH) && server.acl.default_needs_auth() {
        return Err(CmdError::NoAuth);
    }
    if client.multi.is_some() && spec.has(flags::NO_MULTI) {
        return Err(CmdError::new(
            "ERR Command not allowed inside a transaction",
        ));
    }
    Ok(())
}

/// Whether a command may run while a script runs past `busy-reply-threshold` (Redis's
/// `allow-busy` commands): SCRIPT KILL and FUNCTION KILL/STATS to stop it, SHUTDOWN NOSAVE,
/// what a connection needs to get there (AUTH, HELLO, QUIT, RESET), MULTI and DISCARD.
/// Everything else is answered BUSY rather than left waiting for the shards the script holds.
fn allowed_while_busy(server: &NodeState, spec: &CommandSpec, args: &[&[u8]]) -> bool {
    let threshold = server.hot.busy_reply_threshold_ms.load(Relaxed);
    if !server.running_script.busy(unix_millis(), threshold) {
        return true;
    }
    match spec.name {
        "script|kill" | "function|kill" | "function|stats" | "auth" | "hello" | "quit"
        | "reset" => true,
        // Redis lets MULTI and DISCARD through (`allow-busy`): a pipelined transaction whose
        // MULTI came during the script then has its refused commands abort its EXEC, rather
        // than running half of it outside a transaction. They touch no key, so no shard.
        "multi" | "discard" => true,
        "shutdown" => args[1..].iter().any(|a| a.eq_ignore_ascii_case(b"nosave")),
        _ => false,
    }
}

/// Checks after the cluster's redirect, in Redis's order (NOREPLICAS, READONLY, the RESP2
/// subscribed context, LOADING): a key of another node's slot gets MOVED first, so a
/// client follows it rather than failing on a node that would not serve the key anyway;
/// a replica answers READONLY only for what it would serve.
fn admit_routed(server: &NodeState, client: &Client, spec: &CommandSpec) -> Result<(), CmdError> {
    let write = is_write(spec, client);
    if write && !(good_replicas_enough(server) && sync_ack_replicas_enough(server, client)) {
        return Err(CmdError::new(NOREPLICAS_ERROR));
    }
    if write && server.replica_of.is_replica() && !client.primary_link {
        return Err(CmdError::new(READONLY_REPLICA_ERROR));
    }
    if client.subscribed
        && client.protocol == proto::resp::ProtocolVersion::Resp2
        && !spec.has(flags::SUBSCRIBED_OK)
    {
        return Err(CmdError::new(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        )));
    }
    if refuses_stale(server, client) && !serves_stale(spec, client) {
        return Err(CmdError::new(MASTERDOWN_ERROR));
    }
    if server.replica_of.is_loading() && !spec.has(flags::LOADING) && !client.primary_link {
        return Err(CmdError::new(LOADING_ERROR));
    }
    Ok(())
}

/// Whether this node refuses what it may not serve stale to `client`: a replica whose link
/// is down under `replica-serve-stale-data no` (the primary's own stream is exempt).
pub fn refuses_stale(server: &NodeState, client: &Client) -> bool {
    server.replica_of.is_stale()
        && !client.primary_link
        && !server.hot.replica_serve_stale_data.load(Relaxed)
}

/// Whether a stale replica (`replica-serve-stale-data no`) runs the command: only those
/// flagged `stale` (INFO, REPLICAOF, CONFIG, MULTI...), and EXEC only when every command it
/// queued is, since the state may have turned stale after they were queued (Redis's
/// `cmd_inv_flags`).
fn serves_stale(spec: &CommandSpec, client: &Client) -> bool {
    if !spec.has(flags::STALE) {
        return false;
    }
    if spec.name != "exec" {
        return true;
    }
    client.multi.as_ref().is_none_or(|multi| {
        multi.queued.iter().all(|queued| {
            let args: SmallVec<[&[u8]; 8]> = queued.iter().map(|a| a.as_slice()).collect();
            resolve(&args).is_ok_and(|spec| spec.has(flags::STALE))
        })
    })
}

/// EVAL, EVALSHA, FCALL and their read-only forms.
pub fn is_script(spec: &CommandSpec) -> bool {
    // The first letter rules out nearly every command before any comparison of names (each
    // a length test and a `memcmp`): this runs for every command.
    matches!(spec.name.as_bytes().first(), Some(b'e' | b'f'))
        && matches!(
            spec.name,
            "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
        )
}

/// Whether the command writes (EXEC of a transaction that queued a write does).
fn is_write(spec: &CommandSpec, client: &Client) -> bool {
    spec.has(flags::WRITE)
        || (client.multi.as_ref().is_some_and(|m| m.write) && spec.name == "exec")
}

/// `min-replicas-to-write` / `min-replicas-max-lag` (Redis's `checkGoodReplicasCount`): one
/// relaxed load while the check is off (the default).
pub fn good_replicas_enough(server: &NodeState) -> bool {
    let hot = &server.hot;
    let to_write = hot.min_replicas_to_write.load(Relaxed);
    if to_write == 0 {
        return true;
    }
    let max_lag = hot.min_replicas_max_lag.load(Relaxed);
    if max_lag == 0 {
        return true;
    }
    server
        .replication
        .writes_allowed(unix_millis(), to_write as usize, max_lag)
}

/// `repl-sync-acks N`: a write is refused, not applied, while fewer than N replicas stream
/// from this primary: it could not be acknowledged, and answering it (or applying it and
/// answering an error later) would promise what no replica holds. A replica's own writes
/// come only from its primary's link, which is never refused.
fn sync_ack_replicas_enough(server: &NodeState, client: &Client) -> bool {
    let wanted = server.hot.repl_sync_acks.load(Relaxed);
    if wanted == 0 || client.primary_link || server.replica_of.is_replica() {
        return true;
    }
    server.replication.online_replicas() as u64 >= wanted
}

/// Locks the command's shards and runs its handler.
pub fn run(
    node: &dyn NodeServices,
    client: &mut Client,
    reply: Reply<'_>,
    spec: &'static CommandSpec,
    args: &[&[u8]],
    stats: &mut LocalStats,
    effects: &mut Effects,
) {
    let server = node.state();
    let start = client.clock.start();
    let now = start.unix_ms;
    let give_up_behind_script = !client.primary_link;
    // The context is built first and the shards locked into its view where it lies: a view
    // returned up through the lock helpers was copied at each level (~200 bytes per
    // command, a stall on the first read after each copy).
    let keyspace = server.db(client.db).unwrap_or(&server.keyspace);
    let mut ctx = Ctx {
        server,
        services: node,
        client,
        db: Locked::unlocked(keyspace, now, lru_clock(now)),
        held: Vec::new(),
        reply,
        effects,
        in_exec: false,
        replicating: false,
        event: None,
    };
    if lock_into(&mut ctx.db, server, spec, args, give_up_behind_script).is_none() {
        // Waited for shards a script holds until it ran past `busy-reply-threshold`.
        ctx.db.release();
        let e = CmdError::new(server.running_script.busy_error());
        *ctx.effects = reject(
            server,
            ctx.client,
            &mut ctx.reply,
            args,
            e,
            stats,
            Some(spec),
        );
        return;
    }
    let client = &mut *ctx.client;
    // Read with the shards held: the AOF starts taking the stream at an instant when every
    // shard is held (its rewrite's image), so a write either sees it or ran before it.
    let replicating = server.replication.active();
    ctx.replicating = replicating;
    if replicating && !client.primary_link && is_write(spec, client) {
        if let Some(why) = node.write_stream().refusing_writes() {
            ctx.db.release();
            client.clock.touch();
            let text = format!("MISCONF Errors writing to the AOF file: {why}");
            stats.error_reply(&server.stats, &text);
            server.command_stats.record_rejected(spec);
            ctx.reply.error(&text);
            return;
        }
    }
    // Checked with the command's shards held: REPLCONF FAILOVER-PAUSE sets the pause, then
    // takes every shard once, so a write either sees the pause or has fed the stream
    // before the offset it answers is read.
    if server.replication.writes_paused(now) && !client.primary_link && is_write(spec, client) {
        ctx.db.release();
        client.clock.touch();
        stats.error_reply(&server.stats, FAILOVER_PAUSE_ERROR);
        server.command_stats.record_rejected(spec);
        ctx.reply.error(FAILOVER_PAUSE_ERROR);
        return;
    }
    // Checked again with the command's shards held (routing looked before): the source of a
    // migration pauses a batch's slots, then takes each of their shards once, so a write
    // either sees the pause here or has fed the migration's link before its end offset.
    if let Some(cluster) = server.cluster.as_ref() {
        if cluster.migration_gate.any_paused() && !client.primary_link && is_write(spec, client) {
            let paused = command_slot(spec, args, client)
                .filter(|&slot| cluster.migration_gate.paused(slot));
            if let Some(slot) = paused {
                ctx.db.release();
                *ctx.effects = wait_for_migration(cluster, client, args, slot);
                return;
            }
        }
    }
    // Expired keys are recorded for replicas (a DEL each), for `expired` events and for
    // tracking clients' invalidations.
    if replicating || keyspace_events::wanted(server, EXPIRED) || server.tracking.active() {
        ctx.db.record_removed();
    }
    let failed = run_in(&mut ctx, spec, args, stats);
    // The context's fields are used where they are: taking it apart copied the shard view
    // and the effects (about 600 bytes) per command, and the first read after the copy
    // waited for it (a store-forwarding stall that `perf annotate` put at ~3% of PING's
    // samples).
    let effects = &mut *ctx.effects;
    // Into the stream while the shards are still locked: no later write to these keys can
    // be appended before this one.
    if !effects.outgoing.is_empty() {
        let fed = node.write_stream().feed(&mut effects.outgoing);
        if let Some(offset) = fed.repl {
            ctx.client.repl_offset = offset;
        }
    }
    if replicating {
        // The reply leaves once the AOF holds everything appended so far: this write, and
        // any other this command may have seen (its keys' last writers appended before
        // they let the shards go).
        ctx.client.log_offset = node.write_stream().log_end();
    }
    let expired = ctx.db.expired;
    // WATCHes are invalidated while the shards are still locked: an EXEC locking them next
    // must find its watch dirty.
    if !effects.modified.is_empty() {
        server.watches.touch_each(&effects.modified);
    }
    // Published with the keys still locked, so that the events of one key reach
    // subscribers in the order its changes were made.
    if !effects.events.is_empty() {
        keyspace_events::publish(server, &effects.events);
    }
    // BCAST invalidations, also before the keys are unlocked: a reader that locks them next
    // is told of any later change.
    if !effects.tracking_changes.is_empty() {
        server
            .tracking
            .broadcast(&server.clients, &effects.tracking_changes);
    }
    ctx.db.release();
    for held in ctx.held.iter_mut() {
        held.release();
    }
    stats.expired += expired;
    let client = &mut *ctx.client;
    let effects = &*ctx.effects;
    let nanos = client.clock.finish(start);
    // A command that blocks counts once, when it is served or times out (as in Redis).
    if effects.block.is_none() {
        server.command_stats.record(spec, nanos, failed);
    }
    after(server, client, spec, args, effects, nanos / 1000);
    // CLIENT CACHING applies to the next command, or to the transaction it precedes, and
    // survives other CLIENT subcommands (Redis's rule).
    if client.tracking.caching && client.multi.is_none() && !spec.name.starts_with("client|") {
        client.tracking.caching = false;
    }
}

/// Runs a handler in an existing context (used by `run` and by EXEC for each queued command).
/// Returns whether the command answered an error.
pub fn run_in(
    ctx: &mut Ctx<'_>,
    spec: &'static CommandSpec,
    args: &[&[u8]],
    stats: &mut LocalStats,
) -> bool {
    let (hits_before, misses_before) = (ctx.db.hits, ctx.db.misses);
    let dirty_before = ctx.effects.dirty;
    let events_before = ctx.effects.events.list.len();
    let modified_before = ctx.effects.modified.len();
    ctx.event = events_for(ctx, spec);
    // A script is shown before the commands it runs, as Redis's EVAL and FCALL feed the
    // monitors themselves first.
    let fed_before = ctx.server.monitors.active() && is_script(spec);
    if fed_before {
        feed_monitors(ctx, spec, args);
    }
    let result = (spec.handler)(ctx, args);
    let failed = result.is_err();
    if let Err(e) = result {
        let text = e.to_string();
        if !matches!(e, CmdError::Counted(_)) {
            stats.error_reply(&ctx.server.stats, &text);
        }
        ctx.reply.error(&text);
    }
    // Empty unless recorded for replicas or for `expired` events.
    let removed = ctx.db.take_removed();
    if ctx.server.tracking.active() {
        super::tracking::after_command(ctx, spec, args, &removed, modified_before);
    }
    if ctx.event.is_some() {
        note_expired_and_created(ctx, &removed, events_before);
    }
    if ctx.replicating {
        capture(ctx, &removed, spec, args, dirty_before);
    }
    // Shown after it ran, as Redis's `call` does (so EXEC follows its commands); admin
    // commands never, their arguments being too sensitive.
    if !fed_before && ctx.server.monitors.active() {
        feed_monitors(ctx, spec, args);
    }
    if spec.has(flags::READONLY) {
        stats.hits += (ctx.db.hits - hits_before) as u64;
        stats.misses += (ctx.db.misses - misses_before) as u64;
    }
    failed
}

/// Shows a command to the monitors; admin commands never, their arguments being too
/// sensitive. A script's own commands are shown from `lua`, as Redis shows them.
fn feed_monitors(ctx: &Ctx<'_>, spec: &CommandSpec, args: &[&[u8]]) {
    if spec.has(flags::ADMIN) {
        return;
    }
    let from = if ctx.client.in_script {
        None
    } else {
        Some(&*ctx.client.shared)
    };
    ctx.server.monitors.feed(from, &redacted(spec, args));
}

/// Adds what the handler just did to the request's replication stream: a DEL for each key it
/// found expired (first: it happened first), then the write rewritten if it changed the
/// dataset. A write that cannot be rewritten is logged, never failed: the client's command
/// did run.
fn capture(
    ctx: &mut Ctx<'_>,
    removed: &[Key],
    spec: &CommandSpec,
    args: &[&[u8]],
    dirty_before: u64,
) {
    let db = ctx.db.db_index();
    for key in removed {
        ctx.effects.outgoing.key_removed(db, key);
    }
    let effect = std::mem::take(&mut ctx.effects.repl);
    if spec.has(flags::WRITE) && ctx.effects.dirty != dirty_before {
        if let Err(e) = ctx.effects.outgoing.command(db, args, &effect) {
            tracing::error!(command = spec.name, error = %e, "write not replicated");
        }
    } else if spec.name == "publish" && ctx.server.cluster.is_none() {
        // Redis forwards PUBLISH to its replicas (not the AOF) so that their subscribers
        // hear it; in cluster mode the bus carries messages instead.
        ctx.effects.outgoing.replica_only_command(db, args);
    }
}

/// The command's keyspace event, if notifications are on (one relaxed load when off); also
/// starts recording created keys when `new` events are published.
fn events_for(ctx: &mut Ctx<'_>, spec: &CommandSpec) -> Option<CommandEvent> {
    if ctx.server.hot.notify_keyspace_events.load(Relaxed) == 0 {
        return None;
    }
    if keyspace_events::wanted(ctx.server, NEW) {
        ctx.db.record_created();
    }
    // Redis publishes a miss of a read command's lookup (its lookupKeyRead).
    if spec.has(flags::READONLY) && keyspace_events::wanted(ctx.server, KEY_MISS) {
        ctx.db.record_missed();
    }
    // Commands without an event of their own still report expired and created keys.
    Some(key_events::for_command(spec.name).unwrap_or(NO_EVENT))
}

/// The stand-in event of a command that emits none: its class is no class, so it is never
/// published.
const NO_EVENT: CommandEvent = CommandEvent {
    class: 0,
    name: "",
    when_gone: WhenGone::Keep,
};

/// Adds the `expired` events of keys the command found expired, ahead of its own events
/// (the expiry happened first), and the `new` events of keys created without a reported
/// change.
fn note_expired_and_created(ctx: &mut Ctx<'_>, removed: &[Key], events_before: usize) {
    if !removed.is_empty() && keyspace_events::wanted(ctx.server, EXPIRED) {
        let mut expired = KeyEvents::default();
        let db = ctx.db.db_index();
        for key in removed {
            expired.push(db, EXPIRED, "expired", key);
        }
        let at = events_before.min(ctx.effects.events.list.len());
        ctx.effects.events.list.splice(at..at, expired.list);
    }
    for key in ctx.db.take_created() {
        ctx.notify(NEW, "new", &key);
    }
    for key in ctx.db.take_missed() {
        ctx.notify(KEY_MISS, "keymiss", &key);
    }
}

/// Work after the locks are released: count dirty changes, wake blocked clients, log slow.
fn after(
    server: &NodeState,
    client: &Client,
    spec: &CommandSpec,
    args: &[&[u8]],
    effects: &Effects,
    micros: u64,
) {
    if effects.dirty > 0 {
        server.snapshot.add_dirty(effects.dirty);
    }
    let latency_threshold_ms = server.hot.latency_monitor_threshold_ms.load(Relaxed);
    if latency_threshold_ms != 0 && micros / 1000 >= latency_threshold_ms {
        note_latency(server, spec, micros / 1000);
    }
    if !effects.ready.is_empty() {
        server.blocking.wake(&effects.ready);
    }
    let threshold = server
        .hot
        .slowlog_slower_than
        .load(std::sync::atomic::Ordering::Relaxed);
    if threshold != u64::MAX && micros >= threshold && spec.name != "exec" {
        let max_len = server
            .hot
            .slowlog_max_len
            .load(std::sync::atomic::Ordering::Relaxed) as usize;
        let name = client.shared.name.lock().clone().unwrap_or_default();
        let shown = redacted(spec, args);
        server.slowlog.record(
            micros,
            &shown,
            client.shared.peer.to_string(),
            name,
            max_len,
        );
    }
}

/// A command over `latency-monitor-threshold`: an event for LATENCY (`fast-command` for the
/// O(1) ones, as Redis tells them apart). Blocking commands are not events: their time is
/// the wait.
#[cold]
fn note_latency(server: &NodeState, spec: &CommandSpec, millis: u64) {
    if spec.has(flags::BLOCKING) {
        return;
    }
    let event = if spec.has(flags::FAST) {
        "fast-command"
    } else {
        "command"
    };
    server
        .latency_monitor
        .add(event, unix_millis() / 1000, millis);
}

/// The arguments with the command's secrets replaced by `(redacted)`.
fn redacted<'a>(spec: &CommandSpec, args: &[&'a [u8]]) -> SmallVec<[&'a [u8]; 8]> {
    let mut shown: SmallVec<[&[u8]; 8]> = SmallVec::from_slice(args);
    if let Some(secrets) = spec.secrets {
        for i in secrets(args) {
            if let Some(a) = shown.get_mut(i) {
                *a = b"(redacted)";
            }
        }
    }
    shown
}

/// Locks the shards of the command's keys, all shards for whole-keyspace commands; under an
/// LFU policy the command's accesses count in the keys' LFU counters.
///
/// With `give_up_behind_script`, a wait for shards that a script holds ends (None) once the
/// script has run past `busy-reply-threshold`: the command is then answered BUSY, as it
/// would have been had it arrived a moment later, rather than waiting for a script that may
/// never end (and holding its thread, which SCRIPT KILL may need). Without it (the
/// primary's stream, which must apply every command in order), the wait lasts.
pub fn lock_for<'a>(
    server: &'a NodeState,
    spec: &CommandSpec,
    args: &[&[u8]],
    now: u64,
    db: usize,
    give_up_behind_script: bool,
) -> Option<Locked<'a>> {
    // SELECT admitted only databases that exist; a client of a database past the count
    // (never) falls back to database 0 rather than failing every command.
    let keyspace = server.db(db).unwrap_or(&server.keyspace);
    let mut locked = Locked::unlocked(keyspace, now, lru_clock(now));
    lock_into(&mut locked, server, spec, args, give_up_behind_script)?;
    Some(locked)
}

/// [`lock_for`] into `db`, a view that holds nothing yet (of the client's database, at the
/// command's clock): None when it gave up behind a busy script.
fn lock_into(
    db: &mut Locked<'_>,
    server: &NodeState,
    spec: &CommandSpec,
    args: &[&[u8]],
    give_up_behind_script: bool,
) -> Option<()> {
    let mut give_up = || {
        give_up_behind_script
            && server.running_script.busy(
                unix_millis(),
                server.hot.busy_reply_threshold_ms.load(Relaxed),
            )
    };
    lock_shards_into(db, spec, args, &mut give_up)?;
    if let Some(params) = server.hot.lfu_counting() {
        db.count_frequency(params, rand::random::<f64>);
    }
    Some(())
}

fn lock_shards_into(
    db: &mut Locked<'_>,
    spec: &CommandSpec,
    args: &[&[u8]],
    give_up: &mut dyn FnMut() -> bool,
) -> Option<()> {
    if spec.has(flags::ALL_KEYS)
        || (spec.has(flags::PATTERN_KEYS) && flags::names_pattern_keys(args))
    {
        return db.take_unless(&ALL_SHARDS, give_up);
    }
    if let Some(i) = spec.single_key_position(args) {
        // Most commands name one key: no position list, no sort.
        let slot = proto::slot::key_slot(args[i]);
        db.take_unless(&[shard_of_slot(slot)], give_up)?;
        db.hint_slot(args[i], slot);
        return Some(());
    }
    if matches!(spec.keys, KeySpec::None) {
        // No key to lock (PING, ECHO, INFO...): nothing to list.
        return Some(());
    }
    let positions = spec.key_positions(args);
    let mut first: Option<(usize, u16)> = None;
    let mut shards: SmallVec<[usize; 16]> = SmallVec::new();
    for &i in &positions {
        let slot = proto::slot::key_slot(args[i]);
        first.get_or_insert((i, slot));
        shards.push(shard_of_slot(slot));
    }
    shards.sort_unstable();
    shards.dedup();
    db.take_unless(&shards, give_up)?;
    if let Some((i, slot)) = first {
        db.hint_slot(args[i], slot);
    }
    Some(())
}

fn unknown_command(args: &[&[u8]]) -> CmdError {
    let mut text = format!(
        "ERR unknown command '{}', with args beginning with: ",
        clip(args[0])
    );
    for a in args.iter().skip(1) {
        if text.len() >= 128 {
            break;
        }
        text.push_str(&format!("'{}' ", clip(a)));
    }
    CmdError::new(text)
}

/// An argument shown in an error: at most 128 bytes, newlines made spaces.
fn clip(arg: &[u8]) -> String {
    let shown = &arg[..arg.len().min(128)];
    args::text(shown).replace(['\r', '\n'], " ")
}
