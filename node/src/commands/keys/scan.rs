//! SCAN: a cursor over the keyspace that returns every key present for the whole scan at
//! least once, however keys come and go between calls.
//!
//! The cursor names a position: a slot table, counted shard by shard (table `t` of shard `s`
//! is position `s * SLOTS_PER_SHARD + t`, so consecutive positions share a lock), and how
//! many entries of that table remain to visit. A table is visited from its highest index
//! down. Deletion is `swap_remove`, which moves the table's last entry into the hole: an
//! entry not yet visited sits below the cursor and only ever moves down, so it stays ahead
//! of the cursor; a visited entry may move back below it and be returned twice, which SCAN
//! allows. New keys are appended at the top and may or may not be returned, also as allowed.

use crate::command_framework::args::{self, is};
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::keyspace::{SlotTable, SHARD_COUNT, SLOTS_PER_SHARD};
use crate::db::value::Kind;
use crate::db::Key;
use crate::node_state::glob;

/// Positions in a full scan: one per slot table.
const POSITIONS: u64 = (SHARD_COUNT * SLOTS_PER_SHARD) as u64;
/// Entries visited per call when COUNT is not given (Redis's default).
const DEFAULT_COUNT: usize = 10;
/// Bits of the cursor holding the remaining count within a table.
const REMAINING_BITS: u32 = 32;

/// Where a scan stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanCursor {
    /// The table being visited, in position order.
    pub position: u64,
    /// Entries of that table still to visit (indexes `remaining-1` down to 0); None when the
    /// table has not been started, so all its entries are ahead.
    pub remaining: Option<u32>,
}

impl ScanCursor {
    /// The wire form: 0 only for the start (and so, returned, for the end).
    pub fn encode(self) -> u64 {
        let low = match self.remaining {
            None => 0,
            Some(r) => r as u64,
        };
        (self.position << REMAINING_BITS) | low
    }

    pub fn decode(cursor: u64) -> ScanCursor {
        let low = cursor & ((1 << REMAINING_BITS) - 1);
        ScanCursor {
            position: cursor >> REMAINING_BITS,
            remaining: (low != 0).then_some(low as u32),
        }
    }
}

struct Options<'a> {
    count: usize,
    pattern: Option<&'a [u8]>,
    /// `TYPE name`: None matches all; Some(None) is a name no value has (matches nothing).
    kind: Option<Option<Kind>>,
}

fn parse_options<'a>(args: &[&'a [u8]]) -> Result<Options<'a>, CmdError> {
    let mut o = Options {
        count: DEFAULT_COUNT,
        pattern: None,
        kind: None,
    };
    let mut i = 0;
    while i < args.len() {
        let Some(&value) = args.get(i + 1) else {
            return Err(CmdError::Syntax);
        };
        if is(args[i], "count") {
            let n = args::int(value)?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            o.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if is(args[i], "match") {
            // `*` matches everything: skip the matcher.
            o.pattern = (value != b"*").then_some(value);
        } else if is(args[i], "type") {
            o.kind = Some(Kind::from_name(value));
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(o)
}

pub fn scan(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let cursor = crate::command_framework::scan::parse_cursor(args[1])?;
    let options = parse_options(&args[2..])?;
    let mut keys: Vec<Key> = Vec::new();
    let next = scan_keys(ctx, ScanCursor::decode(cursor), &options, &mut keys);
    let mut buf = itoa::Buffer::new();
    ctx.reply.array(2);
    ctx.reply.bulk(buf.format(next).as_bytes());
    ctx.reply.array(keys.len());
    for key in &keys {
        ctx.reply.bulk(key);
    }
    Ok(())
}

/// Visits up to `options.count` entries from `cursor` (empty and hidden tables cost no
/// count: there are at most `POSITIONS` of them, each a length or bit check). Returns the
/// next wire cursor.
fn scan_keys(
    ctx: &mut Ctx<'_>,
    mut cursor: ScanCursor,
    options: &Options<'_>,
    out: &mut Vec<Key>,
) -> u64 {
    let now = ctx.db.now;
    let hidden = ctx.db.keyspace().hidden();
    let mut budget = options.count;
    while cursor.position < POSITIONS && budget > 0 {
        let shard = cursor.position as usize / SLOTS_PER_SHARD;
        cursor = ctx.db.with_shard(shard, |s| {
            let mut c = cursor;
            while budget > 0
                && c.position < POSITIONS
                && c.position as usize / SLOTS_PER_SHARD == shard
            {
                let index = c.position as usize % SLOTS_PER_SHARD;
                // A slot being imported is passed over whole, at no cost to the budget (as
                // an empty table): its keys are not this node's yet.
                if s.table_hidden(index, hidden) {
                    c = ScanCursor {
                        position: c.position + 1,
                        remaining: None,
                    };
                    continue;
                }
                let table = &s.tables()[index];
                c = visit_table(table, c, &mut budget, |key, entry| {
                    if entry.is_expired(now) {
                        return;
                    }
                    if options
                        .pattern
                        .is_some_and(|p| !glob::matches(p, key, false))
                    {
                        return;
                    }
                    if options.kind.is_some_and(|k| k != Some(entry.value.kind())) {
                        return;
                    }
                    out.push(Key::from(key));
                });
            }
            c
        });
    }
    if cursor.position >= POSITIONS {
        0
    } else {
        cursor.encode()
    }
}

/// Visits entries of one table downwards from the cursor, spending `budget`; returns the
/// cursor after them (the next position, unstarted, once the table is done).
fn visit_table(
    table: &SlotTable,
    cursor: ScanCursor,
    budget: &mut usize,
    mut f: impl FnMut(&[u8], &crate::db::Entry),
) -> ScanCursor {
    // Entries removed since the last call may have shrunk the table below the cursor.
    let len = table.len().min(u32::MAX as usize) as u32;
    let mut remaining = cursor.remaining.map_or(len, |r| r.min(len));
    while remaining > 0 && *budget > 0 {
        remaining -= 1;
        *budget -= 1;
        if let Some((key, entry)) = table.get_index(remaining as usize) {
            f(key, entry);
        }
    }
    if remaining == 0 {
        ScanCursor {
            position: cursor.position + 1,
            remaining: None,
        }
    } else {
        ScanCursor {
            position: cursor.position,
            remaining: Some(remaining),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::stored_key::Access;
    use crate::db::{Entry, Value};

    fn table(keys: &[&str]) -> SlotTable {
        let mut t = SlotTable::with_hasher(Default::default());
        for k in keys {
            t.insert(k.as_bytes(), Entry::new(Value::Int(1)), Access::fresh(0));
        }
        t
    }

    fn names(t: &SlotTable, cursor: ScanCursor, budget: usize) -> (Vec<String>, ScanCursor) {
        let mut budget = budget;
        let mut seen = Vec::new();
        let next = visit_table(t, cursor, &mut budget, |k, _| {
            seen.push(String::from_utf8_lossy(k).into_owned())
        });
        (seen, next)
    }

    #[test]
    fn cursor_round_trips_and_zero_is_the_start() {
        assert_eq!(
            ScanCursor::decode(0),
            ScanCursor {
                position: 0,
                remaining: None
            }
        );
        for c in [
            ScanCursor {
                position: 0,
                remaining: Some(3),
            },
            ScanCursor {
                position: POSITIONS - 1,
                remaining: None,
            },
            ScanCursor {
                position: 77,
                remaining: Some(u32::MAX),
            },
        ] {
            assert_eq!(ScanCursor::decode(c.encode()), c);
        }
    }

    #[test]
    fn a_table_is_visited_downwards_in_budgeted_steps() {
        let t = table(&["a", "b", "c", "d"]);
        let start = ScanCursor {
            position: 5,
            remaining: None,
        };
        let (seen, next) = names(&t, start, 3);
        assert_eq!(seen, ["d", "c", "b"]);
        assert_eq!(
            next,
            ScanCursor {
                position: 5,
                remaining: Some(1)
            }
        );
        let (seen, next) = names(&t, next, 3);
        assert_eq!(seen, ["a"]);
        assert_eq!(
            next,
            ScanCursor {
                position: 6,
                remaining: None
            }
        );
    }

    #[test]
    fn deletions_between_calls_never_hide_an_unvisited_key() {
        // Visit the top two, then delete a visited key and an unvisited one: the survivors
        // below the cursor must all still be returned.
        let mut t = table(&["a", "b", "c", "d", "e", "f"]);
        let (first, next) = names(
            &t,
            ScanCursor {
                position: 0,
                remaining: None,
            },
            2,
        );
        assert_eq!(first, ["f", "e"]);
        t.swap_remove(&b"b"[..]);
        t.swap_remove(&b"f"[..]);
        t.insert(b"g", Entry::new(Value::Int(1)), Access::fresh(0));
        let (rest, _) = names(&t, next, 100);
        for k in ["a", "c", "d"] {
            assert!(rest.iter().any(|s| s == k), "{k} missing from {rest:?}");
        }
    }

    #[test]
    fn options_parse_as_redis() {
        let parse = |w: &[&str]| {
            let a: Vec<&[u8]> = w.iter().map(|s| s.as_bytes()).collect();
            parse_options(&a)
                .map(|o| (o.count, o.pattern.map(|p| p.to_vec()), o.kind))
                .map_err(|e| e.to_string())
        };
        assert_eq!(parse(&[]).unwrap(), (10, None, None));
        assert_eq!(
            parse(&["COUNT", "5", "MATCH", "a*"]).unwrap(),
            (5, Some(b"a*".to_vec()), None)
        );
        assert_eq!(parse(&["type", "hash"]).unwrap().2, Some(Some(Kind::Hash)));
        assert_eq!(parse(&["type", "nosuch"]).unwrap().2, Some(None));
        assert_eq!(parse(&["count", "0"]).unwrap_err(), "ERR syntax error");
        assert_eq!(
            parse(&["count", "x"]).unwrap_err(),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(parse(&["match"]).unwrap_err(), "ERR syntax error");
        assert_eq!(parse(&["foo", "bar"]).unwrap_err(), "ERR syntax error");
    }
}
