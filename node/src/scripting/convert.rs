//! Redis's conversions between replies and Lua values, both ways.
//!
//! A command's reply seen by the script (`redis.call`): integers are numbers, bulk strings
//! strings, a status `{ok=...}`, an error `{err=...}`, arrays tables; a null is `false` under
//! RESP2 and `nil` under RESP3 (`redis.setresp(3)`), which also brings maps (`{map=...}`),
//! sets (`{set=...}`, members mapped to `true`), doubles (`{double=...}`), booleans, big
//! numbers (`{big_number=...}`) and verbatim strings.
//!
//! What a script returns, as its reply: numbers are integers (truncated), strings bulk
//! strings, `true` is 1 (a boolean under RESP3), `false` and `nil` are nulls (`false` is
//! `#f` under RESP3), tables with `err`/`ok`/`double`/`big_number`/`map`/`set` fields those
//! replies, and any other table an array of its elements 1, 2, ... up to the first nil.

use mlua::{Lua, Result, Table, Value};
use proto::resp::{Frame, Reply};

/// Deepest nesting converted either way: Redis stops at its Lua stack's limit.
pub const MAX_DEPTH: usize = 1000;

/// The protocol a script's `redis.call` speaks (`redis.setresp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScriptResp {
    #[default]
    Two,
    Three,
}

/// A command's reply as the script sees it.
pub fn frame_to_lua(lua: &Lua, frame: &Frame, resp: ScriptResp, depth: usize) -> Result<Value> {
    if depth > MAX_DEPTH {
        return Err(mlua::Error::runtime("reached lua stack limit"));
    }
    let string = |b: &[u8]| -> Result<Value> { Ok(Value::String(lua.create_string(b)?)) };
    let field = |name: &str, v: Value| -> Result<Value> {
        let t = lua.create_table()?;
        t.raw_set(name, v)?;
        Ok(Value::Table(t))
    };
    let three = resp == ScriptResp::Three;
    Ok(match frame {
        Frame::Integer(i) => Value::Number(*i as f64),
        Frame::Bulk(b) => string(b)?,
        Frame::Simple(b) => field("ok", string(b)?)?,
        Frame::Error(b) | Frame::BlobError(b) => field("err", string(b)?)?,
        Frame::Null | Frame::NullBulk | Frame::NullArray => {
            if three {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Frame::Array(items) | Frame::Push(items) => {
            Value::Table(sequence(lua, items, resp, depth)?)
        }
        Frame::Set(items) if three => {
            let set = lua.create_table()?;
            for item in items {
                set.raw_set(frame_to_lua(lua, item, resp, depth + 1)?, true)?;
            }
            field("set", Value::Table(set))?
        }
        Frame::Set(items) => Value::Table(sequence(lua, items, resp, depth)?),
        Frame::Map(pairs) if three => {
            let map = lua.create_table()?;
            for (k, v) in pairs {
                map.raw_set(
                    frame_to_lua(lua, k, resp, depth + 1)?,
                    frame_to_lua(lua, v, resp, depth + 1)?,
                )?;
            }
            field("map", Value::Table(map))?
        }
        Frame::Map(pairs) => {
            let t = lua.create_table()?;
            for (i, (k, v)) in pairs.iter().enumerate() {
                t.raw_set(2 * i + 1, frame_to_lua(lua, k, resp, depth + 1)?)?;
                t.raw_set(2 * i + 2, frame_to_lua(lua, v, resp, depth + 1)?)?;
            }
            Value::Table(t)
        }
        Frame::Double(d) if three => field("double", Value::Number(*d))?,
        Frame::Double(d) => {
            let mut buf = [0u8; 64];
            string(proto::resp::reply::format_double(*d, &mut buf))?
        }
        Frame::Boolean(b) if three => Value::Boolean(*b),
        Frame::Boolean(b) => Value::Number(*b as i64 as f64),
        Frame::BigNumber(b) if three => field("big_number", string(b)?)?,
        Frame::BigNumber(b) => string(b)?,
        Frame::Verbatim { format, text } if three => {
            let v = lua.create_table()?;
            v.raw_set("format", lua.create_string(format)?)?;
            v.raw_set("string", lua.create_string(text)?)?;
            field("verbatim_string", Value::Table(v))?
        }
        Frame::Verbatim { text, .. } => string(text)?,
        Frame::Attribute { data, .. } => frame_to_lua(lua, data, resp, depth)?,
    })
}

fn sequence(lua: &Lua, items: &[Frame], resp: ScriptResp, depth: usize) -> Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, frame_to_lua(lua, item, resp, depth + 1)?)?;
    }
    Ok(t)
}

/// What the script returned, as its reply.
pub fn lua_to_frame(v: &Value, resp: ScriptResp, depth: usize) -> Frame {
    if depth > MAX_DEPTH {
        return Frame::error("ERR reached lua stack limit");
    }
    match v {
        Value::String(s) => Frame::bulk(&s.as_bytes()),
        Value::Integer(i) => Frame::Integer(*i),
        Value::Number(n) => Frame::Integer(*n as i64),
        Value::Boolean(b) => match resp {
            ScriptResp::Three => Frame::Boolean(*b),
            ScriptResp::Two if *b => Frame::Integer(1),
            ScriptResp::Two => Frame::NullBulk,
        },
        Value::Table(t) => table_to_frame(t, resp, depth),
        _ => Frame::NullBulk,
    }
}

/// Fields are read raw, as Redis does: a returned table's metamethods never run (one could
/// call Redis after the script ended).
fn table_to_frame(t: &Table, resp: ScriptResp, depth: usize) -> Frame {
    let text = |name: &str| -> Option<Vec<u8>> {
        match t.raw_get::<Value>(name).ok()? {
            Value::String(s) => Some(s.as_bytes().to_vec()),
            _ => None,
        }
    };
    if let Some(err) = text("err") {
        return Frame::Error(err.into());
    }
    if let Some(ok) = text("ok") {
        return Frame::Simple(ok.into());
    }
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(n)) => return Frame::Double(n),
        Ok(Value::Integer(i)) => return Frame::Double(i as f64),
        _ => {}
    }
    if let Some(big) = text("big_number") {
        return Frame::BigNumber(big.into());
    }
    if let Ok(Value::Table(map)) = t.raw_get::<Value>("map") {
        let pairs = map
            .pairs::<Value, Value>()
            .filter_map(|p| p.ok())
            .map(|(k, v)| {
                (
                    lua_to_frame(&k, resp, depth + 1),
                    lua_to_frame(&v, resp, depth + 1),
                )
            })
            .collect();
        return Frame::Map(pairs);
    }
    if let Ok(Value::Table(set)) = t.raw_get::<Value>("set") {
        let members = set
            .pairs::<Value, Value>()
            .filter_map(|p| p.ok())
            .map(|(k, _)| lua_to_frame(&k, resp, depth + 1))
            .collect();
        return Frame::Set(members);
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(lua_to_frame(&v, resp, depth + 1)),
        }
    }
    Frame::Array(items)
}

/// Writes `frame` as the client's reply, in the client's protocol.
pub fn write_reply(frame: &Frame, reply: &mut Reply<'_>) {
    match frame {
        Frame::Simple(b) => reply.simple(b),
        Frame::Error(b) | Frame::BlobError(b) => reply.error(&String::from_utf8_lossy(b)),
        Frame::Integer(i) => reply.integer(*i),
        Frame::Bulk(b) => reply.bulk(b),
        Frame::Null | Frame::NullBulk => reply.null(),
        Frame::NullArray => reply.null_array(),
        Frame::Array(items) | Frame::Push(items) => {
            reply.array(items.len());
            for item in items {
                write_reply(item, reply);
            }
        }
        Frame::Set(items) => {
            reply.set(items.len());
            for item in items {
                write_reply(item, reply);
            }
        }
        Frame::Map(pairs) => {
            reply.map(pairs.len());
            for (k, v) in pairs {
                write_reply(k, reply);
                write_reply(v, reply);
            }
        }
        Frame::Double(d) => reply.double(*d),
        Frame::Boolean(b) => reply.boolean(*b),
        Frame::BigNumber(b) => {
            if reply.is_resp3() {
                reply.raw(b"(");
                reply.raw(b);
                reply.raw(b"\r\n");
            } else {
                reply.bulk(b);
            }
        }
        Frame::Verbatim { text, .. } => reply.verbatim(text),
        Frame::Attribute { data, .. } => write_reply(data, reply),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval_frame(lua: &Lua, code: &str, resp: ScriptResp) -> Frame {
        let v: Value = lua.load(code).eval().unwrap();
        lua_to_frame(&v, resp, 0)
    }

    #[test]
    fn lua_values_become_redis_replies() {
        let lua = Lua::new();
        let two = ScriptResp::Two;
        assert_eq!(eval_frame(&lua, "return 3.99", two), Frame::Integer(3));
        assert_eq!(eval_frame(&lua, "return -3.99", two), Frame::Integer(-3));
        assert_eq!(eval_frame(&lua, "return 'x'", two), Frame::bulk(b"x"));
        assert_eq!(eval_frame(&lua, "return true", two), Frame::Integer(1));
        assert_eq!(eval_frame(&lua, "return false", two), Frame::NullBulk);
        assert_eq!(eval_frame(&lua, "return nil", two), Frame::NullBulk);
        assert_eq!(
            eval_frame(&lua, "return {1, 'a', nil, 4}", two),
            Frame::Array(vec![Frame::Integer(1), Frame::bulk(b"a")]),
            "an array stops at its first nil"
        );
        assert_eq!(
            eval_frame(&lua, "return {ok='fine'}", two),
            Frame::simple("fine")
        );
        assert_eq!(
            eval_frame(&lua, "return {err='ERR bad'}", two),
            Frame::error("ERR bad")
        );
        assert_eq!(
            eval_frame(&lua, "return {double=1.5}", two),
            Frame::Double(1.5)
        );
        assert_eq!(
            eval_frame(
                &lua,
                "return {big_number='123456789012345678901234567890'}",
                two
            ),
            Frame::BigNumber("123456789012345678901234567890".into())
        );
        assert_eq!(
            eval_frame(&lua, "return {map={a=1}}", two),
            Frame::Map(vec![(Frame::bulk(b"a"), Frame::Integer(1))])
        );
        assert_eq!(
            eval_frame(&lua, "return {set={a=true}}", two),
            Frame::Set(vec![Frame::bulk(b"a")])
        );
        let three = ScriptResp::Three;
        assert_eq!(eval_frame(&lua, "return true", three), Frame::Boolean(true));
        assert_eq!(
            eval_frame(&lua, "return false", three),
            Frame::Boolean(false)
        );
    }

    #[test]
    fn replies_become_lua_values() {
        let lua = Lua::new();
        let check = |frame: Frame, resp: ScriptResp, expr: &str| {
            let v = frame_to_lua(&lua, &frame, resp, 0).unwrap();
            lua.globals().set("v", v).unwrap();
            let ok: bool = lua.load(expr).eval().unwrap();
            assert!(ok, "{frame:?} -> {expr}");
        };
        let two = ScriptResp::Two;
        let three = ScriptResp::Three;
        check(Frame::Integer(7), two, "return v == 7");
        check(Frame::bulk(b"x"), two, "return v == 'x'");
        check(Frame::NullBulk, two, "return v == false");
        check(Frame::Null, three, "return v == nil");
        check(Frame::simple("OK"), two, "return v.ok == 'OK'");
        check(Frame::error("ERR no"), two, "return v.err == 'ERR no'");
        check(
            Frame::Array(vec![Frame::bulk(b"a"), Frame::Integer(2)]),
            two,
            "return v[1] == 'a' and v[2] == 2 and #v == 2",
        );
        check(Frame::Double(2.5), three, "return v.double == 2.5");
        check(Frame::Double(2.5), two, "return v == '2.5'");
        check(Frame::Boolean(true), three, "return v == true");
        check(
            Frame::Map(vec![(Frame::bulk(b"k"), Frame::Integer(1))]),
            three,
            "return v.map.k == 1",
        );
        check(
            Frame::Set(vec![Frame::bulk(b"m")]),
            three,
            "return v.set.m == true",
        );
        check(
            Frame::BigNumber("99999999999999999999".into()),
            three,
            "return v.big_number == '99999999999999999999'",
        );
    }

    #[test]
    fn replies_follow_the_clients_protocol() {
        let mut out = bytes::BytesMut::new();
        let mut reply = Reply::new(&mut out, proto::resp::ProtocolVersion::Resp2);
        write_reply(
            &Frame::Map(vec![(Frame::bulk(b"a"), Frame::Double(1.5))]),
            &mut reply,
        );
        write_reply(&Frame::BigNumber("12".into()), &mut reply);
        assert_eq!(&out[..], b"*2\r\n$1\r\na\r\n$3\r\n1.5\r\n$2\r\n12\r\n");
    }
}
