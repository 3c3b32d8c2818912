//! Splitting an inline command line into arguments, with the quoting rules of Redis's
//! `sdssplitargs`: `"..."` with `\xHH`, `\n`, `\r`, `\t`, `\b`, `\a` escapes, `'...'` with only
//! `\'`, and a closing quote that must be followed by a space or the end of the line.

/// Splits `line` into `out`. Returns `false` on unbalanced quotes (as `sdssplitargs` does).
pub fn split_args(line: &[u8], out: &mut Vec<Vec<u8>>) -> bool {
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && is_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return true;
        }
        let mut arg = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            if in_double {
                if i >= n {
                    return false;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && is_hex(line[i + 2])
                    && is_hex(line[i + 3])
                {
                    arg.push(hex_val(line[i + 2]) * 16 + hex_val(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    arg.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    // A closing quote must be followed by a space or nothing.
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return false;
                    }

                    i += 1;
                    break;
                } else {
                    arg.push(c);
                }
            } else if in_single {
                if i >= n {
                    return false;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    arg.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return false;
                    }

                    i += 1;
                    break;
                } else {
                    arg.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    c if is_space(c) => break,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    c => arg.push(c),
                }
            }
            i += 1;
        }
        out.push(arg);
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c)
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn hex_val(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Option<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        split_args(s.as_bytes(), &mut out).then_some(out)
    }

    #[test]
    fn plain_and_quoted_arguments() {
        assert_eq!(
            split("set a b").unwrap(),
            vec![b"set".to_vec(), b"a".to_vec(), b"b".to_vec()]
        );
        assert_eq!(
            split("  set   \"a b\"  'c d' ").unwrap(),
            vec![b"set".to_vec(), b"a b".to_vec(), b"c d".to_vec()]
        );
        assert_eq!(
            split("echo \"\\x41\\n\"").unwrap(),
            vec![b"echo".to_vec(), b"A\n".to_vec()]
        );
        assert_eq!(
            split("echo 'it\\'s'").unwrap(),
            vec![b"echo".to_vec(), b"it's".to_vec()]
        );
        assert_eq!(
            split("echo \"\"").unwrap(),
            vec![b"echo".to_vec(), Vec::new()]
        );
        assert!(split("").unwrap().is_empty());
    }

    #[test]
    fn unbalanced_quotes_are_rejected() {
        assert!(split("echo \"abc").is_none());
        assert!(split("echo 'abc").is_none());
        assert!(split("echo \"abc\"def").is_none());
    }
}
