//! XREADGROUP GROUP group consumer [COUNT count] [BLOCK ms] [NOACK] STREAMS key... id...
//!
//! `>` delivers entries the group has not delivered yet (added to the group's and the
//! consumer's PEL unless NOACK) and moves the group's last ID; any other ID reads back the
//! consumer's own pending entries after it (a deleted one as `[id, nil]`). Only `>` waits.
//! A blocked reader whose key is gone or no longer a stream, or whose group was destroyed,
//! gets an error when it looks again, as in Redis.

use super::blocking::{self, BLOCKED_DEFAULT_COUNT};
use super::{reply, stream_at, strict_id};
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::config::keyspace_events::STREAM;
use crate::db::stream::{Stream, StreamId};
use crate::db::Value;
use crate::replication::propagate::{Argv, WriteEffect};

const KEY_GONE: &str = "UNBLOCKED the stream key no longer exists";
const GROUP_GONE: &str = "NOGROUP the consumer group this client was blocked on no longer exists";

/// What one key answers.
enum Served {
    /// New entries (`>`).
    New(Vec<StreamId>),
    /// The consumer's pending entries; None for one deleted from the stream.
    History(Vec<(StreamId, bool)>),
}

pub fn xreadgroup(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let a = blocking::parse(args, true)?;
    let Some((group, consumer)) = a.group else {
        return Err(CmdError::Syntax);
    };
    let retry = blocking::is_retry(ctx);
    // Every key, group and ID is checked before anything is read.
    let mut after: Vec<Option<StreamId>> = Vec::with_capacity(a.keys.len());
    for (key, id) in a.keys.iter().zip(a.ids) {
        let s = match stream_at(&mut ctx.db, key) {
            Ok(Some(s)) => s,
            Ok(None) | Err(CmdError::WrongType) if retry => return err(KEY_GONE),
            Ok(None) => {
                return err(format!(
                "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(group)
            ))
            }
            Err(e) => return Err(e),
        };
        if !s.groups.contains_key(group) {
            if retry {
                return err(GROUP_GONE);
            }
            return err(format!(
                "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(group)
            ));
        }
        match *id {
            b"$" => return err("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."),
            b">" => after.push(None),
            other => after.push(Some(strict_id(other)?)),
        }
    }
    let count = match a.count {
        0 if retry => BLOCKED_DEFAULT_COUNT,
        n => n,
    };
    let now = ctx.db.now;
    let replicating = ctx.replicating;
    let mut repl: Vec<Argv> = Vec::new();
    let mut changed_keys: Vec<&[u8]> = Vec::new();
    // Keys whose group got this consumer now (Redis notifies `xgroup-createconsumer`).
    let mut consumer_created_on: Vec<&[u8]> = Vec::new();
    let mut served: Vec<(usize, Served)> = Vec::new();
    for (i, key) in a.keys.iter().enumerate() {
        let Some(Value::Stream(s)) = ctx.db.get(key).map(|e| &mut e.value) else {
            continue;
        };
        let mut changed = false;
        let Some(g) = s.groups.get_mut(group) else {
            continue;
        };
        let (cname, created) = g.consumer_or_create(consumer, now);
        if let Some(c) = g.consumers.get_mut(&cname) {
            c.seen_time = now;
        }
        if created {
            changed = true;
            consumer_created_on.push(key);
            if replicating {
                repl.push(argv(&[b"XGROUP", b"CREATECONSUMER", key, group, consumer]));
            }
        }
        match after[i] {
            Some(id) => {
                let history = read_history(s, group, &cname, id, count, now);
                // A re-delivery counts: the replica gets each pending entry as it now is.
                let g = &s.groups[group];
                for (id, live) in &history {
                    if let (true, Some(p)) = (*live, g.pel.get(id)) {
                        changed = true;
                        if replicating {
                            repl.push(xclaim_effect(
                                key,
                                group,
                                &cname,
                                *id,
                                p.delivery_time,
                                p.delivery_count,
                                g.last_id,
                            ));
                        }
                    }
                }
                served.push((i, Served::History(history)));
            }
            None => {
                let last = s.groups[group].last_id;
                if s.has_entry_after(last) {
                    let start = last.incr().unwrap_or(StreamId::MAX);
                    let ids = reply::collect_range(s, start, StreamId::MAX, false, count);
                    for &id in &ids {
                        s.advance_group(group, id);
                        if !a.noack {
                            let g = s.groups.get_mut(group).expect("checked above");
                            g.deliver(id, &cname, now);
                            if replicating {
                                repl.push(xclaim_effect(key, group, &cname, id, now, 1, g.last_id));
                            }
                        }
                    }
                    changed = true;
                    if replicating {
                        repl.push(setid_effect(key, group, &s.groups[group]));
                    }
                    served.push((i, Served::New(ids)));
                }
            }
        }
        if changed {
            changed_keys.push(key);
        }
    }
    if !changed_keys.is_empty() {
        // Never the command itself: a replica must not read on its own.
        ctx.replicate(|| WriteEffect::Commands(repl));
    }
    for key in consumer_created_on {
        ctx.notify(STREAM, "xgroup-createconsumer", key);
    }
    for key in changed_keys {
        ctx.modified(key);
    }
    if !served.is_empty() {
        write_served(ctx, a.keys, served);
        return Ok(());
    }
    match a.block {
        Some(timeout) if !ctx.in_exec => {
            let again: Vec<Vec<u8>> = args.iter().map(|x| x.to_vec()).collect();
            let keys = a.keys.to_vec();
            blocking::block(ctx, &keys, timeout, again);
        }
        _ => ctx.reply.null_array(),
    }
    Ok(())
}

/// The consumer's pending entries after `after`, their delivery time and count updated;
/// each with whether the entry still exists.
fn read_history(
    s: &mut Stream,
    group: &[u8],
    consumer: &[u8],
    after: StreamId,
    count: usize,
    now: u64,
) -> Vec<(StreamId, bool)> {
    let Some(start) = after.incr() else {
        return Vec::new();
    };
    let ids: Vec<StreamId> = {
        let Some(c) = s.groups.get(group).and_then(|g| g.consumers.get(consumer)) else {
            return Vec::new();
        };
        let it = c.pel.range(start..).copied();
        if count == 0 {
            it.collect()
        } else {
            it.take(count).collect()
        }
    };
    let exists: Vec<bool> = ids.iter().map(|id| s.contains(*id)).collect();
    if let Some(g) = s.groups.get_mut(group) {
        for (id, live) in ids.iter().zip(&exists) {
            if *live {
                if let Some(p) = g.pel.get_mut(id) {
                    p.delivery_time = now;
                    p.delivery_count = p.delivery_count.saturating_add(1);
                }
            }
        }
    }
    ids.into_iter().zip(exists).collect()
}

fn write_served(ctx: &mut Ctx<'_>, keys: &[&[u8]], served: Vec<(usize, Served)>) {
    let resp3 = ctx.reply.is_resp3();
    if resp3 {
        ctx.reply.map(served.len());
    } else {
        ctx.reply.array(served.len());
    }
    for (i, what) in served {
        if !resp3 {
            ctx.reply.array(2);
        }
        ctx.reply.bulk(keys[i]);
        let Some(Value::Stream(s)) = ctx.db.get(keys[i]).map(|e| &e.value) else {
            ctx.reply.array(0);
            continue;
        };
        match what {
            Served::New(ids) => reply::entries(&mut ctx.reply, s, &ids),
            Served::History(items) => {
                ctx.reply.array(items.len());
                for (id, _) in items {
                    match s.get(id) {
                        Some(f) => reply::entry(&mut ctx.reply, id, f),
                        None => {
                            ctx.reply.array(2);
                            reply::id(&mut ctx.reply, id);
                            ctx.reply.null_array();
                        }
                    }
                }
            }
        }
    }
}

pub fn argv(parts: &[&[u8]]) -> Argv {
    parts.iter().map(|p| p.to_vec()).collect()
}

/// What a replica runs for a delivery or claim: the PEL entry as it now is
/// (`XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID LASTID id`, as Redis
/// propagates it).
pub fn xclaim_effect(
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    id: StreamId,
    time: u64,
    count: u64,
    last_id: StreamId,
) -> Argv {
    argv(&[
        b"XCLAIM",
        key,
        group,
        consumer,
        b"0",
        &id.to_bytes(),
        b"TIME",
        time.to_string().as_bytes(),
        b"RETRYCOUNT",
        count.to_string().as_bytes(),
        b"FORCE",
        b"JUSTID",
        b"LASTID",
        &last_id.to_bytes(),
    ])
}

/// `XGROUP SETID key group last-id ENTRIESREAD n` for a group's position.
pub fn setid_effect(key: &[u8], group: &[u8], g: &crate::db::stream::Group) -> Argv {
    let read = g.entries_read.map_or(-1i64, |n| n as i64).to_string();
    argv(&[
        b"XGROUP",
        b"SETID",
        key,
        group,
        &g.last_id.to_bytes(),
        b"ENTRIESREAD",
        read.as_bytes(),
    ])
}
