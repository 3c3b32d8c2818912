//! Hashes: HSET HSETNX HGET HMGET HMSET HDEL HLEN HEXISTS HGETALL HKEYS HVALS HINCRBY
//! HINCRBYFLOAT HSTRLEN HSCAN HRANDFIELD.
//!
//! A hash is packed while small and a table after (`db::hash`). A table's fields are removed
//! with `swap_remove`, which keeps removal O(1) and is what HSCAN's cursor walk relies on (see
//! `command::scan`); a packed hash is scanned whole in one call, as Redis scans a listpack.

mod random;

use crate::command_framework::args;
use crate::command_framework::error::err;
use crate::command_framework::scan::{self, Extra};
use crate::command_framework::spec::{command, flags::*, KEY1};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::db::packed::PackLimits;
use crate::db::value::HashValue;
use crate::db::{Locked, Value};
use crate::replication::propagate::WriteEffect;

const GROUP: &str = "hash";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec { since: "2.0.0", ..command("hset", -4, WRITE | DENYOOM | FAST, KEY1, hset, GROUP, "Creates or modifies the value of a field in a hash.") },
    CommandSpec { since: "2.0.0", ..command("hsetnx", 4, WRITE | DENYOOM | FAST, KEY1, hsetnx, GROUP, "Sets the value of a field in a hash only when the field doesn't exist.") },
    CommandSpec { since: "2.0.0", ..command("hget", 3, READONLY | FAST, KEY1, hget, GROUP, "Returns the value of a field in a hash.") },
    CommandSpec { since: "2.0.0", ..command("hmget", -3, READONLY | FAST, KEY1, hmget, GROUP, "Returns the values of all fields in a hash.") },
    CommandSpec { since: "2.0.0", ..command("hmset", -4, WRITE | DENYOOM | FAST, KEY1, hmset, GROUP, "Sets the values of multiple fields.") },
    CommandSpec { since: "2.0.0", ..command("hdel", -3, WRITE | FAST, KEY1, hdel, GROUP, "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.") },
    CommandSpec { since: "2.0.0", ..command("hlen", 2, READONLY | FAST, KEY1, hlen, GROUP, "Returns the number of fields in a hash.") },
    CommandSpec { since: "2.0.0", ..command("hexists", 3, READONLY | FAST, KEY1, hexists, GROUP, "Determines whether a field exists in a hash.") },
    CommandSpec { since: "2.0.0", ..command("hgetall", 2, READONLY, KEY1, hgetall, GROUP, "Returns all fields and values in a hash.") },
    CommandSpec { since: "2.0.0", ..command("hkeys", 2, READONLY, KEY1, hkeys, GROUP, "Returns all fields in a hash.") },
    CommandSpec { since: "2.0.0", ..command("hvals", 2, READONLY, KEY1, hvals, GROUP, "Returns all values in a hash.") },
    CommandSpec { since: "2.0.0", ..command("hincrby", 4, WRITE | DENYOOM | FAST, KEY1, hincrby, GROUP, "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.") },
    CommandSpec { since: "2.6.0", ..command("hincrbyfloat", 4, WRITE | DENYOOM | FAST, KEY1, hincrbyfloat, GROUP, "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.") },
    CommandSpec { since: "3.2.0", ..command("hstrlen", 3, READONLY | FAST, KEY1, hstrlen, GROUP, "Returns the length of the value of a field.") },
    CommandSpec { since: "2.8.0", ..command("hscan", -3, READONLY, KEY1, hscan, GROUP, "Iterates over fields and values of a hash.") },
    CommandSpec { since: "6.2.0", ..command("hrandfield", -2, READONLY, KEY1, random::hrandfield, GROUP, "Returns one or more random fields from a hash.") },
];

/// The thresholds a write packs by (`hash-max-listpack-entries`, `hash-max-listpack-value`).
pub(crate) fn pack_limits(ctx: &Ctx<'_>) -> PackLimits {
    ctx.server.hot.hash_limits()
}

/// The hash at `key` for reading: None when there is no key, WRONGTYPE when it is no hash.
pub(crate) fn hash_at<'a>(
    db: &'a mut Locked<'_>,
    key: &[u8],
) -> Result<Option<&'a mut HashValue>, CmdError> {
    match db.get(key).map(|e| &mut e.value) {
        None => Ok(None),
        Some(Value::Hash(h)) => Ok(Some(h)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// The hash at `key`, created empty if there is no key (the caller then adds to it).
fn hash_or_create<'a>(db: &'a mut Locked<'_>, key: &[u8]) -> Result<&'a mut HashValue, CmdError> {
    match &mut db
        .get_or_insert_with(key, || Value::Hash(Box::default()))
        .value
    {
        Value::Hash(h) => Ok(h),
        _ => Err(CmdError::WrongType),
    }
}

/// Sets every field/value pair of `args[2..]`; returns how many fields are new.
fn set_pairs(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<i64, CmdError> {
    if args[2..].len() % 2 == 1 {
        return Err(CmdError::WrongArity(args::lower(args[0])));
    }
    let limits = pack_limits(ctx);
    let hash = hash_or_create(&mut ctx.db, args[1])?;
    let mut created = 0;
    for pair in args[2..].chunks_exact(2) {
        if hash.insert(pair[0], pair[1], limits) {
            created += 1;
        }
    }
    ctx.modified(args[1]);
    Ok(created)
}

fn hset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let created = set_pairs(ctx, args)?;
    ctx.reply.integer(created);
    Ok(())
}

fn hmset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    set_pairs(ctx, args)?;
    ctx.reply.ok();
    Ok(())
}

fn hsetnx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let limits = pack_limits(ctx);
    let hash = hash_or_create(&mut ctx.db, args[1])?;
    if hash.contains_key(args[2]) {
        ctx.reply.integer(0);
        return Ok(());
    }
    hash.insert(args[2], args[3], limits);
    ctx.modified(args[1]);
    ctx.reply.integer(1);
    Ok(())
}

fn hget(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    match hash_at(db, args[1])?.and_then(|h| h.get(args[2])) {
        Some(v) => reply.bulk(v),
        None => reply.null(),
    }
    Ok(())
}

fn hmget(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let hash = hash_at(db, args[1])?;
    reply.array(args.len() - 2);
    for field in &args[2..] {
        match hash.as_ref().and_then(|h| h.get(field)) {
            Some(v) => reply.bulk(v),
            None => reply.null(),
        }
    }
    Ok(())
}

fn hdel(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Some(hash) = hash_at(&mut ctx.db, args[1])? else {
        ctx.reply.integer(0);
        return Ok(());
    };
    let mut deleted = 0;
    for field in &args[2..] {
        if hash.remove(field) {
            deleted += 1;
            if hash.is_empty() {
                break;
            }
        }
    }
    if deleted > 0 {
        ctx.db.remove_if_empty(args[1]);
        ctx.modified(args[1]);
    }
    ctx.reply.integer(deleted);
    Ok(())
}

fn hlen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let len = hash_at(&mut ctx.db, args[1])?.map_or(0, |h| h.len());
    ctx.reply.integer(len as i64);
    Ok(())
}

fn hexists(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let found = hash_at(&mut ctx.db, args[1])?.is_some_and(|h| h.contains_key(args[2]));
    ctx.reply.integer(found as i64);
    Ok(())
}

fn hstrlen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let len = hash_at(&mut ctx.db, args[1])?
        .and_then(|h| h.get(args[2]))
        .map_or(0, |v| v.len());
    ctx.reply.integer(len as i64);
    Ok(())
}

fn hgetall(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let Some(hash) = hash_at(db, args[1])? else {
        reply.map(0);
        return Ok(());
    };
    reply.map(hash.len());
    for (field, value) in hash.iter() {
        reply.bulk(field);
        reply.bulk(value);
    }
    Ok(())
}

fn hkeys(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let hash = hash_at(db, args[1])?;
    reply.array(hash.as_ref().map_or(0, |h| h.len()));
    for field in hash.iter().flat_map(|h| h.keys()) {
        reply.bulk(field);
    }
    Ok(())
}

fn hvals(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let hash = hash_at(db, args[1])?;
    reply.array(hash.as_ref().map_or(0, |h| h.len()));
    for value in hash.iter().flat_map(|h| h.values()) {
        reply.bulk(value);
    }
    Ok(())
}

fn hincrby(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let delta = args::int(args[3])?;
    let limits = pack_limits(ctx);
    let hash = hash_or_create(&mut ctx.db, args[1])?;
    let current = match hash.get(args[2]) {
        None => 0,
        Some(v) => proto::resp::request::parse_i64(v)
            .ok_or_else(|| CmdError::new("ERR hash value is not an integer"))?,
    };
    let next = current.checked_add(delta).ok_or(CmdError::Overflow)?;
    let mut buf = itoa::Buffer::new();
    hash.insert(args[2], buf.format(next).as_bytes(), limits);
    ctx.modified(args[1]);
    ctx.reply.integer(next);
    Ok(())
}

fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let delta = args::float(args[3])?;
    if !delta.is_finite() {
        return err("ERR value is NaN or Infinity");
    }
    let limits = pack_limits(ctx);
    let hash = hash_or_create(&mut ctx.db, args[1])?;
    let current = match hash.get(args[2]) {
        None => 0.0,
        Some(v) => {
            args::parse_float(v).ok_or_else(|| CmdError::new("ERR hash value is not a float"))?
        }
    };
    let next = current + delta;
    if !next.is_finite() {
        return err("ERR increment would produce NaN or Infinity");
    }
    let text = super::strings::human_float(next);
    hash.insert(args[2], text.as_bytes(), limits);
    ctx.replicate(|| WriteEffect::NewValue(text.as_bytes().to_vec()));
    ctx.modified(args[1]);
    ctx.reply.bulk(text.as_bytes());
    Ok(())
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]: the options are read after the key, as
/// Redis does (a missing key answers an empty page whatever they say).
fn hscan(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let cursor = scan::parse_cursor(args[2])?;
    let Ctx { db, reply, .. } = ctx;
    let Some(hash) = hash_at(db, args[1])? else {
        reply.array(2);
        reply.bulk(b"0");
        reply.array(0);
        return Ok(());
    };
    let options = scan::parse_options(&args[3..], Extra::None)?;
    if hash.is_packed() {
        // Small enough to answer whole, as Redis answers a listpack: cursor 0, no walk (a
        // packed hash keeps its order by moving fields up on removal, which a cursor over
        // positions could skip across).
        let matching: Vec<(&[u8], &[u8])> =
            hash.iter().filter(|(f, _)| options.matches(f)).collect();
        reply.array(2);
        reply.bulk(b"0");
        reply.array(matching.len() * 2);
        for (field, value) in matching {
            reply.bulk(field);
            reply.bulk(value);
        }
        return Ok(());
    }
    // At most `count` indexes, and no more than the hash holds.
    let mut found: Vec<usize> = Vec::new();
    let next = scan::walk(hash.len(), cursor, options.count, |i| {
        if let Some((field, _)) = hash.get_index(i) {
            if options.matches(field) {
                found.push(i);
            }
        }
    });
    reply.array(2);
    reply.bulk(itoa::Buffer::new().format(next).as_bytes());
    reply.array(found.len() * 2);
    for (field, value) in found.into_iter().filter_map(|i| hash.get_index(i)) {
        reply.bulk(field);
        reply.bulk(value);
    }
    Ok(())
}
