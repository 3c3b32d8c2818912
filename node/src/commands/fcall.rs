//! FCALL and FCALL_RO: run a function FUNCTION LOAD registered (Redis 7.0).
//!
//! Declared like EVAL (ALL_KEYS, routed by their declared keys in cluster mode): a function
//! runs as one atomic step holding every shard, and its writes replicate as their effects.
//! The function's flags decide what it may do, as Redis's `scriptPrepareForRun` does.

use super::scripting::{numkeys, script_keys};
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::node_state::functions::flag;
use crate::scripting::{CallRules, FunctionCall};

const FCALL_FLAGS: u32 = NOSCRIPT | STALE | MAY_REPLICATE | MOVABLE_KEYS | ALL_KEYS;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "7.0.0",
        ..command(
            "fcall",
            -3,
            FCALL_FLAGS,
            KeySpec::Custom(script_keys),
            fcall,
            "scripting",
            "Invokes a function.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "fcall_ro",
            -3,
            FCALL_FLAGS | READONLY,
            KeySpec::Custom(script_keys),
            fcall_ro,
            "scripting",
            "Invokes a read-only function.",
        )
    },
];

fn fcall(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    call(ctx, args, false)
}

fn fcall_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    call(ctx, args, true)
}

fn call(ctx: &mut Ctx<'_>, args: &[&[u8]], read_only: bool) -> CmdResult {
    let name = String::from_utf8_lossy(args[1]).into_owned();
    let set = ctx.server.functions.get();
    let Some((_, info)) = set.function(&name) else {
        return err("ERR Function not found");
    };
    let flags = info.flags;
    if crate::command_framework::args::int(args[2]).is_err() {
        return err("ERR Bad number of keys provided");
    }
    let n = numkeys(args)?;
    let no_writes = flags & flag::NO_WRITES != 0;
    if flags & flag::NO_CLUSTER != 0 && ctx.server.cluster.is_some() {
        return err("ERR Can not run script on cluster, 'no-cluster' flag is set.");
    }
    if read_only && !no_writes {
        return err("ERR Can not execute a script with write flag using *_ro command.");
    }
    if flags & flag::ALLOW_STALE == 0 {
        super::scripting::refuse_on_stale_replica(ctx)?;
    }
    if !no_writes {
        // A function that may write is refused at once where writes are: on a replica
        // (from its clients) and over maxmemory (unless `allow-oom`).
        if ctx.server.replica_of.is_replica() && !ctx.client.primary_link {
            return err(crate::command_framework::dispatch::READONLY_REPLICA_ERROR);
        }
        if flags & flag::ALLOW_OOM == 0 && ctx.client.oom_before_script {
            return Err(CmdError::OutOfMemory);
        }
        super::scripting::refuse_writing_script(ctx)?;
    }
    let keys = &args[3..3 + n];
    let slot = keys.first().map(|k| proto::slot::key_slot(k));
    crate::scripting::run_function(
        ctx,
        FunctionCall {
            name: &name,
            keys,
            argv: &args[3 + n..],
            rules: CallRules {
                read_only: read_only || no_writes,
                slot,
                cross_slot: flags & flag::ALLOW_CROSS_SLOT != 0,
                allow_oom: flags & flag::ALLOW_OOM != 0,
            },
            command: args,
        },
    )
}
