//! The arguments XREAD and XREADGROUP share, and their waits.
//!
//! A read that finds nothing and has BLOCK asks its connection to wait on its keys
//! (`Effects::block`, as BLPOP does) and to run the command again when one is signalled:
//! XREAD with each `$` replaced by the ID it stood for when the client blocked, so that
//! the retry asks for what came after. Stream readers are woken by every signal on their
//! keys (see `server/blocking.rs`). Inside MULTI/EXEC there is no waiting: the read answers
//! as its timeout would.

use super::int;
use crate::command_framework::args::is;
use crate::command_framework::ctx::{BlockRequest, TimeoutReply};
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, Ctx};
use crate::db::Key;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// COUNT of a read served after a wait without COUNT (Redis's
/// `XREAD_BLOCKED_DEFAULT_COUNT`): a client that blocked with a low ID must not be handed
/// a whole stream at once.
pub const BLOCKED_DEFAULT_COUNT: usize = 1000;

pub struct ReadArgs<'a> {
    /// None: no BLOCK; Some(None): wait forever.
    pub block: Option<Option<Duration>>,
    /// 0: no limit.
    pub count: usize,
    pub keys: &'a [&'a [u8]],
    pub ids: &'a [&'a [u8]],
    /// Index of the first key among the arguments.
    pub keys_at: usize,
    pub group: Option<(&'a [u8], &'a [u8])>,
    pub noack: bool,
}

/// Parses `[GROUP g c] [COUNT n] [BLOCK ms] [NOACK] STREAMS key... id...`.
pub fn parse<'a>(args: &'a [&'a [u8]], readgroup: bool) -> Result<ReadArgs<'a>, CmdError> {
    let mut out = ReadArgs {
        block: None,
        count: 0,
        keys: &[],
        ids: &[],
        keys_at: 0,
        group: None,
        noack: false,
    };
    let mut streams_at = None;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let a = args[i];
        if is(a, "block") && more > 0 {
            i += 1;
            let ms = proto::resp::request::parse_i64(args[i])
                .ok_or_else(|| CmdError::new("ERR timeout is not an integer or out of range"))?;
            if ms < 0 {
                return err("ERR timeout is negative");
            }
            out.block = Some((ms > 0).then(|| Duration::from_millis(ms as u64)));
        } else if is(a, "count") && more > 0 {
            i += 1;
            out.count = usize::try_from(int(args[i])?.max(0)).unwrap_or(usize::MAX);
        } else if is(a, "streams") && more > 0 {
            let rest = args.len() - i - 1;
            if !rest.is_multiple_of(2) {
                let (name, symbol) = if readgroup {
                    ("xreadgroup", '>')
                } else {
                    ("xread", '$')
                };
                return err(format!("ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{symbol}' must be specified."));
            }
            streams_at = Some(i + 1);
            break;
        } else if is(a, "group") && more >= 2 {
            if !readgroup {
                return err("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.");
            }
            out.group = Some((args[i + 1], args[i + 2]));
            i += 2;
        } else if is(a, "noack") {
            if !readgroup {
                return err("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.");
            }
            out.noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let Some(at) = streams_at else {
        return Err(CmdError::Syntax);
    };
    if readgroup && out.group.is_none() {
        return err("ERR Missing GROUP option for XREADGROUP");
    }
    let n = (args.len() - at) / 2;
    out.keys = &args[at..at + n];
    out.ids = &args[at + n..];
    out.keys_at = at;
    Ok(out)
}

/// True when this run is a blocked client's retry (see lists' `is_retry`).
pub fn is_retry(ctx: &Ctx<'_>) -> bool {
    ctx.client.shared.blocked.load(Relaxed)
}

/// Asks the connection to wait on `keys` and run `retry` when one is signalled.
pub fn block(ctx: &mut Ctx<'_>, keys: &[&[u8]], timeout: Option<Duration>, retry: Vec<Vec<u8>>) {
    ctx.effects.block = Some(BlockRequest {
        keys: keys.iter().map(|k| Key::from(*k)).collect(),
        timeout,
        retry,
        timeout_reply: TimeoutReply::StreamRead,
    });
}
