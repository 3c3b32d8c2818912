//! Time to live: EXPIRE PEXPIRE EXPIREAT PEXPIREAT (with Redis 7.0's NX XX GT LT), TTL PTTL
//! EXPIRETIME PEXPIRETIME PERSIST.

use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::replication::propagate::WriteEffect;

/// Which keys an EXPIRE may change, by their current TTL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Condition {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl Condition {
    fn parse(options: &[&[u8]]) -> Result<Condition, CmdError> {
        let mut c = Condition::default();
        for o in options {
            if is(o, "nx") {
                c.nx = true;
            } else if is(o, "xx") {
                c.xx = true;
            } else if is(o, "gt") {
                c.gt = true;
            } else if is(o, "lt") {
                c.lt = true;
            } else {
                return err(format!("ERR Unsupported option {}", args::text(o)));
            }
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return err("ERR NX and XX, GT or LT options at the same time are not compatible");
        }
        if c.gt && c.lt {
            return err("ERR GT and LT options at the same time are not compatible");
        }
        Ok(c)
    }

    /// Whether a key whose expiry is `current` (None: no TTL) may get expiry `when`. A key
    /// without TTL counts as expiring never: GT never passes, LT always does.
    fn allows(self, current: Option<i64>, when: i64) -> bool {
        match current {
            None => !(self.xx || self.gt),
            Some(at) => !(self.nx || (self.gt && when <= at) || (self.lt && when >= at)),
        }
    }
}

/// The absolute expiry, in ms, that `amount` (in `unit_ms`, added to `base` ms) names, or the
/// Redis error when it overflows. Negative and past times are valid: they delete the key.
fn absolute_ms(amount: i64, unit_ms: i64, base: i64, command: &str) -> Result<i64, CmdError> {
    let invalid = || CmdError::new(format!("ERR invalid expire time in '{command}' command"));
    let ms = amount.checked_mul(unit_ms).ok_or_else(invalid)?;
    ms.checked_add(base).ok_or_else(invalid)
}

fn expire_generic(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    unit_ms: i64,
    relative: bool,
    name: &str,
) -> CmdResult {
    let condition = Condition::parse(&args[3..])?;
    let amount = args::int(args[2])?;
    let now = ctx.db.now as i64;
    let when = absolute_ms(amount, unit_ms, if relative { now } else { 0 }, name)?;
    let key = args[1];
    let Some(entry) = ctx.db.get(key) else {
        ctx.reply.integer(0);
        return Ok(());
    };
    let current = (entry.expires_at != 0).then_some(entry.expires_at as i64);
    if !condition.allows(current, when) {
        ctx.reply.integer(0);
        return Ok(());
    }
    if when <= now {
        ctx.db.remove(key);
        ctx.replicate(|| WriteEffect::KeyDeleted);
    } else {
        ctx.db.set_expiry(key, when as u64);
        ctx.replicate(|| WriteEffect::ExpiresAtMs(when as u64));
    }
    ctx.modified(key);
    ctx.reply.integer(1);
    Ok(())
}

pub fn expire(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, 1000, true, "expire")
}

pub fn pexpire(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, 1, true, "pexpire")
}

pub fn expireat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, 1000, false, "expireat")
}

pub fn pexpireat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, 1, false, "pexpireat")
}

/// What the TTL family reports for a key.
enum Ttl {
    Missing,
    Persistent,
    At(u64),
}

fn ttl_of(ctx: &mut Ctx<'_>, key: &[u8]) -> Ttl {
    match ctx.db.peek(key) {
        None => Ttl::Missing,
        Some(e) if e.expires_at == 0 => Ttl::Persistent,
        Some(e) => Ttl::At(e.expires_at),
    }
}

/// Replies -2 (no key), -1 (no TTL) or `f(expires_at)`.
fn reply_ttl(ctx: &mut Ctx<'_>, key: &[u8], f: impl FnOnce(u64, u64) -> i64) -> CmdResult {
    let v = match ttl_of(ctx, key) {
        Ttl::Missing => -2,
        Ttl::Persistent => -1,
        Ttl::At(at) => f(at, ctx.db.now),
    };
    ctx.reply.integer(v);
    Ok(())
}

/// Remaining ms, at least 0 (a key due this very ms is still there until deleted).
fn remaining_ms(at: u64, now: u64) -> i64 {
    at.saturating_sub(now).min(i64::MAX as u64) as i64
}

pub fn ttl(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    // Rounded to the nearest second, as Redis does.
    reply_ttl(ctx, args[1], |at, now| (remaining_ms(at, now) + 500) / 1000)
}

pub fn pttl(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_ttl(ctx, args[1], remaining_ms)
}

pub fn expiretime(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_ttl(ctx, args[1], |at, _| {
        (at / 1000).min(i64::MAX as u64) as i64
    })
}

pub fn pexpiretime(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    reply_ttl(ctx, args[1], |at, _| at.min(i64::MAX as u64) as i64)
}

pub fn persist(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let has_ttl = ctx.db.get(key).is_some_and(|e| e.expires_at != 0);
    if has_ttl {
        ctx.db.set_expiry(key, 0);
        ctx.modified(key);
    }
    ctx.reply.integer(has_ttl as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Result<Condition, String> {
        let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        Condition::parse(&args).map_err(|e| e.to_string())
    }

    #[test]
    fn options_and_their_conflicts() {
        assert_eq!(parse(&[]).unwrap(), Condition::default());
        assert!(parse(&["nx"]).unwrap().nx);
        assert!(parse(&["XX", "gt"]).is_ok());
        assert_eq!(
            parse(&["nx", "xx"]).unwrap_err(),
            "ERR NX and XX, GT or LT options at the same time are not compatible"
        );
        assert_eq!(
            parse(&["gt", "lt"]).unwrap_err(),
            "ERR GT and LT options at the same time are not compatible"
        );
        assert_eq!(parse(&["foo"]).unwrap_err(), "ERR Unsupported option foo");
    }

    #[test]
    fn conditions_against_current_ttl() {
        let c = |w: &[&str]| parse(w).unwrap();
        assert!(c(&[]).allows(None, 5) && c(&[]).allows(Some(1), 5));
        assert!(c(&["nx"]).allows(None, 5) && !c(&["nx"]).allows(Some(1), 5));
        assert!(!c(&["xx"]).allows(None, 5) && c(&["xx"]).allows(Some(1), 5));
        assert!(!c(&["gt"]).allows(None, 5));
        assert!(c(&["gt"]).allows(Some(4), 5) && !c(&["gt"]).allows(Some(5), 5));
        assert!(c(&["lt"]).allows(None, 5));
        assert!(c(&["lt"]).allows(Some(6), 5) && !c(&["lt"]).allows(Some(5), 5));
    }

    #[test]
    fn overflow_is_an_invalid_expire_time() {
        assert_eq!(absolute_ms(5, 1000, 10, "expire").unwrap(), 5010);
        assert_eq!(absolute_ms(-5, 1000, 0, "expireat").unwrap(), -5000);
        assert_eq!(
            absolute_ms(i64::MAX, 1000, 0, "expire")
                .unwrap_err()
                .to_string(),
            "ERR invalid expire time in 'expire' command"
        );
        assert!(absolute_ms(i64::MAX, 1, 1, "pexpire").is_err());
        assert_eq!(absolute_ms(i64::MAX, 1, 0, "pexpireat").unwrap(), i64::MAX);
    }
}
