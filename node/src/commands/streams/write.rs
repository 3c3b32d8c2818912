//! XADD XTRIM XDEL XSETID.

use super::options::{self, node_limits};
use super::{int, reply, stream_at, strict_id};
use crate::command_framework::args::is;
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::config::keyspace_events::STREAM;
use crate::db::stream::{AddIdError, Stream, StreamId, Trim, TrimStrategy};
use crate::db::Value;
use crate::replication::propagate::{Argv, WriteEffect};

/// The trim a replica repeats after an approximate or limited one: exact, to the length
/// reached (the same entries remain: the replica holds the same stream).
fn exact_trim_args(s: &Stream) -> [Vec<u8>; 3] {
    [
        b"MAXLEN".to_vec(),
        b"=".to_vec(),
        s.len().to_string().into_bytes(),
    ]
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value ...
pub fn xadd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let limits = node_limits(ctx);
    let opts = options::parse(args, true, limits, ctx.client.primary_link)?;
    let fields_at = opts.end + 1;
    if fields_at > args.len()
        || (args.len() - fields_at) < 2
        || !(args.len() - fields_at).is_multiple_of(2)
    {
        return Err(CmdError::WrongArity("xadd".into()));
    }
    if let Some(p) = opts.id {
        if p.seq_given && p.id.is_zero() {
            return err("ERR The ID specified in XADD must be greater than 0-0");
        }
    }
    let now = ctx.db.now;
    let exists = match stream_at(&mut ctx.db, key)? {
        Some(s) => {
            if s.last_id == StreamId::MAX {
                return err(
                    "ERR The stream has exhausted the last possible ID, unable to add more items",
                );
            }
            Some(s.next_id(opts.id, now))
        }
        None => None,
    };
    let next = match exists {
        Some(next) => next,
        None if opts.nomkstream => {
            ctx.reply.null();
            return Ok(());
        }
        None => Stream::new().next_id(opts.id, now),
    };
    let id = next.map_err(|e| match e {
        AddIdError::NotGreater => CmdError::new(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item",
        ),
        AddIdError::Exhausted => CmdError::new(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ),
    })?;
    let pairs = &args[fields_at..];
    if exists.is_none() {
        ctx.db.set(key, Value::Stream(Box::default()));
    }
    let s = stream_at(&mut ctx.db, key)?.ok_or(CmdError::NoSuchKey)?;
    s.append(id, pairs, limits);
    let trimmed = opts.trim.map_or(0, |t| s.trim(t));
    let rewrite = ctx.replicating.then(|| {
        let mut c: Argv = vec![b"XADD".to_vec(), key.to_vec()];
        if opts.nomkstream {
            c.push(b"NOMKSTREAM".to_vec());
        }
        if let Some(t) = opts.trim {
            if t.approx {
                c.extend(exact_trim_args(s));
            } else {
                let keyword: &[u8] = match t.strategy {
                    TrimStrategy::MaxLen(_) => b"MAXLEN",
                    TrimStrategy::MinId(_) => b"MINID",
                };
                c.extend([
                    keyword.to_vec(),
                    b"=".to_vec(),
                    args[opts.threshold_at].to_vec(),
                ]);
            }
        }
        c.push(id.to_bytes());
        c.extend(pairs.iter().map(|a| a.to_vec()));
        c
    });
    if let Some(c) = rewrite {
        ctx.replicate(|| WriteEffect::Commands(vec![c]));
    }
    ctx.modified(key);
    if trimmed > 0 {
        ctx.notify(STREAM, "xtrim", key);
    }
    ctx.signal_ready(key);
    reply::id(&mut ctx.reply, id);
    Ok(())
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
pub fn xtrim(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let limits = node_limits(ctx);
    let opts = options::parse(args, false, limits, ctx.client.primary_link)?;
    let Some(trim): Option<Trim> = opts.trim else {
        return Err(CmdError::Syntax);
    };
    let Some(s) = stream_at(&mut ctx.db, key)? else {
        ctx.reply.integer(0);
        return Ok(());
    };
    let removed = s.trim(trim);
    let exact = trim.approx.then(|| exact_trim_args(s));
    if removed > 0 {
        if let Some(e) = exact {
            ctx.replicate(|| {
                let mut c: Argv = vec![b"XTRIM".to_vec(), key.to_vec()];
                c.extend(e);
                WriteEffect::Commands(vec![c])
            });
        }
        ctx.modified(key);
    }
    ctx.reply.integer(removed as i64);
    Ok(())
}

/// XDEL key id [id ...]
pub fn xdel(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let Some(s) = stream_at(&mut ctx.db, key)? else {
        ctx.reply.integer(0);
        return Ok(());
    };
    // Every ID is checked before any is deleted: all or nothing.
    let ids: Vec<StreamId> = args[2..]
        .iter()
        .map(|a| strict_id(a))
        .collect::<Result<_, _>>()?;
    let mut deleted = 0;
    let mut first_gone = false;
    for id in ids {
        if s.delete(id) {
            first_gone |= id == s.first_id;
            deleted += 1;
        }
    }
    if deleted > 0 {
        if s.is_empty() {
            s.first_id = StreamId::ZERO;
        } else if first_gone {
            s.refresh_first_id();
        }
        ctx.modified(key);
        ctx.effects.dirty += deleted - 1;
    }
    ctx.reply.integer(deleted as i64);
    Ok(())
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
pub fn xsetid(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let id = strict_id(args[2])?;
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::ZERO;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if is(args[i], "entriesadded") && more > 0 {
            let n = int(args[i + 1])?;
            if n < 0 {
                return err("ERR entries_added must be positive");
            }
            entries_added = Some(n as u64);
        } else if is(args[i], "maxdeletedid") && more > 0 {
            max_deleted = strict_id(args[i + 1])?;
            if id < max_deleted {
                return err("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id");
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let Some(s) = stream_at(&mut ctx.db, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    if id < s.max_deleted_id {
        return err("ERR The ID specified in XSETID is smaller than current max_deleted_entry_id");
    }
    if !s.is_empty() {
        if s.last_entry_id().is_some_and(|top| id < top) {
            return err(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            );
        }
        if entries_added.is_some_and(|n| s.len() > n) {
            return err("ERR The entries_added specified in XSETID is smaller than the target stream length");
        }
    }
    s.last_id = id;
    if let Some(n) = entries_added {
        s.entries_added = n;
    }
    if !max_deleted.is_zero() {
        s.max_deleted_id = max_deleted;
    }
    ctx.modified(key);
    ctx.reply.ok();
    Ok(())
}
