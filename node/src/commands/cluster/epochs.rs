//! CLUSTER BUMPEPOCH and SET-CONFIG-EPOCH: this node's config epoch by hand, saved before
//! the reply.

use super::cluster;
use crate::command_framework::args;
use crate::command_framework::{CmdResult, Ctx};

pub fn bumpepoch(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let bump = cluster(ctx)?.change(|t| Ok(t.bump_epoch()))?;
    ctx.reply.simple(bump.text().as_bytes());
    Ok(())
}

pub fn set_config_epoch(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let epoch = args::int(args[2])?;
    c.change(|t| t.set_config_epoch(epoch))?;
    ctx.reply.ok();
    Ok(())
}
