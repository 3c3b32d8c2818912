//! The `cjson` library Redis bundles (lua-cjson's behaviour): `cjson.encode`, `cjson.decode`,
//! `cjson.null`, and the settings scripts call (`encode_max_depth`, `decode_max_depth`,
//! `encode_invalid_numbers`, `encode_keep_buffer`...), which last for the Lua state as in
//! Redis.
//!
//! Encoding as lua-cjson does: a table whose keys are all positive integers is an array (nil
//! holes filled with `null`, unless excessively sparse), any other table an object (string and
//! number keys only), numbers with 14 significant digits, `/` escaped.

use mlua::{LightUserData, Lua, Result, Table, Value};
use std::cell::Cell;
use std::fmt::Write as _;
use std::rc::Rc;

/// lua-cjson's defaults.
const DEFAULT_MAX_DEPTH: u32 = 1000;
/// An array is "excessively sparse" when its largest index is over this ratio times its
/// element count (and over `SPARSE_SAFE`).
const SPARSE_RATIO: usize = 2;
const SPARSE_SAFE: usize = 10;

#[derive(Debug)]
struct Settings {
    encode_max_depth: Cell<u32>,
    decode_max_depth: Cell<u32>,
    encode_invalid_numbers: Cell<bool>,
}

/// `cjson.null`: a light userdata holding NULL, as lua-cjson's.
pub fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// Builds the `cjson` table.
pub fn library(lua: &Lua) -> Result<Table> {
    let settings = Rc::new(Settings {
        encode_max_depth: Cell::new(DEFAULT_MAX_DEPTH),
        decode_max_depth: Cell::new(DEFAULT_MAX_DEPTH),
        encode_invalid_numbers: Cell::new(false),
    });
    let cjson = lua.create_table()?;
    let s = settings.clone();
    cjson.set(
        "encode",
        lua.create_function(move |_, v: Value| {
            let mut out = Vec::new();
            encode(&v, &s, 1, &mut out).map_err(mlua::Error::runtime)?;
            Ok(mlua::BString::from(out))
        })?,
    )?;
    let s = settings.clone();
    cjson.set(
        "decode",
        lua.create_function(move |lua, text: mlua::String| {
            let bytes = text.as_bytes();
            let mut parser = Parser {
                text: &bytes,
                pos: 0,
                max_depth: s.decode_max_depth.get(),
            };
            parser.document(lua).map_err(mlua::Error::runtime)
        })?,
    )?;
    cjson.set("null", null())?;
    let depth_setter = |cell: fn(&Settings) -> &Cell<u32>, s: Rc<Settings>| {
        move |_: &Lua, n: Option<f64>| {
            if let Some(n) = n {
                if !(1.0..=2_147_483_647.0).contains(&n) {
                    return Err(mlua::Error::runtime(
                        "bad argument #1 (expected integer between 1 and 2147483647)",
                    ));
                }
                cell(&s).set(n as u32);
            }
            Ok(cell(&s).get())
        }
    };
    cjson.set(
        "encode_max_depth",
        lua.create_function(depth_setter(|s| &s.encode_max_depth, settings.clone()))?,
    )?;
    cjson.set(
        "decode_max_depth",
        lua.create_function(depth_setter(|s| &s.decode_max_depth, settings.clone()))?,
    )?;
    let s = settings;
    cjson.set(
        "encode_invalid_numbers",
        lua.create_function(move |_, on: Option<Value>| {
            if let Some(v) = on {
                s.encode_invalid_numbers.set(truthy_setting(&v));
            }
            Ok(s.encode_invalid_numbers.get())
        })?,
    )?;
    // Accepted for compatibility; this encoder keeps no buffer and never decodes invalid
    // numbers (hex, inf) differently.
    for name in [
        "encode_keep_buffer",
        "encode_sparse_array",
        "decode_invalid_numbers",
        "encode_number_precision",
    ] {
        cjson.set(
            name,
            lua.create_function(|_, _: mlua::Variadic<Value>| Ok(true))?,
        )?;
    }
    Ok(cjson)
}

fn truthy_setting(v: &Value) -> bool {
    match v {
        Value::Boolean(b) => *b,
        Value::String(s) => s.as_bytes().eq_ignore_ascii_case(b"on"),
        Value::Nil => false,
        _ => true,
    }
}

/// A number as lua-cjson writes it (`%.14g`).
pub fn format_number(n: f64) -> String {
    if n == n.trunc() && n.abs() < 1e14 {
        return format!("{}", n as i64);
    }
    // %.14g: 14 significant digits, exponent form below 1e-4 or from 1e14.
    let exp = if n == 0.0 {
        0
    } else {
        n.abs().log10().floor() as i32
    };
    if !(-4..14).contains(&exp) {
        let text = format!("{:.13e}", n);
        let (mantissa, e) = text.split_once('e').unwrap_or((&text, "0"));
        let mantissa = trim_zeros(mantissa);
        let e: i32 = e.parse().unwrap_or(0);
        let sign = if e < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", e.abs())
    } else {
        let decimals = (13 - exp).max(0) as usize;
        trim_zeros(&format!("{:.*}", decimals, n)).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn encode(
    v: &Value,
    s: &Settings,
    depth: u32,
    out: &mut Vec<u8>,
) -> std::result::Result<(), String> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(format_number(*i as f64).as_bytes()),
        Value::Number(n) => {
            if !n.is_finite() && !s.encode_invalid_numbers.get() {
                return Err("Cannot serialise number: must not be NaN or Inf".into());
            }
            let text = if n.is_nan() {
                "nan".to_string()
            } else if n.is_infinite() {
                if *n > 0.0 { "inf" } else { "-inf" }.to_string()
            } else {
                format_number(*n)
            };
            out.extend_from_slice(text.as_bytes());
        }
        Value::String(text) => quote(&text.as_bytes(), out),
        Value::Table(t) => {
            if depth > s.encode_max_depth.get() {
                return Err(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            encode_table(t, s, depth, out)?;
        }
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ))
        }
    }
    Ok(())
}

/// Walks the table twice (shape, then contents) without holding its entries: every value
/// held from Rust takes a slot of Lua's auxiliary stack, which has a few thousand.
fn encode_table(
    t: &Table,
    s: &Settings,
    depth: u32,
    out: &mut Vec<u8>,
) -> std::result::Result<(), String> {
    // An array when every key is a positive integer.
    let mut max = 0usize;
    let mut count = 0usize;
    let mut array = true;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair.map_err(|e| e.to_string())?;
        count += 1;
        match array_index(&k) {
            Some(i) => max = max.max(i),
            None => array = false,
        }
    }
    if array && max > SPARSE_SAFE && max > count * SPARSE_RATIO {
        return Err("Cannot serialise table: excessively sparse array".into());
    }
    if array && max > 0 {
        out.push(b'[');
        for i in 1..=max {
            if i > 1 {
                out.push(b',');
            }
            let v: Value = t.raw_get(i).map_err(|e| e.to_string())?;
            encode(&v, s, depth + 1, out)?;
        }
        out.push(b']');
        return Ok(());
    }
    out.push(b'{');
    for (n, pair) in t.pairs::<Value, Value>().enumerate() {
        let (k, v) = pair.map_err(|e| e.to_string())?;
        if n > 0 {
            out.push(b',');
        }
        match &k {
            Value::String(key) => quote(&key.as_bytes(), out),
            Value::Integer(i) => quote(format_number(*i as f64).as_bytes(), out),
            Value::Number(f) => quote(format_number(*f).as_bytes(), out),
            _ => return Err("Cannot serialise table: table key must be a number or string".into()),
        }
        out.push(b':');
        encode(&v, s, depth + 1, out)?;
    }
    out.push(b'}');
    Ok(())
}

fn array_index(k: &Value) -> Option<usize> {
    match k {
        Value::Integer(i) if *i >= 1 => Some(*i as usize),
        Value::Number(n) if *n >= 1.0 && n.fract() == 0.0 && *n < 1e15 => Some(*n as usize),
        _ => None,
    }
}

fn quote(text: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in text {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b if b < 0x20 || b == 0x7f => {
                let mut hex = String::new();
                let _ = write!(hex, "\\u{:04x}", b);
                out.extend_from_slice(hex.as_bytes());
            }
            b => out.push(b),
        }
    }
    out.push(b'"');
}

struct Parser<'t> {
    text: &'t [u8],
    pos: usize,
    max_depth: u32,
}

impl Parser<'_> {
    fn document(&mut self, lua: &Lua) -> std::result::Result<Value, String> {
        let v = self.value(lua, 1)?;
        self.skip_space();
        if self.pos < self.text.len() {
            return Err(self.unexpected("the end"));
        }
        Ok(v)
    }

    fn skip_space(&mut self) {
        while self.pos < self.text.len()
            && matches!(self.text[self.pos], b' ' | b'\t' | b'\n' | b'\r')
        {
            self.pos += 1;
        }
    }

    fn unexpected(&self, wanted: &str) -> String {
        let found = if self.pos >= self.text.len() {
            "the end"
        } else {
            "invalid token"
        };
        format!(
            "Expected {wanted} but found {found} at character {}",
            self.pos + 1
        )
    }

    /// Steps into an object or array at `depth` (refused past the nesting limit, as cjson
    /// does) and makes its table.
    fn open_container(&mut self, lua: &Lua, depth: u32) -> std::result::Result<Table, String> {
        if depth > self.max_depth {
            return Err(format!(
                "Found too many nested data structures ({depth}) at character {}",
                self.pos + 1
            ));
        }
        self.pos += 1;
        lua.create_table().map_err(|e| e.to_string())
    }

    fn value(&mut self, lua: &Lua, depth: u32) -> std::result::Result<Value, String> {
        self.skip_space();
        let lua_err = |e: mlua::Error| e.to_string();
        match self.text.get(self.pos) {
            Some(b'{') => {
                let t = self.open_container(lua, depth)?;
                self.skip_space();
                if self.text.get(self.pos) == Some(&b'}') {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                loop {
                    self.skip_space();
                    if self.text.get(self.pos) != Some(&b'"') {
                        return Err(self.unexpected("object key string"));
                    }
                    let key = self.string()?;
                    self.skip_space();
                    if self.text.get(self.pos) != Some(&b':') {
                        return Err(self.unexpected("colon"));
                    }
                    self.pos += 1;
                    let v = self.value(lua, depth + 1)?;
                    t.raw_set(lua.create_string(&key).map_err(lua_err)?, v)
                        .map_err(lua_err)?;
                    self.skip_space();
                    match self.text.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return Err(self.unexpected("comma or object end")),
                    }
                }
            }
            Some(b'[') => {
                let t = self.open_container(lua, depth)?;
                self.skip_space();
                if self.text.get(self.pos) == Some(&b']') {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                let mut i = 1i64;
                loop {
                    let v = self.value(lua, depth + 1)?;
                    t.raw_set(i, v).map_err(lua_err)?;
                    i += 1;
                    self.skip_space();
                    match self.text.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return Err(self.unexpected("comma or array end")),
                    }
                }
            }
            Some(b'"') => {
                let s = self.string()?;
                Ok(Value::String(lua.create_string(&s).map_err(lua_err)?))
            }
            Some(b't') if self.text[self.pos..].starts_with(b"true") => {
                self.pos += 4;
                Ok(Value::Boolean(true))
            }
            Some(b'f') if self.text[self.pos..].starts_with(b"false") => {
                self.pos += 5;
                Ok(Value::Boolean(false))
            }
            Some(b'n') if self.text[self.pos..].starts_with(b"null") => {
                self.pos += 4;
                Ok(null())
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.unexpected("value")),
        }
    }

    fn number(&mut self) -> std::result::Result<Value, String> {
        let start = self.pos;
        while self.pos < self.text.len()
            && matches!(
                self.text[self.pos],
                b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
            )
        {
            self.pos += 1;
        }
        std::str::from_utf8(&self.text[start..self.pos])
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
            .map(Value::Number)
            .ok_or_else(|| {
                format!(
                    "Expected value but found invalid number at character {}",
                    start + 1
                )
            })
    }

    /// A string token starting at `"`, unescaped.
    fn string(&mut self) -> std::result::Result<Vec<u8>, String> {
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.text.get(self.pos) else {
                return Err(format!(
                    "Expected value but found unexpected end of string at character {}",
                    start + 1
                ));
            };
            self.pos += 1;
            match b {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.text.get(self.pos) else {
                        return Err(format!(
                            "Expected value but found invalid escape code at character {}",
                            start + 1
                        ));
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let c = self.unicode_escape().ok_or_else(|| {
                                format!("Expected value but found invalid unicode escape code at character {}", start + 1)
                            })?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => {
                            return Err(format!(
                                "Expected value but found invalid escape code at character {}",
                                start + 1
                            ))
                        }
                    }
                }
                b => out.push(b),
            }
        }
    }

    /// The code point of `XXXX` (after `\u`), joining a surrogate pair.
    fn unicode_escape(&mut self) -> Option<char> {
        let hex4 = |p: &mut Self| -> Option<u32> {
            let digits = p.text.get(p.pos..p.pos + 4)?;
            let v = u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()?;
            p.pos += 4;
            Some(v)
        };
        let high = hex4(self)?;
        if (0xD800..0xDC00).contains(&high) {
            if self.text.get(self.pos..self.pos + 2) != Some(b"\\u") {
                return None;
            }
            self.pos += 2;
            let low = hex4(self)?;
            if !(0xDC00..0xE000).contains(&low) {
                return None;
            }
            return char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00));
        }
        char::from_u32(high)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_fourteen_significant_digits() {
        assert_eq!(format_number(100.0), "100");
        assert_eq!(format_number(0.1), "0.1");
        assert_eq!(format_number(1e20), "1e+20");
        assert_eq!(format_number(-5000.0), "-5000");
        assert_eq!(format_number(0.0003), "0.0003");
        assert_eq!(format_number(1.0 / 3.0), "0.33333333333333");
    }

    #[test]
    fn round_trip_through_lua() {
        let lua = Lua::new();
        lua.globals().set("cjson", library(&lua).unwrap()).unwrap();
        let out: String = lua
            .load(r#"return cjson.encode({1, "a/b", true, {x = cjson.null}})"#)
            .eval()
            .unwrap();
        assert_eq!(out, r#"[1,"a\/b",true,{"x":null}]"#);
        let out: String = lua
            .load(r#"local t = cjson.decode('{"k": [1, 2.5, "\\u00e9"], "n": null}'); return t.k[3] .. (t.n == cjson.null and " null" or " ?") .. t.k[2]"#)
            .eval()
            .unwrap();
        assert_eq!(out, "é null2.5");
        let empty: String = lua.load("return cjson.encode({})").eval().unwrap();
        assert_eq!(empty, "{}");
    }
}
