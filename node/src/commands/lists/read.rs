//! Commands that read a list: LLEN LRANGE LINDEX LPOS.

use super::{index, list_mut};
use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::value::ListValue;

pub fn llen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let len = list_mut(&mut ctx.db, args[1])?.map_or(0, |l| l.len());
    ctx.reply.integer(len as i64);
    Ok(())
}

/// LRANGE key start stop; the reply never holds more than the list.
pub fn lrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (start, end) = (args::int(args[2])?, args::int(args[3])?);
    let Ctx { db, reply, .. } = ctx;
    let Some(list) = list_mut(db, args[1])? else {
        reply.array(0);
        return Ok(());
    };
    match index::range(start, end, list.len()) {
        Some((first, last)) => {
            reply.array(last - first + 1);
            // `for_each`, not `for`: the list's own loop (`fold`) walks its nodes.
            list.range(first, last - first + 1)
                .for_each(|e| reply.bulk(e));
        }
        None => reply.array(0),
    }
    Ok(())
}

/// LINDEX key index: the key is looked up before the index is parsed, as Redis does.
pub fn lindex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    let Some(list) = list_mut(db, args[1])? else {
        reply.null();
        return Ok(());
    };
    match index::position(args::int(args[2])?, list.len()) {
        Some(at) => reply.bulk(list.get(at).expect("position within the list")),
        None => reply.null(),
    }
    Ok(())
}

/// The options of LPOS.
#[derive(Debug, PartialEq, Eq)]
struct LposOptions {
    /// Which match to start from: 1 the first from the head, -1 the first from the tail.
    rank: i64,
    /// How many matches to return (0: all); None without COUNT, for a single integer reply.
    count: Option<u64>,
    /// How many elements to compare at most (0: the whole list).
    maxlen: u64,
}

fn parse_lpos(args: &[&[u8]]) -> Result<LposOptions, CmdError> {
    let mut o = LposOptions {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let mut i = 3;
    while i < args.len() {
        let Some(value) = args.get(i + 1) else {
            return Err(CmdError::Syntax);
        };
        if is(args[i], "rank") {
            o.rank = args::int(value)?;
            if o.rank == 0 {
                return err("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list");
            }
        } else if is(args[i], "count") {
            o.count = Some(non_negative(value, "ERR COUNT can't be negative")?);
        } else if is(args[i], "maxlen") {
            o.maxlen = non_negative(value, "ERR MAXLEN can't be negative")?;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(o)
}

/// A count that must be a non-negative integer; anything else answers `text`.
fn non_negative(arg: &[u8], text: &'static str) -> Result<u64, CmdError> {
    args::int(arg)
        .ok()
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| CmdError::new(text))
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len].
pub fn lpos(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let o = parse_lpos(args)?;
    let Ctx { db, reply, .. } = ctx;
    let list = list_mut(db, args[1])?;
    let found = list.map_or_else(Vec::new, |l| find(l, args[2], &o));
    match o.count {
        Some(_) => {
            reply.array(found.len());
            for at in found {
                reply.integer(at as i64);
            }
        }
        None => match found.first() {
            Some(&at) => reply.integer(at as i64),
            None => reply.null(),
        },
    }
    Ok(())
}

/// Positions of the matches LPOS returns, in the order found. At most one position per
/// element of the list, whatever COUNT says.
fn find(list: &ListValue, element: &[u8], o: &LposOptions) -> Vec<usize> {
    let len = list.len();
    let from_tail = o.rank < 0;
    // Redis 7.0 negates the rank in a C long: LONG_MIN stays negative, so every match
    // qualifies and COUNT never stops the scan. Kept for identical replies.
    let (skip, wanted) = if o.rank == i64::MIN {
        (0, u64::MAX)
    } else {
        let skip = o.rank.unsigned_abs() - 1;
        (
            skip,
            o.count.map_or(1, |c| if c == 0 { u64::MAX } else { c }),
        )
    };
    let scan = match o.maxlen {
        0 => len,
        m => usize::try_from(m).unwrap_or(usize::MAX).min(len),
    };
    let mut found = Vec::new();
    let mut matches: u64 = 0;
    let elements: Box<dyn Iterator<Item = &[u8]>> = if from_tail {
        Box::new(list.iter_rev())
    } else {
        Box::new(list.iter())
    };
    for (step, e) in elements.take(scan).enumerate() {
        let at = if from_tail { len - 1 - step } else { step };
        if e != element {
            continue;
        }
        matches += 1;
        if matches <= skip {
            continue;
        }
        found.push(at);
        if found.len() as u64 >= wanted {
            break;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> ListValue {
        items.iter().map(|s| s.as_bytes()).collect()
    }

    fn opts(rank: i64, count: Option<u64>, maxlen: u64) -> LposOptions {
        LposOptions {
            rank,
            count,
            maxlen,
        }
    }

    #[test]
    fn lpos_ranks_counts_and_maxlen() {
        let l = list(&["a", "b", "c", "1", "2", "3", "c", "c"]);
        assert_eq!(find(&l, b"c", &opts(1, None, 0)), [2]);
        assert_eq!(find(&l, b"c", &opts(2, None, 0)), [6]);
        assert_eq!(find(&l, b"c", &opts(-1, None, 0)), [7]);
        assert_eq!(find(&l, b"c", &opts(1, Some(2), 0)), [2, 6]);
        assert_eq!(find(&l, b"c", &opts(1, Some(0), 0)), [2, 6, 7]);
        assert_eq!(find(&l, b"c", &opts(-2, Some(0), 0)), [6, 2]);
        assert_eq!(find(&l, b"c", &opts(1, Some(0), 3)), [2]);
        assert_eq!(find(&l, b"c", &opts(-1, Some(0), 2)), [7, 6]);
        assert_eq!(find(&l, b"c", &opts(9, None, 0)), Vec::<usize>::new());
        assert_eq!(
            find(&l, b"c", &opts(i64::MAX, Some(u64::MAX), u64::MAX)),
            Vec::<usize>::new()
        );
        assert_eq!(find(&l, b"c", &opts(i64::MIN, None, 0)), [7, 6, 2]);
    }

    #[test]
    fn lpos_option_errors() {
        let a = |extra: &[&'static str]| {
            let mut v: Vec<&[u8]> = vec![b"lpos", b"k", b"e"];
            v.extend(extra.iter().map(|s| s.as_bytes()));
            parse_lpos(&v)
        };
        assert_eq!(a(&[]), Ok(opts(1, None, 0)));
        assert_eq!(
            a(&["RANK", "-2", "count", "0", "MaxLen", "9"]),
            Ok(opts(-2, Some(0), 9))
        );
        assert!(a(&["RANK", "0"])
            .unwrap_err()
            .to_string()
            .starts_with("ERR RANK can't be zero"));
        assert_eq!(a(&["RANK", "x"]), Err(CmdError::NotInteger));
        assert_eq!(
            a(&["COUNT", "-1"]).unwrap_err().to_string(),
            "ERR COUNT can't be negative"
        );
        assert_eq!(
            a(&["MAXLEN", "x"]).unwrap_err().to_string(),
            "ERR MAXLEN can't be negative"
        );
        assert_eq!(a(&["RANK"]), Err(CmdError::Syntax));
        assert_eq!(a(&["FOO", "1"]), Err(CmdError::Syntax));
    }
}
