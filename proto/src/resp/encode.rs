//! Writing a [`Frame`] in its exact wire form.
//!
//! The walk over nested frames uses an explicit stack, not recursion, so a frame built by hand
//! of any depth encodes without exhausting the thread's stack.
//!
//! Line-typed payloads (`+`, `-`, `(`) cannot hold CR or LF on the wire; a frame that holds them
//! anyway (built by hand, never by [`super::decode`]) has them written as spaces, as Redis does
//! for status and error replies, so the output is always exactly one well-formed frame.

use super::reply::format_double;
use super::Frame;
use bytes::{BufMut, BytesMut};

/// Appends the wire form of `frame` to `out`.
pub fn encode(frame: &Frame, out: &mut BytesMut) {
    // Frames still to write, the next one on top. Children are pushed in reverse so that they
    // come off in wire order.
    let mut todo: Vec<&Frame> = vec![frame];
    while let Some(frame) = todo.pop() {
        match frame {
            Frame::Simple(text) => line(out, b'+', text),
            Frame::Error(text) => line(out, b'-', text),
            Frame::BigNumber(digits) => line(out, b'(', digits),
            Frame::Integer(v) => {
                out.put_u8(b':');
                decimal(out, *v);
                out.extend_from_slice(b"\r\n");
            }
            Frame::Bulk(data) => blob(out, b'$', data),
            Frame::BlobError(data) => blob(out, b'!', data),
            Frame::Verbatim { format, text } => {
                header(out, b'=', text.len() + 4);
                out.reserve(text.len() + 6);
                out.extend_from_slice(format);
                out.put_u8(b':');
                out.extend_from_slice(text);
                out.extend_from_slice(b"\r\n");
            }
            Frame::Null => out.extend_from_slice(b"_\r\n"),
            Frame::NullBulk => out.extend_from_slice(b"$-1\r\n"),
            Frame::NullArray => out.extend_from_slice(b"*-1\r\n"),
            Frame::Double(v) => {
                let mut buf = [0u8; 64];
                out.put_u8(b',');
                out.extend_from_slice(format_double(*v, &mut buf));
                out.extend_from_slice(b"\r\n");
            }
            Frame::Boolean(v) => out.extend_from_slice(if *v { b"#t\r\n" } else { b"#f\r\n" }),
            Frame::Array(items) => sequence(out, &mut todo, b'*', items),
            Frame::Set(items) => sequence(out, &mut todo, b'~', items),
            Frame::Push(items) => sequence(out, &mut todo, b'>', items),
            Frame::Map(pairs) => {
                header(out, b'%', pairs.len());
                push_pairs(&mut todo, pairs);
            }
            Frame::Attribute { attrs, data } => {
                header(out, b'|', attrs.len());
                // The attribute's pairs first, then the frame it describes.
                todo.push(data);
                push_pairs(&mut todo, attrs);
            }
        }
    }
}

fn sequence<'a>(out: &mut BytesMut, todo: &mut Vec<&'a Frame>, kind: u8, items: &'a [Frame]) {
    header(out, kind, items.len());
    todo.extend(items.iter().rev());
}

fn push_pairs<'a>(todo: &mut Vec<&'a Frame>, pairs: &'a [(Frame, Frame)]) {
    for (key, value) in pairs.iter().rev() {
        todo.push(value);
        todo.push(key);
    }
}

fn header(out: &mut BytesMut, kind: u8, len: usize) {
    out.put_u8(kind);
    let mut buf = itoa::Buffer::new();
    out.extend_from_slice(buf.format(len).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn blob(out: &mut BytesMut, kind: u8, data: &[u8]) {
    header(out, kind, data.len());
    out.reserve(data.len() + 2);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

fn decimal(out: &mut BytesMut, v: i64) {
    let mut buf = itoa::Buffer::new();
    out.extend_from_slice(buf.format(v).as_bytes());
}

/// `<kind><text>\r\n`, CR and LF in `text` written as spaces (see the module comment).
fn line(out: &mut BytesMut, kind: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(kind);
    if text.iter().any(|&b| b == b'\r' || b == b'\n') {
        for &b in text {
            out.put_u8(if b == b'\r' || b == b'\n' { b' ' } else { b });
        }
    } else {
        out.extend_from_slice(text);
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn wire(frame: &Frame) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode(frame, &mut out);
        out.to_vec()
    }

    fn b(s: &'static [u8]) -> Bytes {
        Bytes::from_static(s)
    }

    #[test]
    fn every_type_has_its_wire_form() {
        let cases: Vec<(Frame, &[u8])> = vec![
            (Frame::Simple(b(b"OK")), b"+OK\r\n"),
            (Frame::Error(b(b"ERR x")), b"-ERR x\r\n"),
            (Frame::Integer(-42), b":-42\r\n"),
            (Frame::Integer(i64::MIN), b":-9223372036854775808\r\n"),
            (Frame::Bulk(b(b"hello")), b"$5\r\nhello\r\n"),
            (Frame::Bulk(b(b"")), b"$0\r\n\r\n"),
            (Frame::Null, b"_\r\n"),
            (Frame::NullBulk, b"$-1\r\n"),
            (Frame::NullArray, b"*-1\r\n"),
            (Frame::Array(vec![]), b"*0\r\n"),
            (
                Frame::command(&[b"GET", b"k"]),
                b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
            ),
            (
                Frame::Map(vec![
                    (Frame::Simple(b(b"a")), Frame::Integer(1)),
                    (Frame::Simple(b(b"b")), Frame::Integer(2)),
                ]),
                b"%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n",
            ),
            (
                Frame::Set(vec![Frame::Integer(1), Frame::Boolean(false)]),
                b"~2\r\n:1\r\n#f\r\n",
            ),
            (
                Frame::Push(vec![
                    Frame::bulk(b"message"),
                    Frame::bulk(b"ch"),
                    Frame::bulk(b"hi"),
                ]),
                b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n",
            ),
            (Frame::Double(1.23), b",1.23\r\n"),
            (Frame::Double(3.0), b",3\r\n"),
            (Frame::Double(f64::INFINITY), b",inf\r\n"),
            (Frame::Double(f64::NEG_INFINITY), b",-inf\r\n"),
            (Frame::Double(f64::NAN), b",nan\r\n"),
            (Frame::Boolean(true), b"#t\r\n"),
            (
                Frame::BigNumber(b(b"3492890328409238509324850943850943825024385")),
                b"(3492890328409238509324850943850943825024385\r\n",
            ),
            (
                Frame::Verbatim {
                    format: *b"txt",
                    text: b(b"Some string"),
                },
                b"=15\r\ntxt:Some string\r\n",
            ),
            (
                Frame::BlobError(b(b"SYNTAX invalid syntax")),
                b"!21\r\nSYNTAX invalid syntax\r\n",
            ),
            (
                Frame::Attribute {
                    attrs: vec![(Frame::Simple(b(b"ttl")), Frame::Integer(3))],
                    data: Box::new(Frame::Array(vec![Frame::Integer(1)])),
                },
                b"|1\r\n+ttl\r\n:3\r\n*1\r\n:1\r\n",
            ),
        ];
        for (frame, expected) in cases {
            assert_eq!(
                wire(&frame),
                expected,
                "{frame:?} wrote {:?}",
                String::from_utf8_lossy(&wire(&frame))
            );
        }
    }

    #[test]
    fn line_payloads_stay_one_line() {
        assert_eq!(wire(&Frame::Simple(b(b"a\r\nb"))), b"+a  b\r\n");
        assert_eq!(wire(&Frame::Error(b(b"ERR\n"))), b"-ERR \r\n");
    }

    #[test]
    fn deep_frames_encode_without_recursion() {
        // Far deeper than the decoder accepts: encoding a hand-built frame must not overflow.
        let depth = 100_000;
        let mut frame = Frame::Integer(7);
        for _ in 0..depth {
            frame = Frame::Array(vec![frame]);
        }
        let mut out = BytesMut::new();
        encode(&frame, &mut out);
        assert_eq!(out.len(), depth * 4 + 4);
        // Dropping it would recurse `depth` levels: take it apart by hand.
        let mut next = Some(frame);
        while let Some(Frame::Array(mut items)) = next.take() {
            next = items.pop();
        }
    }
}
