//! Stream entry IDs (`<ms>-<seq>`) and their text forms, parsed as strictly as Redis 7.0
//! parses them (`streamGenericParseIDOrReply`): decimal digits only, each part a u64.

use std::fmt;

/// An entry ID: milliseconds, then a sequence number within the millisecond.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

/// Longest ID argument looked at (Redis copies it into a 128-byte buffer).
pub const ID_TEXT_MAX: usize = 127;

impl StreamId {
    pub const ZERO: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::ZERO
    }

    /// The next ID, or None past the largest.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                return None;
            }
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous ID, or None below 0-0.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                return None;
            }
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// The text form, `<ms>-<seq>`.
    pub fn to_bytes(self) -> Vec<u8> {
        self.to_string().into_bytes()
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An ID as an argument names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedId {
    pub id: StreamId,
    /// False for `<ms>-*` (XADD asks for the next sequence of that millisecond).
    pub seq_given: bool,
}

/// A u64 in decimal digits only (Redis's `string2ull` also takes what `strtoull` takes, such
/// as leading blanks; such IDs are refused here).
fn parse_u64(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || bytes.len() > 20 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &b in bytes {
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

/// Parses `<ms>[-<seq>]`, `-` and `+`. `missing_seq` is the sequence of a bare `<ms>`;
/// `strict` refuses `-` and `+`; `allow_star_seq` accepts `<ms>-*` (XADD).
pub fn parse(arg: &[u8], missing_seq: u64, strict: bool, allow_star_seq: bool) -> Option<ParsedId> {
    if arg.len() > ID_TEXT_MAX {
        return None;
    }
    let given = |id| {
        Some(ParsedId {
            id,
            seq_given: true,
        })
    };
    match arg {
        b"-" if !strict => return given(StreamId::ZERO),
        b"+" if !strict => return given(StreamId::MAX),
        b"-" | b"+" => return None,
        _ => {}
    }
    match arg.iter().position(|&b| b == b'-') {
        None => given(StreamId::new(parse_u64(arg)?, missing_seq)),
        Some(dash) => {
            let ms = parse_u64(&arg[..dash])?;
            let seq_text = &arg[dash + 1..];
            if allow_star_seq && seq_text == b"*" {
                return Some(ParsedId {
                    id: StreamId::new(ms, 0),
                    seq_given: false,
                });
            }
            given(StreamId::new(ms, parse_u64(seq_text)?))
        }
    }
}

/// A strict ID (no `-`/`+`), a bare `<ms>` meaning `<ms>-0`.
pub fn parse_strict(arg: &[u8]) -> Option<StreamId> {
    parse(arg, 0, true, false).map(|p| p.id)
}

/// One end of an XRANGE/XPENDING interval: `-`, `+`, an ID, or `(ID` (exclusive). Returns
/// the ID and whether it was exclusive.
pub fn parse_interval(arg: &[u8], missing_seq: u64) -> Option<(StreamId, bool)> {
    if arg.len() > 1 && arg[0] == b'(' {
        return parse(&arg[1..], missing_seq, true, false).map(|p| (p.id, true));
    }
    parse(arg, missing_seq, false, false).map(|p| (p.id, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_strictly() {
        let p = |s: &str| parse(s.as_bytes(), 7, false, false).map(|p| p.id);
        assert_eq!(p("1-2"), Some(StreamId::new(1, 2)));
        assert_eq!(
            p("5"),
            Some(StreamId::new(5, 7)),
            "a bare ms takes the missing seq"
        );
        assert_eq!(p("-"), Some(StreamId::ZERO));
        assert_eq!(p("+"), Some(StreamId::MAX));
        assert_eq!(
            p("18446744073709551615-18446744073709551615"),
            Some(StreamId::MAX)
        );
        for bad in [
            "",
            "a",
            "1-",
            "-1",
            "1-2-3",
            " 1",
            "1 ",
            "+1",
            "1-a",
            "18446744073709551616",
            "1-18446744073709551616",
            "1.5",
            "1-*",
        ] {
            assert_eq!(p(bad), None, "{bad:?}");
        }
        assert_eq!(parse_strict(b"-"), None);
        assert_eq!(parse_strict(b"+"), None);
        assert_eq!(parse_strict(b"3"), Some(StreamId::new(3, 0)));
        let star = parse(b"5-*", 0, true, true).unwrap();
        assert_eq!((star.id, star.seq_given), (StreamId::new(5, 0), false));
        assert_eq!(parse(&[b'1'; 200], 0, true, false), None, "too long");
    }

    #[test]
    fn intervals_and_neighbours() {
        assert_eq!(
            parse_interval(b"(5-1", 0),
            Some((StreamId::new(5, 1), true))
        );
        assert_eq!(parse_interval(b"(-", 0), None);
        assert_eq!(parse_interval(b"(+", 0), None);
        assert_eq!(parse_interval(b"(", 0), None);
        assert_eq!(
            parse_interval(b"9", u64::MAX),
            Some((StreamId::new(9, u64::MAX), false))
        );
        assert_eq!(StreamId::new(1, u64::MAX).incr(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(StreamId::new(2, 0).decr(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(StreamId::ZERO.decr(), None);
        assert!(StreamId::new(1, 9) < StreamId::new(2, 0));
        assert_eq!(StreamId::new(3, 4).to_string(), "3-4");
    }
}
