//! ZUNIONSTORE ZINTERSTORE ZDIFFSTORE ZUNION ZINTER ZDIFF ZINTERCARD.
//!
//! Inputs may be sorted sets or plain sets (whose members score 1). As in Redis, inputs are
//! visited smallest first for union and intersection, and each member's score is combined
//! across inputs in that order, so sums round exactly as Redis's do. The sources are read one
//! at a time (the keyspace hands out one borrow at a time); the intersection copies only the
//! smallest input and narrows it against each other one.

use super::range::store;
use super::{insert_error, pair, pairs_header, parse, zset_limits};
use crate::command_framework::args::{self, is};
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::packed::PackLimits;
use crate::db::value::{Hasher, SetValue};
use crate::db::zset::ZSet;
use crate::db::{Locked, Value};
use indexmap::IndexMap;
use smallvec::SmallVec;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Redis's `zunionInterAggregate`: a sum of opposite infinities is 0, not NaN.
    fn apply(self, target: &mut f64, value: f64) {
        match self {
            Aggregate::Sum => {
                *target += value;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if value < *target {
                    *target = value;
                }
            }
            Aggregate::Max => {
                if value > *target {
                    *target = value;
                }
            }
        }
    }
}

/// One input, borrowed from the keyspace.
enum Source<'a> {
    Missing,
    Sorted(&'a ZSet),
    Plain(&'a SetValue),
}

impl Source<'_> {
    fn len(&self) -> usize {
        match self {
            Source::Missing => 0,
            Source::Sorted(z) => z.len(),
            Source::Plain(s) => s.len(),
        }
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            Source::Missing => None,
            Source::Sorted(z) => z.score(member),
            Source::Plain(s) => s.contains(member).then_some(1.0),
        }
    }

    fn for_each(&self, mut f: impl FnMut(&[u8], f64)) {
        match self {
            Source::Missing => {}
            Source::Sorted(z) => z.iter_unordered().for_each(|(m, s)| f(m, s)),
            Source::Plain(s) => s.iter().for_each(|m| f(m, 1.0)),
        }
    }
}

fn source<'a>(db: &'a mut Locked<'_>, key: &[u8]) -> Result<Source<'a>, CmdError> {
    Ok(match db.get(key) {
        None => Source::Missing,
        Some(entry) => match &entry.value {
            Value::ZSet(z) => Source::Sorted(z),
            Value::Set(s) => Source::Plain(s),
            _ => return Err(CmdError::WrongType),
        },
    })
}

/// An input key with its weight.
struct Input<'a> {
    key: &'a [u8],
    weight: f64,
    len: usize,
}

/// The parsed request.
struct Request<'a> {
    inputs: SmallVec<[Input<'a>; 4]>,
    aggregate: Aggregate,
    withscores: bool,
    /// ZINTERCARD's LIMIT; 0 is no limit.
    limit: usize,
}

/// Redis's `zunionInterDiffGenericCommand` parse: numkeys, the keys (type-checked in order
/// before any option is read), then WEIGHTS / AGGREGATE / WITHSCORES / LIMIT as the command
/// allows. `name` is the command's name for the numkeys error.
fn parse_request<'a>(
    ctx: &mut Ctx<'_>,
    args: &[&'a [u8]],
    numkeys_at: usize,
    op: Op,
    store: bool,
    card_only: bool,
    name: &str,
) -> Result<Request<'a>, CmdError> {
    let numkeys = args::int(args[numkeys_at])?;
    if numkeys < 1 {
        return Err(CmdError::new(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    let first = numkeys_at + 1;
    if numkeys as u64 > (args.len() - first) as u64 {
        return Err(CmdError::Syntax);
    }
    let numkeys = numkeys as usize;
    let mut inputs = SmallVec::new();
    for &key in &args[first..first + numkeys] {
        let len = source(&mut ctx.db, key)?.len();
        inputs.push(Input {
            key,
            weight: 1.0,
            len,
        });
    }
    let mut request = Request {
        inputs,
        aggregate: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    let mut j = first + numkeys;
    while j < args.len() {
        let remaining = args.len() - j;
        let a = args[j];
        if op != Op::Diff && !card_only && remaining > numkeys && is(a, "weights") {
            for (i, input) in request.inputs.iter_mut().enumerate() {
                input.weight = parse::strict_float(args[j + 1 + i])
                    .ok_or_else(|| CmdError::new("ERR weight value is not a float"))?;
            }
            j += 1 + numkeys;
        } else if op != Op::Diff && !card_only && remaining >= 2 && is(a, "aggregate") {
            let how = args[j + 1];
            request.aggregate = if is(how, "sum") {
                Aggregate::Sum
            } else if is(how, "min") {
                Aggregate::Min
            } else if is(how, "max") {
                Aggregate::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if !store && !card_only && is(a, "withscores") {
            request.withscores = true;
            j += 1;
        } else if card_only && remaining >= 2 && is(a, "limit") {
            request.limit = match args::int(args[j + 1]) {
                Ok(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                _ => return Err(CmdError::new("ERR LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(request)
}

/// The weighted score of a member of one input; 0 * inf is 0, not NaN, as in Redis.
fn weighted(score: f64, weight: f64) -> f64 {
    let v = score * weight;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

type Accumulator = IndexMap<Box<[u8]>, f64, Hasher>;

fn union(db: &mut Locked<'_>, r: &Request<'_>) -> Result<Accumulator, CmdError> {
    let largest = r.inputs.iter().map(|i| i.len).max().unwrap_or(0);
    let mut acc = Accumulator::with_capacity_and_hasher(largest, Hasher::default());
    for input in &r.inputs {
        source(db, input.key)?.for_each(|member, score| {
            let score = weighted(score, input.weight);
            match acc.get_mut(member) {
                Some(total) => r.aggregate.apply(total, score),
                None => {
                    acc.insert(member.into(), score);
                }
            }
        });
    }
    Ok(acc)
}

fn inter(db: &mut Locked<'_>, r: &Request<'_>) -> Result<Accumulator, CmdError> {
    let Some((smallest, others)) = r.inputs.split_first() else {
        return Ok(Accumulator::default());
    };
    let mut acc = Accumulator::with_capacity_and_hasher(smallest.len, Hasher::default());
    source(db, smallest.key)?.for_each(|member, score| {
        acc.insert(member.into(), weighted(score, smallest.weight));
    });
    for input in others {
        if acc.is_empty() {
            break;
        }
        let src = source(db, input.key)?;
        acc.retain(|member, total| match src.score(member) {
            Some(score) => {
                // Redis multiplies without the NaN guard here; SUM then turns NaN into 0.
                r.aggregate.apply(total, score * input.weight);
                true
            }
            None => false,
        });
    }
    Ok(acc)
}

fn diff(db: &mut Locked<'_>, r: &Request<'_>) -> Result<Accumulator, CmdError> {
    let Some((first, others)) = r.inputs.split_first() else {
        return Ok(Accumulator::default());
    };
    let mut acc = Accumulator::with_capacity_and_hasher(first.len, Hasher::default());
    source(db, first.key)?.for_each(|member, score| {
        acc.insert(member.into(), score);
    });
    for input in others {
        if acc.is_empty() {
            break;
        }
        let src = source(db, input.key)?;
        acc.retain(|member, _| src.score(member).is_none());
    }
    Ok(acc)
}

/// The result as a sorted set, packed by `limits` when small (as Redis converts a stored
/// result).
fn compute(
    db: &mut Locked<'_>,
    op: Op,
    r: &mut Request<'_>,
    limits: PackLimits,
) -> Result<ZSet, CmdError> {
    if op != Op::Diff {
        // Smallest first, as Redis orders them (this also decides summation order).
        r.inputs.sort_by_key(|i| i.len);
    }
    let acc = match op {
        Op::Union => union(db, r)?,
        Op::Inter => inter(db, r)?,
        Op::Diff => diff(db, r)?,
    };
    ZSet::from_distinct_pairs(acc.into_iter().collect(), limits).map_err(insert_error)
}

fn store_op(ctx: &mut Ctx<'_>, args: &[&[u8]], op: Op, name: &str) -> CmdResult {
    let mut r = parse_request(ctx, args, 2, op, true, false, name)?;
    let limits = zset_limits(ctx);
    let z = compute(&mut ctx.db, op, &mut r, limits)?;
    store(ctx, args[1], z);
    Ok(())
}

fn reply_op(ctx: &mut Ctx<'_>, args: &[&[u8]], op: Op, name: &str) -> CmdResult {
    let mut r = parse_request(ctx, args, 1, op, false, false, name)?;
    let limits = zset_limits(ctx);
    let z = compute(&mut ctx.db, op, &mut r, limits)?;
    pairs_header(&mut ctx.reply, z.len(), r.withscores);
    for (member, score) in z.iter() {
        pair(&mut ctx.reply, member, score, r.withscores);
    }
    Ok(())
}

/// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX]
pub fn zunionstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    store_op(ctx, args, Op::Union, "zunionstore")
}

/// ZINTERSTORE destination numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX]
pub fn zinterstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    store_op(ctx, args, Op::Inter, "zinterstore")
}

/// ZDIFFSTORE destination numkeys key [key ...]
pub fn zdiffstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    store_op(ctx, args, Op::Diff, "zdiffstore")
}

/// ZUNION numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zunion(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_op(ctx, args, Op::Union, "zunion")
}

/// ZINTER numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zinter(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_op(ctx, args, Op::Inter, "zinter")
}

/// ZDIFF numkeys key [key ...] [WITHSCORES]
pub fn zdiff(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_op(ctx, args, Op::Diff, "zdiff")
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn zintercard(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut r = parse_request(ctx, args, 1, Op::Inter, false, true, "zintercard")?;
    r.inputs.sort_by_key(|i| i.len);
    let n = inter(&mut ctx.db, &r)?.len();
    let n = if r.limit > 0 { n.min(r.limit) } else { n };
    ctx.reply.integer(n as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Keyspace;

    /// Runs `op` over `keys` (weights 1, SUM unless given) on a keyspace holding a sorted set
    /// `z` {a:1, b:2} and a plain set `s` {b, c}.
    fn run(op: Op, keys: &[&'static [u8]], aggregate: Aggregate) -> Vec<(Vec<u8>, f64)> {
        let keyspace = Keyspace::new();
        let mut db = Locked::lock_all(&keyspace, 0, 0);
        let mut z = ZSet::new();
        z.insert(b"a", 1.0, PackLimits::ZSET_DEFAULT).unwrap();
        z.insert(b"b", 2.0, PackLimits::ZSET_DEFAULT).unwrap();
        db.set(b"z", Value::ZSet(Box::new(z)));
        let mut s = SetValue::default();
        s.insert(b"b", crate::db::set::SetLimits::DEFAULT);
        s.insert(b"c", crate::db::set::SetLimits::DEFAULT);
        db.set(b"s", Value::Set(Box::new(s)));
        let mut request = Request {
            inputs: keys
                .iter()
                .map(|&key| Input {
                    key,
                    weight: 1.0,
                    len: source(&mut db, key).unwrap().len(),
                })
                .collect(),
            aggregate,
            withscores: false,
            limit: 0,
        };
        let out = compute(&mut db, op, &mut request, PackLimits::ZSET_DEFAULT).unwrap();
        out.iter().map(|(m, s)| (m.to_vec(), s)).collect()
    }

    #[test]
    fn plain_sets_count_as_score_one() {
        let v = |m: &[u8], s: f64| (m.to_vec(), s);
        assert_eq!(
            run(Op::Union, &[b"z", b"s"], Aggregate::Sum),
            vec![v(b"a", 1.0), v(b"c", 1.0), v(b"b", 3.0)]
        );
        assert_eq!(
            run(Op::Inter, &[b"z", b"s"], Aggregate::Max),
            vec![v(b"b", 2.0)]
        );
        assert_eq!(
            run(Op::Diff, &[b"s", b"z"], Aggregate::Sum),
            vec![v(b"c", 1.0)]
        );
        assert_eq!(
            run(Op::Union, &[b"s", b"missing"], Aggregate::Sum),
            vec![v(b"b", 1.0), v(b"c", 1.0)]
        );
    }

    #[test]
    fn aggregates_as_redis() {
        let mut t = f64::INFINITY;
        Aggregate::Sum.apply(&mut t, f64::NEG_INFINITY);
        assert_eq!(t, 0.0);
        let mut t = 2.0;
        Aggregate::Min.apply(&mut t, 1.0);
        assert_eq!(t, 1.0);
        Aggregate::Max.apply(&mut t, f64::NAN);
        assert_eq!(t, 1.0);
        assert_eq!(weighted(f64::INFINITY, 0.0), 0.0);
    }
}
