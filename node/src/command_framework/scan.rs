//! The SCAN family's shared pieces: the cursor and option parser (`cursor [MATCH pattern]
//! [COUNT n] [TYPE name]`) and a cursor walk over index-ordered collections (the IndexMap and
//! IndexSet behind hashes and sets).
//!
//! # Why the walk goes by descending index
//! Removing an element of an IndexMap/IndexSet with `swap_remove` moves the collection's last
//! element into the hole; inserting appends at the end; `shift_remove` moves later elements
//! down by one. So an element's index never grows while it stays in the collection. The walk
//! visits indexes from the top down, and the cursor names how many indexes are still to visit
//! (the next index plus one). Everything not yet visited sits below the cursor and can only
//! move further down, so it stays ahead of the walk: an element present for the whole scan is
//! always returned. A visited element may move below the cursor and be returned twice, and an
//! element added during the scan lands above it and may be missed: both are allowed by SCAN's
//! contract. Cursor 0 starts at the top; the walk answers 0 when it has reached index 0.

use super::args::{self, is};
use super::error::CmdError;
use crate::db::value::Kind;

/// Elements visited per call when COUNT is not given (Redis's default).
pub const DEFAULT_COUNT: usize = 10;

/// A cursor argument read as Redis reads it, with C's `strtoul`: decimal digits after an
/// optional sign, where `-n` wraps around to `2^64 - n`; an empty argument is 0. Leading
/// spaces, trailing bytes and values past `u64::MAX` are `ERR invalid cursor`.
pub fn parse_cursor(arg: &[u8]) -> Result<u64, CmdError> {
    let invalid = || CmdError::new("ERR invalid cursor");
    if arg.is_empty() {
        return Ok(0);
    }
    let (negative, digits) = match arg[0] {
        b'-' => (true, &arg[1..]),
        b'+' => (false, &arg[1..]),
        _ => (false, arg),
    };
    if digits.is_empty() {
        return Err(invalid());
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(invalid());
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d - b'0')))
            .ok_or_else(invalid)?;
    }
    Ok(if negative { v.wrapping_neg() } else { v })
}

/// Which option keywords a command takes besides MATCH and COUNT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extra {
    /// HSCAN, SSCAN, ZSCAN: MATCH and COUNT only.
    None,
    /// SCAN: also `TYPE name`.
    Type,
}

/// The `TYPE` filter of SCAN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeFilter {
    Is(Kind),
    /// A name no value has: Redis 7.0 accepts it and matches nothing.
    Unknown,
}

impl TypeFilter {
    pub fn accepts(self, kind: Kind) -> bool {
        self == TypeFilter::Is(kind)
    }
}

/// Parsed `[MATCH pattern] [COUNT n] [TYPE name]` options; a repeated option's last value
/// wins, as in Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanOptions<'a> {
    /// Elements to visit per call (at least 1).
    pub count: usize,
    /// None also for `*`, which matches everything, so callers skip the matcher.
    pub pattern: Option<&'a [u8]>,
    pub kind: Option<TypeFilter>,
}

impl ScanOptions<'_> {
    /// Whether `element` passes MATCH.
    pub fn matches(&self, element: &[u8]) -> bool {
        self.pattern
            .is_none_or(|p| crate::node_state::glob::matches(p, element, false))
    }
}

/// Parses the options that follow the cursor. Errors: a keyword without its value or an
/// unknown keyword is `ERR syntax error`; a COUNT that is not an integer is
/// `ERR value is not an integer or out of range`, one below 1 is `ERR syntax error`.
pub fn parse_options<'a>(options: &[&'a [u8]], extra: Extra) -> Result<ScanOptions<'a>, CmdError> {
    let mut o = ScanOptions {
        count: DEFAULT_COUNT,
        pattern: None,
        kind: None,
    };
    let mut i = 0;
    while i < options.len() {
        let Some(&value) = options.get(i + 1) else {
            return Err(CmdError::Syntax);
        };
        let keyword = options[i];
        if is(keyword, "count") {
            let n = args::int(value)?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            o.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if is(keyword, "match") {
            o.pattern = (value != b"*").then_some(value);
        } else if is(keyword, "type") && extra == Extra::Type {
            o.kind = Some(Kind::from_name(value).map_or(TypeFilter::Unknown, TypeFilter::Is));
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(o)
}

/// One call's walk over a collection of `len` elements: visits at most `count` indexes from
/// the one `cursor` names, downwards, calling `visit` for each, and returns the cursor for the
/// next call (0 once index 0 was visited). A cursor beyond the collection (it shrank, or the
/// client made it up) starts at the top.
pub fn walk(len: usize, cursor: u64, count: usize, mut visit: impl FnMut(usize)) -> u64 {
    // Indexes still to visit: all of them at the start.
    let mut remaining = match cursor {
        0 => len,
        c => usize::try_from(c).map_or(len, |c| c.min(len)),
    };
    let mut budget = count.max(1);
    while remaining > 0 && budget > 0 {
        remaining -= 1;
        budget -= 1;
        visit(remaining);
    }
    remaining as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexSet;

    #[test]
    fn cursors_as_strtoul() {
        assert_eq!(parse_cursor(b"0"), Ok(0));
        assert_eq!(parse_cursor(b""), Ok(0));
        assert_eq!(parse_cursor(b"+12"), Ok(12));
        assert_eq!(parse_cursor(b"007"), Ok(7));
        assert_eq!(parse_cursor(b"-1"), Ok(u64::MAX));
        assert_eq!(parse_cursor(b"-0"), Ok(0));
        assert_eq!(parse_cursor(b"18446744073709551615"), Ok(u64::MAX));
        for bad in [
            &b"18446744073709551616"[..],
            b" 1",
            b"1 ",
            b"0x1",
            b"-",
            b"+-1",
            b"abc",
        ] {
            assert_eq!(
                parse_cursor(bad).unwrap_err().to_string(),
                "ERR invalid cursor",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn options_and_their_errors() {
        let o = parse_options(&[b"MATCH", b"a*", b"count", b"5"], Extra::None).unwrap();
        assert_eq!(o.count, 5);
        assert_eq!(o.pattern, Some(&b"a*"[..]));
        assert!(o.matches(b"abc") && !o.matches(b"bc"));
        let o = parse_options(&[b"match", b"a", b"match", b"*"], Extra::None).unwrap();
        assert_eq!(o.pattern, None, "the last MATCH wins; * skips matching");
        assert_eq!(
            parse_options(&[b"count", b"0"], Extra::None),
            Err(CmdError::Syntax)
        );
        assert_eq!(
            parse_options(&[b"count", b"x"], Extra::None),
            Err(CmdError::NotInteger)
        );
        assert_eq!(
            parse_options(&[b"match"], Extra::None),
            Err(CmdError::Syntax)
        );
        assert_eq!(
            parse_options(&[b"type", b"set"], Extra::None),
            Err(CmdError::Syntax)
        );
        let o = parse_options(&[b"TYPE", b"Hash"], Extra::Type).unwrap();
        assert_eq!(o.kind, Some(TypeFilter::Is(Kind::Hash)));
        assert!(o.kind.unwrap().accepts(Kind::Hash));
        let o = parse_options(&[b"type", b"nosuch"], Extra::Type).unwrap();
        assert_eq!(o.kind, Some(TypeFilter::Unknown));
        assert!(!TypeFilter::Unknown.accepts(Kind::String));
    }

    #[test]
    fn walk_visits_downwards_and_ends_with_zero() {
        let mut seen = Vec::new();
        let next = walk(5, 0, 2, |i| seen.push(i));
        assert_eq!((seen.clone(), next), (vec![4, 3], 3));
        let next = walk(5, next, 2, |i| seen.push(i));
        let next = walk(5, next, 2, |i| seen.push(i));
        assert_eq!((seen, next), (vec![4, 3, 2, 1, 0], 0));
        // A cursor past the end starts at the top; an empty collection ends at once.
        assert_eq!(walk(3, 99, 10, |_| {}), 0);
        assert_eq!(walk(0, 0, 10, |_| panic!("nothing to visit")), 0);
    }

    /// The guarantee: elements present for the whole scan are returned, whatever is removed
    /// (with swap_remove) or added between calls.
    #[test]
    fn walk_never_misses_elements_present_throughout() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for round in 0..200u64 {
            let mut set: IndexSet<u64> = (0..rng.gen_range(0..60)).collect();
            // Every third element is never removed during this scan.
            let stable: std::collections::HashSet<u64> =
                set.iter().copied().filter(|&e| e % 3 == 0).collect();
            let mut seen = std::collections::HashSet::new();
            let mut cursor = 0;
            let mut next_new = 1000 * (round + 1);
            let mut calls = 0;
            loop {
                cursor = walk(set.len(), cursor, rng.gen_range(1..5), |i| {
                    seen.insert(set[i]);
                });
                calls += 1;
                assert!(calls < 10_000, "the walk must end");
                if cursor == 0 {
                    break;
                }
                for _ in 0..rng.gen_range(0..4) {
                    if rng.gen_bool(0.5) && !set.is_empty() {
                        let i = rng.gen_range(0..set.len());
                        if !stable.contains(&set[i]) {
                            set.swap_remove_index(i);
                        }
                    } else {
                        set.insert(next_new);
                        next_new += 1;
                    }
                }
            }
            for e in stable {
                assert!(seen.contains(&e), "round {round}: missed {e}");
            }
        }
    }
}
