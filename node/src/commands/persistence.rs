//! Persistence: SAVE BGSAVE LASTSAVE BGREWRITEAOF (DUMP and RESTORE are in `migration.rs`).

use crate::command_framework::args::is;
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::node_state::services::persistence::AofRewriteError;
use crate::node_state::snapshot_state::SaveError;

pub static COMMANDS: &[CommandSpec] = &[
    command(
        "save",
        1,
        ADMIN | NOSCRIPT | NO_MULTI,
        KeySpec::None,
        save,
        "server",
        "Synchronously saves the database(s) to disk.",
    ),
    command(
        "bgsave",
        -1,
        ADMIN | NOSCRIPT,
        KeySpec::None,
        bgsave,
        "server",
        "Asynchronously saves the database(s) to disk.",
    ),
    command(
        "bgrewriteaof",
        1,
        ADMIN | NOSCRIPT,
        KeySpec::None,
        bgrewriteaof,
        "server",
        "Asynchronously rewrites the append-only file to disk.",
    ),
    command(
        "lastsave",
        1,
        LOADING | STALE | FAST,
        KeySpec::None,
        lastsave,
        "server",
        "Returns the Unix timestamp of the last successful save to disk.",
    ),
];

const IN_PROGRESS: &str = "ERR Background save already in progress";

/// SAVE: waits for the save, on this connection's thread.
fn save(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    match ctx.services.persistence().save() {
        Ok(_) => ctx.reply.ok(),
        Err(SaveError::InProgress) => return err(IN_PROGRESS),
        // Redis answers a bare "ERR"; the reason is in the log.
        Err(_) => return err("ERR"),
    }
    Ok(())
}

/// BGSAVE [SCHEDULE]
fn bgsave(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    // SCHEDULE matters in Redis when another child process (AOF rewrite) blocks a fork;
    // there is no such conflict here, so it only has to be accepted.
    match args {
        [_] => {}
        [_, opt] if is(opt, "schedule") => {}
        _ => return Err(CmdError::Syntax),
    }
    let state = &ctx.server.snapshot;
    if state.in_progress().is_some() {
        return err(IN_PROGRESS);
    }
    if ctx.in_exec {
        // As Redis: inside a transaction the save is left to the cron.
        state.schedule();
        ctx.reply.simple(b"Background saving scheduled");
        return Ok(());
    }
    match ctx.services.persistence().bgsave() {
        Ok(()) => ctx.reply.simple(b"Background saving started"),
        Err(SaveError::InProgress) => return err(IN_PROGRESS),
        Err(_) => return err("ERR"),
    }
    Ok(())
}

/// BGREWRITEAOF: a new base and increment while writes go on (with the log off, a base
/// alone, as Redis writes one).
fn bgrewriteaof(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let config = ctx.server.config.read().clone();
    match ctx.services.persistence().bgrewrite_aof(&config) {
        Ok(()) => ctx
            .reply
            .simple(b"Background append only file rewriting started"),
        Err(e @ AofRewriteError::InProgress) => return err(format!("ERR {e}")),
        Err(e) => {
            tracing::error!("cannot start an AOF rewrite: {e}");
            return err("ERR Can't execute an AOF background rewriting. Please check the server logs for more information.");
        }
    }
    Ok(())
}

fn lastsave(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let at = ctx.server.snapshot.last_save_unix();
    ctx.reply.integer(at as i64);
    Ok(())
}
