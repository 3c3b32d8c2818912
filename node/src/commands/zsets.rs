//! Sorted sets, with Redis 7.0 semantics and error texts: ZADD ZINCRBY ZREM ZCARD ZSCORE
//! ZMSCORE ZRANK ZREVRANK ZCOUNT ZLEXCOUNT ZRANGE ZRANGESTORE ZREVRANGE ZRANGEBYSCORE
//! ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZREMRANGEBYRANK ZREMRANGEBYSCORE ZREMRANGEBYLEX
//! ZPOPMIN ZPOPMAX BZPOPMIN BZPOPMAX ZMPOP BZMPOP ZUNIONSTORE ZINTERSTORE ZDIFFSTORE ZUNION
//! ZINTER ZDIFF ZINTERCARD ZRANDMEMBER ZSCAN.
//!
//! Scores are written with the shared `Reply::double` (shortest text that reads back to the
//! same double, as Redis 7.2+ prints them: `1.1`, where 7.0's `%.17g` printed
//! `1.1000000000000001`). Both read back to the same value; clients parse either.
//!
//! Files: `parse` (floats as C's strtod reads them, score and lex ranges), `write` (ZADD,
//! ZINCRBY, ZREM, ZREMRANGEBY*), `read` (lookups, counts, ZRANDMEMBER, ZSCAN), `range`
//! (the ZRANGE family), `pop` (ZPOP*, BZPOP*, ZMPOP, BZMPOP), `setops` (union, intersection,
//! difference).

mod parse;
mod pop;
mod range;
mod read;
mod setops;
mod write;

use crate::command_framework::spec::{command, flags::*, KeySpec, KEY1, KEY1_2};
use crate::command_framework::{CmdError, CommandSpec};
use crate::db::packed::PackLimits;
use crate::db::zset::{ZSet, ZSetError};
use crate::db::{Locked, Value};
use proto::resp::Reply;
use smallvec::SmallVec;

const GROUP: &str = "sorted-set";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec { since: "1.2.0", ..command("zadd", -4, WRITE | DENYOOM | FAST, KEY1, write::zadd, GROUP, "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.") },
    CommandSpec { since: "1.2.0", ..command("zincrby", 4, WRITE | DENYOOM | FAST, KEY1, write::zincrby, GROUP, "Increments the score of a member in a sorted set.") },
    CommandSpec { since: "1.2.0", ..command("zrem", -3, WRITE | FAST, KEY1, write::zrem, GROUP, "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.") },
    CommandSpec { since: "2.0.0", ..command("zremrangebyrank", 4, WRITE, KEY1, write::zremrangebyrank, GROUP, "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.") },
    CommandSpec { since: "1.2.0", ..command("zremrangebyscore", 4, WRITE, KEY1, write::zremrangebyscore, GROUP, "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.") },
    CommandSpec { since: "2.8.9", ..command("zremrangebylex", 4, WRITE, KEY1, write::zremrangebylex, GROUP, "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.") },
    CommandSpec { since: "1.2.0", ..command("zcard", 2, READONLY | FAST, KEY1, read::zcard, GROUP, "Returns the number of members in a sorted set.") },
    CommandSpec { since: "1.2.0", ..command("zscore", 3, READONLY | FAST, KEY1, read::zscore, GROUP, "Returns the score of a member in a sorted set.") },
    CommandSpec { since: "6.2.0", ..command("zmscore", -3, READONLY | FAST, KEY1, read::zmscore, GROUP, "Returns the score of one or more members in a sorted set.") },
    CommandSpec { since: "2.0.0", ..command("zrank", 3, READONLY | FAST, KEY1, read::zrank, GROUP, "Returns the index of a member in a sorted set ordered by ascending scores.") },
    CommandSpec { since: "2.0.0", ..command("zrevrank", 3, READONLY | FAST, KEY1, read::zrevrank, GROUP, "Returns the index of a member in a sorted set ordered by descending scores.") },
    CommandSpec { since: "2.0.0", ..command("zcount", 4, READONLY | FAST, KEY1, read::zcount, GROUP, "Returns the count of members in a sorted set that have scores within a range.") },
    CommandSpec { since: "2.8.9", ..command("zlexcount", 4, READONLY | FAST, KEY1, read::zlexcount, GROUP, "Returns the number of members in a sorted set within a lexicographical range.") },
    CommandSpec { since: "6.2.0", ..command("zrandmember", -2, READONLY, KEY1, read::zrandmember, GROUP, "Returns one or more random members from a sorted set.") },
    CommandSpec { since: "2.8.0", ..command("zscan", -3, READONLY, KEY1, read::zscan, GROUP, "Iterates over members and scores of a sorted set.") },
    CommandSpec { since: "1.2.0", ..command("zrange", -4, READONLY, KEY1, range::zrange, GROUP, "Returns members in a sorted set within a range of indexes.") },
    CommandSpec { since: "6.2.0", ..command("zrangestore", -5, WRITE | DENYOOM, KEY1_2, range::zrangestore, GROUP, "Stores a range of members from sorted set in a key.") },
    CommandSpec { since: "1.2.0", ..command("zrevrange", -4, READONLY, KEY1, range::zrevrange, GROUP, "Returns members in a sorted set within a range of indexes in reverse order.") },
    CommandSpec { since: "1.0.5", ..command("zrangebyscore", -4, READONLY, KEY1, range::zrangebyscore, GROUP, "Returns members in a sorted set within a range of scores.") },
    CommandSpec { since: "2.2.0", ..command("zrevrangebyscore", -4, READONLY, KEY1, range::zrevrangebyscore, GROUP, "Returns members in a sorted set within a range of scores in reverse order.") },
    CommandSpec { since: "2.8.9", ..command("zrangebylex", -4, READONLY, KEY1, range::zrangebylex, GROUP, "Returns members in a sorted set within a lexicographical range.") },
    CommandSpec { since: "2.8.9", ..command("zrevrangebylex", -4, READONLY, KEY1, range::zrevrangebylex, GROUP, "Returns members in a sorted set within a lexicographical range in reverse order.") },
    CommandSpec { since: "5.0.0", ..command("zpopmin", -2, WRITE | FAST, KEY1, pop::zpopmin, GROUP, "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.") },
    CommandSpec { since: "5.0.0", ..command("zpopmax", -2, WRITE | FAST, KEY1, pop::zpopmax, GROUP, "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.") },
    CommandSpec { since: "5.0.0", ..command("bzpopmin", -3, WRITE | NOSCRIPT | BLOCKING | FAST, KeySpec::Range { first: 1, last: -2, step: 1 }, pop::bzpopmin, GROUP, "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.") },
    CommandSpec { since: "5.0.0", ..command("bzpopmax", -3, WRITE | NOSCRIPT | BLOCKING | FAST, KeySpec::Range { first: 1, last: -2, step: 1 }, pop::bzpopmax, GROUP, "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped.") },
    CommandSpec { since: "7.0.0", ..command("zmpop", -4, WRITE | MOVABLE_KEYS, KeySpec::Custom(keys_zmpop), pop::zmpop, GROUP, "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.") },
    CommandSpec { since: "7.0.0", ..command("bzmpop", -5, WRITE | BLOCKING | MOVABLE_KEYS, KeySpec::Custom(keys_bzmpop), pop::bzmpop, GROUP, "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.") },
    CommandSpec { since: "2.0.0", ..command("zunionstore", -4, WRITE | DENYOOM | MOVABLE_KEYS, KeySpec::Custom(keys_store), setops::zunionstore, GROUP, "Stores the union of multiple sorted sets in a key.") },
    CommandSpec { since: "2.0.0", ..command("zinterstore", -4, WRITE | DENYOOM | MOVABLE_KEYS, KeySpec::Custom(keys_store), setops::zinterstore, GROUP, "Stores the intersect of multiple sorted sets in a key.") },
    CommandSpec { since: "6.2.0", ..command("zdiffstore", -4, WRITE | DENYOOM | MOVABLE_KEYS, KeySpec::Custom(keys_store), setops::zdiffstore, GROUP, "Stores the difference of multiple sorted sets in a key.") },
    CommandSpec { since: "6.2.0", ..command("zunion", -3, READONLY | MOVABLE_KEYS, KeySpec::Custom(keys_numkeys1), setops::zunion, GROUP, "Returns the union of multiple sorted sets.") },
    CommandSpec { since: "6.2.0", ..command("zinter", -3, READONLY | MOVABLE_KEYS, KeySpec::Custom(keys_numkeys1), setops::zinter, GROUP, "Returns the intersect of multiple sorted sets.") },
    CommandSpec { since: "6.2.0", ..command("zdiff", -3, READONLY | MOVABLE_KEYS, KeySpec::Custom(keys_numkeys1), setops::zdiff, GROUP, "Returns the difference between multiple sorted sets.") },
    CommandSpec { since: "7.0.0", ..command("zintercard", -3, READONLY | MOVABLE_KEYS, KeySpec::Custom(keys_numkeys1), setops::zintercard, GROUP, "Returns the number of members of the intersect of multiple sorted sets.") },
];

/// Key positions of a numkeys-style command: `fixed` positions, then `numkeys` keys starting
/// after the numkeys argument at `numkeys_at`. A malformed numkeys yields only `fixed` (the
/// handler then answers the error without touching keys).
fn numkeys_positions(args: &[&[u8]], numkeys_at: usize, fixed: &[usize]) -> SmallVec<[usize; 16]> {
    let mut out: SmallVec<[usize; 16]> =
        fixed.iter().copied().filter(|&i| i < args.len()).collect();
    let n = args
        .get(numkeys_at)
        .and_then(|a| proto::resp::request::parse_i64(a))
        .filter(|&n| n > 0)
        .unwrap_or(0) as usize;
    let first = numkeys_at + 1;
    let last = first.saturating_add(n).min(args.len());
    out.extend(first..last);
    out
}

/// ZUNIONSTORE/ZINTERSTORE/ZDIFFSTORE destination numkeys key...
fn keys_store(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    numkeys_positions(args, 2, &[1])
}

/// ZUNION/ZINTER/ZDIFF/ZINTERCARD/ZMPOP numkeys key...
fn keys_numkeys1(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    numkeys_positions(args, 1, &[])
}

fn keys_zmpop(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    numkeys_positions(args, 1, &[])
}

/// BZMPOP timeout numkeys key...
fn keys_bzmpop(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    numkeys_positions(args, 2, &[])
}

/// The thresholds a write packs by (`zset-max-listpack-entries`, `zset-max-listpack-value`).
pub(crate) fn zset_limits(ctx: &crate::command_framework::Ctx<'_>) -> PackLimits {
    ctx.server.hot.zset_limits()
}

/// The sorted set at `key`: None when there is no key, WRONGTYPE when it holds another type.
fn zset_at<'a>(db: &'a mut Locked<'_>, key: &[u8]) -> Result<Option<&'a mut ZSet>, CmdError> {
    match db.get(key) {
        None => Ok(None),
        Some(entry) => match &mut entry.value {
            Value::ZSet(z) => Ok(Some(z)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// The error for a refused insert (a NaN score, or a set at its size limit).
fn insert_error(e: ZSetError) -> CmdError {
    match e {
        ZSetError::NotANumber => CmdError::new("ERR resulting score is not a number (NaN)"),
        ZSetError::Full => CmdError::new("ERR sorted set has reached its maximum size"),
    }
}

/// The header of a list of `n` members, with scores or not: RESP2 flattens member and score
/// into one array of 2n; RESP3 nests a [member, score] pair per member (as Redis 7 does).
fn pairs_header(reply: &mut Reply<'_>, n: usize, withscores: bool) {
    if withscores && !reply.is_resp3() {
        reply.array(n * 2);
    } else {
        reply.array(n);
    }
}

/// One member of a list begun by [`pairs_header`].
fn pair(reply: &mut Reply<'_>, member: &[u8], score: f64, withscores: bool) {
    if withscores && reply.is_resp3() {
        reply.array(2);
    }
    reply.bulk(member);
    if withscores {
        reply.double(score);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numkeys_key_positions() {
        let args: Vec<&[u8]> = vec![
            b"zunionstore",
            b"d",
            b"2",
            b"a",
            b"b",
            b"WEIGHTS",
            b"1",
            b"2",
        ];
        assert_eq!(keys_store(&args).as_slice(), &[1, 3, 4]);
        let bad: Vec<&[u8]> = vec![b"zunionstore", b"d", b"x", b"a"];
        assert_eq!(keys_store(&bad).as_slice(), &[1]);
        let too_many: Vec<&[u8]> = vec![b"zunion", b"5", b"a"];
        assert_eq!(keys_numkeys1(&too_many).as_slice(), &[2]);
        let bz: Vec<&[u8]> = vec![b"bzmpop", b"0", b"2", b"a", b"b", b"MIN"];
        assert_eq!(keys_bzmpop(&bz).as_slice(), &[3, 4]);
    }
}
