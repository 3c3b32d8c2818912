//! The blocking list commands: BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP.
//!
//! Each serves at once when a list has elements. Otherwise it asks its connection to wait
//! (`Effects::block`) and writes no reply; the connection runs the same command again each
//! time one of the keys is signalled, until it is served or its timeout passes. Inside
//! MULTI/EXEC there is no waiting: the command answers as its timeout would, at once.
//!
//! A retry sees a key that now holds another type as empty, as Redis 7.0 keeps such a
//! client blocked (it serves a list client only from a list); the first run fails with
//! WRONGTYPE instead, also as Redis does.

use super::pop::{lmove_core, mpop_core, parse_mpop, reply_mpop};
use super::End;
use crate::command_framework::args;
use crate::command_framework::ctx::{BlockRequest, TimeoutReply};
use crate::command_framework::{CmdResult, Ctx};
use crate::db::Key;
use std::time::Duration;

/// Asks the connection to wait on `keys` and run `args` again when one is signalled.
fn block(
    ctx: &mut Ctx<'_>,
    keys: &[&[u8]],
    timeout: Option<Duration>,
    args: &[&[u8]],
    timeout_reply: TimeoutReply,
) {
    ctx.effects.block = Some(BlockRequest {
        keys: keys.iter().map(|k| Key::from(*k)).collect(),
        timeout,
        retry: args.iter().map(|a| a.to_vec()).collect(),
        timeout_reply,
    });
}

/// BLPOP/BRPOP key [key ...] timeout: `[key, element]` from the first non-empty list.
fn bpop(ctx: &mut Ctx<'_>, args: &[&[u8]], end: End) -> CmdResult {
    let timeout = args::timeout_secs(args[args.len() - 1])?;
    let keys = &args[1..args.len() - 1];
    let retry = ctx.is_block_retry();
    if let Some((key, popped)) = mpop_core(ctx, keys, end, 1, retry)? {
        ctx.reply.array(2);
        ctx.reply.bulk(key);
        ctx.reply.bulk(&popped[0]);
    } else if ctx.in_exec {
        ctx.reply.null_array();
    } else {
        block(ctx, keys, timeout, args, TimeoutReply::NullArray);
    }
    Ok(())
}

pub fn blpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    bpop(ctx, args, End::Left)
}

pub fn brpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    bpop(ctx, args, End::Right)
}

/// BLMOVE and BRPOPLPUSH: waits on the source only; the destination's type is checked when
/// an element is there to move.
fn bmove(ctx: &mut Ctx<'_>, args: &[&[u8]], from: End, to: End, timeout: &[u8]) -> CmdResult {
    let timeout = args::timeout_secs(timeout)?;
    let (src, dst) = (args[1], args[2]);
    let retry = ctx.is_block_retry();
    match lmove_core(ctx, src, dst, from, to, retry)? {
        Some(e) => ctx.reply.bulk(&e),
        // Redis answers a null bulk here, but a null array when a wait times out.
        None if ctx.in_exec => ctx.reply.null(),
        None => block(ctx, &[src], timeout, args, TimeoutReply::NullArray),
    }
    Ok(())
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout.
pub fn blmove(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (from, to) = (End::parse(args[3])?, End::parse(args[4])?);
    bmove(ctx, args, from, to, args[5])
}

/// BRPOPLPUSH source destination timeout.
pub fn brpoplpush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    bmove(ctx, args, End::Right, End::Left, args[3])
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count].
pub fn blmpop(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let timeout = args::timeout_secs(args[1])?;
    let m = parse_mpop(args, 2)?;
    let retry = ctx.is_block_retry();
    match mpop_core(ctx, m.keys, m.end, m.count, retry)? {
        Some((key, popped)) => reply_mpop(ctx, key, &popped),
        None if ctx.in_exec => ctx.reply.null_array(),
        None => block(ctx, m.keys, timeout, args, TimeoutReply::NullArray),
    }
    Ok(())
}
