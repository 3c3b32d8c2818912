//! Lists: LPUSH RPUSH LPUSHX RPUSHX LINSERT LSET LREM LTRIM (in `edit`), LLEN LRANGE LINDEX
//! LPOS (in `read`), LPOP RPOP LMOVE RPOPLPUSH LMPOP (in `pop`), and the blocking forms BLPOP
//! BRPOP BLMOVE BRPOPLPUSH BLMPOP (in `blocking`), with Redis 7.0's replies and error texts.
//!
//! A list is a `VecDeque` of elements stored byte for byte; an emptied list is deleted, as
//! Redis never keeps empty aggregates. Every command that adds elements signals its key, so
//! clients blocked on it are woken.

mod blocking;
// End to end through the server's connections: a test may reach any layer, and files under
// a `tests` folder are not counted as imports of `commands`.
#[cfg(test)]
#[path = "lists/tests/blocking.rs"]
mod blocking_tests;
mod edit;
mod index;
mod pop;
mod read;

use crate::command_framework::args::is;
use crate::command_framework::spec::{command, flags::*, KeySpec, KEY1, KEY1_2};
use crate::command_framework::{CmdError, CommandSpec, Ctx};
use crate::db::list::ListLimits;
use crate::db::value::ListValue;
use crate::db::{Locked, Value};
use smallvec::SmallVec;

pub static COMMANDS: &[CommandSpec] = &[
    command("lpush", -3, WRITE | DENYOOM | FAST, KEY1, edit::lpush, "list", "Prepend one or multiple elements to a list"),
    command("rpush", -3, WRITE | DENYOOM | FAST, KEY1, edit::rpush, "list", "Append one or multiple elements to a list"),
    CommandSpec { since: "2.2.0", ..command("lpushx", -3, WRITE | DENYOOM | FAST, KEY1, edit::lpushx, "list", "Prepend an element to a list, only if the list exists") },
    CommandSpec { since: "2.2.0", ..command("rpushx", -3, WRITE | DENYOOM | FAST, KEY1, edit::rpushx, "list", "Append an element to a list, only if the list exists") },
    CommandSpec { since: "2.2.0", ..command("linsert", 5, WRITE | DENYOOM, KEY1, edit::linsert, "list", "Insert an element before or after another element in a list") },
    command("lset", 4, WRITE | DENYOOM, KEY1, edit::lset, "list", "Set the value of an element in a list by its index"),
    command("lrem", 4, WRITE, KEY1, edit::lrem, "list", "Remove elements from a list"),
    command("ltrim", 4, WRITE, KEY1, edit::ltrim, "list", "Trim a list to the specified range"),
    command("llen", 2, READONLY | FAST, KEY1, read::llen, "list", "Get the length of a list"),
    command("lrange", 4, READONLY, KEY1, read::lrange, "list", "Get a range of elements from a list"),
    command("lindex", 3, READONLY, KEY1, read::lindex, "list", "Get an element from a list by its index"),
    CommandSpec { since: "6.0.6", ..command("lpos", -3, READONLY, KEY1, read::lpos, "list", "Return the index of matching elements on a list") },
    command("lpop", -2, WRITE | FAST, KEY1, pop::lpop, "list", "Remove and get the first elements in a list"),
    command("rpop", -2, WRITE | FAST, KEY1, pop::rpop, "list", "Remove and get the last elements in a list"),
    CommandSpec { since: "6.2.0", ..command("lmove", 5, WRITE | DENYOOM, KEY1_2, pop::lmove, "list", "Pop an element from a list, push it to another list and return it") },
    CommandSpec { since: "1.2.0", ..command("rpoplpush", 3, WRITE | DENYOOM, KEY1_2, pop::rpoplpush, "list", "Remove the last element in a list, prepend it to another list and return it") },
    CommandSpec { since: "7.0.0", ..command("lmpop", -4, WRITE | MOVABLE_KEYS, KeySpec::Custom(lmpop_keys), pop::lmpop, "list", "Pop elements from a list") },
    CommandSpec { since: "2.0.0", ..command("blpop", -3, WRITE | NOSCRIPT | BLOCKING, ALL_BUT_LAST_KEYS, blocking::blpop, "list", "Remove and get the first element in a list, or block until one is available") },
    CommandSpec { since: "2.0.0", ..command("brpop", -3, WRITE | NOSCRIPT | BLOCKING, ALL_BUT_LAST_KEYS, blocking::brpop, "list", "Remove and get the last element in a list, or block until one is available") },
    CommandSpec { since: "6.2.0", ..command("blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING, KEY1_2, blocking::blmove, "list", "Pop an element from a list, push it to another list and return it; or block until one is available") },
    CommandSpec { since: "2.2.0", ..command("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING, KEY1_2, blocking::brpoplpush, "list", "Pop an element from a list, push it to another list and return it; or block until one is available") },
    CommandSpec { since: "7.0.0", ..command("blmpop", -5, WRITE | BLOCKING | MOVABLE_KEYS, KeySpec::Custom(blmpop_keys), blocking::blmpop, "list", "Pop elements from a list, or block until one is available") },
];

/// Keys: every argument from 1 but the last (BLPOP's timeout).
const ALL_BUT_LAST_KEYS: KeySpec = KeySpec::Range {
    first: 1,
    last: -2,
    step: 1,
};

/// The end of a list an element leaves or joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

impl End {
    /// `LEFT` or `RIGHT`, any case (`ERR syntax error` otherwise).
    fn parse(arg: &[u8]) -> Result<End, CmdError> {
        if is(arg, "left") {
            Ok(End::Left)
        } else if is(arg, "right") {
            Ok(End::Right)
        } else {
            Err(CmdError::Syntax)
        }
    }

    /// The keyspace event of taking an element from this end (`lpop`, `rpop`).
    fn pop_event(self) -> &'static str {
        match self {
            End::Left => "lpop",
            End::Right => "rpop",
        }
    }

    /// The keyspace event of adding an element at this end (`lpush`, `rpush`).
    fn push_event(self) -> &'static str {
        match self {
            End::Left => "lpush",
            End::Right => "rpush",
        }
    }
}

/// The thresholds a write packs by (`list-max-listpack-size`).
fn list_limits(ctx: &Ctx<'_>) -> ListLimits {
    ctx.server.hot.list_limits()
}

/// The list stored at `key`: None when there is no key, WRONGTYPE when it holds another type.
fn list_mut<'d>(db: &'d mut Locked<'_>, key: &[u8]) -> Result<Option<&'d mut ListValue>, CmdError> {
    match db.get(key) {
        None => Ok(None),
        Some(entry) => match &mut entry.value {
            Value::List(list) => Ok(Some(list)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// The keys of `LMPOP numkeys key... LEFT|RIGHT [COUNT n]`.
fn lmpop_keys(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    numkeys_positions(args, 1)
}

/// The keys of `BLMPOP timeout numkeys key... LEFT|RIGHT [COUNT n]`.
fn blmpop_keys(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    numkeys_positions(args, 2)
}

/// Argument indexes of the keys that follow a `numkeys` argument at `at`. None when numkeys
/// is not a positive integer or names more keys than there are arguments: the command then
/// fails on parsing before it touches any key.
fn numkeys_positions(args: &[&[u8]], at: usize) -> SmallVec<[usize; 16]> {
    let Some(n) = args
        .get(at)
        .and_then(|a| proto::resp::request::parse_i64(a))
        .and_then(|n| usize::try_from(n).ok())
    else {
        return SmallVec::new();
    };
    // Keys plus the LEFT|RIGHT that must follow them; `n` is bounded by the arguments here,
    // so the range below never exceeds the request.
    if n == 0 || n >= args.len().saturating_sub(at + 1) {
        return SmallVec::new();
    }
    (at + 1..=at + n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numkeys_positions_follow_the_count() {
        let args: Vec<&[u8]> = vec![b"lmpop", b"2", b"a", b"b", b"left"];
        assert_eq!(lmpop_keys(&args).as_slice(), &[2, 3]);
        let args: Vec<&[u8]> = vec![b"blmpop", b"0", b"1", b"a", b"left", b"count", b"3"];
        assert_eq!(blmpop_keys(&args).as_slice(), &[3]);
    }

    #[test]
    fn numkeys_positions_refuse_bad_counts() {
        for n in [&b"0"[..], b"-1", b"x", b"3", b"4611686018427387904"] {
            let args: Vec<&[u8]> = vec![b"lmpop", n, b"a", b"b", b"left"];
            assert!(lmpop_keys(&args).is_empty(), "numkeys {n:?}");
        }
        // No room left for LEFT|RIGHT after the keys.
        let args: Vec<&[u8]> = vec![b"lmpop", b"2", b"a", b"b"];
        assert!(lmpop_keys(&args).is_empty());
    }

    #[test]
    fn ends_parse_in_any_case() {
        assert_eq!(End::parse(b"LeFt"), Ok(End::Left));
        assert_eq!(End::parse(b"RIGHT"), Ok(End::Right));
        assert_eq!(End::parse(b"middle"), Err(CmdError::Syntax));
    }
}
