//! `redis.call` / `redis.pcall`: a command run from a script through the node's own dispatch
//! (`dispatch::run_in`, as EXEC runs its queued commands), in the script's client context and
//! under the shards the script holds, its reply read back instead of sent.
//!
//! Refused before running, with Redis's texts: unknown commands, wrong arity, commands flagged
//! `noscript`, writes from a read-only script (EVAL_RO, `#!lua flags=no-writes`), writes on
//! a replica, and in cluster mode keys of another node's slot or of another slot than the
//! script's keys.

use super::convert::{frame_to_lua, ScriptResp};
use super::engine::run_state;
use crate::command_framework::{acl_check, dispatch, flags, table, CmdError, Ctx};
use crate::node_state::stats::LocalStats;
use mlua::{Lua, Table, Value};
use proto::resp::{Frame, ProtocolVersion};
use smallvec::SmallVec;

/// Most arguments one call may pass (Redis's Lua stack allows about this many).
pub const MAX_CALL_ARGS: usize = 1 << 20;

/// What the script running now may do, fixed for the run.
#[derive(Debug, Clone, Copy)]
pub struct CallRules {
    pub read_only: bool,
    /// The slot of the script's declared keys (cluster mode), if it declared any.
    pub slot: Option<u16>,
    /// `#!lua flags=allow-cross-slot-keys`.
    pub cross_slot: bool,
    /// `#!lua flags=allow-oom`.
    pub allow_oom: bool,
}

/// A Lua number as an argument: `%.17g`, as Redis 7.0 formats it.
pub fn lua_number_text(n: f64) -> String {
    let mut buf = [0u8; 64];
    String::from_utf8_lossy(proto::resp::reply::format_double(n, &mut buf)).into_owned()
}

/// The dispatcher behind `redis.call`/`redis.pcall`: returns the reply as a Lua value, and
/// whether it is an error (which `redis.call` raises).
pub fn dispatch_from_lua(
    lua: &Lua,
    ctx: &mut Ctx<'_>,
    rules: CallRules,
    stats: &mut LocalStats,
    (args, count): (Table, usize),
) -> mlua::Result<(Value, bool)> {
    let resp = run_state(lua).resp;
    let (frame, counted) = match arguments(&args, count) {
        Ok(argv) => {
            let refs: SmallVec<[&[u8]; 8]> = argv.iter().map(|a| a.as_slice()).collect();
            (call(ctx, rules, resp, &refs, stats), true)
        }
        Err(text) => (Frame::error(text), false),
    };
    let failed = frame.is_error();
    let value = super::engine::outside_the_limit(lua, || frame_to_lua(lua, &frame, resp, 0))?;
    if let (true, Value::Table(t)) = (failed && counted, &value) {
        t.raw_set(COUNTED_FIELD, true)?;
    }
    Ok((value, failed))
}

/// Marks an error table whose error INFO errorstats already counted (the command's own, or
/// its refusal): the script's reply of it is not counted again (Redis's field name).
pub const COUNTED_FIELD: &str = "ignore_error_stats_update";

/// `redis.acl_check_cmd(cmd, args...)`: whether the script's user may run the command.
pub fn acl_check_from_lua(ctx: &Ctx<'_>, (args, count): (Table, usize)) -> mlua::Result<bool> {
    let argv = arguments(&args, count).map_err(mlua::Error::runtime)?;
    let refs: SmallVec<[&[u8]; 8]> = argv.iter().map(|a| a.as_slice()).collect();
    let Ok(spec) = dispatch::resolve(&refs) else {
        return Err(mlua::Error::runtime(
            "Invalid command passed to redis.acl_check_cmd()",
        ));
    };
    Ok(acl_check::allowed(ctx.server, ctx.client, spec, &refs))
}

/// The call's arguments, read one at a time from the table the sandbox packed them in
/// (`count` of them: a nil among them is an error, as Redis finds it).
fn arguments(args: &Table, count: usize) -> Result<Vec<Vec<u8>>, &'static str> {
    if count == 0 {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    if count > MAX_CALL_ARGS {
        return Err("ERR Too many arguments for this redis lib call");
    }
    let wrong = "ERR Lua redis lib command arguments must be strings or integers";
    let mut out = Vec::with_capacity(count);
    for i in 1..=count {
        let arg = match args.raw_get::<Value>(i).map_err(|_| wrong)? {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Integer(i) => i.to_string().into_bytes(),
            Value::Number(n) => lua_number_text(n).into_bytes(),
            _ => return Err(wrong),
        };
        out.push(arg);
    }
    Ok(out)
}

/// Runs one command for the script; its reply (an error frame when refused or failed).
pub fn call(
    ctx: &mut Ctx<'_>,
    rules: CallRules,
    resp: ScriptResp,
    args: &[&[u8]],
    stats: &mut LocalStats,
) -> Frame {
    // A command refused here counts in INFO errorstats now, as Redis's `scriptCall` does.
    let mut refused = |text: &str| {
        stats.error_reply(&ctx.server.stats, text);
        Frame::error(text)
    };
    if table::lookup(args[0]).is_none() {
        return refused("ERR Unknown Redis command called from script");
    }
    let spec = match dispatch::resolve(args) {
        Ok(spec) => spec,
        Err(CmdError::WrongArity(_)) => {
            return refused("ERR Wrong number of args calling Redis command from script")
        }
        Err(e) => return refused(&e.to_string()),
    };
    if let Some(refusal) = refusal(ctx, rules, spec, args) {
        ctx.server.command_stats.record_rejected(spec);
        return refused(&refusal);
    }
    // The script's user must be allowed what the script calls (Redis checks every call);
    // what the AOF or the primary's stream replays was allowed when it first ran.
    if !ctx.client.primary_link {
        let context = crate::node_state::acl::log::Context::Lua;
        if let Err(e) = acl_check::check(ctx.server, ctx.client, spec, args, context) {
            ctx.server.command_stats.record_rejected(spec);
            stats.error_reply(&ctx.server.stats, &e.to_string());
            return Frame::error(&e.to_string());
        }
    }
    let write = spec.has(flags::WRITE);
    let version = ctx.reply.version();
    ctx.reply.set_version(match resp {
        ScriptResp::Two => ProtocolVersion::Resp2,
        ScriptResp::Three => ProtocolVersion::Resp3,
    });
    let at = ctx.reply.buffered();
    let dirty_before = ctx.effects.dirty;
    let in_exec = ctx.in_exec;
    // Like EXEC's commands: a blocking command answers at once instead of waiting.
    ctx.in_exec = true;
    stats.commands += 1;
    let started = std::time::Instant::now();
    let failed = dispatch::run_in(ctx, spec, args, stats);
    if let Some(block) = ctx.effects.block.take() {
        block.timeout_reply.write(&mut ctx.reply);
    }
    ctx.server
        .command_stats
        .record(spec, started.elapsed().as_nanos() as u64, failed);
    ctx.in_exec = in_exec;
    let bytes = ctx.reply.take_from(at);
    ctx.reply.set_version(version);
    if write && ctx.effects.dirty != dirty_before {
        ctx.server.running_script.note_write();
    }
    match proto::resp::decode(&bytes) {
        Ok(Some((frame, _))) => frame,
        _ => Frame::error("ERR the command's reply could not be read back"),
    }
}

/// Why the script may not run this command, in Redis's words.
fn refusal(
    ctx: &Ctx<'_>,
    rules: CallRules,
    spec: &crate::command_framework::CommandSpec,
    args: &[&[u8]],
) -> Option<String> {
    if spec.has(flags::NOSCRIPT) {
        return Some("ERR This Redis command is not allowed from script".into());
    }
    // A script cannot wait: XREAD/XREADGROUP with BLOCK are refused outright, as Redis does.
    if matches!(spec.name, "xread" | "xreadgroup")
        && args.iter().any(|a| a.eq_ignore_ascii_case(b"block"))
    {
        return Some(format!(
            "ERR {} command is not allowed with BLOCK option from scripts",
            spec.name
        ));
    }
    let write = spec.has(flags::WRITE);
    if write && rules.read_only {
        return Some("ERR Write commands are not allowed from read-only scripts.".into());
    }
    if write && ctx.server.replica_of.is_replica() && !ctx.client.primary_link {
        return Some(crate::command_framework::dispatch::READONLY_REPLICA_ERROR.into());
    }
    if write && !ctx.client.primary_link && !dispatch::good_replicas_enough(ctx.server) {
        return Some(crate::replication::ack::NOREPLICAS_ERROR.into());
    }
    // Over maxmemory when the script started: its first write that may grow memory is
    // refused; after a write it cannot stop half-way.
    if spec.has(flags::DENYOOM)
        && ctx.client.oom_before_script
        && !rules.allow_oom
        && !ctx.client.primary_link
        && !ctx.server.running_script.has_written()
    {
        return Some(CmdError::OutOfMemory.to_string());
    }
    cluster_refusal(ctx, rules, spec, args).map(String::from)
}

/// Cluster mode: every key must be served here, and in the script's slot (Redis 7.0's
/// `scriptVerifyClusterState`). Read from the topology alone: the script holds every shard.
fn cluster_refusal(
    ctx: &Ctx<'_>,
    rules: CallRules,
    spec: &crate::command_framework::CommandSpec,
    args: &[&[u8]],
) -> Option<&'static str> {
    let cluster = ctx.server.cluster.as_ref()?;
    if ctx.client.primary_link {
        return None;
    }
    let positions = spec.key_positions(args);
    if positions.is_empty() {
        return None;
    }
    let topology = cluster.topology.read();
    let me = topology.myself_index();
    let mut first_slot = None;
    for i in positions {
        let Some(key) = args.get(i) else { continue };
        let slot = proto::slot::key_slot(key);
        if *first_slot.get_or_insert(slot) != slot || topology.slots.owner(slot) != Some(me) {
            return Some("ERR Script attempted to access a non local key in a cluster node");
        }
        if !rules.cross_slot && rules.slot.is_some_and(|s| s != slot) {
            return Some("ERR Script attempted to access keys that do not hash to the same slot");
        }
    }
    None
}
