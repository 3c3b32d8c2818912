//! Replies written straight into a connection's output buffer, in RESP2 or RESP3.
//!
//! Commands describe replies by meaning (a map, a set, a double, a null); the writer chooses
//! the encoding for the client's protocol version the way Redis does: in RESP2 a map is a flat
//! array of 2n elements, a set an array, a double a bulk string, a boolean an integer, and a
//! null a `$-1` (or `*-1` for a null array).

use bytes::{BufMut, BytesMut};

/// The protocol a client negotiated with `HELLO` (RESP2 until it asks for 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProtocolVersion {
    #[default]
    Resp2,
    Resp3,
}

/// A writer of replies for one client. Cheap: a buffer reference and a version.
pub struct Reply<'a> {
    out: &'a mut BytesMut,
    version: ProtocolVersion,
}

impl<'a> Reply<'a> {
    pub fn new(out: &'a mut BytesMut, version: ProtocolVersion) -> Self {
        Reply { out, version }
    }

    /// Switches the protocol for replies written from now on (HELLO, RESET).
    pub fn set_version(&mut self, version: ProtocolVersion) {
        self.version = version;
    }

    pub fn version(&self) -> ProtocolVersion {
        self.version
    }

    pub fn is_resp3(&self) -> bool {
        self.version == ProtocolVersion::Resp3
    }

    /// Bytes written so far into the underlying buffer (for output-buffer limits).
    pub fn buffered(&self) -> usize {
        self.out.len()
    }

    /// Takes back what was written from offset `at` on (a script's call of a command reads
    /// that command's reply instead of sending it). `at` past the end takes nothing.
    pub fn take_from(&mut self, at: usize) -> BytesMut {
        let at = at.min(self.out.len());
        self.out.split_off(at)
    }

    /// Writes bytes already in RESP form (used for replies cached as encoded bytes).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// `+<text>`; CR and LF in `text` are replaced by spaces so the reply stays one line.
    pub fn simple(&mut self, text: &[u8]) {
        self.out.put_u8(b'+');
        put_line(self.out, text);
    }

    /// `-<text>`; `text` starts with its error code (`ERR`, `WRONGTYPE`, ...).
    pub fn error(&mut self, text: &str) {
        self.out.put_u8(b'-');
        put_line(self.out, text.as_bytes());
    }

    pub fn integer(&mut self, v: i64) {
        self.out.put_u8(b':');
        put_decimal(self.out, v);
        self.out.extend_from_slice(b"\r\n");
    }

    pub fn bulk(&mut self, data: &[u8]) {
        self.out.reserve(data.len() + 16);
        self.out.put_u8(b'$');
        put_decimal(self.out, data.len() as i64);
        self.out.extend_from_slice(b"\r\n");
        self.out.extend_from_slice(data);
        self.out.extend_from_slice(b"\r\n");
    }

    /// A bulk string holding the decimal form of `v` (for example INCRBYFLOAT, or a field).
    pub fn bulk_integer(&mut self, v: i64) {
        let mut buf = itoa::Buffer::new();
        self.bulk(buf.format(v).as_bytes());
    }

    /// The absence of a value: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        match self.version {
            ProtocolVersion::Resp2 => self.out.extend_from_slice(b"$-1\r\n"),
            ProtocolVersion::Resp3 => self.out.extend_from_slice(b"_\r\n"),
        }
    }

    /// The absence of an array (BLPOP timeout, EXEC aborted by WATCH): `*-1` or `_`.
    pub fn null_array(&mut self) {
        match self.version {
            ProtocolVersion::Resp2 => self.out.extend_from_slice(b"*-1\r\n"),
            ProtocolVersion::Resp3 => self.out.extend_from_slice(b"_\r\n"),
        }
    }

    pub fn array(&mut self, len: usize) {
        self.header(b'*', len);
    }

    /// A map of `len` pairs: `%len` in RESP3, `*2len` in RESP2.
    pub fn map(&mut self, len: usize) {
        match self.version {
            ProtocolVersion::Resp2 => self.header(b'*', len * 2),
            ProtocolVersion::Resp3 => self.header(b'%', len),
        }
    }

    /// A set of `len` elements: `~len` in RESP3, `*len` in RESP2.
    pub fn set(&mut self, len: usize) {
        match self.version {
            ProtocolVersion::Resp2 => self.header(b'*', len),
            ProtocolVersion::Resp3 => self.header(b'~', len),
        }
    }

    /// An out-of-band push (pub/sub messages): `>len` in RESP3, `*len` in RESP2.
    pub fn push(&mut self, len: usize) {
        match self.version {
            ProtocolVersion::Resp2 => self.header(b'*', len),
            ProtocolVersion::Resp3 => self.header(b'>', len),
        }
    }

    /// A double: `,<d>` in RESP3, a bulk string in RESP2.
    pub fn double(&mut self, v: f64) {
        let mut buf = [0u8; 64];
        let text = format_double(v, &mut buf);
        match self.version {
            ProtocolVersion::Resp2 => self.bulk(text),
            ProtocolVersion::Resp3 => {
                self.out.put_u8(b',');
                self.out.extend_from_slice(text);
                self.out.extend_from_slice(b"\r\n");
            }
        }
    }

    /// A boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    pub fn boolean(&mut self, v: bool) {
        match self.version {
            ProtocolVersion::Resp2 => self.integer(v as i64),
            ProtocolVersion::Resp3 => {
                self.out
                    .extend_from_slice(if v { b"#t\r\n" } else { b"#f\r\n" })
            }
        }
    }

    /// Verbatim text (INFO, CLIENT LIST in RESP3): `=len\r\ntxt:...` or a bulk string.
    pub fn verbatim(&mut self, text: &[u8]) {
        match self.version {
            ProtocolVersion::Resp2 => self.bulk(text),
            ProtocolVersion::Resp3 => {
                self.header(b'=', text.len() + 4);
                self.out.extend_from_slice(b"txt:");
                self.out.extend_from_slice(text);
                self.out.extend_from_slice(b"\r\n");
            }
        }
    }

    fn header(&mut self, kind: u8, len: usize) {
        self.out.put_u8(kind);
        put_decimal(self.out, len as i64);
        self.out.extend_from_slice(b"\r\n");
    }
}

fn put_decimal(out: &mut BytesMut, v: i64) {
    let mut buf = itoa::Buffer::new();
    out.extend_from_slice(buf.format(v).as_bytes());
}

fn put_line(out: &mut BytesMut, text: &[u8]) {
    out.reserve(text.len() + 2);
    for &b in text {
        out.put_u8(if b == b'\r' || b == b'\n' { b' ' } else { b });
    }
    out.extend_from_slice(b"\r\n");
}

/// Formats a double as Redis 7.0 does for replies (`addReplyDouble`): `inf`, `-inf`, `nan`,
/// otherwise C's `%.17g`: 17 significant digits (so 0.1 is `0.10000000000000001`, as Redis
/// 7.0 answers; 7.2 moved to the shortest form), trailing zeros dropped, and an exponent of
/// at least two digits (`1e+21`, `1.4999999999999999e-07`) below 1e-4 or from 1e17.
pub fn format_double(v: f64, buf: &mut [u8; 64]) -> &[u8] {
    use std::io::Write;
    /// `%.17g`'s precision.
    const DIGITS: i32 = 17;
    // Formatted on the stack, not through `format!`: ZRANGE WITHSCORES calls this per member.
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    let written = if v.is_nan() {
        write!(cursor, "nan")
    } else if v.is_infinite() {
        write!(cursor, "{}", if v > 0.0 { "inf" } else { "-inf" })
    } else if v == 0.0 {
        write!(cursor, "{}", if v.is_sign_negative() { "-0" } else { "0" })
    } else {
        // The decimal exponent after rounding to 17 digits decides the style, as in C.
        let mut sci_buf = [0u8; 48];
        let mut sci = std::io::Cursor::new(&mut sci_buf[..]);
        let ok = write!(sci, "{:.*e}", (DIGITS - 1) as usize, v);
        debug_assert!(ok.is_ok(), "48 bytes hold 17 digits and an exponent");
        let sci_len = sci.position() as usize;
        let scientific = std::str::from_utf8(&sci_buf[..sci_len]).expect("`{:e}` writes ASCII");
        let (mantissa, exponent) = scientific
            .split_once('e')
            .expect("`{:e}` always has an exponent");
        let exponent: i32 = exponent.parse().expect("`{:e}` exponents are integers");
        if !(-4..DIGITS).contains(&exponent) {
            let sign = if exponent < 0 { '-' } else { '+' };
            write!(
                cursor,
                "{}e{sign}{:02}",
                trim_fraction(mantissa),
                exponent.abs()
            )
        } else {
            // At most 1 + 17 + 1 + 20 bytes: written in place, then trimmed.
            let fixed = write!(cursor, "{:.*}", (DIGITS - 1 - exponent) as usize, v);
            let len = cursor.position() as usize;
            let text = std::str::from_utf8(&cursor.get_ref()[..len]).expect("ASCII digits");
            let trimmed = trim_fraction(text).len();
            cursor.set_position(trimmed as u64);
            fixed
        }
    };
    debug_assert!(written.is_ok(), "64 bytes hold any f64");
    let len = cursor.position() as usize;
    &buf[..len]
}

/// `%g` drops trailing zeros of the fraction, and the point with them.
fn trim_fraction(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(version: ProtocolVersion, f: impl FnOnce(&mut Reply<'_>)) -> Vec<u8> {
        let mut out = BytesMut::new();
        f(&mut Reply::new(&mut out, version));
        out.to_vec()
    }

    #[test]
    fn versions_differ_where_redis_differs() {
        use ProtocolVersion::*;
        assert_eq!(written(Resp2, |r| r.null()), b"$-1\r\n");
        assert_eq!(written(Resp3, |r| r.null()), b"_\r\n");
        assert_eq!(written(Resp2, |r| r.map(2)), b"*4\r\n");
        assert_eq!(written(Resp3, |r| r.map(2)), b"%2\r\n");
        assert_eq!(written(Resp2, |r| r.double(1.5)), b"$3\r\n1.5\r\n");
        assert_eq!(written(Resp3, |r| r.double(1.5)), b",1.5\r\n");
        assert_eq!(written(Resp3, |r| r.boolean(true)), b"#t\r\n");
        assert_eq!(written(Resp3, |r| r.push(3)), b">3\r\n");
        assert_eq!(written(Resp2, |r| r.error("ERR a\r\nb")), b"-ERR a  b\r\n");
    }

    #[test]
    fn doubles_format_like_redis() {
        let f = |v: f64| String::from_utf8(format_double(v, &mut [0; 64]).to_vec()).unwrap();
        // Expected texts are glibc's printf("%.17g") of the same values.
        assert_eq!(f(3.0), "3");
        assert_eq!(f(-0.5), "-0.5");
        assert_eq!(f(0.1), "0.10000000000000001");
        assert_eq!(f(0.3555149302610731), "0.35551493026107311");
        assert_eq!(f(1e21), "1e+21");
        assert_eq!(f(1.5e-7), "1.4999999999999999e-07");
        assert_eq!(f(0.0001), "0.0001");
        assert_eq!(f(1e16), "10000000000000000");
        assert_eq!(f(1e17), "1e+17");
        assert_eq!(f(123456789.125), "123456789.125");
        assert_eq!(f(-2.5e-300), "-2.5e-300");
        assert_eq!(f(-0.0), "-0");
        assert_eq!(f(f64::INFINITY), "inf");
        assert_eq!(f(f64::NEG_INFINITY), "-inf");
    }

    /// `%.17g` spelled out with `format!` (the allocating form `format_double` replaced).
    fn reference_17g(v: f64) -> String {
        let scientific = format!("{v:.16e}");
        let (mantissa, exponent) = scientific.split_once('e').unwrap();
        let exponent: i32 = exponent.parse().unwrap();
        if !(-4..17).contains(&exponent) {
            let sign = if exponent < 0 { '-' } else { '+' };
            format!("{}e{sign}{:02}", trim_fraction(mantissa), exponent.abs())
        } else {
            trim_fraction(&format!("{:.*}", (16 - exponent) as usize, v)).to_string()
        }
    }

    proptest::proptest! {
        /// Goal: the in-place formatting writes what the spelled-out `%.17g` does, for any
        /// finite non-zero double.
        #[test]
        fn doubles_format_in_place_as_spelled_out(bits in proptest::prelude::any::<u64>()) {
            let v = f64::from_bits(bits);
            proptest::prop_assume!(v.is_finite() && v != 0.0);
            let got = String::from_utf8(format_double(v, &mut [0; 64]).to_vec()).unwrap();
            proptest::prop_assert_eq!(got, reference_17g(v));
        }
    }
}
