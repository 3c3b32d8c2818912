//! The `redis` table's functions that need no client: `sha1hex`, `error_reply`,
//! `status_reply`, `log` and its levels, `setresp`, `set_repl` and its flags (accepted; a
//! script's writes always replicate as its effects), `replicate_commands`, and the version.
//! `redis.call` and `redis.pcall` are the sandbox's (see `sandbox.lua` and `call`).

use super::convert::ScriptResp;
use super::engine::{run_state, set_run_state};
use super::errors::error_reply_text;
use mlua::{Lua, Result, Table, Value, Variadic};

pub const LOG_DEBUG: i64 = 0;
pub const LOG_VERBOSE: i64 = 1;
pub const LOG_NOTICE: i64 = 2;
pub const LOG_WARNING: i64 = 3;

/// `redis.REDIS_VERSION`: the Redis version the node is compatible with (the commands'
/// `REDIS_COMPAT_VERSION`; a test in `commands::scripting` keeps them equal).
pub const REDIS_VERSION: &str = "7.0.15";

const REPL_NONE: i64 = 0;
const REPL_AOF: i64 = 1;
const REPL_REPLICA: i64 = 2;
const REPL_ALL: i64 = 3;

/// SHA1 of `data`, 40 lower-case hex digits (the script cache's key).
pub fn sha1_hex(data: &[u8]) -> [u8; 40] {
    use sha1::{Digest, Sha1};
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha1::digest(data);
    let mut out = [0u8; 40];
    for (i, b) in digest.iter().enumerate() {
        out[2 * i] = HEX[(b >> 4) as usize];
        out[2 * i + 1] = HEX[(b & 15) as usize];
    }
    out
}

fn error_table(lua: &Lua, text: String) -> Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", text)?;
    Ok(t)
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

pub fn library(lua: &Lua) -> Result<Table> {
    let redis = lua.create_table()?;
    redis.set(
        "sha1hex",
        lua.create_function(|lua, args: Variadic<Value>| {
            let [arg] = args.as_slice() else {
                return Err(mlua::Error::runtime("wrong number of arguments"));
            };
            let text = match arg {
                Value::String(s) => s.as_bytes().to_vec(),
                v => match lua.coerce_string(v.clone())? {
                    Some(s) => s.as_bytes().to_vec(),
                    None => return Err(mlua::Error::runtime("wrong number of arguments")),
                },
            };
            lua.create_string(sha1_hex(&text))
        })?,
    )?;
    redis.set(
        "error_reply",
        lua.create_function(|lua, args: Variadic<Value>| match args.as_slice() {
            [Value::String(s)] => error_table(lua, error_reply_text(&s.to_string_lossy())),
            _ => error_table(lua, "ERR wrong number or type of arguments".into()),
        })?,
    )?;
    redis.set(
        "status_reply",
        lua.create_function(|lua, args: Variadic<Value>| {
            let t = lua.create_table()?;
            match args.as_slice() {
                [Value::String(s)] => t.raw_set("ok", s.clone())?,
                _ => t.raw_set("err", "ERR wrong number or type of arguments")?,
            }
            Ok(t)
        })?,
    )?;
    redis.set(
        "log",
        lua.create_function(|_, args: Variadic<Value>| {
            if args.len() < 2 {
                return Err(mlua::Error::runtime(
                    "redis.log() requires two arguments or more.",
                ));
            }
            let Some(level) = number(&args[0]) else {
                return Err(mlua::Error::runtime("First argument must be a number"));
            };
            let level = level as i64;
            if !(LOG_DEBUG..=LOG_WARNING).contains(&level) {
                return Err(mlua::Error::runtime("Invalid debug level."));
            }
            let mut line = String::new();
            for (i, v) in args.iter().skip(1).enumerate() {
                if i > 0 {
                    line.push(' ');
                }
                match v {
                    Value::String(s) => line.push_str(&s.to_string_lossy()),
                    Value::Integer(n) => line.push_str(&n.to_string()),
                    Value::Number(n) => line.push_str(&super::call::lua_number_text(*n)),
                    _ => {}
                }
            }
            match level {
                LOG_DEBUG => tracing::debug!(target: "script", "{line}"),
                LOG_VERBOSE => tracing::debug!(target: "script", "{line}"),
                LOG_NOTICE => tracing::info!(target: "script", "{line}"),
                _ => tracing::warn!(target: "script", "{line}"),
            }
            Ok(())
        })?,
    )?;
    for (name, level) in [
        ("LOG_DEBUG", LOG_DEBUG),
        ("LOG_VERBOSE", LOG_VERBOSE),
        ("LOG_NOTICE", LOG_NOTICE),
        ("LOG_WARNING", LOG_WARNING),
    ] {
        redis.set(name, level)?;
    }
    redis.set(
        "setresp",
        lua.create_function(|lua, args: Variadic<Value>| {
            let [v] = args.as_slice() else {
                return Err(mlua::Error::runtime(
                    "redis.setresp() requires one argument.",
                ));
            };
            let resp = match number(v).map(|n| n as i64) {
                Some(2) => ScriptResp::Two,
                Some(3) => ScriptResp::Three,
                _ => return Err(mlua::Error::runtime("RESP version must be 2 or 3.")),
            };
            let mut state = run_state(lua);
            state.resp = resp;
            set_run_state(lua, state);
            Ok(())
        })?,
    )?;
    redis.set(
        "set_repl",
        lua.create_function(|_, args: Variadic<Value>| {
            let [v] = args.as_slice() else {
                return Err(mlua::Error::runtime(
                    "redis.set_repl() requires one argument.",
                ));
            };
            match number(v).map(|n| n as i64) {
                Some(flags) if (REPL_NONE..=REPL_ALL).contains(&flags) => Ok(()),
                _ => Err(mlua::Error::runtime(
                    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                )),
            }
        })?,
    )?;
    for (name, flags) in [
        ("REPL_NONE", REPL_NONE),
        ("REPL_AOF", REPL_AOF),
        ("REPL_SLAVE", REPL_REPLICA),
        ("REPL_REPLICA", REPL_REPLICA),
        ("REPL_ALL", REPL_ALL),
    ] {
        redis.set(name, flags)?;
    }
    redis.set(
        "replicate_commands",
        lua.create_function(|_, _: Variadic<Value>| Ok(true))?,
    )?;
    redis.set(
        "breakpoint",
        lua.create_function(|_, _: Variadic<Value>| Ok(false))?,
    )?;
    redis.set(
        "debug",
        lua.create_function(|_, _: Variadic<Value>| Ok(()))?,
    )?;
    redis.set("REDIS_VERSION", REDIS_VERSION)?;
    redis.set("REDIS_VERSION_NUM", version_num(REDIS_VERSION))?;
    Ok(redis)
}

/// `7.0.15` as `0x07000f`.
fn version_num(version: &str) -> i64 {
    let mut parts = version.split('.').map(|p| p.parse::<i64>().unwrap_or(0));
    let (a, b, c) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    (a << 16) | (b << 8) | c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_of_the_empty_string_and_a_script() {
        assert_eq!(&sha1_hex(b""), b"da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            &sha1_hex(b"Pizza & Mandolino"),
            b"74822d82031af7493c20eefa13bd07ec4fada82f"
        );
        assert_eq!(version_num("7.0.15"), 0x07000f);
    }
}
