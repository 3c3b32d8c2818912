//! CLUSTER ADDSLOTS ADDSLOTSRANGE DELSLOTS DELSLOTSRANGE FLUSHSLOTS SETSLOT: changes to the
//! slot map, validated by the topology, and made by this node (saved before the reply) or,
//! in a topology group, committed by the group before the reply (see `change`).

use super::change::{change_topology, commit_then_ok};
use super::cluster;
use crate::cluster::consensus::TopologyCommand;
use crate::cluster::ops::{parse_ranges, parse_slots};
use crate::cluster::setslot::SetSlot;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::keyspace::shard_of_slot;

fn assign(ctx: &mut Ctx<'_>, ranges: Vec<(u16, u16)>) -> CmdResult {
    let c = cluster(ctx)?;
    change_topology(
        ctx,
        c,
        |t| t.add_slots(&ranges),
        |t, ()| {
            Some(TopologyCommand::AssignSlots {
                node: t.myself().id,
                ranges: ranges.clone(),
            })
        },
    )
}

fn unassign(ctx: &mut Ctx<'_>, ranges: Vec<(u16, u16)>) -> CmdResult {
    let c = cluster(ctx)?;
    change_topology(
        ctx,
        c,
        |t| t.del_slots(&ranges),
        |_, ()| {
            Some(TopologyCommand::RemoveSlots {
                ranges: ranges.clone(),
            })
        },
    )
}

pub fn addslots(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let ranges = parse_slots(&args[2..])?;
    assign(ctx, ranges)
}

pub fn delslots(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let ranges = parse_slots(&args[2..])?;
    unassign(ctx, ranges)
}

/// Range forms take pairs: an odd count is an arity error, as Redis answers it.
fn ranges_arg(args: &[&[u8]], name: &str) -> Result<Vec<(u16, u16)>, CmdError> {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.into()));
    }
    Ok(parse_ranges(&args[2..])?)
}

pub fn addslotsrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let ranges = ranges_arg(args, "cluster|addslotsrange")?;
    assign(ctx, ranges)
}

pub fn delslotsrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let ranges = ranges_arg(args, "cluster|delslotsrange")?;
    unassign(ctx, ranges)
}

pub fn flushslots(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let keys = super::keys_held(ctx);
    change_topology(
        ctx,
        c,
        |t| t.flush_slots(keys),
        |t, ()| {
            let ranges = t.slots.ranges_of(t.myself_index());
            (!ranges.is_empty()).then_some(TopologyCommand::RemoveSlots { ranges })
        },
    )
}

/// MIGRATING, IMPORTING and STABLE are this node's own markers, in a group too (Redis
/// keeps them out of consensus as well). NODE binds the slot: in a group, through the log
/// (its apply ends this node's markers for the slot), unless the slot is bound to that node
/// already (redis-cli sends NODE to every primary after a move), which only ends the markers.
pub fn setslot(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    c.topology.read().check_setslot_allowed()?;
    let (slot, action) = SetSlot::parse(&args[2..])?;
    let keys = ctx
        .db
        .with_shard(shard_of_slot(slot), |s| s.table(slot).len());
    let SetSlot::Node(arg) = action else {
        c.change(|t| t.set_slot(slot, action, keys))?;
        ctx.reply.ok();
        return Ok(());
    };
    if !c.in_group() {
        c.change(|t| t.set_slot(slot, SetSlot::Node(arg), keys))?;
        ctx.reply.ok();
        return Ok(());
    }
    let (target, bound) = {
        let t = c.topology.read();
        t.clone().set_slot(slot, SetSlot::Node(arg), keys)?;
        let target = t.primary_by_arg(arg, false)?;
        let bound = t.owner(slot).is_some_and(|o| o.id == target);
        (target, bound)
    };
    if bound {
        c.change(|t| {
            let me = t.myself().id;
            if target != me && keys == 0 {
                t.slots.migrating.remove(&slot);
            }
            if target == me {
                t.slots.importing.remove(&slot);
            }
            t.refresh_state();
            Ok(())
        })?;
    } else {
        return commit_then_ok(ctx, c, TopologyCommand::SetSlotNode { slot, node: target });
    }
    ctx.reply.ok();
    Ok(())
}
