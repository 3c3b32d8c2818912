//! Index arithmetic shared by the list commands: Redis's rules for negative indexes and
//! ranges, on i64 arguments, without overflow for any input.

/// The position of `index` (negative: counted from the end) in a list of `len`, if inside.
pub fn position(index: i64, len: usize) -> Option<usize> {
    let len = len as i64;
    // `len + index` cannot overflow: len >= 0 and index < 0.
    let i = if index < 0 { len + index } else { index };
    if (0..len).contains(&i) {
        Some(i as usize)
    } else {
        None
    }
}

/// The inclusive range `start..=end` (negative: from the end) of a list of `len`, clamped to
/// the list as LRANGE and LTRIM do; None when empty.
pub fn range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    // start >= 0 here, so a negative end makes the range empty too.
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as usize, end as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_from_either_end() {
        assert_eq!(position(0, 3), Some(0));
        assert_eq!(position(2, 3), Some(2));
        assert_eq!(position(3, 3), None);
        assert_eq!(position(-1, 3), Some(2));
        assert_eq!(position(-3, 3), Some(0));
        assert_eq!(position(-4, 3), None);
        assert_eq!(position(i64::MIN, 3), None);
        assert_eq!(position(i64::MAX, 3), None);
        assert_eq!(position(0, 0), None);
    }

    #[test]
    fn ranges_clamp_like_lrange() {
        assert_eq!(range(0, -1, 5), Some((0, 4)));
        assert_eq!(range(-100, 100, 5), Some((0, 4)));
        assert_eq!(range(1, 2, 5), Some((1, 2)));
        assert_eq!(range(3, 1, 5), None);
        assert_eq!(range(5, 10, 5), None);
        assert_eq!(range(0, -6, 5), None);
        assert_eq!(range(i64::MIN, i64::MAX, 5), Some((0, 4)));
        assert_eq!(range(i64::MAX, i64::MIN, 5), None);
        assert_eq!(range(0, -1, 0), None);
    }
}
