//! RESTORE and RESTORE-ASKING: `key ttl serialized-value [REPLACE] [ABSTTL]
//! [IDLETIME seconds] [FREQ frequency]`. The payload is verified (version, CRC-64) before
//! it is decoded, and decoding is bounded by the payload's own size (`snapshot_format::format`);
//! the payload itself is one argument, so `proto-max-bulk-len` already caps it.

use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::{Access, Entry, Value};
use crate::replication::propagate::WriteEffect;
use crate::snapshot_format::dump;

#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct RestoreOptions {
    pub replace: bool,
    pub absttl: bool,
    pub idle_secs: Option<i64>,
    pub freq: Option<u8>,
}

impl RestoreOptions {
    /// The options after the payload (`args[4..]`), with Redis's rules: IDLETIME and FREQ
    /// exclude each other (the second one is a syntax error).
    pub fn parse(options: &[&[u8]]) -> Result<RestoreOptions, CmdError> {
        let mut o = RestoreOptions::default();
        let mut i = 0;
        while i < options.len() {
            let a = options[i];
            let next = options.get(i + 1);
            if is(a, "replace") {
                o.replace = true;
            } else if is(a, "absttl") {
                o.absttl = true;
            } else if let (true, Some(v), None) = (is(a, "idletime"), next, o.freq) {
                let idle = args::int(v)?;
                if idle < 0 {
                    return err("ERR Invalid IDLETIME value, must be >= 0");
                }
                o.idle_secs = Some(idle);
                i += 1;
            } else if let (true, Some(v), None) = (is(a, "freq"), next, o.idle_secs) {
                let freq = args::int(v)?;
                let Ok(freq) = u8::try_from(freq) else {
                    return err("ERR Invalid FREQ value, must be >= 0 and <= 255");
                };
                o.freq = Some(freq);
                i += 1;
            } else {
                return Err(CmdError::Syntax);
            }
            i += 1;
        }
        Ok(o)
    }
}

/// The absolute expiry a RESTORE's `ttl` names: 0 for none, else unix ms.
fn expires_at(ttl: i64, absttl: bool, now: u64) -> u64 {
    match (ttl, absttl) {
        (0, _) => 0,
        (t, true) => t as u64,
        (t, false) => now.saturating_add(t as u64),
    }
}

/// RESTORE key ttl payload [options]; RESTORE-ASKING is the same command, flagged `asking`
/// for cluster routing.
pub(super) fn restore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    // Redis's order of checks, which decides which error a bad call gets.
    let o = RestoreOptions::parse(&args[4..])?;
    if !o.replace && ctx.db.exists(key) {
        return err("BUSYKEY Target key name already exists.");
    }
    let ttl = args::int(args[2])?;
    if ttl < 0 {
        return err("ERR Invalid TTL value, must be >= 0");
    }
    let value = match dump::value(args[3], ctx.server.hot.packing()) {
        Ok(v) => v,
        Err(dump::PayloadError::VersionOrChecksum) => {
            return err("ERR DUMP payload version or checksum are wrong")
        }
        Err(dump::PayloadError::BadData(_) | dump::PayloadError::BadRdb(_)) => {
            return err("ERR Bad data format")
        }
    };
    let now = ctx.db.now;
    let expires_at = expires_at(ttl, o.absttl, now);
    let deleted = o.replace && ctx.db.remove(key).is_some();
    if expires_at != 0 && expires_at <= now {
        // Already expired: the key is not created (and a replaced one stays deleted).
        if deleted {
            ctx.replicate(|| WriteEffect::KeyDeleted);
            ctx.modified(key);
        }
        ctx.reply.ok();
        return Ok(());
    }
    let wakes = matches!(value, Value::List(_) | Value::ZSet(_) | Value::Stream(_));
    let mut entry = Entry::new(value);
    entry.expires_at = expires_at;
    let mut access = Access::fresh(ctx.db.lru_clock);
    // Under an LFU policy the entry's access stamp is the LFU counter's decay base: IDLETIME
    // does not apply there, as in Redis (FREQ applies under any policy, it is read only
    // under LFU).
    if let (Some(idle), false) = (o.idle_secs, ctx.server.hot.policy().is_lfu()) {
        access.lru = ctx
            .db
            .lru_clock
            .saturating_sub(u32::try_from(idle).unwrap_or(u32::MAX));
    }
    if let Some(freq) = o.freq {
        access.freq = freq;
    }
    ctx.db.insert_with_access(key, entry, access);
    if expires_at != 0 {
        ctx.replicate(|| WriteEffect::ExpiresAtMs(expires_at));
    }
    ctx.modified(key);
    if wakes {
        ctx.signal_ready(key);
    }
    ctx.reply.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(extra: &[&str]) -> Result<RestoreOptions, CmdError> {
        let args: Vec<&[u8]> = extra.iter().map(|s| s.as_bytes()).collect();
        RestoreOptions::parse(&args)
    }

    #[test]
    fn restore_options_follow_redis() {
        let o = opts(&["REPLACE", "absttl", "IDLETIME", "10"]).unwrap();
        assert!(o.replace && o.absttl && o.idle_secs == Some(10));
        assert_eq!(opts(&["FREQ", "7"]).unwrap().freq, Some(7));
        assert_eq!(opts(&["FREQ", "255"]).unwrap().freq, Some(255));
        assert_eq!(opts(&[]).unwrap(), RestoreOptions::default());
        assert_eq!(
            opts(&["IDLETIME", "1", "FREQ", "1"]).err(),
            Some(CmdError::Syntax)
        );
        assert_eq!(
            opts(&["FREQ", "1", "IDLETIME", "1"]).err(),
            Some(CmdError::Syntax)
        );
        assert_eq!(opts(&["IDLETIME"]).err(), Some(CmdError::Syntax));
        assert_eq!(opts(&["bogus"]).err(), Some(CmdError::Syntax));
        assert_eq!(opts(&["IDLETIME", "x"]).err(), Some(CmdError::NotInteger));
        assert_eq!(
            opts(&["IDLETIME", "-1"]).err().unwrap().to_string(),
            "ERR Invalid IDLETIME value, must be >= 0"
        );
        for bad in ["256", "-1"] {
            assert_eq!(
                opts(&["FREQ", bad]).err().unwrap().to_string(),
                "ERR Invalid FREQ value, must be >= 0 and <= 255"
            );
        }
    }

    #[test]
    fn ttl_is_relative_unless_absttl() {
        assert_eq!(expires_at(0, false, 1_000), 0);
        assert_eq!(expires_at(0, true, 1_000), 0);
        assert_eq!(expires_at(500, false, 1_000), 1_500);
        assert_eq!(expires_at(500, true, 1_000), 500);
        assert_eq!(expires_at(i64::MAX, false, 1_000), i64::MAX as u64 + 1_000);
    }
}
