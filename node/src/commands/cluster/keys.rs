//! CLUSTER KEYSLOT COUNTKEYSINSLOT GETKEYSINSLOT: the keyspace seen by hash slot (the
//! keyspace keeps one table per slot, so counting is O(1) and listing O(keys returned)).

use super::cluster;
use crate::command_framework::args;
use crate::command_framework::error::err;
use crate::command_framework::{CmdResult, Ctx};
use crate::db::keyspace::shard_of_slot;
use proto::slot::SLOT_COUNT;

pub fn keyslot(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    cluster(ctx)?;
    ctx.reply.integer(proto::slot::key_slot(args[2]) as i64);
    Ok(())
}

pub fn countkeysinslot(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    cluster(ctx)?;
    let slot = args::int(args[2])?;
    if !(0..SLOT_COUNT as i64).contains(&slot) {
        return err("ERR Invalid slot");
    }
    let slot = slot as u16;
    let n = ctx
        .db
        .with_shard(shard_of_slot(slot), |s| s.table(slot).len());
    ctx.reply.integer(n as i64);
    Ok(())
}

pub fn getkeysinslot(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    cluster(ctx)?;
    let slot = args::int(args[2])?;
    let count = args::int(args[3])?;
    if count < 0 || !(0..SLOT_COUNT as i64).contains(&slot) {
        return err("ERR Invalid slot or number of keys");
    }
    // The slot's table bounds the reply whatever count asks for.
    let (slot, max) = (slot as u16, usize::try_from(count).unwrap_or(usize::MAX));
    let keys = ctx
        .db
        .with_shard(shard_of_slot(slot), |s| s.keys_in_slot(slot, max));
    ctx.reply.array(keys.len());
    for k in &keys {
        ctx.reply.bulk(k);
    }
    Ok(())
}
