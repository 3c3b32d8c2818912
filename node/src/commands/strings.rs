//! Strings: GET SET SETNX SETEX PSETEX GETSET GETDEL GETEX MGET MSET MSETNX APPEND STRLEN
//! INCR DECR INCRBY DECRBY INCRBYFLOAT GETRANGE SETRANGE.

use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::key_events::WhenGone;
use crate::command_framework::spec::{command, flags::*, KeySpec, ALL_ARGS_KEYS, KEY1};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::config::keyspace_events::GENERIC;
use crate::db::{Entry, Value};
use crate::replication::propagate::WriteEffect;

pub static COMMANDS: &[CommandSpec] = &[
    command("get", 2, READONLY | FAST, KEY1, get, "string", "Returns the string value of a key."),
    command("set", -3, WRITE | DENYOOM, KEY1, set, "string", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist."),
    command("setnx", 3, WRITE | DENYOOM | FAST, KEY1, setnx, "string", "Set the string value of a key only when the key doesn't exist."),
    command("setex", 4, WRITE | DENYOOM, KEY1, setex, "string", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist."),
    CommandSpec { since: "2.6.0", ..command("psetex", 4, WRITE | DENYOOM, KEY1, psetex, "string", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.") },
    command("getset", 3, WRITE | DENYOOM | FAST, KEY1, getset, "string", "Returns the previous string value of a key after setting it to a new value."),
    CommandSpec { since: "6.2.0", ..command("getdel", 2, WRITE | FAST, KEY1, getdel, "string", "Returns the string value of a key after deleting the key.") },
    CommandSpec { since: "6.2.0", ..command("getex", -2, WRITE | FAST, KEY1, getex, "string", "Returns the string value of a key after setting its expiration time.") },
    command("mget", -2, READONLY | FAST, ALL_ARGS_KEYS, mget, "string", "Atomically returns the string values of one or more keys."),
    command("mset", -3, WRITE | DENYOOM, KeySpec::Range { first: 1, last: -1, step: 2 }, mset, "string", "Atomically creates or modifies the string values of one or more keys."),
    command("msetnx", -3, WRITE | DENYOOM, KeySpec::Range { first: 1, last: -1, step: 2 }, msetnx, "string", "Atomically modifies the string values of one or more keys only when all keys don't exist."),
    command("append", 3, WRITE | DENYOOM | FAST, KEY1, append, "string", "Appends a string to the value of a key. Creates the key if it doesn't exist."),
    command("strlen", 2, READONLY | FAST, KEY1, strlen, "string", "Returns the length of a string value."),
    command("incr", 2, WRITE | DENYOOM | FAST, KEY1, incr, "string", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    command("decr", 2, WRITE | DENYOOM | FAST, KEY1, decr, "string", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    command("incrby", 3, WRITE | DENYOOM | FAST, KEY1, incrby, "string", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
    command("decrby", 3, WRITE | DENYOOM | FAST, KEY1, decrby, "string", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist."),
    CommandSpec { since: "2.6.0", ..command("incrbyfloat", 3, WRITE | DENYOOM | FAST, KEY1, incrbyfloat, "string", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.") },
    CommandSpec { since: "2.4.0", ..command("getrange", 4, READONLY, KEY1, getrange, "string", "Returns a substring of the string stored at a key.") },
    CommandSpec { since: "2.2.0", ..command("setrange", 4, WRITE | DENYOOM, KEY1, setrange, "string", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.") },
];

/// The bytes of a string value (copied), WRONGTYPE otherwise.
pub fn string_bytes(value: &Value) -> Result<Vec<u8>, CmdError> {
    let mut buf = itoa::Buffer::new();
    value
        .as_bytes(&mut buf)
        .map(|b| b.to_vec())
        .ok_or(CmdError::WrongType)
}

fn get(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    // Split the borrow: the entry lives in ctx.db, the reply in ctx.reply.
    let Ctx { db, reply, .. } = ctx;
    match db.get(args[1]) {
        None => reply.null(),
        Some(entry) => match &entry.value {
            Value::Str(s) => reply.bulk(s),
            Value::Int(n) => reply.bulk_integer(*n),
            _ => return Err(CmdError::WrongType),
        },
    }
    Ok(())
}

/// An absolute expiry (ms since epoch) from a relative or absolute time, or the Redis error
/// for `command` when it is not positive or overflows.
pub fn expiry_at(
    now: u64,
    amount: &[u8],
    unit_ms: i64,
    absolute: bool,
    command: &str,
) -> Result<u64, CmdError> {
    let invalid = || CmdError::new(format!("ERR invalid expire time in '{command}' command"));
    let v = args::int(amount)?;
    if v <= 0 {
        return Err(invalid());
    }
    let ms = v.checked_mul(unit_ms).ok_or_else(invalid)?;
    let at = if absolute {
        ms
    } else {
        ms.checked_add(now as i64).ok_or_else(invalid)?
    };
    Ok(at as u64)
}

#[derive(Default)]
struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    expires_at: Option<u64>,
}

fn parse_set_options(now: u64, args: &[&[u8]]) -> Result<SetOptions, CmdError> {
    let mut o = SetOptions::default();
    let mut i = 3;
    while i < args.len() {
        let a = args[i];
        let next = args.get(i + 1);
        let unit = if is(a, "ex") {
            Some((1000, false))
        } else if is(a, "px") {
            Some((1, false))
        } else if is(a, "exat") {
            Some((1000, true))
        } else if is(a, "pxat") {
            Some((1, true))
        } else {
            None
        };
        if let Some((unit_ms, absolute)) = unit {
            let Some(amount) = next else {
                return Err(CmdError::Syntax);
            };
            if o.expires_at.is_some() || o.keep_ttl {
                return Err(CmdError::Syntax);
            }
            o.expires_at = Some(expiry_at(now, amount, unit_ms, absolute, "set")?);
            i += 2;
            continue;
        }
        if is(a, "nx") && !o.xx {
            o.nx = true;
        } else if is(a, "xx") && !o.nx {
            o.xx = true;
        } else if is(a, "get") {
            o.get = true;
        } else if is(a, "keepttl") && o.expires_at.is_none() {
            o.keep_ttl = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

fn set(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (key, value) = (args[1], args[2]);
    if args.len() == 3 {
        // The plain SET of every benchmark: no options to parse.
        ctx.db.set(key, Value::string(value));
        ctx.modified(key);
        ctx.reply.ok();
        return Ok(());
    }
    let o = parse_set_options(ctx.db.now, args)?;
    let existing = ctx.db.get(key);
    let exists = existing.is_some();
    let old = match (o.get, existing) {
        (true, Some(e)) => Some(string_bytes(&e.value)?),
        _ => None,
    };
    if (o.nx && exists) || (o.xx && !exists) {
        if o.get {
            match old {
                Some(v) => ctx.reply.bulk(&v),
                None => ctx.reply.null(),
            }
        } else {
            ctx.reply.null();
        }
        return Ok(());
    }
    if o.keep_ttl {
        ctx.db.set_keep_ttl(key, Value::string(value));
    } else {
        match o.expires_at {
            // Already past: the key ends up deleted, whatever it held.
            Some(at) if at <= ctx.db.now => {
                ctx.db.remove(key);
                ctx.replicate(|| WriteEffect::KeyDeleted);
            }
            at => {
                let mut entry = Entry::new(Value::string(value));
                entry.expires_at = at.unwrap_or(0);
                ctx.db.insert(key, entry);
                if let Some(at) = at {
                    ctx.replicate(|| WriteEffect::ExpiresAtMs(at));
                }
            }
        }
    }
    ctx.modified(key);
    if !o.keep_ttl && o.expires_at.is_some() {
        ctx.notify(GENERIC, "expire", key);
    }
    if o.get {
        match old {
            Some(v) => ctx.reply.bulk(&v),
            None => ctx.reply.null(),
        }
    } else {
        ctx.reply.ok();
    }
    Ok(())
}

fn setnx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.db.exists(args[1]) {
        ctx.reply.integer(0);
    } else {
        ctx.db.set(args[1], Value::string(args[2]));
        ctx.modified(args[1]);
        ctx.reply.integer(1);
    }
    Ok(())
}

fn set_with_ttl(ctx: &mut Ctx<'_>, args: &[&[u8]], unit_ms: i64, name: &str) -> CmdResult {
    let at = expiry_at(ctx.db.now, args[2], unit_ms, false, name)?;
    let mut entry = Entry::new(Value::string(args[3]));
    entry.expires_at = at;
    ctx.db.insert(args[1], entry);
    ctx.replicate(|| WriteEffect::ExpiresAtMs(at));
    ctx.modified(args[1]);
    ctx.notify(GENERIC, "expire", args[1]);
    ctx.reply.ok();
    Ok(())
}

fn setex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    set_with_ttl(ctx, args, 1000, "setex")
}

fn psetex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    set_with_ttl(ctx, args, 1, "psetex")
}

fn getset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let old = match ctx.db.get(args[1]) {
        Some(e) => Some(string_bytes(&e.value)?),
        None => None,
    };
    ctx.db.set(args[1], Value::string(args[2]));
    ctx.modified(args[1]);
    match old {
        Some(v) => ctx.reply.bulk(&v),
        None => ctx.reply.null(),
    }
    Ok(())
}

fn getdel(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    match ctx.db.get(args[1]) {
        None => ctx.reply.null(),
        Some(e) => {
            let v = string_bytes(&e.value)?;
            ctx.db.remove(args[1]);
            ctx.modified(args[1]);
            ctx.reply.bulk(&v);
        }
    }
    Ok(())
}

fn getex(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let now = ctx.db.now;
    // None: leave the TTL; Some(0): PERSIST; Some(at): expire at.
    let mut change: Option<u64> = None;
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        if is(a, "persist") && change.is_none() {
            change = Some(0);
            i += 1;
            continue;
        }
        let unit = if is(a, "ex") {
            (1000, false)
        } else if is(a, "px") {
            (1, false)
        } else if is(a, "exat") {
            (1000, true)
        } else if is(a, "pxat") {
            (1, true)
        } else {
            return Err(CmdError::Syntax);
        };
        let (Some(amount), None) = (args.get(i + 1), change) else {
            return Err(CmdError::Syntax);
        };
        change = Some(expiry_at(now, amount, unit.0, unit.1, "getex")?);
        i += 2;
    }
    let value = match ctx.db.get(args[1]) {
        None => {
            ctx.reply.null();
            return Ok(());
        }
        Some(e) => string_bytes(&e.value)?,
    };
    match change {
        Some(at) if at != 0 && at <= now => {
            ctx.db.remove(args[1]);
            ctx.replicate(|| WriteEffect::KeyDeleted);
            ctx.modified(args[1]);
        }
        Some(at) => {
            ctx.db.set_expiry(args[1], at);
            ctx.replicate(|| match at {
                0 => WriteEffect::Persisted,
                at => WriteEffect::ExpiresAtMs(at),
            });
            if at == 0 {
                ctx.name_event(GENERIC, "persist", WhenGone::Keep);
            }
            ctx.modified(args[1]);
        }
        None => {}
    }
    ctx.reply.bulk(&value);
    Ok(())
}

fn mget(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.reply.array(args.len() - 1);
    let Ctx { db, reply, .. } = ctx;
    for key in &args[1..] {
        match db.get(key).map(|e| &e.value) {
            Some(Value::Str(s)) => reply.bulk(s),
            Some(Value::Int(n)) => reply.bulk_integer(*n),
            // MGET answers nil for keys of other types rather than failing.
            _ => reply.null(),
        }
    }
    Ok(())
}

fn mset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity("mset".into()));
    }
    for pair in args[1..].chunks(2) {
        ctx.db.set(pair[0], Value::string(pair[1]));
        ctx.modified(pair[0]);
    }
    ctx.reply.ok();
    Ok(())
}

fn msetnx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity("msetnx".into()));
    }
    if args[1..].chunks(2).any(|pair| ctx.db.exists(pair[0])) {
        ctx.reply.integer(0);
        return Ok(());
    }
    for pair in args[1..].chunks(2) {
        ctx.db.set(pair[0], Value::string(pair[1]));
        ctx.modified(pair[0]);
    }
    ctx.reply.integer(1);
    Ok(())
}

fn max_string_len(ctx: &Ctx<'_>) -> usize {
    ctx.server
        .hot
        .proto_max_bulk_len
        .load(std::sync::atomic::Ordering::Relaxed) as usize
}

fn too_big() -> CmdError {
    CmdError::new("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
}

fn append(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let max = max_string_len(ctx);
    let new_len = match ctx.db.get(args[1]) {
        None => {
            ctx.db.set(args[1], Value::Str(args[2].into()));
            args[2].len()
        }
        Some(entry) => {
            let mut bytes = string_bytes(&entry.value)?;
            if bytes.len() + args[2].len() > max {
                return Err(too_big());
            }
            bytes.extend_from_slice(args[2]);
            let len = bytes.len();
            entry.value = Value::Str(bytes.into_boxed_slice());
            ctx.db
                .update_access(args[1], |access| access.edited_in_place = true);
            len
        }
    };
    ctx.modified(args[1]);
    ctx.reply.integer(new_len as i64);
    Ok(())
}

fn strlen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let len = match ctx.db.get(args[1]).map(|e| &e.value) {
        None => 0,
        Some(Value::Str(s)) => s.len(),
        Some(Value::Int(n)) => itoa::Buffer::new().format(*n).len(),
        Some(_) => return Err(CmdError::WrongType),
    };
    ctx.reply.integer(len as i64);
    Ok(())
}

/// INCR and friends: the stored value must be an integer; the result is stored as one.
fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], delta: i64) -> CmdResult {
    let result = match ctx.db.get(key) {
        None => {
            ctx.db.set(key, Value::Int(delta));
            delta
        }
        Some(entry) => {
            let current = match &entry.value {
                Value::Int(n) => *n,
                Value::Str(s) => proto::resp::request::parse_i64(s).ok_or(CmdError::NotInteger)?,
                _ => return Err(CmdError::WrongType),
            };
            let next = current.checked_add(delta).ok_or(CmdError::Overflow)?;
            entry.value = Value::Int(next);
            next
        }
    };
    ctx.modified(key);
    ctx.reply.integer(result);
    Ok(())
}

fn incr(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    incr_by(ctx, args[1], 1)
}

fn decr(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    incr_by(ctx, args[1], -1)
}

fn incrby(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    incr_by(ctx, args[1], args::int(args[2])?)
}

fn decrby(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let delta = args::int(args[2])?;
    let neg = delta
        .checked_neg()
        .ok_or_else(|| CmdError::new("ERR decrement would overflow"))?;
    incr_by(ctx, args[1], neg)
}

/// Formats a float result as Redis's INCRBYFLOAT does: plain decimal, no exponent, no
/// trailing zeros.
pub fn human_float(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e17 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn incrbyfloat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let delta = args::float(args[2])?;
    let current = match ctx.db.get(args[1]) {
        None => 0.0,
        Some(e) => {
            let bytes = string_bytes(&e.value)?;
            args::parse_float(&bytes).ok_or(CmdError::NotFloat)?
        }
    };
    let next = current + delta;
    if !next.is_finite() {
        return err("ERR increment would produce NaN or Infinity");
    }
    let text = human_float(next);
    ctx.db
        .set_keep_ttl(args[1], Value::Str(text.as_bytes().into()));
    ctx.replicate(|| WriteEffect::NewValue(text.as_bytes().to_vec()));
    ctx.modified(args[1]);
    ctx.reply.bulk(text.as_bytes());
    Ok(())
}

fn getrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let start = args::int(args[2])?;
    let end = args::int(args[3])?;
    let bytes = match ctx.db.get(args[1]) {
        None => Vec::new(),
        Some(e) => string_bytes(&e.value)?,
    };
    let len = bytes.len() as i64;
    if len == 0 || (start < 0 && end < 0 && start > end) {
        ctx.reply.bulk(b"");
        return Ok(());
    }
    let clamp = |i: i64| if i < 0 { (len + i).max(0) } else { i };
    let (s, e) = (clamp(start), clamp(end).min(len - 1));
    if s > e || s >= len {
        ctx.reply.bulk(b"");
    } else {
        ctx.reply.bulk(&bytes[s as usize..=e as usize]);
    }
    Ok(())
}

fn setrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let offset = args::int(args[2])?;
    if offset < 0 {
        return err("ERR offset is out of range");
    }
    let offset = offset as usize;
    let value = args[3];
    let max = max_string_len(ctx);
    let mut bytes = match ctx.db.get(args[1]) {
        None => {
            if value.is_empty() {
                ctx.reply.integer(0);
                return Ok(());
            }
            Vec::new()
        }
        Some(e) => string_bytes(&e.value)?,
    };
    if value.is_empty() {
        ctx.reply.integer(bytes.len() as i64);
        return Ok(());
    }
    if offset.saturating_add(value.len()) > max {
        return Err(too_big());
    }
    if bytes.len() < offset + value.len() {
        bytes.resize(offset + value.len(), 0);
    }
    bytes[offset..offset + value.len()].copy_from_slice(value);
    let len = bytes.len();
    ctx.db
        .set_edited_keep_ttl(args[1], Value::Str(bytes.into_boxed_slice()));
    ctx.modified(args[1]);
    ctx.reply.integer(len as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_formatting_matches_incrbyfloat() {
        assert_eq!(human_float(10.5), "10.5");
        assert_eq!(human_float(3.0e3), "3000");
        assert_eq!(human_float(-0.1), "-0.1");
    }
}
