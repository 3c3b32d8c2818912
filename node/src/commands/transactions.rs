//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH, with Redis 7.0's rules.
//!
//! The dispatcher queues the commands sent after MULTI (answering `+QUEUED`) and dooms the
//! transaction when one is refused; MULTI, EXEC, DISCARD and WATCH run at once (TXN_CONTROL).
//! EXEC locks every shard (ALL_KEYS), so the queued commands run as one atomic step: each
//! through the dispatcher's `run_in`, in EXEC's own context, so their writes, wake-ups of
//! blocked clients and WATCH invalidations are acted on when EXEC returns.
//!
//! EXEC refuses to run, answering a null array, if a watched key changed since WATCH (a
//! writer sets the watch's dirty flag) or if a watched key that existed then has expired.

use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec, ALL_ARGS_KEYS};
use crate::command_framework::{acl_check, dispatch, transaction};
use crate::command_framework::{CmdResult, CommandSpec, Ctx};
use crate::db::Locked;
use crate::node_state::client::MultiState;
use crate::node_state::stats::LocalStats;
use crate::node_state::watch::{WatchHandle, MAX_WATCHED_KEYS_PER_CLIENT};
use crate::node_state::{Client, NodeState};
use smallvec::SmallVec;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

const TXN: u32 = NOSCRIPT | LOADING | STALE;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "1.2.0",
        ..command(
            "multi",
            1,
            TXN | FAST | TXN_CONTROL,
            KeySpec::None,
            multi,
            "transactions",
            "Starts a transaction.",
        )
    },
    CommandSpec {
        since: "1.2.0",
        ..command(
            "exec",
            1,
            TXN | TXN_CONTROL | ALL_KEYS,
            KeySpec::None,
            exec,
            "transactions",
            "Executes all commands in a transaction.",
        )
    },
    CommandSpec {
        since: "2.0.0",
        ..command(
            "discard",
            1,
            TXN | FAST | TXN_CONTROL,
            KeySpec::None,
            discard,
            "transactions",
            "Discards a transaction.",
        )
    },
    // Not NO_MULTI: inside MULTI, Redis 7.0 answers WATCH with its own error and does not
    // doom the transaction.
    CommandSpec {
        since: "2.2.0",
        ..command(
            "watch",
            -2,
            TXN | FAST | TXN_CONTROL,
            ALL_ARGS_KEYS,
            watch,
            "transactions",
            "Monitors changes to keys to determine the execution of a transaction.",
        )
    },
    // Not TXN_CONTROL: Redis queues UNWATCH inside MULTI like any command.
    CommandSpec {
        since: "2.2.0",
        ..command(
            "unwatch",
            1,
            TXN | FAST,
            KeySpec::None,
            unwatch,
            "transactions",
            "Forgets about watched keys of a transaction.",
        )
    },
];

fn multi(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    if ctx.client.multi.is_some() {
        // An error reply only: the transaction being queued goes on.
        return err("ERR MULTI calls can not be nested");
    }
    ctx.client.multi = Some(MultiState::default());
    ctx.client.shared.in_multi.store(true, Relaxed);
    ctx.reply.ok();
    Ok(())
}

fn discard(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    if ctx.client.multi.is_none() {
        return err("ERR DISCARD without MULTI");
    }
    transaction::discard(ctx.server, ctx.client);
    ctx.reply.ok();
    Ok(())
}

fn unwatch_all(server: &NodeState, client: &mut Client) {
    if let Some(handle) = client.watch.take() {
        server.watches.unwatch_all(handle);
    }
}

fn watch(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return err("ERR WATCH inside MULTI is not allowed");
    }
    let handle = ctx.client.watch.get_or_insert_with(WatchHandle::default);
    for key in &args[1..] {
        // The shards of the keys are locked: no write can slip between this look and the
        // registration, which every later write to the key will see.
        let live = ctx.db.exists(key);
        let db = ctx.db.db_index();
        if !ctx.server.watches.watch(handle, db, key, live) {
            return err(format!(
                "ERR too many watched keys: a client may watch at most {MAX_WATCHED_KEYS_PER_CLIENT}"
            ));
        }
    }
    ctx.reply.ok();
    Ok(())
}

fn unwatch(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    unwatch_all(ctx.server, ctx.client);
    ctx.reply.ok();
    Ok(())
}

/// Whether a watch forbids EXEC: a watched key was written, or one that existed when watched
/// is gone now — it expired, which no writer reports (any other deletion sets `dirty`).
fn watch_broken(db: &mut Locked<'_>, handle: &WatchHandle) -> bool {
    // Only the keys of the database EXEC runs in can be looked at under its locks; those
    // of another (WATCH, then SELECT) count only their writes.
    let here = db.db_index();
    handle.is_dirty()
        || handle
            .live_when_watched
            .iter()
            .any(|(d, k)| *d == here && !db.exists(k))
}

fn exec(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let Some(multi) = ctx.client.multi.take() else {
        return err("ERR EXEC without MULTI");
    };
    ctx.client.shared.in_multi.store(false, Relaxed);
    // The databases the queued SELECTs name are taken now, with the client's, before the
    // watches are checked: SELECT then switches among held databases, and the
    // transaction's writes reach the stream as one MULTI/EXEC (Redis's propagation).
    let selected = selected_dbs(ctx, &multi.queued);
    if !selected.is_empty() {
        ctx.hold_dbs(&selected, None)?;
    }
    let broken = match &ctx.client.watch {
        Some(handle) => watch_broken(&mut ctx.db, handle),
        None => false,
    };
    // Unwatch before running: the transaction's own writes must not touch its watch.
    unwatch_all(ctx.server, ctx.client);
    if multi.errored {
        return err("EXECABORT Transaction discarded because of previous errors.");
    }
    if broken {
        ctx.reply.null_array();
        return Ok(());
    }
    ctx.reply.array(multi.queued.len());
    let mut stats = LocalStats::default();
    let outer = ctx.in_exec;
    ctx.in_exec = true;
    for queued in &multi.queued {
        let args: SmallVec<[&[u8]; 8]> = queued.iter().map(|a| a.as_slice()).collect();
        run_queued(ctx, &args, &mut stats);
    }
    ctx.in_exec = outer;
    stats.flush(&ctx.server.stats);
    Ok(())
}

/// The existing databases other than the client's that the queued SELECTs name (none in
/// cluster mode, where SELECT refuses all but 0).
fn selected_dbs(ctx: &Ctx<'_>, queued: &[Vec<Vec<u8>>]) -> SmallVec<[usize; 4]> {
    let mut dbs = SmallVec::new();
    if ctx.server.cluster.is_some() {
        return dbs;
    }
    let current = ctx.db.db_index();
    for args in queued {
        let [name, index] = args.as_slice() else {
            continue;
        };
        if !name.eq_ignore_ascii_case(b"select") {
            continue;
        }
        let index = std::str::from_utf8(index)
            .ok()
            .and_then(|i| i.parse::<usize>().ok());
        if let Some(i) = index.filter(|&i| i != current && ctx.server.db(i).is_some()) {
            if !dbs.contains(&i) {
                dbs.push(i);
            }
        }
    }
    dbs
}

/// Runs one queued command inside EXEC; its reply (or error) is one element of EXEC's array.
fn run_queued(ctx: &mut Ctx<'_>, args: &[&[u8]], stats: &mut LocalStats) {
    stats.commands += 1;
    // Checked when queued; looked up again because the queue holds only the arguments.
    let spec = match dispatch::resolve(args) {
        Ok(spec) => spec,
        Err(e) => {
            let text = e.to_string();
            stats.error_reply(&ctx.server.stats, &text);
            ctx.reply.error(&text);
            return;
        }
    };
    // The user's rules may have changed since the command was queued: EXEC checks again,
    // as Redis does, and refuses just that command.
    if !ctx.client.primary_link {
        let context = crate::node_state::acl::log::Context::Multi;
        if let Err(e) = acl_check::check(ctx.server, ctx.client, spec, args, context) {
            let text = e.to_string();
            stats.error_reply(&ctx.server.stats, &text);
            ctx.server.command_stats.record_rejected(spec);
            ctx.reply.error(&text);
            return;
        }
    }
    ctx.client.note_command(spec.name);
    let started = Instant::now();
    let failed = dispatch::run_in(ctx, spec, args, stats);
    // Blocking commands do not block inside EXEC (`in_exec`); should one still ask to, it
    // gets its timeout reply at once so that the array keeps one reply per command.
    if let Some(block) = ctx.effects.block.take() {
        block.timeout_reply.write(&mut ctx.reply);
    }
    let nanos = started.elapsed().as_nanos() as u64;
    ctx.server.command_stats.record(spec, nanos, failed);
    log_if_slow(ctx, args, nanos / 1000);
}

/// The slow log records the commands of a transaction one by one (never EXEC itself), as
/// Redis does.
fn log_if_slow(ctx: &Ctx<'_>, args: &[&[u8]], micros: u64) {
    let hot = &ctx.server.hot;
    let threshold = hot.slowlog_slower_than.load(Relaxed);
    if threshold == u64::MAX || micros < threshold {
        return;
    }
    let max_len = hot.slowlog_max_len.load(Relaxed) as usize;
    let shared = &ctx.client.shared;
    let name = shared.name.lock().clone().unwrap_or_default();
    ctx.server
        .slowlog
        .record(micros, args, shared.peer.to_string(), name, max_len);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command_framework::table;
    use crate::db::Keyspace;
    use crate::node_state::watch::Watches;
    use crate::server::Server;

    #[test]
    fn control_commands_run_immediately_and_unwatch_is_queued() {
        for name in ["multi", "exec", "discard", "watch"] {
            let spec = table::lookup(name.as_bytes()).unwrap();
            assert!(spec.has(TXN_CONTROL), "{name}");
            assert!(!spec.has(NO_MULTI), "{name}");
        }
        assert!(!table::lookup(b"unwatch").unwrap().has(TXN_CONTROL));
        assert!(table::lookup(b"EXEC").unwrap().has(ALL_KEYS));
    }

    #[test]
    fn a_watched_key_that_expired_breaks_the_watch() {
        let keyspace = Keyspace::new();
        let watches = Watches::default();
        let mut handle = WatchHandle::default();
        let mut db = Locked::lock_all(&keyspace, 1_000, 1);
        db.set(b"k", crate::db::Value::Int(1));
        db.set_expiry(b"k", 2_000);
        assert!(watches.watch(&mut handle, 0, b"k", db.exists(b"k")));
        assert!(watches.watch(&mut handle, 0, b"absent", db.exists(b"absent")));
        assert!(!watch_broken(&mut db, &handle));
        drop(db);
        let mut later = Locked::lock_all(&keyspace, 2_000, 2);
        assert!(watch_broken(&mut later, &handle), "k expired at 2000");
        drop(later);
        watches.unwatch_all(handle);
        assert!(!watches.active());
    }

    /// Runs one request through the dispatcher, as a connection does; returns the reply.
    fn request(server: &Server, client: &mut Client, args: &[&str]) -> String {
        let mut out = bytes::BytesMut::new();
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let mut stats = LocalStats::default();
        dispatch::execute(server, client, &mut out, &args, &mut stats);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn test_client(server: &Server) -> Client {
        let addr: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let shared = crate::node_state::ClientShared::new(server.clients.next_id(), addr, addr);
        Client::new(std::sync::Arc::new(shared), true)
    }

    #[test]
    fn exec_of_a_growing_transaction_is_refused_over_maxmemory() {
        crate::commands::install_table();
        let server = Server::new(crate::config::Config::default());
        let mut c = test_client(&server);
        assert_eq!(request(&server, &mut c, &["WATCH", "w"]), "+OK\r\n");
        assert_eq!(request(&server, &mut c, &["MULTI"]), "+OK\r\n");
        assert_eq!(request(&server, &mut c, &["SET", "k", "v"]), "+QUEUED\r\n");
        assert!(c.shared.in_multi.load(Relaxed));
        // Memory runs out between queueing and EXEC.
        server.hot.maxmemory.store(1, Relaxed);
        assert_eq!(
            request(&server, &mut c, &["EXEC"]),
            "-EXECABORT Transaction discarded because of: OOM command not allowed when used memory > 'maxmemory'.\r\n"
        );
        assert!(c.multi.is_none() && c.watch.is_none() && !c.shared.in_multi.load(Relaxed));
        assert!(
            !server.watches.active(),
            "the refused EXEC dropped the watch"
        );
        // A transaction of reads is not refused.
        assert_eq!(request(&server, &mut c, &["MULTI"]), "+OK\r\n");
        server.hot.maxmemory.store(0, Relaxed);
        assert_eq!(request(&server, &mut c, &["GET", "k"]), "+QUEUED\r\n");
        server.hot.maxmemory.store(1, Relaxed);
        assert_eq!(request(&server, &mut c, &["EXEC"]), "*1\r\n$-1\r\n");
    }

    #[test]
    fn the_queue_is_bounded_and_overflow_dooms_the_transaction() {
        use crate::node_state::client::MAX_QUEUED_COMMANDS;
        let mut multi = MultiState::default();
        for _ in 0..MAX_QUEUED_COMMANDS {
            multi.queue(&[b"ping"], false).unwrap();
        }
        assert!(!multi.errored);
        assert!(multi.queue(&[b"set", b"k", b"v"], true).is_err());
        assert!(multi.errored && !multi.denyoom);
        assert_eq!(multi.queued.len(), MAX_QUEUED_COMMANDS);
    }

    #[test]
    fn touches_set_only_the_watchers_of_the_key() {
        let watches = Watches::default();
        let (mut a, mut b) = (WatchHandle::default(), WatchHandle::default());
        assert!(watches.watch(&mut a, 0, b"x", true));
        assert!(
            watches.watch(&mut a, 0, b"x", true),
            "watching twice is one watch"
        );
        assert!(watches.watch(&mut b, 0, b"y", false));
        assert_eq!(a.keys.len(), 1);
        watches.touch(0, &[b"x".to_vec().into()]);
        assert!(a.is_dirty() && !b.is_dirty());
        watches.touch_where(|_, k| k == b"nothing");
        assert!(
            !b.is_dirty(),
            "a flush of keys that do not exist leaves the watch"
        );
        watches.touch_where(|_, k| k == b"y");
        assert!(b.is_dirty());
        watches.unwatch_all(a);
        watches.unwatch_all(b);
        assert_eq!(watches.watched_key_count(), 0);
    }
}
