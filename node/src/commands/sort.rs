//! SORT and SORT_RO: the elements of a list, set or sorted set, ordered by their own value
//! or by the keys a `BY` pattern names, sliced by `LIMIT`, answered or `STORE`d as a list,
//! each one replaced by what `GET` patterns name. Redis 7.0 semantics and error texts.
//!
//! Patterns read keys no key spec names, so the dispatcher locks every shard when the
//! arguments hold `BY` or `GET` (`flags::PATTERN_KEYS`). In cluster mode such keys may live on
//! another node: as Redis, a `BY` pattern with `*` and any `GET` are refused there.

mod lookup;
mod options;

use crate::command_framework::spec::{command, flags::*, KeySpec, KEY1};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::db::{Key, Value};
use options::{Order, SortOptions};
use smallvec::SmallVec;
use std::cmp::Ordering;

pub static COMMANDS: &[CommandSpec] = &[
    command(
        "sort",
        -2,
        WRITE | DENYOOM | MOVABLE_KEYS | PATTERN_KEYS,
        KeySpec::CustomWithRange {
            first: 1,
            last: 1,
            step: 1,
            find: sort_keys,
        },
        sort,
        "generic",
        "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.",
    ),
    CommandSpec {
        since: "7.0.0",
        ..command(
            "sort_ro",
            -2,
            // Movable as in Redis: its BY and GET patterns name keys no key spec can locate.
            READONLY | MOVABLE_KEYS | PATTERN_KEYS,
            KEY1,
            sort_ro,
            "generic",
            "Returns the sorted elements of a list, a set, or a sorted set.",
        )
    },
];

/// The key to sort and the `STORE` destination (the last one given), found as Redis finds
/// them: `LIMIT` skips two arguments, `GET` and `BY` one.
fn sort_keys(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    let mut keys = SmallVec::new();
    keys.push(1);
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let arg = args[i];
        if arg.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if arg.eq_ignore_ascii_case(b"get") || arg.eq_ignore_ascii_case(b"by") {
            i += 1;
        } else if arg.eq_ignore_ascii_case(b"store") && i + 1 < args.len() {
            store = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    keys.extend(store);
    keys
}

fn sort(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    run(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    run(ctx, args, true)
}

/// One element being sorted and what it is compared by.
struct Item {
    element: Key,
    /// ALPHA with a BY pattern: the named value (`None`: no such key, sorts first).
    alpha_by: Option<Vec<u8>>,
    /// Numeric sorts: the element's or the named value as a double (0 when BY finds none).
    score: f64,
}

fn run(ctx: &mut Ctx<'_>, args: &[&[u8]], read_only: bool) -> CmdResult {
    let cluster = ctx.server.cluster.is_some();
    let full_key_access = crate::command_framework::acl_check::user_of(ctx.server, ctx.client)
        .rules()
        .all_keys;
    let mut opts = SortOptions::parse(&args[2..], read_only, cluster, full_key_access)?;
    let key = args[1];
    let (mut elements, is_set, is_zset) = match ctx.db.get(key).map(|e| &e.value) {
        None => (Vec::new(), false, false),
        Some(Value::List(l)) => (l.iter().map(Key::from).collect(), false, false),
        Some(Value::Set(s)) => (s.iter().map(Key::from).collect(), true, false),
        Some(Value::ZSet(z)) => (z.iter().map(|(m, _)| Key::from(m)).collect(), false, true),
        Some(_) => return Err(CmdError::WrongType),
    };
    // A set's own order is not the same on a replica or after a reload: what is stored (and
    // so replicated as the command) must not depend on it, so Redis sorts it by its bytes;
    // so does a script, whose reply may decide what it writes.
    if opts.dont_sort && is_set && (opts.store.is_some() || ctx.client.in_script) {
        opts.dont_sort = false;
        opts.alpha = true;
        opts.by = None;
    }
    // An unsorted sorted set keeps its score order, reversed by DESC.
    if opts.dont_sort && is_zset && opts.order == Order::Desc {
        elements.reverse();
    }
    let range = opts.range(elements.len());
    let ordered = if opts.dont_sort {
        elements
    } else {
        sort_elements(ctx, elements, &opts)?
    };
    let picked = &ordered[range];
    match opts.store {
        Some(dest) => store(ctx, dest, picked, &opts.gets),
        None => {
            answer(ctx, picked, &opts.gets);
            Ok(())
        }
    }
}

fn sort_elements(
    ctx: &mut Ctx<'_>,
    elements: Vec<Key>,
    opts: &SortOptions<'_>,
) -> Result<Vec<Key>, CmdError> {
    let mut items = Vec::with_capacity(elements.len());
    let mut not_a_number = false;
    for element in elements {
        let by_value = match opts.by {
            Some(pattern) => lookup::value_named(&mut ctx.db, pattern, &element),
            None => None,
        };
        let mut item = Item {
            element,
            alpha_by: None,
            score: 0.0,
        };
        if opts.alpha {
            item.alpha_by = by_value;
        } else {
            let text = match (&by_value, opts.by) {
                (Some(v), _) => Some(v.as_slice()),
                (None, None) => Some(&item.element[..]),
                (None, Some(_)) => None,
            };
            if let Some(text) = text {
                match lookup::strtod_whole(text) {
                    Some(score) => item.score = score,
                    None => not_a_number = true,
                }
            }
        }
        items.push(item);
    }
    if not_a_number {
        return Err(CmdError::new(
            "ERR One or more scores can't be converted into double",
        ));
    }
    let by_pattern = opts.by.is_some();
    let alpha = opts.alpha;
    items.sort_by(|a, b| {
        let cmp = compare(a, b, alpha, by_pattern);
        match opts.order {
            Order::Asc => cmp,
            Order::Desc => cmp.reverse(),
        }
    });
    Ok(items.into_iter().map(|i| i.element).collect())
}

/// Redis's order: numbers by value, equal ones by their bytes; ALPHA by the bytes of the
/// element or of the value BY names (a missing one first, equal ones left as they were).
fn compare(a: &Item, b: &Item, alpha: bool, by_pattern: bool) -> Ordering {
    if !alpha {
        return a
            .score
            .partial_cmp(&b.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.element.cmp(&b.element));
    }
    if by_pattern {
        a.alpha_by.cmp(&b.alpha_by)
    } else {
        a.element.cmp(&b.element)
    }
}

/// The reply: each element, or for each element what every GET pattern names (nil where
/// nothing is).
fn answer(ctx: &mut Ctx<'_>, picked: &[Key], gets: &[&[u8]]) {
    if gets.is_empty() {
        ctx.reply.array(picked.len());
        for element in picked {
            ctx.reply.bulk(element);
        }
        return;
    }
    ctx.reply.array(picked.len() * gets.len());
    for element in picked {
        for pattern in gets {
            match lookup::value_named(&mut ctx.db, pattern, element) {
                Some(value) => ctx.reply.bulk(&value),
                None => ctx.reply.null(),
            }
        }
    }
}

/// STORE: the result becomes a list at `dest` (whatever it held, its TTL too; what GET
/// finds nothing for is stored empty); an empty result deletes `dest`. Answers its length.
fn store(ctx: &mut Ctx<'_>, dest: &[u8], picked: &[Key], gets: &[&[u8]]) -> CmdResult {
    let limits = ctx.server.hot.list_limits();
    let mut list = crate::db::value::ListValue::new();
    for element in picked {
        if gets.is_empty() {
            list.push_back(element, limits);
            continue;
        }
        for pattern in gets {
            let value = lookup::value_named(&mut ctx.db, pattern, element).unwrap_or_default();
            list.push_back(&value, limits);
        }
    }
    let len = list.len();
    if len == 0 {
        if ctx.db.remove(dest).is_some() {
            ctx.modified(dest);
        }
    } else {
        ctx.db.set(dest, Value::List(Box::new(list)));
        ctx.modified(dest);
        // A list stored into place serves the clients blocked on it.
        ctx.signal_ready(dest);
    }
    ctx.reply.integer(len as i64);
    Ok(())
}
