//! `CLUSTER SLOT-STATS SLOTSRANGE start end` (Valkey 8's form): per slot, its key count and
//! (our addition) the bytes of its keys and values, walked on request. The Rebalance
//! operation reads every primary's share through it. ORDERBY is not supported.

use super::cluster;
use crate::command_framework::args::int;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::keyspace::shard_of_slot;

pub fn slot_stats(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    cluster(ctx)?;
    if args.len() != 5 || !args[2].eq_ignore_ascii_case(b"slotsrange") {
        return Err(CmdError::new(
            "ERR only CLUSTER SLOT-STATS SLOTSRANGE start end is supported",
        ));
    }
    let slot = |a: &[u8]| {
        int(a)
            .ok()
            .filter(|&s| (0..=crate::cluster::slots::SLOT_MAX as i64).contains(&s))
            .map(|s| s as u16)
            .ok_or_else(|| CmdError::new("ERR Invalid or out of range slot"))
    };
    let (start, end) = (slot(args[3])?, slot(args[4])?);
    if start > end {
        return Err(CmdError::new(
            "ERR Start slot number is greater than end slot number",
        ));
    }
    ctx.reply.array((end - start + 1) as usize);
    for s in start..=end {
        let (keys, bytes) = ctx
            .db
            .with_shard(shard_of_slot(s), |sh| sh.slot_footprint(s));
        ctx.reply.array(2);
        ctx.reply.integer(s as i64);
        ctx.reply.map(2);
        ctx.reply.bulk(b"key-count");
        ctx.reply.integer(keys as i64);
        ctx.reply.bulk(b"bytes");
        ctx.reply.integer(bytes as i64);
    }
    Ok(())
}
