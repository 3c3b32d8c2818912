//! XCLAIM XAUTOCLAIM: pending entries handed to another consumer. Each claim replicates as
//! the PEL entry it leaves (`XCLAIM ... FORCE JUSTID LASTID`), an entry found deleted as
//! the claim that drops it, as Redis propagates them.

use super::readgroup::{argv, setid_effect, xclaim_effect};
use super::{int_or, no_group, range_start, reply, stream_at, strict_id};
use crate::command_framework::args::is;
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::config::keyspace_events::STREAM;
use crate::db::stream::group::{ConsumerName, DeliveryCount, Group};
use crate::db::stream::{id, Stream, StreamId};
use crate::replication::propagate::{Argv, WriteEffect};

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-ms]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID id]
pub fn xclaim(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (key, group, consumer) = (args[1], args[2], args[3]);
    {
        let Some(s) = stream_at(&mut ctx.db, key)? else {
            return Err(no_group(key, group));
        };
        if !s.groups.contains_key(group) {
            return Err(no_group(key, group));
        }
    }
    let min_idle = int_or(args[4], "ERR Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut j = 5;
    let mut ids = Vec::new();
    while j < args.len() {
        match id::parse_strict(args[j]) {
            Some(id) => ids.push(id),
            None => break,
        }
        j += 1;
    }
    let now = ctx.db.now;
    let (mut force, mut justid) = (false, false);
    let mut retrycount: Option<i64> = None;
    let mut delivery: Option<i64> = None;
    let mut last_id = StreamId::ZERO;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args[j];
        if is(opt, "force") {
            force = true;
        } else if is(opt, "justid") {
            justid = true;
        } else if is(opt, "idle") && more > 0 {
            j += 1;
            let idle = int_or(args[j], "ERR Invalid IDLE option argument for XCLAIM")?;
            delivery = Some(now as i64 - idle);
        } else if is(opt, "time") && more > 0 {
            j += 1;
            delivery = Some(int_or(
                args[j],
                "ERR Invalid TIME option argument for XCLAIM",
            )?);
        } else if is(opt, "retrycount") && more > 0 {
            j += 1;
            retrycount = Some(int_or(
                args[j],
                "ERR Invalid RETRYCOUNT option argument for XCLAIM",
            )?);
        } else if is(opt, "lastid") && more > 0 {
            j += 1;
            last_id = strict_id(args[j])?;
        } else {
            return err(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(opt)
            ));
        }
        j += 1;
    }
    let delivery_time = match delivery {
        Some(t) if t >= 0 && t <= now as i64 => t as u64,
        _ => now,
    };
    let replicating = ctx.replicating;
    let s = stream_at(&mut ctx.db, key)?.ok_or(CmdError::NoSuchKey)?;
    let mut repl: Vec<Argv> = Vec::new();
    let mut changed = false;
    let mut propagate_last_id = false;
    let g = s.groups.get_mut(group).expect("checked above");
    if last_id > g.last_id {
        g.last_id = last_id;
        propagate_last_id = true;
        changed = true;
    }
    let mut claimed: Vec<StreamId> = Vec::new();
    let mut claimant = Claimant::new(consumer, replicating);
    for id in ids {
        let exists = s.contains(id);
        let g = s.groups.get_mut(group).expect("checked above");
        let pending = g.pel.get(&id).cloned();
        if !exists {
            if let Some(p) = pending {
                if replicating {
                    repl.push(xclaim_effect(
                        key,
                        group,
                        &p.consumer,
                        id,
                        p.delivery_time,
                        p.delivery_count,
                        g.last_id,
                    ));
                }
                g.ack(id);
                propagate_last_id = false;
                changed = true;
            }
            continue;
        }
        if pending.is_none() && !force {
            continue;
        }
        if let Some(p) = &pending {
            if min_idle > 0 && (now as i64 - p.delivery_time as i64) < min_idle {
                continue;
            }
        }
        let name = &claimant.resolve(g, now, &mut repl, [key, group]);
        let how = match retrycount {
            Some(n) if n >= 0 => DeliveryCount::Set(n as u64),
            _ if justid => DeliveryCount::Keep,
            _ => DeliveryCount::Increment,
        };
        let p = g.claim(id, name, delivery_time, how);
        if replicating {
            repl.push(xclaim_effect(
                key,
                group,
                name,
                id,
                p.delivery_time,
                p.delivery_count,
                g.last_id,
            ));
        }
        propagate_last_id = false;
        changed = true;
        claimed.push(id);
    }
    if propagate_last_id && replicating {
        repl.push(setid_effect(key, group, &s.groups[group]));
    }
    let r = &mut ctx.reply;
    r.array(claimed.len());
    for id in &claimed {
        if justid {
            reply::id(r, *id);
        } else if let Some(f) = s.get(*id) {
            reply::entry(r, *id, f);
        }
    }
    if changed {
        ctx.modified(key);
        ctx.replicate(|| WriteEffect::Commands(repl));
    }
    if claimant.created {
        ctx.notify(STREAM, "xgroup-createconsumer", key);
    }
    Ok(())
}

/// Most entries XAUTOCLAIM looks at per entry it may claim (Redis's attempts factor).
const ATTEMPTS_FACTOR: u64 = 10;

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
pub fn xautoclaim(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (key, group, consumer) = (args[1], args[2], args[3]);
    let min_idle = int_or(args[4], "ERR Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let start = range_start(args[5])?;
    let mut count: u64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(args[j], "count") && more > 0 {
            let max = (i64::MAX as u64) / 16;
            let n = int_or(args[j + 1], "ERR COUNT must be > 0")?;
            if n < 1 || n as u64 > max {
                return err("ERR COUNT must be > 0");
            }
            count = n as u64;
            j += 1;
        } else if is(args[j], "justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let now = ctx.db.now;
    let replicating = ctx.replicating;
    let Some(s) = stream_at(&mut ctx.db, key)? else {
        return Err(no_group(key, group));
    };
    if !s.groups.contains_key(group) {
        return Err(no_group(key, group));
    }
    let mut attempts = count * ATTEMPTS_FACTOR;
    let mut left = count;
    let mut repl: Vec<Argv> = Vec::new();
    let mut claimed: Vec<StreamId> = Vec::new();
    let mut deleted: Vec<StreamId> = Vec::new();
    let mut claimant = Claimant::new(consumer, replicating);
    let mut cursor = start;
    let mut next: Option<StreamId> = None;
    loop {
        let Some(id) = next_pending(s, group, cursor) else {
            next = None;
            break;
        };
        if attempts == 0 || left == 0 {
            next = Some(id);
            break;
        }
        attempts -= 1;
        cursor = id.incr().unwrap_or(StreamId::MAX);
        let exists = s.contains(id);
        let g = s.groups.get_mut(group).expect("checked above");
        let p = g.pel[&id].clone();
        if !exists {
            if replicating {
                repl.push(xclaim_effect(
                    key,
                    group,
                    &p.consumer,
                    id,
                    p.delivery_time,
                    p.delivery_count,
                    g.last_id,
                ));
            }
            g.ack(id);
            deleted.push(id);
            left -= 1;
            if id == StreamId::MAX {
                break;
            }
            continue;
        }
        if min_idle > 0 && (now as i64 - p.delivery_time as i64) < min_idle {
            if id == StreamId::MAX {
                break;
            }
            continue;
        }
        let name = &claimant.resolve(g, now, &mut repl, [key, group]);
        let how = if justid {
            DeliveryCount::Keep
        } else {
            DeliveryCount::Increment
        };
        let p = g.claim(id, name, now, how);
        if replicating {
            repl.push(xclaim_effect(
                key,
                group,
                name,
                id,
                p.delivery_time,
                p.delivery_count,
                g.last_id,
            ));
        }
        claimed.push(id);
        left -= 1;
        if id == StreamId::MAX {
            break;
        }
    }
    let r = &mut ctx.reply;
    r.array(3);
    reply::id(r, next.unwrap_or(StreamId::ZERO));
    r.array(claimed.len());
    for id in &claimed {
        if justid {
            reply::id(r, *id);
        } else if let Some(f) = s.get(*id) {
            reply::entry(r, *id, f);
        }
    }
    r.array(deleted.len());
    for id in &deleted {
        reply::id(r, *id);
    }
    if !claimed.is_empty() || !deleted.is_empty() {
        ctx.modified(key);
        ctx.replicate(|| WriteEffect::Commands(repl));
    }
    if claimant.created {
        ctx.notify(STREAM, "xgroup-createconsumer", key);
    }
    Ok(())
}

/// The first pending entry of `group` at or after `from`.
fn next_pending(s: &Stream, group: &[u8], from: StreamId) -> Option<StreamId> {
    s.groups
        .get(group)?
        .pel
        .range(from..)
        .next()
        .map(|(id, _)| *id)
}

/// The consumer XCLAIM and XAUTOCLAIM hand entries to: found, or created on the first claim
/// (not before: a claim of nothing creates no consumer), the creation replicated as
/// `XGROUP CREATECONSUMER` as Redis does; its seen-time touched at every claim.
struct Claimant<'a> {
    consumer: &'a [u8],
    replicating: bool,
    name: Option<ConsumerName>,
    /// Created by this command (a `stream`-class event is due).
    created: bool,
}

impl<'a> Claimant<'a> {
    fn new(consumer: &'a [u8], replicating: bool) -> Self {
        Claimant {
            consumer,
            replicating,
            name: None,
            created: false,
        }
    }

    /// The consumer's name in `g`, created and announced in `repl` on first use; `at` is
    /// the stream's key and the group's name.
    fn resolve(
        &mut self,
        g: &mut Group,
        now: u64,
        repl: &mut Vec<Argv>,
        at: [&[u8]; 2],
    ) -> ConsumerName {
        let name = match &self.name {
            Some(n) => n.clone(),
            None => {
                let (n, created) = g.consumer_or_create(self.consumer, now);
                self.created |= created;
                if created && self.replicating {
                    let [key, group] = at;
                    repl.push(argv(&[
                        b"XGROUP",
                        b"CREATECONSUMER",
                        key,
                        group,
                        self.consumer,
                    ]));
                }
                self.name.insert(n).clone()
            }
        };
        if let Some(c) = g.consumers.get_mut(&name) {
            c.seen_time = now;
        }
        name
    }
}
