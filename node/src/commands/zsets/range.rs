//! ZRANGE and its older forms (ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
//! ZREVRANGEBYLEX), and ZRANGESTORE. All share Redis's one argument parser, so each accepts
//! and refuses exactly what Redis does (ZREVRANGE ... REV is a syntax error, and so on).
//!
//! Every range resolves to a window of ranks in O(log n) (binary searches over the
//! order-statistic tree), so LIMIT's offset costs nothing, unlike Redis's O(offset) walk.
//! Lexicographic ranges assume all scores equal, as Redis documents; on mixed scores the
//! result is unspecified (here: the ranks between the two binary searches).

use super::parse::{LexRange, ScoreRange};
use super::write::rank_window;
use super::{insert_error, pair, pairs_header, zset_at, zset_limits};
use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::zset::ZSet;
use crate::db::Value;

#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Rank,
    Score,
    Lex,
}

/// The bounds of a range, parsed by its kind.
enum Bounds<'a> {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange<'a>),
}

/// A parsed ZRANGE-family request.
struct Request<'a> {
    bounds: Bounds<'a>,
    rev: bool,
    withscores: bool,
    offset: i64,
    /// Negative: no limit.
    limit: i64,
}

/// Redis's `zrangeGenericCommand` parse: `<min> <max>` at `key_at + 1`, then options.
/// `by` and `rev` are fixed by the older command forms; ZRANGE leaves them to the options.
fn parse_request<'a>(
    args: &[&'a [u8]],
    key_at: usize,
    store: bool,
    by: Option<By>,
    rev: Option<bool>,
) -> Result<Request<'a>, CmdError> {
    let (mut by, mut rev) = (by, rev);
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut j = key_at + 3;
    while j < args.len() {
        let a = args[j];
        let left = args.len() - j - 1;
        if !store && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            offset = args::int(args[j + 1])?;
            limit = args::int(args[j + 2])?;
            j += 2;
        } else if rev.is_none() && is(a, "rev") {
            rev = Some(true);
        } else if by.is_none() && is(a, "bylex") {
            by = Some(By::Lex);
        } else if by.is_none() && is(a, "byscore") {
            by = Some(By::Score);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let by = by.unwrap_or(By::Rank);
    let rev = rev.unwrap_or(false);
    // Redis compares against its "no LIMIT" default, so `LIMIT 0 -1` passes with ranks.
    if limit != -1 && by == By::Rank {
        return err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && by == By::Lex {
        return err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    let (mut min, mut max) = (args[key_at + 1], args[key_at + 2]);
    if rev && by != By::Rank {
        // Reverse score and lex ranges are given as max, min.
        std::mem::swap(&mut min, &mut max);
    }
    let bounds = match by {
        By::Rank => Bounds::Rank(args::int(min)?, args::int(max)?),
        By::Score => Bounds::Score(ScoreRange::parse(min, max)?),
        By::Lex => Bounds::Lex(LexRange::parse(min, max)?),
    };
    Ok(Request {
        bounds,
        rev,
        withscores,
        offset,
        limit,
    })
}

/// Ranks of the members inside a score range: (first rank, count).
pub fn score_ranks(z: &ZSet, range: &ScoreRange) -> (usize, usize) {
    if range.is_empty() {
        return (0, 0);
    }
    let lo = z.partition_point(|s, _| !range.above_min(s));
    let hi = z.partition_point(|s, _| range.below_max(s));
    (lo, hi.saturating_sub(lo))
}

/// Ranks of the members inside a lexicographic range: (first rank, count).
pub fn lex_ranks(z: &ZSet, range: &LexRange<'_>) -> (usize, usize) {
    if range.is_empty() {
        return (0, 0);
    }
    let lo = z.partition_point(|_, m| !range.above_min(m));
    let hi = z.partition_point(|_, m| range.below_max(m));
    (lo, hi.saturating_sub(lo))
}

/// The members a request selects: (ascending rank of the first one yielded, count,
/// walking down). LIMIT applies from the first member in the walking direction; a negative
/// offset selects nothing and a negative count means all (as Redis's loops behave).
fn window(z: &ZSet, r: &Request<'_>) -> (usize, usize, bool) {
    let (lo, n) = match &r.bounds {
        Bounds::Rank(start, end) => {
            let (first, count) = rank_window(*start, *end, z.len());
            if count == 0 {
                return (0, 0, r.rev);
            }
            // Reverse ranks count from the top.
            let start = if r.rev { z.len() - 1 - first } else { first };
            return (start, count, r.rev);
        }
        Bounds::Score(range) => score_ranks(z, range),
        Bounds::Lex(range) => lex_ranks(z, range),
    };
    let Ok(offset) = usize::try_from(r.offset) else {
        return (0, 0, r.rev);
    };
    if offset >= n {
        return (0, 0, r.rev);
    }
    let available = n - offset;
    let count = usize::try_from(r.limit).map_or(available, |l| l.min(available));
    let start = if r.rev {
        lo + n - 1 - offset
    } else {
        lo + offset
    };
    (start, count, r.rev)
}

/// Answers a range request on `args[key_at]`.
fn reply_range(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    key_at: usize,
    by: Option<By>,
    rev: Option<bool>,
) -> CmdResult {
    let request = parse_request(args, key_at, false, by, rev)?;
    let Ctx { db, reply, .. } = ctx;
    let Some(z) = zset_at(db, args[key_at])? else {
        reply.array(0);
        return Ok(());
    };
    let (start, count, rev) = window(z, &request);
    pairs_header(reply, count, request.withscores);
    for (member, score) in z.range(start, count, rev) {
        pair(reply, member, score, request.withscores);
    }
    Ok(())
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub fn zrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_range(ctx, args, 1, None, None)
}

/// ZREVRANGE key start stop [WITHSCORES]
pub fn zrevrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_range(ctx, args, 1, Some(By::Rank), Some(true))
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
pub fn zrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_range(ctx, args, 1, Some(By::Score), Some(false))
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
pub fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_range(ctx, args, 1, Some(By::Score), Some(true))
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
pub fn zrangebylex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_range(ctx, args, 1, Some(By::Lex), Some(false))
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
pub fn zrevrangebylex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_range(ctx, args, 1, Some(By::Lex), Some(true))
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
pub fn zrangestore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let request = parse_request(args, 2, true, None, None)?;
    let dst = args[1];
    let limits = zset_limits(ctx);
    let mut pairs = Vec::new();
    if let Some(z) = zset_at(&mut ctx.db, args[2])? {
        let (start, count, rev) = window(z, &request);
        pairs.extend(z.range(start, count, rev).map(|(m, s)| (Box::from(m), s)));
    }
    let out = ZSet::from_distinct_pairs(pairs, limits).map_err(insert_error)?;
    store(ctx, dst, out);
    Ok(())
}

/// Stores a computed sorted set at `dst` (replacing any value and TTL), or deletes `dst` when
/// the result is empty, as Redis does; replies with the result's size.
pub fn store(ctx: &mut Ctx<'_>, dst: &[u8], z: ZSet) {
    let len = z.len();
    if len > 0 {
        ctx.db.set(dst, Value::ZSet(Box::new(z)));
        ctx.modified(dst);
        ctx.signal_ready(dst);
    } else if ctx.db.remove(dst).is_some() {
        ctx.modified(dst);
    }
    ctx.reply.integer(len as i64);
}
