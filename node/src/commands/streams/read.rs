//! XLEN XRANGE XREVRANGE XREAD.

use super::blocking::{self, BLOCKED_DEFAULT_COUNT};
use super::{int, range_end, range_start, reply, stream_at, strict_id};
use crate::command_framework::args::is;
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::stream::StreamId;
use crate::db::Value;

/// XLEN key
pub fn xlen(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let n = stream_at(&mut ctx.db, args[1])?.map_or(0, |s| s.len());
    ctx.reply.integer(n as i64);
    Ok(())
}

/// XRANGE key start end [COUNT count]
pub fn xrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    range(ctx, args, false)
}

/// XREVRANGE key end start [COUNT count]
pub fn xrevrange(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    range(ctx, args, true)
}

fn range(ctx: &mut Ctx<'_>, args: &[&[u8]], rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev {
        (args[3], args[2])
    } else {
        (args[2], args[3])
    };
    let start = range_start(start_arg)?;
    let end = range_end(end_arg)?;
    let mut count: Option<usize> = None;
    let mut i = 4;
    while i < args.len() {
        if is(args[i], "count") && i + 1 < args.len() {
            count = Some(usize::try_from(int(args[i + 1])?.max(0)).unwrap_or(usize::MAX));
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(s) = stream_at(&mut ctx.db, args[1])? else {
        ctx.reply.array(0);
        return Ok(());
    };
    if count == Some(0) {
        ctx.reply.null_array();
        return Ok(());
    }
    let ids = reply::collect_range(s, start, end, rev, count.unwrap_or(0));
    reply::entries(&mut ctx.reply, s, &ids);
    Ok(())
}

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]
pub fn xread(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let a = blocking::parse(args, false)?;
    let retry = blocking::is_retry(ctx);
    // Resolve each ID first: `$` is the stream's last ID now (0-0 without a stream).
    let mut after: Vec<StreamId> = Vec::with_capacity(a.keys.len());
    for (key, id) in a.keys.iter().zip(a.ids) {
        let stream = match stream_at(&mut ctx.db, key) {
            Ok(s) => s,
            // A retry waits on: the key may become a stream again (Redis keeps it blocked).
            Err(CmdError::WrongType) if retry => None,
            Err(e) => return Err(e),
        };
        let last = stream.map_or(StreamId::ZERO, |s| s.last_id);
        if *id == b"$" {
            after.push(last);
        } else if *id == b">" {
            return err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
        } else {
            after.push(strict_id(id)?);
        }
    }
    let count = match a.count {
        0 if retry => BLOCKED_DEFAULT_COUNT,
        n => n,
    };
    let mut served: Vec<(usize, Vec<StreamId>)> = Vec::new();
    for (i, key) in a.keys.iter().enumerate() {
        let Some(Value::Stream(s)) = ctx.db.get(key).map(|e| &e.value) else {
            continue;
        };
        if !s.has_entry_after(after[i]) {
            continue;
        }
        let Some(start) = after[i].incr() else {
            continue;
        };
        served.push((
            i,
            reply::collect_range(s, start, StreamId::MAX, false, count),
        ));
    }
    if !served.is_empty() {
        if ctx.reply.is_resp3() {
            ctx.reply.map(served.len());
        } else {
            ctx.reply.array(served.len());
        }
        for (i, ids) in served {
            if !ctx.reply.is_resp3() {
                ctx.reply.array(2);
            }
            ctx.reply.bulk(a.keys[i]);
            if let Some(Value::Stream(s)) = ctx.db.get(a.keys[i]).map(|e| &e.value) {
                reply::entries(&mut ctx.reply, s, &ids);
            }
        }
        return Ok(());
    }
    match a.block {
        Some(timeout) if !ctx.in_exec => {
            let mut again: Vec<Vec<u8>> = args.iter().map(|x| x.to_vec()).collect();
            let ids_at = a.keys_at + a.keys.len();
            for (j, id) in after.iter().enumerate() {
                again[ids_at + j] = id.to_bytes();
            }
            let keys = a.keys.to_vec();
            blocking::block(ctx, &keys, timeout, again);
        }
        _ => ctx.reply.null_array(),
    }
    Ok(())
}
