//! CLUSTER ADDSLOTS ADDSLOTSRANGE DELSLOTS DELSLOTSRANGE FLUSHSLOTS SETSLOT: changes to the
//! slot map, validated by the topology and saved before the reply.

use super::cluster;
use crate::cluster::ops::{parse_ranges, parse_slots};
use crate::cluster::setslot::SetSlot;
use crate::command::{CmdError, CmdResult, Ctx};

pub fn addslots(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let ranges = parse_slots(&args[2..])?;
    c.change(|t| t.add_slots(&ranges))?;
    ctx.reply.ok();
    Ok(())
}

pub fn delslots(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let ranges = parse_slots(&args[2..])?;
    c.change(|t| t.del_slots(&ranges))?;
    ctx.reply.ok();
    Ok(())
}

/// Range forms take pairs: an odd count is an arity error, as Redis answers it.
fn ranges_arg(args: &[&[u8]], name: &str) -> Result<Vec<(u16, u16)>, CmdError> {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.into()));
    }
    Ok(parse_ranges(&args[2..])?)
}

pub fn addslotsrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let ranges = ranges_arg(args, "cluster|addslotsrange")?;
    c.change(|t| t.add_slots(&ranges))?;
    ctx.reply.ok();
    Ok(())
}

pub fn delslotsrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let ranges = ranges_arg(args, "cluster|delslotsrange")?;
    c.change(|t| t.del_slots(&ranges))?;
    ctx.reply.ok();
    Ok(())
}

pub fn flushslots(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let keys = ctx.server.keyspace.key_count();
    c.change(|t| t.flush_slots(keys))?;
    ctx.reply.ok();
    Ok(())
}

pub fn setslot(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    c.topology.read().check_setslot_allowed()?;
    let (slot, action) = SetSlot::parse(&args[2..])?;
    let keys = ctx.server.keyspace.count_in_slot(slot);
    c.change(|t| t.set_slot(slot, action, keys))?;
    ctx.reply.ok();
    Ok(())
}
