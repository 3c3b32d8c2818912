//! Parsing command arguments with Redis's rules and error texts.

use super::error::CmdError;

/// Case-insensitive match of an argument against an ASCII keyword.
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// An integer argument (`ERR value is not an integer or out of range`).
pub fn int(arg: &[u8]) -> Result<i64, CmdError> {
    proto::resp::request::parse_i64(arg).ok_or(CmdError::NotInteger)
}

/// A non-negative integer that fits in usize (counts, indexes that must be >= 0).
pub fn uint(arg: &[u8]) -> Result<usize, CmdError> {
    let v = int(arg)?;
    usize::try_from(v).map_err(|_| CmdError::NotInteger)
}

/// A float argument as Redis's `strtold`-based parser accepts it: decimal or exponent form,
/// `inf`/`+inf`/`-inf` (any case), no spaces, no NaN (`ERR value is not a valid float`).
pub fn float(arg: &[u8]) -> Result<f64, CmdError> {
    parse_float(arg).ok_or(CmdError::NotFloat)
}

pub fn parse_float(arg: &[u8]) -> Option<f64> {
    if arg.is_empty()
        || arg.len() > 5120
        || arg[0].is_ascii_whitespace()
        || arg[arg.len() - 1].is_ascii_whitespace()
    {
        return None;
    }
    let s = std::str::from_utf8(arg).ok()?;
    let lower = s.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            // Rust also accepts "nan" and "infinity" spellings; NaN is refused below.
            if !lower.bytes().all(|b| {
                b.is_ascii_digit()
                    || matches!(b, b'.' | b'e' | b'-' | b'+' | b'x' | b'p' | b'a'..=b'f')
            }) {
                return None;
            }
            s.parse::<f64>().ok()?
        }
    };
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

/// A blocking command's timeout in seconds (float), as a Duration; 0 means forever.
///
/// As Redis 7.0: the milliseconds are rounded up (0.0001 waits 1 ms, -0.0001 rounds to 0 and
/// waits forever), and a value whose milliseconds do not fit an i64 (`inf`, `1e16`) is
/// "negative", because that is what Redis's conversion to `long long` makes of it.
pub fn timeout_secs(arg: &[u8]) -> Result<Option<std::time::Duration>, CmdError> {
    let v = parse_float(arg)
        .ok_or_else(|| CmdError::new("ERR timeout is not a float or out of range"))?;
    let ms = (v * 1000.0).ceil();
    // 2^63 as f64: the first value that does not fit an i64.
    if !(0.0..9_223_372_036_854_775_808.0).contains(&ms) {
        return Err(CmdError::new("ERR timeout is negative"));
    }
    if ms == 0.0 {
        // Below f64's range but not zero (1e-400): Redis's long double still sees a positive
        // value, which rounds up to 1 ms.
        let mantissa = arg.split(|&b| b == b'e' || b == b'E').next().unwrap_or(arg);
        if arg[0] != b'-' && mantissa.iter().any(|b| (b'1'..=b'9').contains(b)) {
            return Ok(Some(std::time::Duration::from_millis(1)));
        }
        return Ok(None);
    }
    // Redis caps timeouts far in the future; a year is more than any client waits.
    Ok(Some(std::time::Duration::from_millis(
        ms.min(365.0 * 24.0 * 3600.0 * 1000.0) as u64,
    )))
}

/// Lower-case copy of an argument for matching subcommand names and options.
pub fn lower(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).to_ascii_lowercase()
}

/// The text of an argument for inclusion in an error message.
pub fn text(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_redis_reads_them() {
        assert_eq!(parse_float(b"1.5"), Some(1.5));
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float(b"+INF"), Some(f64::INFINITY));
        assert_eq!(parse_float(b"1e3"), Some(1000.0));
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b" 1"), None);
        assert_eq!(parse_float(b"abc"), None);
        assert_eq!(parse_float(b""), None);
    }

    #[test]
    fn timeouts_as_redis_reads_them() {
        use std::time::Duration;
        assert_eq!(timeout_secs(b"0"), Ok(None));
        assert_eq!(timeout_secs(b"-0.0001"), Ok(None));
        assert_eq!(timeout_secs(b"0e5"), Ok(None));
        assert_eq!(timeout_secs(b"1e-400"), Ok(Some(Duration::from_millis(1))));
        assert_eq!(timeout_secs(b"-1e-400"), Ok(None));
        assert_eq!(timeout_secs(b"0.0001"), Ok(Some(Duration::from_millis(1))));
        assert_eq!(timeout_secs(b"1.5"), Ok(Some(Duration::from_millis(1500))));
        let negative = Err(CmdError::new("ERR timeout is negative"));
        assert_eq!(timeout_secs(b"-1"), negative);
        assert_eq!(timeout_secs(b"inf"), negative);
        assert_eq!(timeout_secs(b"1e16"), negative);
        let not_float = Err(CmdError::new("ERR timeout is not a float or out of range"));
        assert_eq!(timeout_secs(b"nan"), not_float);
        assert_eq!(timeout_secs(b"1x"), not_float);
    }
}
