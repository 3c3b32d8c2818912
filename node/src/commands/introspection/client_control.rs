//! CLIENT PAUSE | UNPAUSE | UNBLOCK: one client controlling others' commands.

use crate::clock::unix_millis;
use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::node_state::client_pause::PauseMode;
use crate::node_state::client_unblock::UnblockHow;
use std::sync::atomic::Ordering::Relaxed;

/// Redis's answer to a CLIENT subcommand given a number of arguments it has no form for.
fn wrong_form(sub: &[u8]) -> CmdError {
    let shown = &sub[..sub.len().min(128)];
    CmdError::new(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
        args::text(shown)
    ))
}

/// CLIENT PAUSE timeout [WRITE|ALL]: holds clients' commands (all of them, or those that
/// write or may replicate) for `timeout` milliseconds (see `node_state::client_pause`).
pub fn pause(ctx: &mut Ctx<'_>, a: &[&[u8]]) -> CmdResult {
    if a.len() > 4 {
        return Err(wrong_form(a[1]));
    }
    let mode = match a.get(3) {
        None => PauseMode::All,
        Some(m) if is(m, "write") => PauseMode::Write,
        Some(m) if is(m, "all") => PauseMode::All,
        Some(_) => return err("ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    let timeout = args::int(a[2])
        .map_err(|_| CmdError::new("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return err("ERR timeout is negative");
    }
    let now = unix_millis();
    // A zero timeout sets a pause that is already over, as in Redis.
    let end = if timeout > 0 {
        now.saturating_add(timeout as u64)
    } else {
        0
    };
    ctx.server.client_pause.pause(mode, end, now);
    ctx.reply.ok();
    Ok(())
}

/// CLIENT UNPAUSE: lifts the pause; held clients run their commands.
pub fn unpause(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    if ctx.server.client_pause.unpause() {
        for client in ctx.server.clients.all() {
            if client.paused.load(Relaxed) {
                client.wake();
            }
        }
    }
    ctx.reply.ok();
    Ok(())
}

/// CLIENT UNBLOCK client-id [TIMEOUT|ERROR]: ends another client's wait in a blocking
/// command (BLPOP, BZPOPMIN, XREAD, WAIT...) as if it timed out, or with an error. 1 if
/// that client was so blocked, else 0 (a client held by CLIENT PAUSE is not, as in Redis
/// 7.2, where 7.0 had no answer for it).
pub fn unblock(ctx: &mut Ctx<'_>, a: &[&[u8]]) -> CmdResult {
    if a.len() > 4 {
        return Err(wrong_form(a[1]));
    }
    let how = match a.get(3) {
        None => UnblockHow::Timeout,
        Some(r) if is(r, "timeout") => UnblockHow::Timeout,
        Some(r) if is(r, "error") => UnblockHow::Error,
        Some(_) => return err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let id = args::int(a[2])?;
    let target = u64::try_from(id)
        .ok()
        .and_then(|id| ctx.server.clients.get(id));
    let unblocked = match target {
        Some(client) if client.unblock.request(how) => {
            client.wake();
            true
        }
        _ => false,
    };
    ctx.reply.integer(i64::from(unblocked));
    Ok(())
}
