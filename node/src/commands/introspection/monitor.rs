//! MONITOR: the client sees every command the node runs from then on (the lines are made
//! and bounded in [`crate::node_state::monitors`]). RESET or leaving ends it.

use crate::command_framework::error::err;
use crate::command_framework::{CmdResult, Ctx};

pub fn monitor(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    // Inside EXEC the client expects one reply per command (Redis's DENY BLOCKING).
    if ctx.in_exec {
        return err("ERR MONITOR isn't allowed for DENY BLOCKING client");
    }
    // A second MONITOR is ignored without a reply, as Redis ignores it.
    if ctx.server.monitors.add(&ctx.client.shared) {
        ctx.reply.simple(b"OK");
    }
    Ok(())
}
