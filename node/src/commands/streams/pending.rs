//! XACK XPENDING: the pending entries lists.

use super::{int_or, no_group, range_end, range_start, reply, stream_at, strict_id};
use crate::command_framework::args::is;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::stream::StreamId;

/// XACK key group id [id ...]
pub fn xack(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (key, group) = (args[1], args[2]);
    let Some(g) = stream_at(&mut ctx.db, key)?.and_then(|s| s.groups.get_mut(group)) else {
        ctx.reply.integer(0);
        return Ok(());
    };
    let ids: Vec<StreamId> = args[3..]
        .iter()
        .map(|a| strict_id(a))
        .collect::<Result<_, _>>()?;
    let acked = ids.into_iter().filter(|id| g.ack(*id)).count();
    if acked > 0 {
        ctx.modified(key);
        ctx.effects.dirty += acked as u64 - 1;
    }
    ctx.reply.integer(acked as i64);
    Ok(())
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
pub fn xpending(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (key, group) = (args[1], args[2]);
    let summary = args.len() == 3;
    if !summary && !(6..=9).contains(&args.len()) {
        return Err(CmdError::Syntax);
    }
    let mut range = None;
    if !summary {
        let mut at = 3;
        let mut min_idle = 0i64;
        if is(args[3], "idle") {
            min_idle = int_or(args[4], "ERR value is not an integer or out of range")?;
            if args.len() < 8 {
                return Err(CmdError::Syntax);
            }
            at += 2;
        }
        let count = int_or(args[at + 2], "ERR value is not an integer or out of range")?.max(0);
        let start = range_start(args[at])?;
        let end = range_end(args[at + 1])?;
        let consumer = args.get(at + 3).copied();
        if args.len() > at + 4 {
            return Err(CmdError::Syntax);
        }
        range = Some((min_idle, start, end, count as u64, consumer));
    }
    let now = ctx.db.now;
    let Some(g) = stream_at(&mut ctx.db, key)?.and_then(|s| s.groups.get(group)) else {
        return Err(no_group(key, group));
    };
    let r = &mut ctx.reply;
    let Some((min_idle, start, end, count, consumer)) = range else {
        r.array(4);
        r.integer(g.pel.len() as i64);
        match (g.pel.first_key_value(), g.pel.last_key_value()) {
            (Some((first, _)), Some((last, _))) => {
                reply::id(r, *first);
                reply::id(r, *last);
                let holders: Vec<_> = g
                    .consumers
                    .iter()
                    .filter(|(_, c)| !c.pel.is_empty())
                    .collect();
                r.array(holders.len());
                for (name, c) in holders {
                    r.array(2);
                    r.bulk(name);
                    r.bulk(c.pel.len().to_string().as_bytes());
                }
            }
            _ => {
                r.null();
                r.null();
                r.null_array();
            }
        }
        return Ok(());
    };
    let ids: Vec<StreamId> = match consumer {
        Some(name) => match g.consumers.get(name) {
            None => {
                r.array(0);
                return Ok(());
            }
            Some(c) => c
                .pel
                .range(start..)
                .take_while(|id| **id <= end)
                .copied()
                .collect(),
        },
        None => g
            .pel
            .range(start..)
            .take_while(|(id, _)| **id <= end)
            .map(|(id, _)| *id)
            .collect(),
    };
    if start > end {
        r.array(0);
        return Ok(());
    }
    let mut rows = Vec::new();
    for id in ids {
        if rows.len() as u64 >= count {
            break;
        }
        let Some(p) = g.pel.get(&id) else { continue };
        let idle = now as i64 - p.delivery_time as i64;
        if min_idle > 0 && idle < min_idle {
            continue;
        }
        rows.push((id, p.consumer.clone(), idle.max(0), p.delivery_count));
    }
    r.array(rows.len());
    for (id, name, idle, n) in rows {
        r.array(4);
        reply::id(r, id);
        r.bulk(&name);
        r.integer(idle);
        r.integer(n as i64);
    }
    Ok(())
}
