//! ZCARD ZSCORE ZMSCORE ZRANK ZREVRANK ZCOUNT ZLEXCOUNT ZRANDMEMBER ZSCAN.

use super::parse::{LexRange, ScoreRange};
use super::range::{lex_ranks, score_ranks};
use super::{pair, pairs_header, zset_at};
use crate::command_framework::args::{self, is};
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::node_state::glob;
use proto::resp::reply::format_double;
use rand::Rng;

/// Most members ZRANDMEMBER returns for a negative count (repeats allowed). Redis has no
/// bound and will build a reply of any size; this keeps one command's reply within what a
/// node can buffer (at 16 bytes a member, about 160 MB).
pub const RANDMEMBER_MAX_REPEATS: u64 = 10_000_000;

/// Sets this small are scanned in one call whatever the cursor, as Redis does for its
/// compact (listpack) encoding, whose threshold this is.
const SCAN_WHOLE_MAX: usize = 128;

/// ZSCAN's default COUNT.
const SCAN_DEFAULT_COUNT: usize = 10;

/// ZCARD key
pub fn zcard(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let len = zset_at(&mut ctx.db, args[1])?.map_or(0, |z| z.len());
    ctx.reply.integer(len as i64);
    Ok(())
}

/// ZSCORE key member
pub fn zscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    match zset_at(&mut ctx.db, args[1])?.and_then(|z| z.score(args[2])) {
        Some(score) => ctx.reply.double(score),
        None => ctx.reply.null(),
    }
    Ok(())
}

/// ZMSCORE key member [member ...]
pub fn zmscore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let z = zset_at(db, args[1])?;
    reply.array(args.len() - 2);
    for member in &args[2..] {
        match z.as_ref().and_then(|z| z.score(member)) {
            Some(score) => reply.double(score),
            None => reply.null(),
        }
    }
    Ok(())
}

fn rank(ctx: &mut Ctx<'_>, args: &[&[u8]], rev: bool) -> CmdResult {
    let found = zset_at(&mut ctx.db, args[1])?.and_then(|z| {
        z.rank(args[2])
            .map(|r| if rev { z.len() - 1 - r } else { r })
    });
    match found {
        Some(r) => ctx.reply.integer(r as i64),
        None => ctx.reply.null(),
    }
    Ok(())
}

/// ZRANK key member
pub fn zrank(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    rank(ctx, args, false)
}

/// ZREVRANK key member
pub fn zrevrank(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    rank(ctx, args, true)
}

/// ZCOUNT key min max (the range is checked before the key, as in Redis).
pub fn zcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let range = ScoreRange::parse(args[2], args[3])?;
    let n = zset_at(&mut ctx.db, args[1])?.map_or(0, |z| score_ranks(z, &range).1);
    ctx.reply.integer(n as i64);
    Ok(())
}

/// ZLEXCOUNT key min max
pub fn zlexcount(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let range = LexRange::parse(args[2], args[3])?;
    let n = zset_at(&mut ctx.db, args[1])?.map_or(0, |z| lex_ranks(z, &range).1);
    ctx.reply.integer(n as i64);
    Ok(())
}

/// ZRANDMEMBER key [count [WITHSCORES]]
pub fn zrandmember(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let mut rng = rand::thread_rng();
    if args.len() == 2 {
        match zset_at(db, args[1])? {
            Some(z) if !z.is_empty() => {
                let (member, _) = z
                    .get_index(rng.gen_range(0..z.len()))
                    .expect("index below len");
                reply.bulk(member);
            }
            _ => reply.null(),
        }
        return Ok(());
    }
    let count = args::int(args[2])?;
    if count == i64::MIN {
        return Err(CmdError::new(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    if args.len() > 4 || (args.len() == 4 && !is(args[3], "withscores")) {
        return Err(CmdError::Syntax);
    }
    let withscores = args.len() == 4;
    // Member and score make two elements: Redis refuses counts whose double overflows.
    if withscores && count.unsigned_abs() > (i64::MAX / 2) as u64 {
        return Err(CmdError::new("ERR value is out of range"));
    }
    let Some(z) = zset_at(db, args[1])? else {
        reply.array(0);
        return Ok(());
    };
    if count == 0 || z.is_empty() {
        reply.array(0);
        return Ok(());
    }
    let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    if count < 0 && count.unsigned_abs() > RANDMEMBER_MAX_REPEATS {
        return Err(CmdError::new(format!(
            "ERR count is out of range, at most {RANDMEMBER_MAX_REPEATS} members with repetitions"
        )));
    }
    if count > 0 && n >= z.len() {
        // Distinct members, no more than asked: the whole set, in order, as Redis's
        // iteration gives it.
        pairs_header(reply, z.len(), withscores);
        for (member, score) in z.iter() {
            pair(reply, member, score, withscores);
        }
        return Ok(());
    }
    // A packed sorted set is walked to reach a position: list its pairs once instead (a
    // count of -100,000 on 128 packed members would otherwise walk 6.4M pairs).
    let packed: Option<Vec<(&[u8], f64)>> = z.is_packed().then(|| z.iter().collect());
    let at = |i: usize| {
        match &packed {
            Some(pairs) => pairs.get(i).copied(),
            None => z.get_index(i),
        }
        .expect("index below len")
    };
    if count < 0 {
        // Repeats allowed: independent picks, in random order.
        pairs_header(reply, n, withscores);
        for _ in 0..n {
            let (member, score) = at(rng.gen_range(0..z.len()));
            pair(reply, member, score, withscores);
        }
        return Ok(());
    }
    // Distinct members, fewer than the set holds: a uniform sample without repetition.
    let picks = rand::seq::index::sample(&mut rng, z.len(), n);
    pairs_header(reply, n, withscores);
    for i in picks.iter() {
        let (member, score) = at(i);
        pair(reply, member, score, withscores);
    }
    Ok(())
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]
pub fn zscan(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let cursor = crate::command_framework::scan::parse_cursor(args[2])?;
    let Ctx { db, reply, .. } = ctx;
    let Some(z) = zset_at(db, args[1])? else {
        reply.array(2);
        reply.bulk(b"0");
        reply.array(0);
        return Ok(());
    };
    // Options are read after the key, as Redis does.
    let mut count = SCAN_DEFAULT_COUNT;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - i - 1;
        if is(args[i], "count") && more >= 1 {
            let n = args::int(args[i + 1])?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else if is(args[i], "match") && more >= 1 {
            pattern = Some(args[i + 1]).filter(|p| *p != b"*");
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut found: Vec<(&[u8], f64)> = Vec::new();
    let next = if z.len() <= SCAN_WHOLE_MAX {
        found.extend(z.iter_unordered());
        0
    } else {
        // `found` holds at most `count` entries of a set already in memory.
        z.scan(cursor, count, |m, s| found.push((m, s)))
    };
    if let Some(p) = pattern {
        found.retain(|(m, _)| glob::matches(p, m, false));
    }
    reply.array(2);
    reply.bulk_integer(next as i64);
    reply.array(found.len() * 2);
    let mut buf = [0u8; 64];
    for (member, score) in found {
        reply.bulk(member);
        // ZSCAN scores are bulk strings in both protocols, as in Redis.
        reply.bulk(format_double(score, &mut buf));
    }
    Ok(())
}
