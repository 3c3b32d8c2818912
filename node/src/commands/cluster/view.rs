//! CLUSTER MYID MYSHARDID INFO NODES SLOTS SHARDS SAVECONFIG: views of the topology.

use super::cluster;
use crate::cluster::{nodes_text, replies};
use crate::command::{CmdResult, Ctx};

pub fn myid(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let id = cluster(ctx)?.topology.read().myself().id;
    ctx.reply.bulk(id.as_bytes());
    Ok(())
}

pub fn myshardid(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let id = cluster(ctx)?.topology.read().myself().shard;
    ctx.reply.bulk(id.as_bytes());
    Ok(())
}

pub fn info(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let text = replies::info(&cluster(ctx)?.topology.read());
    ctx.reply.verbatim(text.as_bytes());
    Ok(())
}

pub fn nodes(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let text = nodes_text::cluster_nodes(&cluster(ctx)?.topology.read());
    ctx.reply.verbatim(text.as_bytes());
    Ok(())
}

pub fn slots(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    replies::slots(&c.topology.read(), &mut ctx.reply);
    Ok(())
}

pub fn shards(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    replies::shards(&c.topology.read(), &mut ctx.reply);
    Ok(())
}

pub fn saveconfig(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    cluster(ctx)?.save()?;
    ctx.reply.ok();
    Ok(())
}
