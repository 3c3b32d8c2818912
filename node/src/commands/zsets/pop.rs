//! ZPOPMIN ZPOPMAX BZPOPMIN BZPOPMAX ZMPOP BZMPOP.
//!
//! Reply shapes follow Redis 7.0: ZPOPMIN/MAX answer a flat [member, score, ...] array, except
//! with a COUNT in RESP3, where each pair is nested; BZPOPMIN/MAX answer [key, member, score];
//! ZMPOP/BZMPOP answer [key, [[member, score], ...]] in both protocols.

use super::zset_at;
use crate::command_framework::args::{self, is};
use crate::command_framework::ctx::{BlockRequest, TimeoutReply};
use crate::command_framework::key_events::WhenGone;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::config::keyspace_events::ZSET as ZSET_EVENTS;
use crate::db::zset::ZSet;
use crate::replication::propagate::WriteEffect;
use proto::resp::Reply;

#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Min,
    Max,
}

impl End {
    /// The keyspace event of popping from this end (`zpopmin`, `zpopmax`).
    fn pop_event(self) -> &'static str {
        match self {
            End::Min => "zpopmin",
            End::Max => "zpopmax",
        }
    }
}

/// How a batch of popped members is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// member, score, member, score...
    Flat,
    /// [member, score], [member, score]...
    Nested,
}

/// Pops up to `count` members from `end` of `z`, writing each one. The caller has written
/// the array header for `popped_len(z, count)` members.
fn pop_into(z: &mut ZSet, end: End, count: usize, shape: Shape, reply: &mut Reply<'_>) {
    // Written from one walk of the range, then removed at once: popping one at a time from
    // the top of a packed set would walk it once per member.
    let n = count.min(z.len());
    if n == 0 {
        return;
    }
    let (first, window) = match end {
        End::Min => (0, z.range(0, n, false)),
        End::Max => (z.len() - n, z.range(z.len() - 1, n, true)),
    };
    for (member, score) in window {
        if shape == Shape::Nested {
            reply.array(2);
        }
        reply.bulk(member);
        reply.double(score);
    }
    z.remove_range(first, n);
}

/// ZPOPMIN/ZPOPMAX key [count]
fn zpop(ctx: &mut Ctx<'_>, args: &[&[u8]], end: End) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match args::int(a) {
            Ok(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            // Redis's getPositiveLongFromObjectOrReply: one text for both failures.
            _ => return Err(CmdError::new("ERR value is out of range, must be positive")),
        },
    };
    let key = args[1];
    let shape = if ctx.reply.is_resp3() && count.is_some() {
        Shape::Nested
    } else {
        Shape::Flat
    };
    let Ctx { db, reply, .. } = ctx;
    let popped = match zset_at(db, key)? {
        Some(z) if count != Some(0) => {
            let n = count.unwrap_or(1).min(z.len());
            reply.array(if shape == Shape::Flat { n * 2 } else { n });
            pop_into(z, end, n, shape, reply);
            n
        }
        _ => {
            reply.array(0);
            0
        }
    };
    if popped > 0 {
        ctx.db.remove_if_empty(key);
        ctx.name_event(ZSET_EVENTS, end.pop_event(), WhenGone::AlsoDel);
        ctx.modified(key);
    }
    Ok(())
}

/// ZPOPMIN key [count]
pub fn zpopmin(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    zpop(ctx, args, End::Min)
}

/// ZPOPMAX key [count]
pub fn zpopmax(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    zpop(ctx, args, End::Max)
}

/// Pops from the first key holding members; returns false if none does. `count` None is
/// the BZPOPMIN shape ([key, member, score]); Some(n) the ZMPOP shape. With
/// `wrong_type_is_empty` (a blocked client's retry) a key of another type is passed over, as
/// Redis 7.0 serves a blocked zset client only from a zset and keeps it waiting otherwise;
/// else it is WRONGTYPE.
fn pop_first_available(
    ctx: &mut Ctx<'_>,
    keys: &[&[u8]],
    end: End,
    count: Option<usize>,
    wrong_type_is_empty: bool,
) -> Result<bool, CmdError> {
    for key in keys {
        let Ctx { db, reply, .. } = &mut *ctx;
        let z = match zset_at(db, key) {
            Err(CmdError::WrongType) if wrong_type_is_empty => continue,
            other => other?,
        };
        let Some(z) = z else {
            continue;
        };
        if z.is_empty() {
            continue;
        }
        let served = match count {
            None => {
                reply.array(3);
                reply.bulk(key);
                pop_into(z, end, 1, Shape::Flat, reply);
                1
            }
            Some(count) => {
                let n = count.min(z.len());
                reply.array(2);
                reply.bulk(key);
                reply.array(n);
                pop_into(z, end, n, Shape::Nested, reply);
                n
            }
        };
        ctx.replicate(|| WriteEffect::Served {
            key: key.to_vec(),
            count: served,
        });
        ctx.db.remove_if_empty(key);
        ctx.modified(key);
        return Ok(true);
    }
    Ok(false)
}

/// Serves a blocking pop now, or asks the connection to wait for one of `keys`.
fn blocking_pop(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    keys: &[&[u8]],
    end: End,
    count: Option<usize>,
    timeout: Option<std::time::Duration>,
) -> CmdResult {
    let retry = ctx.is_block_retry();
    if pop_first_available(ctx, keys, end, count, retry)? {
        return Ok(());
    }
    if ctx.in_exec {
        // A transaction cannot wait: it is a timeout straight away, as in Redis.
        ctx.reply.null_array();
        return Ok(());
    }
    ctx.effects.block = Some(BlockRequest {
        keys: keys.iter().map(|k| (*k).into()).collect(),
        timeout,
        retry: args.iter().map(|a| a.to_vec()).collect(),
        timeout_reply: TimeoutReply::NullArray,
    });
    Ok(())
}

/// BZPOPMIN/BZPOPMAX key [key ...] timeout
fn bzpop(ctx: &mut Ctx<'_>, args: &[&[u8]], end: End) -> CmdResult {
    let timeout = args::timeout_secs(args[args.len() - 1])?;
    let keys = &args[1..args.len() - 1];
    blocking_pop(ctx, args, keys, end, None, timeout)
}

/// BZPOPMIN key [key ...] timeout
pub fn bzpopmin(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    bzpop(ctx, args, End::Min)
}

/// BZPOPMAX key [key ...] timeout
pub fn bzpopmax(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    bzpop(ctx, args, End::Max)
}

/// A positive count-like argument; any failure answers `message` (Redis's
/// `getRangeLongFromObjectOrReply` with a message).
fn positive(arg: &[u8], message: &'static str) -> Result<usize, CmdError> {
    match args::int(arg) {
        Ok(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
        _ => Err(CmdError::new(message)),
    }
}

/// Parses `numkeys key... MIN|MAX [COUNT count]` from `numkeys_at`: (keys, end, count).
fn parse_mpop<'a, 'b>(
    args: &'b [&'a [u8]],
    numkeys_at: usize,
) -> Result<(&'b [&'a [u8]], End, usize), CmdError> {
    let numkeys = positive(args[numkeys_at], "ERR numkeys should be greater than 0")?;
    let where_at = (numkeys_at + 1).saturating_add(numkeys);
    if where_at >= args.len() {
        return Err(CmdError::Syntax);
    }
    let end = if is(args[where_at], "min") {
        End::Min
    } else if is(args[where_at], "max") {
        End::Max
    } else {
        return Err(CmdError::Syntax);
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < args.len() {
        if count.is_none() && is(args[j], "count") && j + 1 < args.len() {
            count = Some(positive(args[j + 1], "ERR count should be greater than 0")?);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((&args[numkeys_at + 1..where_at], end, count.unwrap_or(1)))
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
pub fn zmpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (keys, end, count) = parse_mpop(args, 1)?;
    if !pop_first_available(ctx, keys, end, Some(count), false)? {
        ctx.reply.null_array();
    }
    Ok(())
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
pub fn bzmpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (keys, end, count) = parse_mpop(args, 2)?;
    let timeout = args::timeout_secs(args[1])?;
    blocking_pop(ctx, args, keys, end, Some(count), timeout)
}
