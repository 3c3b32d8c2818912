//! The `cmsgpack` library Redis bundles (lua-cmsgpack's behaviour): `pack(...)` writes each
//! argument as MessagePack, `unpack(s)` returns every object in `s`, `unpack_one(s, offset)`
//! and `unpack_limit(s, limit, offset)` read some and return the next offset (-1 at the end).
//!
//! As lua-cmsgpack: integral numbers take the smallest integer encoding, others a float when
//! exact as one and a double otherwise; a table is an array when its keys are exactly 1..n;
//! tables nested 16 deep are written as nil (a cycle becomes a deep copy cut there).

use mlua::{Lua, MultiValue, Result, Table, Value, Variadic};

/// Tables deeper than this are written as nil (`LUACMSGPACK_MAX_NESTING`).
const MAX_NESTING: usize = 16;
/// Deepest nesting `unpack` follows: a crafted input cannot recurse without end.
const MAX_DECODE_DEPTH: usize = 1000;

const MISSING: &str = "Missing bytes in input.";
const BAD: &str = "Bad data format in input.";

pub fn library(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: Variadic<Value>| {
            if args.is_empty() {
                return Err(mlua::Error::runtime("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                encode(v, 0, &mut out)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::String| {
            let bytes = s.as_bytes();
            let mut d = Decoder {
                data: &bytes,
                pos: 0,
            };
            let mut out = MultiValue::new();
            while d.pos < d.data.len() {
                out.push_back(d.value(lua, 0)?);
            }
            Ok(out)
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::String, Option<i64>)| {
            unpack_some(lua, &s.as_bytes(), 1, offset.unwrap_or(0))
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(
            |lua, (s, limit, offset): (mlua::String, Option<i64>, Option<i64>)| {
                unpack_some(lua, &s.as_bytes(), limit.unwrap_or(0), offset.unwrap_or(0))
            },
        )?,
    )?;
    Ok(t)
}

/// Up to `limit` objects (all when 0 or less) from `offset`: the next offset (-1 when the
/// input is used up), then the objects.
fn unpack_some(lua: &Lua, data: &[u8], limit: i64, offset: i64) -> Result<MultiValue> {
    let start = usize::try_from(offset)
        .ok()
        .filter(|&o| o <= data.len())
        .ok_or_else(|| mlua::Error::runtime("Start offset greater than input length."))?;
    let mut d = Decoder { data, pos: start };
    let mut objects = Vec::new();
    while d.pos < data.len() && (limit <= 0 || (objects.len() as i64) < limit) {
        objects.push(d.value(lua, 0)?);
    }
    let next = if d.pos >= data.len() {
        -1
    } else {
        d.pos as i64
    };
    let mut out = MultiValue::new();
    out.push_back(Value::Number(next as f64));
    out.extend(objects);
    Ok(out)
}

fn encode(v: &Value, level: usize, out: &mut Vec<u8>) -> Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(*i, out),
        Value::Number(n) => encode_number(*n, out),
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Table(t) if level < MAX_NESTING => encode_table(t, level, out)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_number(n: f64, out: &mut Vec<u8>) {
    /// The doubles that are exactly an i64.
    const I64_RANGE: std::ops::Range<f64> = -9.223_372_036_854_776e18..9.223_372_036_854_776e18;
    if n == n.trunc() && I64_RANGE.contains(&n) {
        encode_int(n as i64, out);
    } else if (n as f32) as f64 == n || n.is_nan() {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_int(i: i64, out: &mut Vec<u8>) {
    if i >= 0 {
        let u = i as u64;
        if u < 128 {
            out.push(u as u8);
        } else if u <= 0xff {
            out.extend_from_slice(&[0xcc, u as u8]);
        } else if u <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(u as u16).to_be_bytes());
        } else if u <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(u as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&u.to_be_bytes());
        }
    } else if i >= -32 {
        out.push(i as i8 as u8);
    } else if i >= -128 {
        out.extend_from_slice(&[0xd0, i as i8 as u8]);
    } else if i >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(i as i16).to_be_bytes());
    } else if i >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(i as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&i.to_be_bytes());
    }
}

fn encode_bytes(b: &[u8], out: &mut Vec<u8>) {
    let len = b.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(b);
}

/// The header of an array or a map of `n` entries.
fn encode_len(n: usize, fix: u8, b16: u8, b32: u8, out: &mut Vec<u8>) {
    if n < 16 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// Walks the table twice (shape, then contents) without holding its entries: every value
/// held from Rust takes a slot of Lua's auxiliary stack, which has a few thousand.
fn encode_table(t: &Table, level: usize, out: &mut Vec<u8>) -> Result<()> {
    // An array when the keys are exactly 1..n (no holes), as lua-cmsgpack decides.
    let mut count = 0usize;
    let mut max = 0f64;
    let mut is_array = true;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        count += 1;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => {
                is_array = false;
                continue;
            }
        };
        if n > 0.0 && n == n.trunc() {
            max = max.max(n);
        } else {
            is_array = false;
        }
    }
    if is_array && max as usize == count {
        encode_len(count, 0x90, 0xdc, 0xdd, out);
        for i in 1..=count {
            encode(&t.raw_get::<Value>(i)?, level + 1, out)?;
        }
    } else {
        encode_len(count, 0x80, 0xde, 0xdf, out);
        for pair in t.pairs::<Value, Value>() {
            let (k, v) = pair?;
            encode(&k, level + 1, out)?;
            encode(&v, level + 1, out)?;
        }
    }
    Ok(())
}

struct Decoder<'d> {
    data: &'d [u8],
    pos: usize,
}

impl Decoder<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            return Err(mlua::Error::runtime(MISSING));
        };
        let bytes = &self.data[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn uint(&mut self, n: usize) -> Result<u64> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | *b as u64))
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> Result<Value> {
        if depth > MAX_DECODE_DEPTH {
            return Err(mlua::Error::runtime(BAD));
        }
        let tag = self.take(1)?[0];
        let num = |n: f64| Ok(Value::Number(n));
        match tag {
            0x00..=0x7f => num(tag as f64),
            0xe0..=0xff => num(tag as i8 as f64),
            0xc0 => Ok(Value::Nil),
            0xc2 => Ok(Value::Boolean(false)),
            0xc3 => Ok(Value::Boolean(true)),
            0xcc => num(self.uint(1)? as f64),
            0xcd => num(self.uint(2)? as f64),
            0xce => num(self.uint(4)? as f64),
            0xcf => num(self.uint(8)? as f64),
            0xd0 => num(self.uint(1)? as u8 as i8 as f64),
            0xd1 => num(self.uint(2)? as u16 as i16 as f64),
            0xd2 => num(self.uint(4)? as u32 as i32 as f64),
            0xd3 => num(self.uint(8)? as i64 as f64),
            0xca => num(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => num(f64::from_bits(self.uint(8)?)),
            0xa0..=0xbf => self.string(lua, (tag & 0x1f) as usize),
            0xd9 | 0xc4 => {
                let n = self.uint(1)? as usize;
                self.string(lua, n)
            }
            0xda | 0xc5 => {
                let n = self.uint(2)? as usize;
                self.string(lua, n)
            }
            0xdb | 0xc6 => {
                let n = self.uint(4)? as usize;
                self.string(lua, n)
            }
            0x90..=0x9f => self.array(lua, (tag & 0x0f) as usize, depth),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(lua, n, depth)
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(lua, n, depth)
            }
            0x80..=0x8f => self.map(lua, (tag & 0x0f) as usize, depth),
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(lua, n, depth)
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(lua, n, depth)
            }
            _ => Err(mlua::Error::runtime(BAD)),
        }
    }

    fn string(&mut self, lua: &Lua, n: usize) -> Result<Value> {
        let bytes = self.take(n)?;
        Ok(Value::String(lua.create_string(bytes)?))
    }

    /// Every element takes at least a byte: a count beyond the input is refused before
    /// anything is allocated for it.
    fn check_count(&self, n: usize) -> Result<()> {
        if n > self.data.len() - self.pos {
            return Err(mlua::Error::runtime(MISSING));
        }
        Ok(())
    }

    fn array(&mut self, lua: &Lua, n: usize, depth: usize) -> Result<Value> {
        self.check_count(n)?;
        let t = lua.create_table_with_capacity(n, 0)?;
        for i in 1..=n {
            t.raw_set(i, self.value(lua, depth + 1)?)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize, depth: usize) -> Result<Value> {
        self.check_count(n)?;
        let t = lua.create_table_with_capacity(0, n)?;
        for _ in 0..n {
            let k = self.value(lua, depth + 1)?;
            let v = self.value(lua, depth + 1)?;
            if !matches!(k, Value::Nil) {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(lua: &Lua, code: &str) -> String {
        let s: mlua::String = lua.load(code).eval().unwrap();
        s.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn encodings_are_lua_cmsgpacks() {
        let lua = Lua::new();
        lua.globals()
            .set("cmsgpack", library(&lua).unwrap())
            .unwrap();
        assert_eq!(hex(&lua, "return cmsgpack.pack(0.1)"), "cb3fb999999999999a");
        assert_eq!(
            hex(&lua, "return cmsgpack.pack(-1099511627776)"),
            "d3ffffff0000000000"
        );
        assert_eq!(
            hex(&lua, "return cmsgpack.pack({1, 2}, 'ab', true, nil)"),
            "920102a26162c3c0"
        );
        assert_eq!(hex(&lua, "return cmsgpack.pack({})"), "90");
        let ok: bool = lua
            .load("local s = cmsgpack.pack({a = {1, 'x'}, b = -200}, 300); local t, n = cmsgpack.unpack(s); return t.a[2] == 'x' and t.b == -200 and n == 300")
            .eval()
            .unwrap();
        assert!(ok);
        let ok: bool = lua
            .load("local s = cmsgpack.pack('a', 'b'); local o, x = cmsgpack.unpack_limit(s, 1, 0); local o2, y = cmsgpack.unpack_one(s, o); return x == 'a' and y == 'b' and o2 == -1")
            .eval()
            .unwrap();
        assert!(ok);
        assert!(
            lua.load("return cmsgpack.unpack('\\220\\255\\255')")
                .exec()
                .is_err(),
            "a count beyond the input"
        );
    }
}
