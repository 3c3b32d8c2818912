//! FUNCTION: the node has no function library yet (no Lua), so the one subcommand it answers
//! is FLUSH, which empties a library that is always empty. Clients and test suites call
//! `FUNCTION FLUSH` to reset a server between runs (Redis's own suite does so before every
//! test group), so refusing it would make a node unusable for them. Every other subcommand is
//! unknown, as on a server without functions.

use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    since: "7.0.0",
    subcommands: SUBCOMMANDS,
    ..command(
        "function",
        -2,
        0,
        KeySpec::None,
        container,
        "scripting",
        "A container for function commands.",
    )
}];

static SUBCOMMANDS: &[CommandSpec] = &[CommandSpec {
    since: "7.0.0",
    ..command(
        "function|flush",
        -2,
        WRITE | NOSCRIPT,
        KeySpec::None,
        flush,
        "scripting",
        "Deletes all libraries and functions.",
    )
}];

fn container(_ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    Err(CmdError::Syntax)
}

/// FUNCTION FLUSH [ASYNC | SYNC]: the mode is checked as Redis checks it; there is nothing
/// to delete either way.
fn flush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    match args.get(2) {
        None => {}
        Some(mode) if mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync") => {
        }
        Some(_) => return err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"),
    }
    if args.len() > 3 {
        return err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
    }
    ctx.reply.ok();
    Ok(())
}
