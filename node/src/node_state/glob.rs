//! Glob-style pattern matching as Redis applies it (KEYS, SCAN MATCH, PSUBSCRIBE,
//! CONFIG GET): `*`, `?`, `[abc]`, `[^a-z]`, `\x` escapes. Iterative with a bounded
//! backtrack point, so hostile patterns cost O(pattern x text), never exponential time.

/// Whether `text` matches `pattern`.
pub fn matches(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut t) = (0usize, 0usize);
    // Where to resume after the last '*': (pattern index after it, text index it covers to).
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, t));
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class(pattern, p, text[t], nocase) {
                        if matched {
                            p = next;
                            t += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if eq(pattern[p + 1], text[t]) {
                        p += 2;
                        t += 1;
                        continue;
                    }
                }
                c => {
                    if eq(c, text[t]) {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        // Mismatch: let the last '*' swallow one more byte, or fail.
        match star {
            Some((sp, st)) => {
                p = sp;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class starting at `pattern[start] == '['`. Returns whether it
/// matched and the index after the class; None for an unterminated class, which (as in
/// Redis) then matches up to the pattern's end.
fn class(pattern: &[u8], start: usize, c: u8, nocase: bool) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let fold = |x: u8| if nocase { x.to_ascii_lowercase() } else { x };
    let c = fold(c);
    let mut matched = false;
    while i < pattern.len() && pattern[i] != b']' {
        if pattern[i] == b'\\' && i + 1 < pattern.len() {
            matched |= fold(pattern[i + 1]) == c;
            i += 2;
        } else if i + 2 < pattern.len() && pattern[i + 1] == b'-' && pattern[i + 2] != b']' {
            let (mut lo, mut hi) = (fold(pattern[i]), fold(pattern[i + 2]));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            matched |= (lo..=hi).contains(&c);
            i += 3;
        } else {
            matched |= fold(pattern[i]) == c;
            i += 1;
        }
    }
    let next = if i < pattern.len() { i + 1 } else { i };
    Some((matched != negate, next))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs_as_redis() {
        assert!(matches(b"*", b"anything", false));
        assert!(matches(b"h?llo", b"hello", false));
        assert!(matches(b"h*llo", b"heeeello", false));
        assert!(matches(b"h[ae]llo", b"hallo", false));
        assert!(!matches(b"h[^e]llo", b"hello", false));
        assert!(matches(b"h[a-b]llo", b"hbllo", false));
        assert!(matches(b"user:*:name", b"user:42:name", false));
        assert!(!matches(b"user:*:name", b"user:42:email", false));
        assert!(matches(b"a\\*b", b"a*b", false));
        assert!(!matches(b"a\\*b", b"axb", false));
        assert!(matches(b"HELLO", b"hello", true));
        assert!(!matches(b"", b"x", false));
        assert!(matches(b"", b"", false));
    }

    #[test]
    fn hostile_patterns_stay_fast() {
        let text = vec![b'a'; 10_000];
        let pattern = b"*a*a*a*a*a*a*a*a*a*a*a*a*b";
        assert!(!matches(pattern, &text, false));
    }
}
