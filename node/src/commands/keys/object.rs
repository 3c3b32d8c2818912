//! OBJECT ENCODING | FREQ | IDLETIME | REFCOUNT | HELP.

use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::db::Value;

/// The key of every OBJECT subcommand: argument 2.
const KEY2: KeySpec = KeySpec::Range {
    first: 2,
    last: 2,
    step: 1,
};

/// Integers Redis keeps as shared objects (OBJ_SHARED_INTEGERS), whose reference count reads
/// as INT_MAX; clients and tests sometimes look at it.
const SHARED_INTEGERS: i64 = 10_000;

pub static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "2.2.3",
        ..command(
            "object|encoding",
            3,
            READONLY,
            KEY2,
            encoding,
            "generic",
            "Returns the internal encoding of a Redis object.",
        )
    },
    CommandSpec {
        since: "4.0.0",
        ..command(
            "object|freq",
            3,
            READONLY,
            KEY2,
            freq,
            "generic",
            "Returns the logarithmic access frequency counter of a Redis object.",
        )
    },
    CommandSpec {
        since: "2.2.3",
        ..command(
            "object|idletime",
            3,
            READONLY,
            KEY2,
            idletime,
            "generic",
            "Returns the time since the last access to a Redis object.",
        )
    },
    CommandSpec {
        since: "2.2.3",
        ..command(
            "object|refcount",
            3,
            READONLY,
            KEY2,
            refcount,
            "generic",
            "Returns the reference count of a value of a key.",
        )
    },
    CommandSpec {
        since: "6.2.0",
        ..command(
            "object|help",
            2,
            LOADING | STALE,
            KeySpec::None,
            help,
            "generic",
            "Returns helpful text about the different subcommands.",
        )
    },
];

/// The container itself never runs: the dispatcher picks a subcommand.
pub fn container(_ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    Err(CmdError::Syntax)
}

fn encoding(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    match ctx.db.peek_with_access(args[2]) {
        Some((e, access)) => {
            let name = super::encoding::redis_encoding(&e.value, access.edited_in_place);
            ctx.reply.bulk(name.as_bytes());
        }
        None => ctx.reply.null(),
    }
    Ok(())
}

/// Access frequency is counted only under an LFU policy; the counter shown is decayed to now
/// without counting this look.
fn freq(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let lfu = ctx.server.hot.lfu_counting();
    let clock = ctx.db.lru_clock;
    let Some((_, e)) = ctx.db.peek_with_access(args[2]) else {
        ctx.reply.null();
        return Ok(());
    };
    let Some(params) = lfu else {
        return Err(CmdError::new("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    };
    let idle = clock.saturating_sub(e.lru);
    let freq = crate::db::frequency::decayed(e.freq, idle, params);
    ctx.reply.integer(i64::from(freq));
    Ok(())
}

/// Idle time is not shown under an LFU policy, as in Redis (its LRU field holds the LFU data).
fn idletime(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let clock = ctx.db.lru_clock;
    let lfu = ctx.server.hot.policy().is_lfu();
    match ctx.db.peek_with_access(args[2]) {
        Some(_) if lfu => {
            return Err(CmdError::new("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
        }
        Some((_, e)) => {
            let idle = clock.saturating_sub(e.lru);
            ctx.reply.integer(idle as i64);
        }
        None => ctx.reply.null(),
    }
    Ok(())
}

/// Values are never shared here; small integers report what Redis reports for its shared ones.
fn refcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    match ctx.db.peek(args[2]) {
        Some(e) => {
            let shared = matches!(e.value, Value::Int(n) if (0..SHARED_INTEGERS).contains(&n));
            ctx.reply.integer(if shared { i32::MAX as i64 } else { 1 });
        }
        None => ctx.reply.null(),
    }
    Ok(())
}

const HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

fn help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    crate::commands::introspection::reply_help(&mut ctx.reply, HELP);
    Ok(())
}
