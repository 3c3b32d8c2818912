//! Set algebra: SINTER SUNION SDIFF, SINTERSTORE SUNIONSTORE SDIFFSTORE, SINTERCARD.
//!
//! As in Redis 7.0, every source key is looked up and type-checked before any work, so a key
//! of another type fails the command even when a missing key already decides the result. A
//! missing key counts as an empty set. Results are computed over borrowed members (held at
//! most once each, so bounded by the inputs) and copied only when stored.

use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::value::{Hasher, SetValue};
use crate::db::{Locked, Value};
use smallvec::SmallVec;

/// Looks up every key (lazy expiry, access time) and checks it holds a set; then returns the
/// sets through shared borrows, None for missing keys, so several can be read at once.
fn sources<'a>(
    db: &'a mut Locked<'_>,
    keys: &[&[u8]],
) -> Result<Vec<Option<&'a SetValue>>, CmdError> {
    for key in keys {
        super::set_at(db, key)?;
    }
    let db: &'a Locked<'_> = db;
    Ok(keys
        .iter()
        .map(|key| match db.get_shared(key).map(|e| &e.value) {
            Some(Value::Set(s)) => Some(&**s),
            _ => None,
        })
        .collect())
}

/// Calls `each` with every member of the intersection until it returns false.
fn intersect<'a>(sets: &[Option<&'a SetValue>], mut each: impl FnMut(&'a [u8]) -> bool) {
    let Some(mut present) = sets.iter().copied().collect::<Option<Vec<&SetValue>>>() else {
        return; // An empty set intersects to nothing.
    };
    // Walk the smallest set, probing the others from the smallest up: misses come early.
    present.sort_by_key(|s| s.len());
    let Some((first, rest)) = present.split_first() else {
        return;
    };
    for member in first.iter() {
        if rest.iter().all(|s| s.contains(member)) && !each(member) {
            return;
        }
    }
}

fn union<'a>(sets: &[Option<&'a SetValue>]) -> indexmap::IndexSet<&'a [u8], Hasher> {
    let mut out = indexmap::IndexSet::with_hasher(Hasher::default());
    for set in sets.iter().flatten() {
        out.extend(set.iter());
    }
    out
}

fn difference<'a>(sets: &[Option<&'a SetValue>]) -> Vec<&'a [u8]> {
    let Some((Some(first), rest)) = sets.split_first() else {
        return Vec::new();
    };
    first
        .iter()
        .filter(|m| !rest.iter().flatten().any(|s| s.contains(m)))
        .collect()
}

#[derive(Clone, Copy)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The members of `op` over `sets`, borrowed.
fn compute<'a>(op: Op, sets: &[Option<&'a SetValue>]) -> Vec<&'a [u8]> {
    match op {
        Op::Inter => {
            let mut out = Vec::new();
            intersect(sets, |m| {
                out.push(m);
                true
            });
            out
        }
        Op::Union => union(sets).into_iter().collect(),
        Op::Diff => difference(sets),
    }
}

/// SINTER / SUNION / SDIFF key [key ...]: a set reply.
fn read_op(ctx: &mut Ctx<'_>, keys: &[&[u8]], op: Op) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let sets = sources(db, keys)?;
    let members = compute(op, &sets);
    reply.set(members.len());
    for m in members {
        reply.bulk(m);
    }
    Ok(())
}

/// The STORE forms: the result replaces `dest` whatever it held (its TTL too); an empty
/// result deletes `dest`. Answers the result's size.
fn store_op(ctx: &mut Ctx<'_>, dest: &[u8], keys: &[&[u8]], op: Op) -> CmdResult {
    let limits = super::set_limits(ctx);
    let result: SetValue = {
        let sets = sources(&mut ctx.db, keys)?;
        let mut result = SetValue::default();
        for m in compute(op, &sets) {
            result.insert(m, limits);
        }
        result
    };
    let len = result.len();
    if len == 0 {
        if ctx.db.remove(dest).is_some() {
            ctx.modified(dest);
        }
    } else {
        ctx.db.set(dest, Value::Set(Box::new(result)));
        ctx.modified(dest);
    }
    ctx.reply.integer(len as i64);
    Ok(())
}

pub fn sinter(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    read_op(ctx, &args[1..], Op::Inter)
}

pub fn sunion(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    read_op(ctx, &args[1..], Op::Union)
}

pub fn sdiff(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    read_op(ctx, &args[1..], Op::Diff)
}

pub fn sinterstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    store_op(ctx, args[1], &args[2..], Op::Inter)
}

pub fn sunionstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    store_op(ctx, args[1], &args[2..], Op::Union)
}

pub fn sdiffstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    store_op(ctx, args[1], &args[2..], Op::Diff)
}

/// SINTERCARD's numkeys when valid (at least 1).
fn numkeys(args: &[&[u8]]) -> Option<usize> {
    let n = args::int(args.get(1)?).ok()?;
    usize::try_from(n).ok().filter(|&n| n >= 1)
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]: its keys are the `numkeys` arguments
/// after numkeys (as many as there are, when numkeys is too large; the handler then fails).
pub fn sintercard_keys(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    match numkeys(args) {
        Some(n) => (2..n.saturating_add(2).min(args.len())).collect(),
        None => SmallVec::new(),
    }
}

pub fn sintercard(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Some(n) = numkeys(args) else {
        return err("ERR numkeys should be greater than 0");
    };
    if n > args.len() - 2 {
        return err("ERR Number of keys can't be greater than number of args");
    }
    let keys = &args[2..2 + n];
    // 0: no limit.
    let mut limit: u64 = 0;
    let mut i = 2 + n;
    while i < args.len() {
        match args.get(i + 1) {
            Some(value) if is(args[i], "limit") => {
                limit = args::int(value)
                    .ok()
                    .and_then(|l| u64::try_from(l).ok())
                    .ok_or_else(|| CmdError::new("ERR LIMIT can't be negative"))?;
                i += 2;
            }
            _ => return Err(CmdError::Syntax),
        }
    }
    let Ctx { db, reply, .. } = ctx;
    let sets = sources(db, keys)?;
    let mut count: u64 = 0;
    intersect(&sets, |_| {
        count += 1;
        limit == 0 || count < limit
    });
    reply.integer(count as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(members: &[&str]) -> SetValue {
        let mut s = SetValue::default();
        for m in members {
            s.insert(m.as_bytes(), crate::db::set::SetLimits::DEFAULT);
        }
        s
    }

    fn sorted(v: Vec<&[u8]>) -> Vec<String> {
        let mut v: Vec<String> = v
            .into_iter()
            .map(|m| String::from_utf8_lossy(m).into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn algebra_over_sets_and_missing_keys() {
        let (a, b, c) = (set(&["1", "2", "3"]), set(&["2", "3", "4"]), set(&["3"]));
        let all = [Some(&a), Some(&b), Some(&c)];
        assert_eq!(sorted(compute(Op::Inter, &all)), ["3"]);
        assert_eq!(sorted(compute(Op::Union, &all)), ["1", "2", "3", "4"]);
        assert_eq!(sorted(compute(Op::Diff, &[Some(&a), Some(&b)])), ["1"]);
        assert_eq!(
            sorted(compute(Op::Diff, &[Some(&a), None, Some(&c)])),
            ["1", "2"]
        );
        assert!(compute(Op::Diff, &[None, Some(&a)]).is_empty());
        assert!(compute(Op::Inter, &[Some(&a), None]).is_empty());
        assert_eq!(sorted(compute(Op::Union, &[None, Some(&c)])), ["3"]);
    }

    #[test]
    fn intersect_stops_when_told() {
        let (a, b) = (set(&["1", "2", "3", "4"]), set(&["1", "2", "3", "5"]));
        let mut n = 0;
        intersect(&[Some(&a), Some(&b)], |_| {
            n += 1;
            n < 2
        });
        assert_eq!(n, 2);
    }

    #[test]
    fn sintercard_key_positions() {
        let args: Vec<&[u8]> = vec![b"sintercard", b"2", b"a", b"b", b"limit", b"1"];
        assert_eq!(sintercard_keys(&args).as_slice(), &[2, 3]);
        let args: Vec<&[u8]> = vec![b"sintercard", b"9", b"a"];
        assert_eq!(sintercard_keys(&args).as_slice(), &[2]);
        let args: Vec<&[u8]> = vec![b"sintercard", b"0", b"a"];
        assert!(sintercard_keys(&args).is_empty());
        let args: Vec<&[u8]> = vec![b"sintercard", b"x", b"a"];
        assert!(sintercard_keys(&args).is_empty());
    }
}
