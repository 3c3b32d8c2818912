//! ZADD ZINCRBY ZREM ZREMRANGEBYRANK ZREMRANGEBYSCORE ZREMRANGEBYLEX.

use super::parse::{self, LexRange, ScoreRange};
use super::{insert_error, zset_at, zset_limits};
use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::key_events::WhenGone;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::config::keyspace_events::ZSET as ZSET_EVENTS;
use crate::db::packed::PackLimits;
use crate::db::zset::ZSet;
use crate::db::Value;
use smallvec::SmallVec;

/// ZADD's options (ZINCRBY is ZADD with INCR set).
#[derive(Default, Clone, Copy)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What adding one member did.
#[derive(PartialEq, Eq)]
enum Outcome {
    Added,
    Updated,
    /// Processed, but the score was already that value.
    Same,
    /// Skipped by NX, XX, GT or LT.
    Skipped,
}

/// Redis's `zsetAdd`: one member under the options; returns the outcome and the member's
/// score afterwards.
fn add_one(
    z: &mut ZSet,
    member: &[u8],
    score: f64,
    f: AddFlags,
    limits: PackLimits,
) -> Result<(Outcome, f64), CmdError> {
    match z.score(member) {
        Some(current) => {
            if f.nx {
                return Ok((Outcome::Skipped, current));
            }
            let mut score = score;
            if f.incr {
                score += current;
                if score.is_nan() {
                    return err("ERR resulting score is not a number (NaN)");
                }
            }
            if (f.lt && score >= current) || (f.gt && score <= current) {
                return Ok((Outcome::Skipped, current));
            }
            if score != current {
                z.insert(member, score, limits).map_err(insert_error)?;
                Ok((Outcome::Updated, score))
            } else {
                Ok((Outcome::Same, score))
            }
        }
        None if !f.xx => {
            z.insert(member, score, limits).map_err(insert_error)?;
            Ok((Outcome::Added, score))
        }
        None => Ok((Outcome::Skipped, score)),
    }
}

/// Counts over a ZADD's members.
#[derive(Default)]
struct Tally {
    added: usize,
    updated: usize,
    processed: usize,
    /// The last member's score afterwards (the INCR reply).
    score: f64,
}

/// Adds every (score, member) pair; stops at the first error (only INCR's NaN, with a single
/// pair, or a set at its size limit), returning what was done before it.
fn add_all(
    z: &mut ZSet,
    pairs: &[&[u8]],
    scores: &[f64],
    f: AddFlags,
    limits: PackLimits,
) -> (Tally, Option<CmdError>) {
    let mut t = Tally::default();
    for (pair, &score) in pairs.chunks_exact(2).zip(scores) {
        match add_one(z, pair[1], score, f, limits) {
            Ok((outcome, s)) => {
                match outcome {
                    Outcome::Added => t.added += 1,
                    Outcome::Updated => t.updated += 1,
                    Outcome::Same | Outcome::Skipped => {}
                }
                if outcome != Outcome::Skipped {
                    t.processed += 1;
                }
                t.score = s;
            }
            Err(e) => return (t, Some(e)),
        }
    }
    (t, None)
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
pub fn zadd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    zadd_generic(ctx, args, false)
}

/// ZINCRBY key increment member
pub fn zincrby(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    zadd_generic(ctx, args, true)
}

fn zadd_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], incr: bool) -> CmdResult {
    let key = args[1];
    let mut f = AddFlags {
        incr,
        ..AddFlags::default()
    };
    // Options come first; the first argument that is not one starts the pairs (ZINCRBY shares
    // this parse, as in Redis).
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        if is(a, "nx") {
            f.nx = true;
        } else if is(a, "xx") {
            f.xx = true;
        } else if is(a, "ch") {
            f.ch = true;
        } else if is(a, "incr") {
            f.incr = true;
        } else if is(a, "gt") {
            f.gt = true;
        } else if is(a, "lt") {
            f.lt = true;
        } else {
            break;
        }
        i += 1;
    }
    let pairs = &args[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if f.nx && f.xx {
        return err("ERR XX and NX options at the same time are not compatible");
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return err("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && pairs.len() > 2 {
        return err("ERR INCR option supports a single increment-element pair");
    }
    // Every score is checked before anything changes: the command applies fully or not at all.
    let scores: SmallVec<[f64; 8]> = pairs
        .chunks_exact(2)
        .map(|p| parse::score(p[0]))
        .collect::<Result<_, _>>()?;

    let limits = zset_limits(ctx);
    let (tally, error) = if let Some(z) = zset_at(&mut ctx.db, key)? {
        add_all(z, pairs, &scores, f, limits)
    } else if f.xx {
        // No key and XX: nothing can be added.
        (Tally::default(), None)
    } else {
        let mut z = Box::new(ZSet::new());
        let done = add_all(&mut z, pairs, &scores, f, limits);
        if !z.is_empty() {
            ctx.db.set(key, Value::ZSet(z));
        }
        done
    };
    let changes = tally.added + tally.updated;
    if changes > 0 {
        if f.incr {
            ctx.name_event(ZSET_EVENTS, "zincr", WhenGone::Keep);
        }
        ctx.modified(key);
        ctx.effects.dirty += (changes - 1) as u64;
    }
    if tally.added > 0 {
        ctx.signal_ready(key);
    }
    if let Some(e) = error {
        return Err(e);
    }
    if f.incr {
        if tally.processed > 0 {
            ctx.reply.double(tally.score);
        } else {
            ctx.reply.null();
        }
    } else {
        let n = if f.ch { changes } else { tally.added };
        ctx.reply.integer(n as i64);
    }
    Ok(())
}

/// ZREM key member [member ...]
pub fn zrem(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let removed = match zset_at(&mut ctx.db, key)? {
        None => 0,
        Some(z) => args[2..].iter().filter(|m| z.remove(m).is_some()).count(),
    };
    finish_removal(ctx, key, removed);
    Ok(())
}

/// After removing `removed` members: delete the key if empty, record the change, reply.
fn finish_removal(ctx: &mut Ctx<'_>, key: &[u8], removed: usize) {
    if removed > 0 {
        ctx.db.remove_if_empty(key);
        ctx.modified(key);
    }
    ctx.reply.integer(removed as i64);
}

/// Clamps Redis-style rank indexes (negative counts from the end) to a window over `len`
/// members: (first rank, count). An empty window has count 0.
pub fn rank_window(start: i64, end: i64, len: usize) -> (usize, usize) {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { len + end } else { end };
    if start > end || start >= len {
        return (0, 0);
    }
    let end = end.min(len - 1);
    (start as usize, (end - start + 1) as usize)
}

/// ZREMRANGEBYRANK key start stop
pub fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (start, end) = (args::int(args[2])?, args::int(args[3])?);
    let removed = match zset_at(&mut ctx.db, args[1])? {
        None => 0,
        Some(z) => {
            let (first, count) = rank_window(start, end, z.len());
            z.remove_range(first, count)
        }
    };
    finish_removal(ctx, args[1], removed);
    Ok(())
}

/// ZREMRANGEBYSCORE key min max
pub fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let range = ScoreRange::parse(args[2], args[3])?;
    let removed = match zset_at(&mut ctx.db, args[1])? {
        None => 0,
        Some(z) => {
            let (first, count) = super::range::score_ranks(z, &range);
            z.remove_range(first, count)
        }
    };
    finish_removal(ctx, args[1], removed);
    Ok(())
}

/// ZREMRANGEBYLEX key min max
pub fn zremrangebylex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let range = LexRange::parse(args[2], args[3])?;
    let removed = match zset_at(&mut ctx.db, args[1])? {
        None => 0,
        Some(z) => {
            let (first, count) = super::range::lex_ranks(z, &range);
            z.remove_range(first, count)
        }
    };
    finish_removal(ctx, args[1], removed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_windows_as_redis_sanitises() {
        assert_eq!(rank_window(0, -1, 5), (0, 5));
        assert_eq!(rank_window(-2, -1, 5), (3, 2));
        assert_eq!(rank_window(-100, 1, 5), (0, 2));
        assert_eq!(rank_window(3, 100, 5), (3, 2));
        assert_eq!(rank_window(5, 10, 5), (0, 0));
        assert_eq!(rank_window(2, 1, 5), (0, 0));
        assert_eq!(rank_window(0, -6, 5), (0, 0));
        assert_eq!(rank_window(0, 0, 0), (0, 0));
        assert_eq!(rank_window(i64::MIN, i64::MAX, 3), (0, 3));
    }
}
