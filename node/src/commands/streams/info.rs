//! XINFO STREAM [FULL [COUNT n]] | GROUPS | CONSUMERS | HELP.

use super::groups::write_help;
use super::{int, reply, stream_at};
use crate::command_framework::args::is;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::stream::{Group, Stream, StreamId};
use crate::db::Locked;
use proto::resp::Reply;

/// FULL's default COUNT: enough to look at, not a whole stream at once.
const FULL_DEFAULT_COUNT: u64 = 10;

fn existing<'a>(db: &'a mut Locked<'_>, key: &[u8]) -> Result<&'a mut Stream, CmdError> {
    stream_at(db, key)?.ok_or(CmdError::NoSuchKey)
}

fn name(r: &mut Reply<'_>, text: &str) {
    r.bulk(text.as_bytes());
}

fn opt_integer(r: &mut Reply<'_>, v: Option<u64>) {
    match v {
        Some(n) => r.integer(n as i64),
        None => r.null(),
    }
}

/// XINFO STREAM key [FULL [COUNT count]]
pub fn stream(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut full = false;
    let mut count = FULL_DEFAULT_COUNT;
    if args.len() > 3 {
        if !is(args[3], "full") {
            return Err(CmdError::Syntax);
        }
        full = true;
        match args.len() {
            4 => {}
            6 if is(args[4], "count") => {
                let n = int(args[5])?;
                count = if n < 0 { FULL_DEFAULT_COUNT } else { n as u64 };
            }
            _ => return Err(CmdError::Syntax),
        }
    }
    let s = existing(&mut ctx.db, args[2])?;
    let r = &mut ctx.reply;
    r.map(if full { 9 } else { 10 });
    name(r, "length");
    r.integer(s.len() as i64);
    name(r, "radix-tree-keys");
    r.integer(s.node_count() as i64);
    name(r, "radix-tree-nodes");
    r.integer(s.node_count() as i64);
    name(r, "last-generated-id");
    reply::id(r, s.last_id);
    name(r, "max-deleted-entry-id");
    reply::id(r, s.max_deleted_id);
    name(r, "entries-added");
    r.integer(s.entries_added as i64);
    name(r, "recorded-first-entry-id");
    reply::id(r, s.first_id);
    if !full {
        name(r, "groups");
        r.integer(s.groups.len() as i64);
        name(r, "first-entry");
        edge(r, s, false);
        name(r, "last-entry");
        edge(r, s, true);
        return Ok(());
    }
    name(r, "entries");
    let ids = reply::collect_range(s, StreamId::ZERO, StreamId::MAX, false, count as usize);
    reply::entries(r, s, &ids);
    name(r, "groups");
    r.array(s.groups.len());
    for (gname, g) in &s.groups {
        full_group(r, s, gname, g, count);
    }
    Ok(())
}

fn edge(r: &mut Reply<'_>, s: &Stream, last: bool) {
    let id = if last {
        s.last_entry_id()
    } else {
        s.first_entry_id()
    };
    match id.and_then(|id| s.get(id).map(|f| (id, f))) {
        Some((id, f)) => reply::entry(r, id, f),
        None => r.null(),
    }
}

fn full_group(r: &mut Reply<'_>, s: &Stream, gname: &[u8], g: &Group, count: u64) {
    let take = if count == 0 {
        usize::MAX
    } else {
        count as usize
    };
    r.map(7);
    name(r, "name");
    r.bulk(gname);
    name(r, "last-delivered-id");
    reply::id(r, g.last_id);
    name(r, "entries-read");
    opt_integer(r, g.entries_read);
    name(r, "lag");
    opt_integer(r, s.group_lag(g));
    name(r, "pel-count");
    r.integer(g.pel.len() as i64);
    name(r, "pending");
    let pel: Vec<_> = g.pel.iter().take(take).collect();
    r.array(pel.len());
    for (id, p) in pel {
        r.array(4);
        reply::id(r, *id);
        r.bulk(&p.consumer);
        r.integer(p.delivery_time as i64);
        r.integer(p.delivery_count as i64);
    }
    name(r, "consumers");
    r.array(g.consumers.len());
    for (cname, c) in &g.consumers {
        r.map(4);
        name(r, "name");
        r.bulk(cname);
        name(r, "seen-time");
        r.integer(c.seen_time as i64);
        name(r, "pel-count");
        r.integer(c.pel.len() as i64);
        name(r, "pending");
        let ids: Vec<_> = c.pel.iter().take(take).collect();
        r.array(ids.len());
        for id in ids {
            r.array(3);
            reply::id(r, *id);
            let p = g.pel.get(id);
            r.integer(p.map_or(0, |p| p.delivery_time as i64));
            r.integer(p.map_or(0, |p| p.delivery_count as i64));
        }
    }
}

/// XINFO GROUPS key
pub fn groups(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let s = existing(&mut ctx.db, args[2])?;
    let r = &mut ctx.reply;
    r.array(s.groups.len());
    for (gname, g) in &s.groups {
        r.map(6);
        name(r, "name");
        r.bulk(gname);
        name(r, "consumers");
        r.integer(g.consumers.len() as i64);
        name(r, "pending");
        r.integer(g.pel.len() as i64);
        name(r, "last-delivered-id");
        reply::id(r, g.last_id);
        name(r, "entries-read");
        opt_integer(r, g.entries_read);
        name(r, "lag");
        opt_integer(r, s.group_lag(g));
    }
    Ok(())
}

/// XINFO CONSUMERS key group
pub fn consumers(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (key, group) = (args[2], args[3]);
    let now = ctx.db.now;
    let s = existing(&mut ctx.db, key)?;
    let Some(g) = s.groups.get(group) else {
        return Err(CmdError::new(format!(
            "NOGROUP No such consumer group '{}' for key name '{}'",
            String::from_utf8_lossy(group),
            String::from_utf8_lossy(key)
        )));
    };
    let r = &mut ctx.reply;
    r.array(g.consumers.len());
    for (cname, c) in &g.consumers {
        r.map(3);
        name(r, "name");
        r.bulk(cname);
        name(r, "pending");
        r.integer(c.pel.len() as i64);
        name(r, "idle");
        r.integer((now as i64 - c.seen_time as i64).max(0));
    }
    Ok(())
}

const HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Print this help.",
];

pub fn help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    write_help(ctx, HELP);
    Ok(())
}
