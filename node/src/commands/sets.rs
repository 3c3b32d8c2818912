//! Sets: SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SMOVE SSCAN here; SPOP SRANDMEMBER in
//! `random`; SINTER SUNION SDIFF, their STORE forms and SINTERCARD in `algebra`.
//!
//! A set is packed while small and a table after (`db::set`). A table's members are removed
//! with `swap_remove`, which keeps removal O(1) and is what SSCAN's cursor walk relies on
//! (see `command::scan`); a packed set is scanned whole in one call, as Redis scans a small
//! set.

mod algebra;
mod random;

use crate::command_framework::key_events::WhenGone;
use crate::command_framework::scan::{self, Extra};
use crate::command_framework::spec::{command, flags::*, KeySpec, ALL_ARGS_KEYS, KEY1, KEY1_2};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::config::keyspace_events::SET as SET_EVENTS;
use crate::db::set::SetLimits;
use crate::db::value::SetValue;
use crate::db::{Locked, Value};

const GROUP: &str = "set";

pub static COMMANDS: &[CommandSpec] = &[
    command("sadd", -3, WRITE | DENYOOM | FAST, KEY1, sadd, GROUP, "Adds one or more members to a set. Creates the key if it doesn't exist."),
    command("srem", -3, WRITE | FAST, KEY1, srem, GROUP, "Removes one or more members from a set. Deletes the set if the last member was removed."),
    command("smembers", 2, READONLY, KEY1, smembers, GROUP, "Returns all members of a set."),
    command("sismember", 3, READONLY | FAST, KEY1, sismember, GROUP, "Determines whether a member belongs to a set."),
    CommandSpec { since: "6.2.0", ..command("smismember", -3, READONLY | FAST, KEY1, smismember, GROUP, "Determines whether multiple members belong to a set.") },
    command("scard", 2, READONLY | FAST, KEY1, scard, GROUP, "Returns the number of members in a set."),
    command("spop", -2, WRITE | FAST, KEY1, random::spop, GROUP, "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped."),
    command("srandmember", -2, READONLY, KEY1, random::srandmember, GROUP, "Get one or multiple random members from a set"),
    command("smove", 4, WRITE | FAST, KEY1_2, smove, GROUP, "Moves a member from one set to another."),
    command("sinter", -2, READONLY, ALL_ARGS_KEYS, algebra::sinter, GROUP, "Returns the intersect of multiple sets."),
    command("sunion", -2, READONLY, ALL_ARGS_KEYS, algebra::sunion, GROUP, "Returns the union of multiple sets."),
    command("sdiff", -2, READONLY, ALL_ARGS_KEYS, algebra::sdiff, GROUP, "Returns the difference of multiple sets."),
    command("sinterstore", -3, WRITE | DENYOOM, ALL_ARGS_KEYS, algebra::sinterstore, GROUP, "Stores the intersect of multiple sets in a key."),
    command("sunionstore", -3, WRITE | DENYOOM, ALL_ARGS_KEYS, algebra::sunionstore, GROUP, "Stores the union of multiple sets in a key."),
    command("sdiffstore", -3, WRITE | DENYOOM, ALL_ARGS_KEYS, algebra::sdiffstore, GROUP, "Stores the difference of multiple sets in a key."),
    CommandSpec { since: "7.0.0", ..command("sintercard", -3, READONLY | MOVABLE_KEYS, KeySpec::Custom(algebra::sintercard_keys), algebra::sintercard, GROUP, "Returns the number of members of the intersect of multiple sets.") },
    CommandSpec { since: "2.8.0", ..command("sscan", -3, READONLY, KEY1, sscan, GROUP, "Iterates over members of a set.") },
];

/// The thresholds a write packs by (`set-max-listpack-entries`, `set-max-listpack-value`)
/// and the intset bound OBJECT ENCODING answers by (`set-max-intset-entries`).
pub(crate) fn set_limits(ctx: &Ctx<'_>) -> SetLimits {
    ctx.server.hot.set_limits()
}

/// The set at `key`: None when there is no key, WRONGTYPE when it is no set.
pub(crate) fn set_at<'a>(
    db: &'a mut Locked<'_>,
    key: &[u8],
) -> Result<Option<&'a mut SetValue>, CmdError> {
    match db.get(key).map(|e| &mut e.value) {
        None => Ok(None),
        Some(Value::Set(s)) => Ok(Some(s)),
        Some(_) => Err(CmdError::WrongType),
    }
}

fn sadd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let limits = set_limits(ctx);
    let entry = ctx
        .db
        .get_or_insert_with(args[1], || Value::Set(Box::default()));
    let Value::Set(set) = &mut entry.value else {
        return Err(CmdError::WrongType);
    };
    let mut added = 0;
    for member in &args[2..] {
        if set.insert(member, limits) {
            added += 1;
        }
    }
    // The key was live, or was created with at least one member: nothing to delete.
    if added > 0 {
        ctx.modified(args[1]);
    }
    ctx.reply.integer(added);
    Ok(())
}

fn srem(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Some(set) = set_at(&mut ctx.db, args[1])? else {
        ctx.reply.integer(0);
        return Ok(());
    };
    let mut removed = 0;
    for member in &args[2..] {
        if set.remove(member) {
            removed += 1;
            if set.is_empty() {
                break;
            }
        }
    }
    if removed > 0 {
        ctx.db.remove_if_empty(args[1]);
        ctx.modified(args[1]);
    }
    ctx.reply.integer(removed);
    Ok(())
}

fn smembers(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let set = set_at(db, args[1])?;
    reply.set(set.as_ref().map_or(0, |s| s.len()));
    for member in set.iter().flat_map(|s| s.iter()) {
        reply.bulk(member);
    }
    Ok(())
}

fn sismember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let found = set_at(&mut ctx.db, args[1])?.is_some_and(|s| s.contains(args[2]));
    ctx.reply.integer(found as i64);
    Ok(())
}

fn smismember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let set = set_at(db, args[1])?;
    reply.array(args.len() - 2);
    for member in &args[2..] {
        let found = set.as_ref().is_some_and(|s| s.contains(member));
        reply.integer(found as i64);
    }
    Ok(())
}

fn scard(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let len = set_at(&mut ctx.db, args[1])?.map_or(0, |s| s.len());
    ctx.reply.integer(len as i64);
    Ok(())
}

/// SMOVE source destination member. As in Redis: a missing source answers 0 before any type
/// check; then both keys must be sets (or the destination absent); moving within one set
/// only reports membership.
fn smove(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (src, dst, member) = (args[1], args[2], args[3]);
    let limits = set_limits(ctx);
    let Some(src_set) = set_at(&mut ctx.db, src)? else {
        ctx.reply.integer(0);
        return Ok(());
    };
    let in_src = src_set.contains(member);
    set_at(&mut ctx.db, dst)?;
    if src == dst || !in_src {
        ctx.reply.integer(in_src as i64);
        return Ok(());
    }
    if let Some(s) = set_at(&mut ctx.db, src)? {
        s.remove(member);
    }
    ctx.db.remove_if_empty(src);
    ctx.modified(src);
    let added = match &mut ctx
        .db
        .get_or_insert_with(dst, || Value::Set(Box::default()))
        .value
    {
        Value::Set(d) => d.insert(member, limits),
        _ => false,
    };
    // A destination that already held the member is unchanged: its watchers keep their
    // EXEC, as in Redis.
    if added {
        ctx.name_event(SET_EVENTS, "sadd", WhenGone::Keep);
        ctx.modified(dst);
    }
    ctx.reply.integer(1);
    Ok(())
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]: the options are read after the key, as
/// Redis does (a missing key answers an empty page whatever they say).
fn sscan(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let cursor = scan::parse_cursor(args[2])?;
    let Ctx { db, reply, .. } = ctx;
    let Some(set) = set_at(db, args[1])? else {
        reply.array(2);
        reply.bulk(b"0");
        reply.array(0);
        return Ok(());
    };
    let options = scan::parse_options(&args[3..], Extra::None)?;
    if set.is_packed() {
        // Small enough to answer whole: cursor 0, no walk (a packed set keeps its order by
        // moving members up on removal, which a cursor over positions could skip across).
        let matching: Vec<&[u8]> = set.iter().filter(|m| options.matches(m)).collect();
        reply.array(2);
        reply.bulk(b"0");
        reply.array(matching.len());
        for member in matching {
            reply.bulk(member);
        }
        return Ok(());
    }
    // At most `count` indexes, and no more than the set holds.
    let mut found: Vec<usize> = Vec::new();
    let next = scan::walk(set.len(), cursor, options.count, |i| {
        if set.get_index(i).is_some_and(|m| options.matches(m)) {
            found.push(i);
        }
    });
    reply.array(2);
    reply.bulk(itoa::Buffer::new().format(next).as_bytes());
    reply.array(found.len());
    for member in found.into_iter().filter_map(|i| set.get_index(i)) {
        reply.bulk(member);
    }
    Ok(())
}
