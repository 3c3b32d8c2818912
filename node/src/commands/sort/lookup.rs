//! What a BY or GET pattern names for one element: `#` is the element itself; otherwise the
//! first `*` is replaced by the element and the result names a string key, or with
//! `->field` after the `*` a field of a hash. A pattern without `*` names nothing.

use crate::db::{Locked, Value};

pub fn value_named(db: &mut Locked<'_>, pattern: &[u8], element: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(element.to_vec());
    }
    let star = pattern.iter().position(|&b| b == b'*')?;
    let after = &pattern[star + 1..];
    // `->` followed by a field name, searched after the `*` only.
    let (suffix, field) = match find(after, b"->") {
        Some(arrow) if arrow + 2 < after.len() => (&after[..arrow], Some(&after[arrow + 2..])),
        _ => (after, None),
    };
    let mut key = Vec::with_capacity(star + element.len() + suffix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(suffix);
    let value = &db.get(&key)?.value;
    match (field, value) {
        (Some(field), Value::Hash(hash)) => hash.get(field).map(|v| v.to_vec()),
        (None, Value::Str(_) | Value::Int(_)) => {
            let mut buf = itoa::Buffer::new();
            value.as_bytes(&mut buf).map(<[u8]>::to_vec)
        }
        _ => None,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A sort weight as Redis reads one with `strtod`: leading white space allowed, the whole
/// rest must be the number (an empty rest reads 0); NaN and numbers out of a double's range
/// are refused.
pub fn strtod_whole(text: &[u8]) -> Option<f64> {
    let start = text
        .iter()
        .position(|b| !b" \t\n\x0b\x0c\r".contains(b))
        .unwrap_or(text.len());
    let rest = std::str::from_utf8(&text[start..]).ok()?;
    if rest.is_empty() {
        return Some(0.0);
    }
    let lower = rest.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    // Rust's parser takes what strtod takes in decimal, and no more than one sign.
    if lower.len() - unsigned.len() > 1 {
        return None;
    }
    let value: f64 = lower.parse().ok()?;
    if value.is_nan() {
        return None;
    }
    let spelled_infinite = unsigned == "inf" || unsigned == "infinity";
    if value.is_infinite() && !spelled_infinite {
        // strtod's ERANGE: too large for a double.
        return None;
    }
    if value == 0.0
        && unsigned
            .bytes()
            .take_while(|b| *b != b'e')
            .any(|b| (b'1'..=b'9').contains(&b))
    {
        // strtod's ERANGE: a non-zero number too small for a double.
        return None;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::strtod_whole;

    #[test]
    fn weights_read_as_strtod_reads_them() {
        assert_eq!(strtod_whole(b"1.5"), Some(1.5));
        assert_eq!(strtod_whole(b"  -2"), Some(-2.0));
        assert_eq!(strtod_whole(b""), Some(0.0));
        assert_eq!(strtod_whole(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(strtod_whole(b"1e3"), Some(1000.0));
        assert_eq!(strtod_whole(b"abc"), None);
        assert_eq!(strtod_whole(b"1 "), None);
        assert_eq!(strtod_whole(b"nan"), None);
        assert_eq!(strtod_whole(b"1e400"), None);
        assert_eq!(strtod_whole(b"1e-400"), None);
        assert_eq!(strtod_whole(b"--1"), None);
    }
}
