//! Memory sizes and booleans as redis.conf writes them.

/// `1gb`, `512mb`, `100k`, `42` ... (k = 1000, kb = 1024 as in Redis).
pub fn parse_memory(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let (digits, mul) = [
        ("gb", 1u64 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1_000_000_000),
        ("m", 1_000_000),
        ("k", 1000),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suffix, mul)| lower.strip_suffix(suffix).map(|d| (d.to_string(), *mul)))
    .unwrap_or((lower.clone(), 1));
    let n: u64 = digits.parse().ok()?;
    n.checked_mul(mul)
}

pub fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

pub fn format_bool(v: bool) -> String {
    if v { "yes" } else { "no" }.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("100MB"), Some(100 << 20));
        assert_eq!(parse_memory("10k"), Some(10_000));
        assert_eq!(parse_memory("7"), Some(7));
        assert_eq!(parse_memory("x"), None);
        assert_eq!(parse_memory("-1"), None);
    }
}
