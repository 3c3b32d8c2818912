//! Server commands: DBSIZE FLUSHDB FLUSHALL TIME SHUTDOWN and CONFIG (`config.rs`).

mod config;

use crate::command_framework::args::is;
use crate::command_framework::ctx::{BlockRequest, TimeoutReply, SHUTDOWN_FAILED_ERROR};
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::db::SHARD_COUNT;
use crate::node_state::shutdown::ShutdownMode;
use std::sync::mpsc::TryRecvError;

const SERVER: &str = "server";

pub static COMMANDS: &[CommandSpec] = &[
    command(
        "dbsize",
        1,
        READONLY | FAST,
        KeySpec::None,
        dbsize,
        SERVER,
        "Returns the number of keys in the database.",
    ),
    command(
        "flushdb",
        -1,
        WRITE | ALL_KEYS,
        KeySpec::None,
        flushdb,
        SERVER,
        "Remove all keys from the current database.",
    ),
    command(
        "flushall",
        -1,
        WRITE | ALL_KEYS,
        KeySpec::None,
        flushall,
        SERVER,
        "Removes all keys from all databases.",
    ),
    CommandSpec {
        since: "2.6.0",
        ..command(
            "time",
            1,
            LOADING | STALE | FAST,
            KeySpec::None,
            time,
            SERVER,
            "Returns the server time.",
        )
    },
    command(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI,
        KeySpec::None,
        shutdown,
        SERVER,
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
    ),
    CommandSpec {
        since: "2.0.0",
        subcommands: config::SUBCOMMANDS,
        ..command(
            "config",
            -2,
            0,
            KeySpec::None,
            config::container,
            SERVER,
            "A container for server configuration commands.",
        )
    },
];

/// Keys in the node, and those with a TTL: each shard's count, one shard locked at a time,
/// less the keys of slots being imported (hidden until they are this node's).
pub fn key_counts(ctx: &mut Ctx<'_>) -> (usize, usize) {
    let (mut keys, mut volatile) = (0, 0);
    let hidden = ctx.db.keyspace().hidden();
    for shard in 0..SHARD_COUNT {
        let (k, v) = ctx.db.with_shard(shard, |s| s.visible_counts(hidden));
        keys += k;
        volatile += v;
    }
    (keys, volatile)
}

/// [`key_counts`] of every database ever used, in ascending order. Another database than
/// the client's is counted a shard at a time; inside EXEC (which holds the client's
/// database) its busy shards are passed by rather than waited for, since its holder may
/// wait for the EXEC's.
pub fn key_counts_per_db(ctx: &mut Ctx<'_>) -> Vec<(usize, (usize, usize))> {
    let mine = ctx.db.db_index();
    let holding = ctx.db.holds_all();
    let mut out = Vec::new();
    for keyspace in ctx.server.dbs().iter() {
        let counts = if keyspace.index() == mine {
            key_counts(ctx)
        } else if holding {
            keyspace.visible_counts_unheld()
        } else {
            keyspace.visible_counts()
        };
        out.push((keyspace.index(), counts));
    }
    out
}

fn dbsize(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let (keys, _) = key_counts(ctx);
    ctx.reply.integer(keys as i64);
    Ok(())
}

/// FLUSHDB/FLUSHALL accept ASYNC or SYNC; memory is freed in place either way.
fn flush_mode_ok(args: &[&[u8]]) -> CmdResult {
    match args {
        [_] => Ok(()),
        [_, mode] if is(mode, "async") || is(mode, "sync") => Ok(()),
        _ => Err(CmdError::Syntax),
    }
}

fn flush(ctx: &mut Ctx<'_>, args: &[&[u8]], every_db: bool) -> Result<u64, CmdError> {
    flush_mode_ok(args)?;
    debug_assert!(ctx.db.holds_all(), "FLUSH* is declared ALL_KEYS");
    if every_db && ctx.server.multi_db() {
        // Every database at once, again if one was created meanwhile: a write to it could
        // otherwise reach the stream before the FLUSHALL that the primary ran after it.
        loop {
            let listed: Vec<usize> = ctx.server.dbs().iter().map(|k| k.index()).collect();
            ctx.hold_dbs(&listed, None)?;
            if ctx.server.dbs().iter().count() == listed.len() {
                break;
            }
        }
    }
    // Only the watches of keys the flush deletes fail their EXEC, as in Redis: a watched
    // key that is absent (or already expired: EXEC checks those) stays as it was.
    if ctx.server.watches.active() {
        let views: Vec<&crate::db::Locked<'_>> =
            std::iter::once(&ctx.db).chain(ctx.held.iter()).collect();
        ctx.server.watches.touch_where(|db, key| {
            views
                .iter()
                .any(|v| v.db_index() == db && v.get_shared(key).is_some())
        });
    }
    let mut removed = ctx.db.clear_held() as u64;
    for other in ctx.held.iter_mut() {
        removed += other.clear_held() as u64;
    }
    // Every tracking client is told that everything changed (a null invalidation), even
    // when nothing was there, as Redis does.
    ctx.server.tracking.flushed(&ctx.server.clients);
    // Clients blocked on a stream group learn that their key is gone (Redis answers them
    // an error); the others look again and keep waiting.
    if removed > 0 && ctx.server.blocking.active() {
        ctx.server.blocking.wake_all();
    }
    Ok(removed)
}

fn flushdb(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let removed = flush(ctx, args, false)?;
    ctx.effects.dirty += removed;
    ctx.reply.ok();
    Ok(())
}

fn flushall(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let removed = flush(ctx, args, true)?;
    // Redis counts FLUSHALL itself as a change on top of the keys it removed.
    ctx.effects.dirty += removed + 1;
    ctx.reply.ok();
    Ok(())
}

fn time(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut buf = itoa::Buffer::new();
    ctx.reply.array(2);
    ctx.reply.bulk(buf.format(now.as_secs()).as_bytes());
    ctx.reply.bulk(buf.format(now.subsec_micros()).as_bytes());
    Ok(())
}

/// The mode SHUTDOWN's options ask for (NOW and FORCE are read by [`shutdown`]).
fn shutdown_mode(options: &[&[u8]]) -> Result<ShutdownMode, CmdError> {
    let (mut save, mut nosave, mut abort) = (false, false, false);
    for o in options {
        if is(o, "nosave") {
            nosave = true;
        } else if is(o, "save") {
            save = true;
        } else if is(o, "abort") {
            abort = true;
        } else if !(is(o, "now") || is(o, "force")) {
            return Err(CmdError::Syntax);
        }
    }
    if (save && nosave) || (abort && options.len() > 1) {
        return Err(CmdError::Syntax);
    }
    if abort {
        // Shutdown starts the moment it is asked for: there is never one to abort.
        return err("ERR No shutdown in progress.");
    }
    Ok(if nosave {
        ShutdownMode::NoSave
    } else if save {
        ShutdownMode::Save
    } else {
        ShutdownMode::Default
    })
}

/// SHUTDOWN answers nothing when it succeeds: the connection closes as the node stops.
/// Without NOW the replicas get the last writes first (as Redis 7), on a thread of its own
/// that also makes the final save: the client parks until it is done.
fn shutdown(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.client.pending_shutdown.is_some() {
        return shutdown_outcome(ctx, args);
    }
    let mode = shutdown_mode(&args[1..])?;
    let option = |name: &str| args[1..].iter().any(|a| is(a, name));
    tracing::info!(client = ctx.client.id(), ?mode, "SHUTDOWN requested");
    if mode == ShutdownMode::NoSave && script_busy(ctx) {
        // A script past busy-reply-threshold holds every shard: an orderly stop would wait
        // for it. SHUTDOWN NOSAVE is the way out Redis offers then, and it exits at once.
        tracing::warn!("SHUTDOWN NOSAVE while a script is busy: exiting now");
        std::process::exit(0);
    }
    if !option("now") {
        let outcome = ctx
            .services
            .shutdown()
            .start(mode, option("force"), ctx.client.shared.clone())
            .map_err(|e| CmdError::new(format!("ERR {e}")))?;
        ctx.client.pending_shutdown = Some(outcome);
        park_shutdown(ctx, args);
        return Ok(());
    }
    // The final save happens here, so that a failure can keep the node up as Redis does
    // (unless FORCE says to go anyway).
    if let Err(e) = ctx.services.persistence().prepare_shutdown(mode) {
        tracing::error!(error = %e, "final save before SHUTDOWN failed");
        if !option("force") {
            return err(SHUTDOWN_FAILED_ERROR);
        }
    }
    ctx.server.shutdown.trigger(mode);
    ctx.effects.close = true;
    Ok(())
}

fn script_busy(ctx: &Ctx<'_>) -> bool {
    let threshold = ctx
        .server
        .hot
        .busy_reply_threshold_ms
        .load(std::sync::atomic::Ordering::Relaxed);
    ctx.server
        .running_script
        .busy(crate::clock::unix_millis(), threshold)
}

/// The parked SHUTDOWN, run again when its thread woke it (or by any other wake-up).
fn shutdown_outcome(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let outcome = match ctx.client.pending_shutdown.as_ref().map(|o| o.try_recv()) {
        Some(Err(TryRecvError::Empty)) => {
            park_shutdown(ctx, args);
            return Ok(());
        }
        Some(Ok(outcome)) => outcome,
        Some(Err(TryRecvError::Disconnected)) | None => Err(SHUTDOWN_FAILED_ERROR.to_string()),
    };
    ctx.client.pending_shutdown = None;
    match outcome {
        Ok(()) => {
            ctx.effects.close = true;
            Ok(())
        }
        Err(text) => err(text),
    }
}

fn park_shutdown(ctx: &mut Ctx<'_>, args: &[&[u8]]) {
    ctx.effects.block = Some(BlockRequest {
        keys: Vec::new(),
        timeout: None,
        retry: args.iter().map(|a| a.to_vec()).collect(),
        timeout_reply: TimeoutReply::Shutdown,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(words: &[&str]) -> Result<ShutdownMode, String> {
        let a: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        shutdown_mode(&a).map_err(|e| e.to_string())
    }

    #[test]
    fn shutdown_options() {
        assert_eq!(mode(&[]).unwrap(), ShutdownMode::Default);
        assert_eq!(mode(&["NOSAVE", "now"]).unwrap(), ShutdownMode::NoSave);
        assert_eq!(mode(&["save", "force"]).unwrap(), ShutdownMode::Save);
        assert_eq!(mode(&["nosave", "save"]).unwrap_err(), "ERR syntax error");
        assert_eq!(mode(&["foo"]).unwrap_err(), "ERR syntax error");
        assert_eq!(mode(&["abort", "now"]).unwrap_err(), "ERR syntax error");
        assert_eq!(
            mode(&["abort"]).unwrap_err(),
            "ERR No shutdown in progress."
        );
    }

    #[test]
    fn flush_modes() {
        assert!(flush_mode_ok(&[b"flushall"]).is_ok());
        assert!(flush_mode_ok(&[b"flushall", b"ASYNC"]).is_ok());
        assert!(flush_mode_ok(&[b"flushall", b"sync"]).is_ok());
        assert!(flush_mode_ok(&[b"flushall", b"foo"]).is_err());
        assert!(flush_mode_ok(&[b"flushall", b"sync", b"async"]).is_err());
    }
}
