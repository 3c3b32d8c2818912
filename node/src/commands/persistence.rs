//! Persistence: SAVE BGSAVE LASTSAVE, and DUMP RESTORE (one value as a payload in the
//! snapshot format, with Redis's payload layout and error texts).

use crate::command::args::{self, is};
use crate::command::error::err;
use crate::command::spec::{command, flags::*, KeySpec, KEY1};
use crate::command::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::db::{Entry, Value};
use crate::persistence::{self, dump, SaveError};

pub static COMMANDS: &[CommandSpec] = &[
    command(
        "save",
        1,
        ADMIN | NOSCRIPT | NO_MULTI,
        KeySpec::None,
        save,
        "server",
        "Synchronously saves the database(s) to disk.",
    ),
    command(
        "bgsave",
        -1,
        ADMIN | NOSCRIPT,
        KeySpec::None,
        bgsave,
        "server",
        "Asynchronously saves the database(s) to disk.",
    ),
    command(
        "lastsave",
        1,
        LOADING | STALE | FAST,
        KeySpec::None,
        lastsave,
        "server",
        "Returns the Unix timestamp of the last successful save to disk.",
    ),
    CommandSpec {
        since: "2.6.0",
        ..command(
            "dump",
            2,
            READONLY,
            KEY1,
            dump,
            "generic",
            "Returns a serialized representation of the value stored at a key.",
        )
    },
    CommandSpec {
        since: "2.6.0",
        ..command(
            "restore",
            -4,
            WRITE | DENYOOM,
            KEY1,
            restore,
            "generic",
            "Creates a key from the serialized representation of a value.",
        )
    },
];

const IN_PROGRESS: &str = "ERR Background save already in progress";

/// SAVE: waits for the save, on this connection's thread.
fn save(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    match persistence::save(ctx.server) {
        Ok(_) => ctx.reply.ok(),
        Err(SaveError::InProgress) => return err(IN_PROGRESS),
        // Redis answers a bare "ERR"; the reason is in the log.
        Err(_) => return err("ERR"),
    }
    Ok(())
}

/// BGSAVE [SCHEDULE]
fn bgsave(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    // SCHEDULE matters in Redis when another child process (AOF rewrite) blocks a fork;
    // there is no such conflict here, so it only has to be accepted.
    match args {
        [_] => {}
        [_, opt] if is(opt, "schedule") => {}
        _ => return Err(CmdError::Syntax),
    }
    let state = &ctx.server.snapshot;
    if state.in_progress().is_some() {
        return err(IN_PROGRESS);
    }
    if ctx.in_exec {
        // As Redis: inside a transaction the save is left to the cron.
        state.schedule();
        ctx.reply.simple(b"Background saving scheduled");
        return Ok(());
    }
    match persistence::bgsave(ctx.server) {
        Ok(()) => ctx.reply.simple(b"Background saving started"),
        Err(SaveError::InProgress) => return err(IN_PROGRESS),
        Err(_) => return err("ERR"),
    }
    Ok(())
}

fn lastsave(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let at = ctx.server.snapshot.last_save_unix();
    ctx.reply.integer(at as i64);
    Ok(())
}

/// DUMP key: the payload, or nil for a missing key.
fn dump(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    match db.get(args[1]) {
        None => reply.null(),
        Some(entry) => reply.bulk(&dump::payload(&entry.value)),
    }
    Ok(())
}

#[derive(Default)]
struct RestoreOptions {
    replace: bool,
    absttl: bool,
    idle_secs: Option<i64>,
    freq: Option<i64>,
}

/// The options after the payload, with Redis's rules: IDLETIME and FREQ exclude each other.
fn restore_options(args: &[&[u8]]) -> Result<RestoreOptions, CmdError> {
    let mut o = RestoreOptions::default();
    let mut i = 4;
    while i < args.len() {
        let a = args[i];
        let next = args.get(i + 1);
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
            if !(0..=255).contains(&freq) {
                return err("ERR Invalid FREQ value, must be >= 0 and <= 255");
            }
            o.freq = Some(freq);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
fn restore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    // Redis's order of checks, which decides which error a bad call gets.
    let o = restore_options(args)?;
    if !o.replace && ctx.db.exists(key) {
        return err("BUSYKEY Target key name already exists.");
    }
    let ttl = args::int(args[2])?;
    if ttl < 0 {
        return err("ERR Invalid TTL value, must be >= 0");
    }
    let value = match dump::value(args[3]) {
        Ok(v) => v,
        Err(dump::PayloadError::VersionOrChecksum) => {
            return err("ERR DUMP payload version or checksum are wrong")
        }
        Err(dump::PayloadError::BadData(_)) => return err("ERR Bad data format"),
    };
    let now = ctx.db.now;
    let expires_at = match (ttl, o.absttl) {
        (0, _) => 0,
        (t, true) => t as u64,
        (t, false) => now.saturating_add(t as u64),
    };
    let deleted = o.replace && ctx.db.remove(key).is_some();
    if expires_at != 0 && expires_at <= now {
        // Already expired: the key is not created (and a replaced one stays deleted).
        if deleted {
            ctx.modified(key);
        }
        ctx.reply.ok();
        return Ok(());
    }
    let wakes = matches!(value, Value::List(_) | Value::ZSet(_));
    let mut entry = Entry::new(value, ctx.db.lru_clock);
    entry.expires_at = expires_at;
    if let Some(idle) = o.idle_secs {
        entry.lru = ctx
            .db
            .lru_clock
            .saturating_sub(u32::try_from(idle).unwrap_or(u32::MAX));
    }
    if let Some(freq) = o.freq {
        entry.freq = freq as u8;
    }
    ctx.db.insert(key, entry);
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
        let mut args: Vec<&[u8]> = vec![b"restore", b"k", b"0", b"payload"];
        args.extend(extra.iter().map(|s| s.as_bytes()));
        restore_options(&args)
    }

    #[test]
    fn restore_options_follow_redis() {
        let o = opts(&["REPLACE", "absttl", "IDLETIME", "10"]).unwrap();
        assert!(o.replace && o.absttl && o.idle_secs == Some(10));
        assert_eq!(opts(&["FREQ", "7"]).unwrap().freq, Some(7));
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
        assert_eq!(
            opts(&["FREQ", "256"]).err().unwrap().to_string(),
            "ERR Invalid FREQ value, must be >= 0 and <= 255"
        );
    }
}
