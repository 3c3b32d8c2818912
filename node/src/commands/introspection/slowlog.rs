//! SLOWLOG GET [count] | LEN | RESET | HELP over the server's slow log.

use crate::command_framework::args;
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};

const FLAGS: u32 = ADMIN | LOADING | STALE;
/// Entries SLOWLOG GET returns when no count is given.
const DEFAULT_COUNT: usize = 10;

pub static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "2.2.12",
        ..command(
            "slowlog|get",
            -2,
            FLAGS,
            KeySpec::None,
            get,
            "server",
            "Returns the slow log's entries.",
        )
    },
    CommandSpec {
        since: "2.2.12",
        ..command(
            "slowlog|len",
            2,
            FLAGS,
            KeySpec::None,
            len,
            "server",
            "Returns the number of entries in the slow log.",
        )
    },
    CommandSpec {
        since: "2.2.12",
        ..command(
            "slowlog|reset",
            2,
            FLAGS,
            KeySpec::None,
            reset,
            "server",
            "Clears all entries from the slow log.",
        )
    },
    CommandSpec {
        since: "6.2.0",
        ..command(
            "slowlog|help",
            2,
            LOADING | STALE,
            KeySpec::None,
            help,
            "server",
            "Show helpful text about the different subcommands",
        )
    },
];

/// SLOWLOG GET [count]: newest first; -1 means every entry.
fn get(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::new(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
            args::text(args[1])
        )));
    }
    let count = match args.get(2) {
        None => DEFAULT_COUNT,
        Some(a) => match args::int(a) {
            Ok(-1) => usize::MAX,
            Ok(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
            _ => {
                return Err(CmdError::new(
                    "ERR count should be greater than or equal to -1",
                ))
            }
        },
    };
    let reply = &mut ctx.reply;
    ctx.server.slowlog.with_entries(|entries| {
        let n = entries.len().min(count);
        reply.array(n);
        for e in entries.iter().take(n) {
            reply.array(6);
            reply.integer(e.id as i64);
            reply.integer(e.unix_secs as i64);
            reply.integer(e.micros as i64);
            reply.array(e.args.len());
            for a in &e.args {
                reply.bulk(a);
            }
            reply.bulk(e.peer.as_bytes());
            reply.bulk(e.name.as_bytes());
        }
    });
    Ok(())
}

fn len(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    ctx.reply.integer(ctx.server.slowlog.len() as i64);
    Ok(())
}

fn reset(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    ctx.server.slowlog.reset();
    ctx.reply.ok();
    Ok(())
}

const HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

fn help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    super::reply_help(&mut ctx.reply, HELP);
    Ok(())
}
