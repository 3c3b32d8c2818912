//! Replies printed the way redis-cli prints them: the formatted ("TTY") form, with `(integer)`,
//! quoted strings and numbered arrays, and the raw form used when stdout is not a terminal.
//!
//! Both recurse over nested aggregates; the depth is bounded by the decoder's
//! `proto::resp::decode::DEPTH_MAX`.

use proto::resp::Frame;

/// Which of redis-cli's output forms to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputMode {
    /// redis-cli on a terminal: `(integer) 1`, `"bar"`, `(nil)`, `1) ...`, `(error) ERR ...`.
    Formatted,
    /// redis-cli with stdout redirected: values as they are, one per line.
    Raw,
}

/// The text redis-cli prints for `reply`, its final newline included.
pub fn format_reply(reply: &Frame, mode: OutputMode) -> Vec<u8> {
    let mut out = Vec::new();
    match mode {
        OutputMode::Formatted => formatted(reply, "", &mut out),
        OutputMode::Raw => {
            raw(reply, &mut out);
            out.push(b'\n');
        }
    }
    out
}

fn formatted(reply: &Frame, prefix: &str, out: &mut Vec<u8>) {
    match reply {
        Frame::Error(text) | Frame::BlobError(text) => {
            out.extend_from_slice(b"(error) ");
            out.extend_from_slice(text);
        }
        Frame::Simple(text) => out.extend_from_slice(text),
        Frame::Integer(n) => out.extend_from_slice(format!("(integer) {n}").as_bytes()),
        Frame::Double(d) => {
            out.extend_from_slice(format!("(double) {}", double_text(*d)).as_bytes())
        }
        Frame::Bulk(data) => quoted(data, out),
        Frame::Verbatim { text, .. } => out.extend_from_slice(text),
        Frame::Null | Frame::NullBulk | Frame::NullArray => out.extend_from_slice(b"(nil)"),
        Frame::Boolean(b) => out.extend_from_slice(if *b { b"(true)" } else { b"(false)" }),
        Frame::BigNumber(n) => {
            out.extend_from_slice(b"(big number) ");
            out.extend_from_slice(n);
        }
        Frame::Attribute { data, .. } => return formatted(data, prefix, out),
        Frame::Array(items) => return sequence(items, ')', "(empty array)", prefix, out),
        Frame::Set(items) => return sequence(items, '~', "(empty set)", prefix, out),
        Frame::Push(items) => return sequence(items, ')', "(empty push)", prefix, out),
        Frame::Map(pairs) => return map(pairs, prefix, out),
    }
    out.push(b'\n');
}

/// `1) "a"` lines; nested aggregates are indented past their parent's index, as redis-cli does.
fn sequence(items: &[Frame], separator: char, empty: &str, prefix: &str, out: &mut Vec<u8>) {
    if items.is_empty() {
        out.extend_from_slice(empty.as_bytes());
        out.push(b'\n');
        return;
    }
    let width = digits(items.len());
    let nested = format!("{prefix}{}", " ".repeat(width + 2));
    for (i, item) in items.iter().enumerate() {
        // The first index follows whatever the parent already printed on this line.
        let lead = if i == 0 { "" } else { prefix };
        out.extend_from_slice(format!("{lead}{:>width$}{separator} ", i + 1).as_bytes());
        formatted(item, &nested, out);
    }
}

/// `1# "key" => "value"` lines.
fn map(pairs: &[(Frame, Frame)], prefix: &str, out: &mut Vec<u8>) {
    if pairs.is_empty() {
        out.extend_from_slice(b"(empty hash)\n");
        return;
    }
    let width = digits(pairs.len());
    let nested = format!("{prefix}{}", " ".repeat(width + 2));
    for (i, (key, value)) in pairs.iter().enumerate() {
        let lead = if i == 0 { "" } else { prefix };
        out.extend_from_slice(format!("{lead}{:>width$}# ", i + 1).as_bytes());
        formatted(key, &nested, out);
        out.pop(); // the key's newline: the value follows on the same line
        out.extend_from_slice(b" => ");
        formatted(value, &nested, out);
    }
}

fn raw(reply: &Frame, out: &mut Vec<u8>) {
    match reply {
        Frame::Error(text) | Frame::BlobError(text) => {
            // redis-cli ends a raw error with its own newline, then the line's.
            out.extend_from_slice(text);
            out.push(b'\n');
        }
        Frame::Simple(data) | Frame::Bulk(data) | Frame::BigNumber(data) => {
            out.extend_from_slice(data)
        }
        Frame::Verbatim { text, .. } => out.extend_from_slice(text),
        Frame::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Frame::Double(d) => out.extend_from_slice(double_text(*d).as_bytes()),
        Frame::Null | Frame::NullBulk | Frame::NullArray => {}
        Frame::Boolean(b) => out.extend_from_slice(if *b { b"(true)" } else { b"(false)" }),
        Frame::Attribute { data, .. } => raw(data, out),
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b'\n');
                }
                raw(item, out);
            }
        }
        Frame::Map(pairs) => {
            for (i, (key, value)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(b'\n');
                }
                raw(key, out);
                out.push(b' ');
                raw(value, out);
            }
        }
    }
}

/// A bulk string as redis-cli shows it (`sdscatrepr`): in double quotes, with `\n`, `\r`,
/// `\t`, `\a`, `\b`, `\\` and `\"` escaped and other unprintable bytes as `\xHH`.
pub fn quoted(data: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &byte in data {
        match byte {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            b' '..=b'~' => out.push(byte),
            _ => out.extend_from_slice(format!("\\x{byte:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// A double as RESP3 spells it (`inf`, `-inf`, `nan`, shortest round-trip digits otherwise).
fn double_text(d: f64) -> String {
    if d.is_nan() {
        "nan".into()
    } else if d.is_infinite() {
        if d > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        d.to_string()
    }
}

/// How many decimal digits `n` has (at least one).
fn digits(mut n: usize) -> usize {
    let mut count = 1;
    while n >= 10 {
        n /= 10;
        count += 1;
    }
    count
}

#[cfg(test)]
mod tests {
    //! Goal: every reply type prints exactly as redis-cli 7.0 prints it. The expected texts were
    //! taken from redis-cli 7.0.15 against redis-server (on a pty for the formatted form).
    use super::*;
    use bytes::Bytes;

    fn f(reply: &Frame) -> String {
        String::from_utf8(format_reply(reply, OutputMode::Formatted)).unwrap()
    }

    fn r(reply: &Frame) -> String {
        String::from_utf8(format_reply(reply, OutputMode::Raw)).unwrap()
    }

    fn bulks(items: &[&str]) -> Frame {
        Frame::Array(items.iter().map(|s| Frame::bulk(s.as_bytes())).collect())
    }

    #[test]
    fn scalars_formatted() {
        assert_eq!(f(&Frame::simple("OK")), "OK\n");
        assert_eq!(f(&Frame::Integer(1)), "(integer) 1\n");
        assert_eq!(f(&Frame::Integer(-7)), "(integer) -7\n");
        assert_eq!(f(&Frame::bulk(b"bar")), "\"bar\"\n");
        assert_eq!(f(&Frame::NullBulk), "(nil)\n");
        assert_eq!(f(&Frame::Null), "(nil)\n");
        assert_eq!(
            f(&Frame::error("ERR value is not an integer or out of range")),
            "(error) ERR value is not an integer or out of range\n"
        );
        assert_eq!(f(&Frame::Double(1.5)), "(double) 1.5\n");
        assert_eq!(f(&Frame::Boolean(true)), "(true)\n");
        assert_eq!(
            f(&Frame::BigNumber(Bytes::from_static(
                b"123456789012345678901234567890"
            ))),
            "(big number) 123456789012345678901234567890\n"
        );
        assert_eq!(
            f(&Frame::Verbatim {
                format: *b"txt",
                text: Bytes::from_static(b"some text")
            }),
            "some text\n"
        );
    }

    #[test]
    fn bulk_strings_are_escaped_like_sdscatrepr() {
        assert_eq!(f(&Frame::bulk(b"q\"x")), "\"q\\\"x\"\n");
        assert_eq!(f(&Frame::bulk(b"a\nb\r\t\\")), "\"a\\nb\\r\\t\\\\\"\n");
        assert_eq!(
            f(&Frame::bulk(&[0, 0x7f, 0xff, 7, 8])),
            "\"\\x00\\x7f\\xff\\a\\b\"\n"
        );
        assert_eq!(f(&Frame::bulk(b"")), "\"\"\n");
    }

    #[test]
    fn arrays_are_numbered_with_aligned_indexes_and_nested_indentation() {
        assert_eq!(
            f(&bulks(&["a", "b c", "q\"x"])),
            "1) \"a\"\n2) \"b c\"\n3) \"q\\\"x\"\n"
        );
        let eleven: Vec<String> = (1..=11).map(|i| i.to_string()).collect();
        let eleven: Vec<&str> = eleven.iter().map(String::as_str).collect();
        let text = f(&bulks(&eleven));
        assert!(text.starts_with(" 1) \"1\"\n 2) \"2\"\n"), "{text}");
        assert!(
            text.ends_with(" 9) \"9\"\n10) \"10\"\n11) \"11\"\n"),
            "{text}"
        );
        let nested = Frame::Array(vec![
            Frame::Integer(1),
            Frame::Array(vec![Frame::Integer(2), Frame::Integer(3)]),
            Frame::bulk(b"x"),
        ]);
        assert_eq!(
            f(&nested),
            "1) (integer) 1\n2) 1) (integer) 2\n   2) (integer) 3\n3) \"x\"\n"
        );
        assert_eq!(f(&Frame::Array(vec![])), "(empty array)\n");
        assert_eq!(f(&Frame::Set(vec![])), "(empty set)\n");
        assert_eq!(f(&Frame::Map(vec![])), "(empty hash)\n");
    }

    #[test]
    fn maps_print_key_arrow_value() {
        let map = Frame::Map(vec![
            (Frame::bulk(b"f1"), Frame::bulk(b"v1")),
            (Frame::bulk(b"f2"), Frame::bulk(b"v2")),
        ]);
        assert_eq!(f(&map), "1# \"f1\" => \"v1\"\n2# \"f2\" => \"v2\"\n");
        assert_eq!(r(&map), "f1 v1\nf2 v2\n");
    }

    #[test]
    fn raw_form_prints_values_as_they_are() {
        assert_eq!(r(&Frame::simple("OK")), "OK\n");
        assert_eq!(r(&Frame::bulk(b"v")), "v\n");
        assert_eq!(r(&Frame::NullBulk), "\n");
        assert_eq!(r(&Frame::Integer(3)), "3\n");
        assert_eq!(r(&bulks(&["a", "b c", "q\"x"])), "a\nb c\nq\"x\n");
        assert_eq!(r(&Frame::Array(vec![])), "\n");
        // redis-cli's raw error ends with two newlines.
        assert_eq!(r(&Frame::error("ERR x")), "ERR x\n\n");
        let nested = Frame::Array(vec![
            Frame::Integer(1),
            Frame::Array(vec![Frame::Integer(2), Frame::Integer(3)]),
            Frame::bulk(b"x"),
        ]);
        assert_eq!(r(&nested), "1\n2\n3\nx\n");
    }
}
