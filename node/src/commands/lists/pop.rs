//! Commands that take elements out of lists: LPOP RPOP LMOVE RPOPLPUSH LMPOP, and the cores
//! the blocking forms share with them.

use super::edit::push_into;
use super::{list_limits, list_mut, End};
use crate::command_framework::args::{self, is};
use crate::command_framework::key_events::WhenGone;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::config::keyspace_events::LIST;
use crate::db::value::ListValue;
use crate::db::Value;
use crate::replication::propagate::WriteEffect;

/// Removes up to `n` elements from `end` (never more than the list holds, so `n` may be any
/// user-given number).
fn take(list: &mut ListValue, end: End, n: u64) -> Vec<Box<[u8]>> {
    let n = usize::try_from(n).unwrap_or(usize::MAX).min(list.len());
    match end {
        End::Left => list.pop_front_n(n),
        End::Right => list.pop_back_n(n),
    }
}

/// Pops up to `n` elements from the list at `key`: None when there is no list.
fn pop_from(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    end: End,
    n: u64,
) -> Result<Option<Vec<Box<[u8]>>>, CmdError> {
    let Some(list) = list_mut(&mut ctx.db, key)? else {
        return Ok(None);
    };
    let popped = take(list, end, n);
    if !popped.is_empty() {
        ctx.db.remove_if_empty(key);
        ctx.name_event(LIST, end.pop_event(), WhenGone::AlsoDel);
        ctx.modified(key);
    }
    Ok(Some(popped))
}

fn pop_command(ctx: &mut Ctx<'_>, args: &[&[u8]], end: End) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::WrongArity(args::lower(args[0])));
    }
    let key = args[1];
    let Some(count_arg) = args.get(2) else {
        match pop_from(ctx, key, end, 1)?.and_then(|mut v| v.pop()) {
            Some(e) => ctx.reply.bulk(&e),
            None => ctx.reply.null(),
        }
        return Ok(());
    };
    let count = args::int(count_arg)
        .ok()
        .and_then(|c| u64::try_from(c).ok())
        .ok_or_else(|| CmdError::new("ERR value is out of range, must be positive"))?;
    match pop_from(ctx, key, end, count)? {
        None => ctx.reply.null_array(),
        Some(popped) => bulks(ctx, &popped),
    }
    Ok(())
}

fn bulks(ctx: &mut Ctx<'_>, elements: &[Box<[u8]>]) {
    ctx.reply.array(elements.len());
    for e in elements {
        ctx.reply.bulk(e);
    }
}

pub fn lpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    pop_command(ctx, args, End::Left)
}

pub fn rpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    pop_command(ctx, args, End::Right)
}

/// Moves one element from `from` of `src` to `to` of `dst` and returns it; None when `src`
/// has no list. Both types are checked before anything moves. With `src_absent_if_wrong`
/// (a blocked client's retry) a source of another type counts as absent, as Redis keeps such
/// a client waiting.
pub(super) fn lmove_core(
    ctx: &mut Ctx<'_>,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
    src_absent_if_wrong: bool,
) -> Result<Option<Box<[u8]>>, CmdError> {
    match list_mut(&mut ctx.db, src) {
        Ok(Some(list)) if !list.is_empty() => {}
        Ok(_) => return Ok(None),
        Err(_) if src_absent_if_wrong => return Ok(None),
        Err(e) => return Err(e),
    }
    list_mut(&mut ctx.db, dst)?;
    let limits = list_limits(ctx);
    let Some(element) = list_mut(&mut ctx.db, src)?.and_then(|l| take(l, from, 1).pop()) else {
        return Ok(None);
    };
    let target = ctx
        .db
        .get_or_insert_with(dst, || Value::List(Box::default()));
    let Value::List(list) = &mut target.value else {
        // Checked above, under the same locks.
        return Err(CmdError::WrongType);
    };
    push_into(list, to, [&element[..]], limits);
    ctx.db.remove_if_empty(src);
    ctx.name_event(LIST, from.pop_event(), WhenGone::AlsoDel);
    ctx.modified(src);
    ctx.name_event(LIST, to.push_event(), WhenGone::Keep);
    ctx.modified(dst);
    ctx.signal_ready(dst);
    Ok(Some(element))
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT.
pub fn lmove(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (from, to) = (End::parse(args[3])?, End::parse(args[4])?);
    reply_moved(ctx, args[1], args[2], from, to)
}

/// RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT.
pub fn rpoplpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_moved(ctx, args[1], args[2], End::Right, End::Left)
}

fn reply_moved(ctx: &mut Ctx<'_>, src: &[u8], dst: &[u8], from: End, to: End) -> CmdResult {
    match lmove_core(ctx, src, dst, from, to, false)? {
        Some(e) => ctx.reply.bulk(&e),
        None => ctx.reply.null(),
    }
    Ok(())
}

/// The parsed tail of `[B]LMPOP ... numkeys key... LEFT|RIGHT [COUNT count]`.
pub(super) struct Mpop<'a> {
    pub keys: &'a [&'a [u8]],
    pub end: End,
    pub count: u64,
}

/// Parses from the `numkeys` argument at `at` on, with Redis's errors in Redis's order.
pub(super) fn parse_mpop<'a>(args: &'a [&'a [u8]], at: usize) -> Result<Mpop<'a>, CmdError> {
    let numkeys = args::int(args[at])
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| CmdError::new("ERR numkeys should be greater than 0"))?;
    // Bounded by the arguments: more keys than arguments is a syntax error.
    let end_at = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(at + 1))
        .filter(|&i| i < args.len())
        .ok_or(CmdError::Syntax)?;
    let keys = &args[at + 1..end_at];
    let end = End::parse(args[end_at])?;
    let mut count = None;
    let mut i = end_at + 1;
    while i < args.len() {
        match args.get(i + 1) {
            Some(value) if count.is_none() && is(args[i], "count") => {
                let c = args::int(value)
                    .ok()
                    .filter(|&c| c > 0)
                    .ok_or_else(|| CmdError::new("ERR count should be greater than 0"))?;
                count = Some(c as u64);
                i += 2;
            }
            _ => return Err(CmdError::Syntax),
        }
    }
    Ok(Mpop {
        keys,
        end,
        count: count.unwrap_or(1),
    })
}

/// The key a multi-key pop took from, and what it took.
pub(super) type Popped<'k> = (&'k [u8], Vec<Box<[u8]>>);

/// Pops from the first non-empty list among `keys`: its key and the elements. A key of
/// another type fails the command, unless `skip_wrong_type` (a blocked client's retry).
pub(super) fn mpop_core<'k>(
    ctx: &mut Ctx<'_>,
    keys: &[&'k [u8]],
    end: End,
    count: u64,
    skip_wrong_type: bool,
) -> Result<Option<Popped<'k>>, CmdError> {
    for &key in keys {
        match pop_from(ctx, key, end, count) {
            Ok(Some(popped)) if !popped.is_empty() => {
                // Which key served and how much is all a replica needs (a plain pop).
                ctx.replicate(|| WriteEffect::Served {
                    key: key.to_vec(),
                    count: popped.len(),
                });
                return Ok(Some((key, popped)));
            }
            Ok(_) => {}
            Err(_) if skip_wrong_type => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// `[key, [elements...]]`, LMPOP's reply.
pub(super) fn reply_mpop(ctx: &mut Ctx<'_>, key: &[u8], elements: &[Box<[u8]>]) {
    ctx.reply.array(2);
    ctx.reply.bulk(key);
    bulks(ctx, elements);
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count].
pub fn lmpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let m = parse_mpop(args, 1)?;
    match mpop_core(ctx, m.keys, m.end, m.count, false)? {
        Some((key, popped)) => reply_mpop(ctx, key, &popped),
        None => ctx.reply.null_array(),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> ListValue {
        items.iter().map(|s| s.as_bytes()).collect()
    }

    #[test]
    fn take_is_bounded_by_the_list() {
        let mut l = list(&["a", "b", "c"]);
        let got = take(&mut l, End::Right, 2);
        assert_eq!(
            got,
            vec![b"c"[..].into(), b"b"[..].into()] as Vec<Box<[u8]>>
        );
        // A count of 2^62 takes what there is and allocates for that only.
        let got = take(&mut l, End::Left, 1 << 62);
        assert_eq!(got, vec![b"a"[..].into()] as Vec<Box<[u8]>>);
        assert!(l.is_empty());
        assert!(take(&mut l, End::Left, u64::MAX).is_empty());
    }

    fn mpop_args(extra: &[&'static str]) -> Vec<&'static [u8]> {
        extra.iter().map(|s| s.as_bytes()).collect()
    }

    #[test]
    fn mpop_parsing_and_errors() {
        let a = mpop_args(&["lmpop", "2", "a", "b", "RIGHT", "COUNT", "3"]);
        let m = parse_mpop(&a, 1).unwrap();
        assert_eq!(m.keys, &[&b"a"[..], &b"b"[..]]);
        assert_eq!((m.end, m.count), (End::Right, 3));
        let e = |extra: &[&'static str]| {
            parse_mpop(&mpop_args(extra), 1)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(
            e(&["lmpop", "0", "a", "left"]),
            "ERR numkeys should be greater than 0"
        );
        assert_eq!(
            e(&["lmpop", "x", "a", "left"]),
            "ERR numkeys should be greater than 0"
        );
        assert_eq!(
            e(&["lmpop", "9223372036854775807", "a", "left"]),
            "ERR syntax error"
        );
        assert_eq!(e(&["lmpop", "2", "a", "left"]), "ERR syntax error");
        assert_eq!(e(&["lmpop", "1", "a", "up"]), "ERR syntax error");
        assert_eq!(
            e(&["lmpop", "1", "a", "left", "count", "0"]),
            "ERR count should be greater than 0"
        );
        assert_eq!(e(&["lmpop", "1", "a", "left", "count"]), "ERR syntax error");
        assert_eq!(
            e(&["lmpop", "1", "a", "left", "count", "1", "count", "1"]),
            "ERR syntax error"
        );
    }
}
