//! Arguments of the sorted-set commands: floats as Redis reads them (C's `strtod`), score
//! ranges (`(1.5`, `-inf`) and lexicographic ranges (`[a`, `(a`, `-`, `+`).

use crate::command_framework::CmdError;

/// Longest float text considered; Redis bounds its own float parsing buffers similarly, and no
/// meaningful double needs more digits.
const FLOAT_TEXT_MAX: usize = 5120;

/// What C's `strtod` makes of the start of `s`.
struct Strtod {
    value: f64,
    /// Bytes consumed; 0 when no number starts `s`.
    len: usize,
    /// `errno == ERANGE`: the number overflowed to infinity or underflowed to zero.
    range_error: bool,
}

fn starts_with_nocase(s: &[u8], word: &[u8]) -> bool {
    s.len() >= word.len() && s[..word.len()].eq_ignore_ascii_case(word)
}

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn strtod(s: &[u8]) -> Strtod {
    let none = Strtod {
        value: 0.0,
        len: 0,
        range_error: false,
    };
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let negative = s.get(i) == Some(&b'-');
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let sign = if negative { -1.0 } else { 1.0 };
    let rest = &s[i..];
    if starts_with_nocase(rest, b"infinity") || starts_with_nocase(rest, b"inf") {
        let len = if starts_with_nocase(rest, b"infinity") {
            8
        } else {
            3
        };
        return Strtod {
            value: sign * f64::INFINITY,
            len: i + len,
            range_error: false,
        };
    }
    if starts_with_nocase(rest, b"nan") {
        let mut len = 3;
        // "nan(chars)" is NaN too.
        if rest.get(3) == Some(&b'(') {
            if let Some(close) = rest[4..]
                .iter()
                .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_'))
            {
                if rest[4 + close] == b')' {
                    len = 4 + close + 1;
                }
            }
        }
        return Strtod {
            value: f64::NAN,
            len: i + len,
            range_error: false,
        };
    }
    if rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        if let Some((value, len)) = hex_float(&rest[2..]) {
            return Strtod {
                value: sign * value,
                len: i + 2 + len,
                range_error: value.is_infinite(),
            };
        }
        // "0x" with no hex digits: strtod reads the "0".
        return Strtod {
            value: 0.0 * sign,
            len: i + 1,
            range_error: false,
        };
    }
    // Decimal: digits, optional fraction, at least one digit, optional exponent.
    let mut j = 0;
    let mut digits = 0;
    let mut nonzero = false;
    while j < rest.len() && rest[j].is_ascii_digit() {
        nonzero |= rest[j] != b'0';
        j += 1;
        digits += 1;
    }
    if rest.get(j) == Some(&b'.') {
        j += 1;
        while j < rest.len() && rest[j].is_ascii_digit() {
            nonzero |= rest[j] != b'0';
            j += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return none;
    }
    let mantissa_end = j;
    if matches!(rest.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(rest.get(k), Some(b'-' | b'+')) {
            k += 1;
        }
        let exp_digits_start = k;
        while k < rest.len() && rest[k].is_ascii_digit() {
            k += 1;
        }
        if k > exp_digits_start {
            j = k;
        }
    }
    // Rust's parser accepts exactly this grammar once a bare trailing '.' is handled.
    let mut text = String::with_capacity(j + 2);
    for &b in &rest[..mantissa_end] {
        text.push(b as char);
    }
    if text.ends_with('.') {
        text.push('0');
    }
    if text.starts_with('.') {
        text.insert(0, '0');
    }
    for &b in &rest[mantissa_end..j] {
        text.push(b as char);
    }
    let magnitude: f64 = text.parse().unwrap_or(0.0);
    Strtod {
        value: sign * magnitude,
        len: i + j,
        range_error: magnitude.is_infinite() || (magnitude == 0.0 && nonzero),
    }
}

/// A hexadecimal float body (after `0x`): hex digits, optional fraction, optional binary
/// exponent `p[+-]digits`. Returns the magnitude and the bytes consumed.
fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
    // Significant hex digits kept: 15 fit exactly in a u64 with room to spare.
    const KEPT_DIGITS: u32 = 15;
    let mut mantissa: u64 = 0;
    let mut kept = 0;
    let mut exp2: i64 = 0;
    let mut digits = 0;
    let mut i = 0;
    let mut in_fraction = false;
    while i < s.len() {
        let b = s[i];
        if b == b'.' && !in_fraction {
            in_fraction = true;
            i += 1;
            continue;
        }
        let Some(d) = (b as char).to_digit(16) else {
            break;
        };
        digits += 1;
        if mantissa == 0 && d == 0 {
            // A leading zero: only its place in the fraction matters.
            if in_fraction {
                exp2 -= 4;
            }
        } else if kept < KEPT_DIGITS {
            mantissa = mantissa * 16 + u64::from(d);
            kept += 1;
            if in_fraction {
                exp2 -= 4;
            }
        } else if !in_fraction {
            // An integer digit beyond the kept precision still scales the value.
            exp2 += 4;
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if matches!(s.get(i), Some(b'p' | b'P')) {
        let mut k = i + 1;
        let negative = s.get(k) == Some(&b'-');
        if matches!(s.get(k), Some(b'-' | b'+')) {
            k += 1;
        }
        let start = k;
        let mut e: i64 = 0;
        while k < s.len() && s[k].is_ascii_digit() {
            e = (e * 10 + i64::from(s[k] - b'0')).min(1 << 20);
            k += 1;
        }
        if k > start {
            exp2 += if negative { -e } else { e };
            i = k;
        }
    }
    let exp2 = exp2.clamp(-4000, 4000) as i32;
    // Scale in steps so that intermediate powers neither overflow nor underflow early.
    let mut value = mantissa as f64;
    let mut remaining = exp2;
    while remaining != 0 && value != 0.0 && value.is_finite() {
        let step = remaining.clamp(-1000, 1000);
        value *= 2f64.powi(step);
        remaining -= step;
    }
    Some((value, i))
}

/// A float as Redis's `getDoubleFromObject` accepts it (ZADD scores, ZINCRBY increments,
/// WEIGHTS): the whole argument is a number, no leading space, no overflow, not NaN.
pub fn strict_float(arg: &[u8]) -> Option<f64> {
    if arg.is_empty() || arg.len() > FLOAT_TEXT_MAX || is_c_space(arg[0]) {
        return None;
    }
    let r = strtod(arg);
    if r.len != arg.len()
        || r.value.is_nan()
        || (r.range_error && (r.value.is_infinite() || r.value == 0.0))
    {
        return None;
    }
    Some(r.value)
}

/// A score argument (`ERR value is not a valid float`).
pub fn score(arg: &[u8]) -> Result<f64, CmdError> {
    strict_float(arg).ok_or(CmdError::NotFloat)
}

/// A range bound as `zslParseRange` reads it: plain `strtod` up to the end of the argument
/// (or an embedded NUL, where C's string ends), so leading spaces are fine, an empty text is
/// 0, overflow is infinity; NaN is refused.
fn lenient_float(text: &[u8]) -> Option<f64> {
    if text.len() > FLOAT_TEXT_MAX {
        return None;
    }
    let r = strtod(text);
    let ends = text.get(r.len).is_none_or(|&b| b == 0);
    if !ends || r.value.is_nan() {
        return None;
    }
    Some(r.value)
}

/// A score interval: `min`..`max`, each end open or closed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub max: f64,
    pub min_open: bool,
    pub max_open: bool,
}

impl ScoreRange {
    /// Parses `min max` (`ERR min or max is not a float`).
    pub fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
        let bound = |arg: &[u8]| -> Option<(f64, bool)> {
            match arg.first() {
                Some(b'(') => lenient_float(&arg[1..]).map(|v| (v, true)),
                _ => lenient_float(arg).map(|v| (v, false)),
            }
        };
        match (bound(min), bound(max)) {
            (Some((min, min_open)), Some((max, max_open))) => Ok(ScoreRange {
                min,
                max,
                min_open,
                max_open,
            }),
            _ => Err(CmdError::new("ERR min or max is not a float")),
        }
    }

    pub fn above_min(&self, score: f64) -> bool {
        if self.min_open {
            score > self.min
        } else {
            score >= self.min
        }
    }

    pub fn below_max(&self, score: f64) -> bool {
        if self.max_open {
            score < self.max
        } else {
            score <= self.max
        }
    }

    /// True when no score can be inside.
    pub fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.min_open || self.max_open))
    }
}

/// One end of a lexicographic range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LexBound<'a> {
    /// `-`: below every member.
    Lowest,
    /// `+`: above every member.
    Highest,
    /// `[x`
    Closed(&'a [u8]),
    /// `(x`
    Open(&'a [u8]),
}

impl<'a> LexBound<'a> {
    fn parse(arg: &'a [u8]) -> Option<LexBound<'a>> {
        match arg.first()? {
            b'-' if arg.len() == 1 => Some(LexBound::Lowest),
            b'+' if arg.len() == 1 => Some(LexBound::Highest),
            b'[' => Some(LexBound::Closed(&arg[1..])),
            b'(' => Some(LexBound::Open(&arg[1..])),
            _ => None,
        }
    }

    /// Where the bound sits, for comparing two bounds: (rank of the kind, text).
    fn position(&self) -> (u8, &'a [u8]) {
        match *self {
            LexBound::Lowest => (0, b""),
            LexBound::Closed(s) | LexBound::Open(s) => (1, s),
            LexBound::Highest => (2, b""),
        }
    }

    /// `-` and `+` count as exclusive, as in Redis.
    fn is_open(&self) -> bool {
        !matches!(self, LexBound::Closed(_))
    }
}

/// A lexicographic interval between two bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LexRange<'a> {
    pub min: LexBound<'a>,
    pub max: LexBound<'a>,
}

impl<'a> LexRange<'a> {
    /// Parses `min max` (`ERR min or max not valid string range item`).
    pub fn parse(min: &'a [u8], max: &'a [u8]) -> Result<LexRange<'a>, CmdError> {
        match (LexBound::parse(min), LexBound::parse(max)) {
            (Some(min), Some(max)) => Ok(LexRange { min, max }),
            _ => Err(CmdError::new("ERR min or max not valid string range item")),
        }
    }

    pub fn above_min(&self, member: &[u8]) -> bool {
        match self.min {
            LexBound::Lowest => true,
            LexBound::Highest => false,
            LexBound::Closed(m) => member >= m,
            LexBound::Open(m) => member > m,
        }
    }

    pub fn below_max(&self, member: &[u8]) -> bool {
        match self.max {
            LexBound::Lowest => false,
            LexBound::Highest => true,
            LexBound::Closed(m) => member <= m,
            LexBound::Open(m) => member < m,
        }
    }

    /// True when no member can be inside.
    pub fn is_empty(&self) -> bool {
        let order = self.min.position().cmp(&self.max.position());
        order.is_gt() || (order.is_eq() && (self.min.is_open() || self.max.is_open()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_floats_as_get_double_from_object() {
        assert_eq!(strict_float(b"1.5"), Some(1.5));
        assert_eq!(strict_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(strict_float(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(strict_float(b"1e3"), Some(1000.0));
        assert_eq!(strict_float(b"1."), Some(1.0));
        assert_eq!(strict_float(b".5"), Some(0.5));
        assert_eq!(strict_float(b"1.e2"), Some(100.0));
        assert_eq!(strict_float(b"0x10"), Some(16.0));
        assert_eq!(strict_float(b"0x1p-2"), Some(0.25));
        assert_eq!(strict_float(b"-0x.8"), Some(-0.5));
        assert_eq!(strict_float(b"1e400"), None, "overflow is ERANGE");
        assert_eq!(strict_float(b"1e-400"), None, "underflow to zero is ERANGE");
        assert_eq!(strict_float(b"0e-400"), Some(0.0));
        assert_eq!(strict_float(b"nan"), None);
        assert_eq!(strict_float(b" 1"), None);
        assert_eq!(strict_float(b"1 "), None);
        assert_eq!(strict_float(b""), None);
        assert_eq!(strict_float(b"1e"), None);
        assert_eq!(strict_float(b"abc"), None);
        assert_eq!(strict_float(b"1\x002"), None);
    }

    #[test]
    fn lenient_floats_as_zsl_parse_range() {
        assert_eq!(lenient_float(b""), Some(0.0));
        assert_eq!(lenient_float(b" 1"), Some(1.0));
        assert_eq!(lenient_float(b"1 "), None);
        assert_eq!(lenient_float(b"1e400"), Some(f64::INFINITY));
        assert_eq!(lenient_float(b"nan"), None);
        assert_eq!(lenient_float(b"2\x00junk"), Some(2.0));
    }

    #[test]
    fn score_ranges() {
        let r = ScoreRange::parse(b"(1", b"+inf").unwrap();
        assert!(!r.above_min(1.0) && r.above_min(1.5) && r.below_max(f64::INFINITY));
        assert!(ScoreRange::parse(b"(1", b"1").unwrap().is_empty());
        assert!(!ScoreRange::parse(b"1", b"1").unwrap().is_empty());
        assert!(ScoreRange::parse(b"2", b"1").unwrap().is_empty());
        assert!(ScoreRange::parse(b"x", b"1").is_err());
        assert!(ScoreRange::parse(b"(nan", b"1").is_err());
    }

    #[test]
    fn lex_ranges() {
        let r = LexRange::parse(b"[b", b"(d").unwrap();
        assert!(!r.above_min(b"a") && r.above_min(b"b") && r.below_max(b"c") && !r.below_max(b"d"));
        assert!(LexRange::parse(b"-", b"-").unwrap().is_empty());
        assert!(LexRange::parse(b"+", b"+").unwrap().is_empty());
        assert!(!LexRange::parse(b"-", b"+").unwrap().is_empty());
        assert!(LexRange::parse(b"+", b"-").unwrap().is_empty());
        assert!(!LexRange::parse(b"[a", b"[a").unwrap().is_empty());
        assert!(LexRange::parse(b"(a", b"[a").unwrap().is_empty());
        assert!(LexRange::parse(b"a", b"+").is_err());
        assert!(LexRange::parse(b"+x", b"+").is_err());
        assert!(LexRange::parse(b"", b"+").is_err());
    }
}
