//! Commands that add, replace or remove elements in place: LPUSH RPUSH LPUSHX RPUSHX
//! LINSERT LSET LREM LTRIM.

use super::{index, list_limits, list_mut, End};
use crate::command_framework::args::{self, is};
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::list::ListLimits;
use crate::db::value::ListValue;
use crate::db::Value;

/// Adds `elements` at `end` of the list at `key`, creating it if `create`; returns the new
/// length (0 when there is no list and `create` is false).
pub(super) fn push(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    end: End,
    elements: &[&[u8]],
    create: bool,
) -> Result<usize, CmdError> {
    let limits = list_limits(ctx);
    let list = match list_mut(&mut ctx.db, key)? {
        Some(list) => list,
        None if create => {
            ctx.db.set(key, Value::List(Box::default()));
            list_mut(&mut ctx.db, key)?.ok_or(CmdError::NoSuchKey)?
        }
        None => return Ok(0),
    };
    push_into(list, end, elements.iter().copied(), limits);
    let len = list.len();
    ctx.modified(key);
    ctx.signal_ready(key);
    Ok(len)
}

/// Pushes elements one by one, as Redis does: LPUSH a b c leaves c first.
pub(super) fn push_into<'e>(
    list: &mut ListValue,
    end: End,
    elements: impl IntoIterator<Item = &'e [u8]>,
    limits: ListLimits,
) {
    for e in elements {
        match end {
            End::Left => list.push_front(e, limits),
            End::Right => list.push_back(e, limits),
        }
    }
}

fn push_command(ctx: &mut Ctx<'_>, args: &[&[u8]], end: End, create: bool) -> CmdResult {
    let len = push(ctx, args[1], end, &args[2..], create)?;
    ctx.reply.integer(len as i64);
    Ok(())
}

pub fn lpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    push_command(ctx, args, End::Left, true)
}

pub fn rpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    push_command(ctx, args, End::Right, true)
}

pub fn lpushx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    push_command(ctx, args, End::Left, false)
}

pub fn rpushx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    push_command(ctx, args, End::Right, false)
}

/// LINSERT key BEFORE|AFTER pivot element: the new length, -1 without the pivot, 0 without
/// the key.
pub fn linsert(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let after = if is(args[2], "after") {
        true
    } else if is(args[2], "before") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let (key, pivot, element) = (args[1], args[3], args[4]);
    let limits = list_limits(ctx);
    let Some(list) = list_mut(&mut ctx.db, key)? else {
        ctx.reply.integer(0);
        return Ok(());
    };
    let Some(at) = list.iter().position(|e| e == pivot) else {
        ctx.reply.integer(-1);
        return Ok(());
    };
    list.insert(at + usize::from(after), element, limits);
    let len = list.len();
    ctx.modified(key);
    ctx.signal_ready(key);
    ctx.reply.integer(len as i64);
    Ok(())
}

/// LSET key index element.
pub fn lset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let limits = list_limits(ctx);
    let list = list_mut(&mut ctx.db, key)?.ok_or(CmdError::NoSuchKey)?;
    let at = index::position(args::int(args[2])?, list.len()).ok_or(CmdError::IndexOutOfRange)?;
    list.set(at, args[3], limits);
    ctx.modified(key);
    ctx.reply.ok();
    Ok(())
}

/// LREM key count element: removes up to |count| matches from the head (count > 0), from
/// the tail (count < 0), or all of them (0).
pub fn lrem(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let count = args::int(args[2])?;
    let Some(list) = list_mut(&mut ctx.db, key)? else {
        ctx.reply.integer(0);
        return Ok(());
    };
    let removed = remove_matches(list, args[3], count);
    if removed > 0 {
        ctx.db.remove_if_empty(key);
        ctx.modified(key);
    }
    ctx.reply.integer(removed as i64);
    Ok(())
}

/// Removes matches of `element` as LREM's `count` says; returns how many were removed.
fn remove_matches(list: &mut ListValue, element: &[u8], count: i64) -> usize {
    let limit = match count.unsigned_abs() {
        0 => usize::MAX,
        n => usize::try_from(n).unwrap_or(usize::MAX),
    };
    // From the tail: the last `limit` matches go, so the first `matches - limit` stay.
    let mut keep_first = if count < 0 {
        let matches = list.iter().filter(|e| *e == element).count();
        matches.saturating_sub(limit)
    } else {
        0
    };
    let mut removed = 0;
    list.retain(|e| {
        if e != element || removed == limit {
            return true;
        }
        if keep_first > 0 {
            keep_first -= 1;
            return true;
        }
        removed += 1;
        false
    });
    removed
}

/// LTRIM key start stop: keeps only the range; an empty range deletes the key.
pub fn ltrim(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let (start, end) = (args::int(args[2])?, args::int(args[3])?);
    let Some(list) = list_mut(&mut ctx.db, key)? else {
        ctx.reply.ok();
        return Ok(());
    };
    match index::range(start, end, list.len()) {
        Some((first, last)) => {
            list.keep_range(first, last);
        }
        None => list.clear(),
    }
    ctx.db.remove_if_empty(key);
    ctx.modified(key);
    ctx.reply.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> ListValue {
        items.iter().map(|s| s.as_bytes()).collect()
    }

    fn items(l: &ListValue) -> Vec<String> {
        l.iter()
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect()
    }

    #[test]
    fn lrem_from_head_tail_and_all() {
        let mut l = list(&["a", "b", "a", "c", "a"]);
        assert_eq!(remove_matches(&mut l, b"a", 2), 2);
        assert_eq!(items(&l), ["b", "c", "a"]);

        let mut l = list(&["a", "b", "a", "c", "a"]);
        assert_eq!(remove_matches(&mut l, b"a", -2), 2);
        assert_eq!(items(&l), ["a", "b", "c"]);

        let mut l = list(&["a", "b", "a", "c", "a"]);
        assert_eq!(remove_matches(&mut l, b"a", 0), 3);
        assert_eq!(items(&l), ["b", "c"]);

        let mut l = list(&["a", "b", "a"]);
        assert_eq!(remove_matches(&mut l, b"a", i64::MIN), 2);
        assert_eq!(items(&l), ["b"]);

        let mut l = list(&["a", "b"]);
        assert_eq!(remove_matches(&mut l, b"z", -1), 0);
        assert_eq!(items(&l), ["a", "b"]);
    }

    #[test]
    fn pushes_go_one_by_one() {
        let mut l = list(&["x"]);
        push_into(&mut l, End::Left, [&b"a"[..], b"b"], ListLimits::DEFAULT);
        push_into(&mut l, End::Right, [&b"c"[..]], ListLimits::DEFAULT);
        assert_eq!(items(&l), ["b", "a", "x", "c"]);
    }
}
