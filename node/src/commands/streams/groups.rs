//! XGROUP CREATE | SETID | DESTROY | CREATECONSUMER | DELCONSUMER | HELP.

use super::{int, stream_at, strict_id};
use crate::command_framework::args::is;
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::stream::{id, Group, Stream};
use crate::db::Value;

pub fn container(_ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    Err(CmdError::Syntax)
}

fn subcommand_syntax(args: &[&[u8]]) -> CmdError {
    CmdError::new(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try XGROUP HELP.",
        String::from_utf8_lossy(args[1])
    ))
}

const KEY_REQUIRED: &str = "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";

/// `ENTRIESREAD n`: n >= 0, or -1 for unknown.
fn entries_read(arg: &[u8]) -> Result<Option<u64>, CmdError> {
    match int(arg)? {
        -1 => Ok(None),
        n if n < 0 => err("ERR value for ENTRIESREAD must be positive or -1"),
        n => Ok(Some(n as u64)),
    }
}

fn nogroup_for_key(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::new(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(group),
        String::from_utf8_lossy(key)
    ))
}

/// The stream for a subcommand that needs it to exist.
fn existing<'a>(ctx: &'a mut Ctx<'_>, key: &[u8]) -> Result<&'a mut Stream, CmdError> {
    stream_at(&mut ctx.db, key)?.ok_or_else(|| CmdError::new(KEY_REQUIRED))
}

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n]
pub fn create(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (key, name) = (args[2], args[3]);
    let mut mkstream = false;
    let mut read: Option<u64> = None;
    let mut i = 5;
    while i < args.len() {
        if is(args[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if is(args[i], "entriesread") && i + 1 < args.len() {
            read = entries_read(args[i + 1])?;
            i += 2;
        } else {
            return Err(subcommand_syntax(args));
        }
    }
    if args.len() > 8 {
        return Err(subcommand_syntax(args));
    }
    let existing_last = match stream_at(&mut ctx.db, key)? {
        Some(s) => Some(s.last_id),
        None if mkstream => None,
        None => return err(KEY_REQUIRED),
    };
    let last = if args[4] == b"$" {
        existing_last.unwrap_or_default()
    } else {
        strict_id(args[4])?
    };
    if existing_last.is_none() {
        ctx.db.set(key, Value::Stream(Box::default()));
    }
    let s = existing(ctx, key)?;
    if s.groups.contains_key(name) {
        return err("BUSYGROUP Consumer Group name already exists");
    }
    s.groups.insert(name.into(), Group::new(last, read));
    ctx.modified(key);
    ctx.reply.ok();
    Ok(())
}

/// XGROUP SETID key group id|$ [ENTRIESREAD n]
pub fn setid(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (key, name) = (args[2], args[3]);
    let mut read: Option<u64> = None;
    match args.len() {
        7 if is(args[5], "entriesread") => read = entries_read(args[6])?,
        5 => {}
        _ => return Err(subcommand_syntax(args)),
    }
    let s = existing(ctx, key)?;
    let last_id = s.last_id;
    let Some(g) = s.groups.get_mut(name) else {
        return Err(nogroup_for_key(key, name));
    };
    g.last_id = if args[4] == b"$" {
        last_id
    } else {
        id::parse(args[4], 0, false, false)
            .map(|p| p.id)
            .ok_or_else(super::invalid_id)?
    };
    g.entries_read = read;
    ctx.modified(key);
    ctx.reply.ok();
    Ok(())
}

/// XGROUP DESTROY key group
pub fn destroy(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (key, name) = (args[2], args[3]);
    let s = existing(ctx, key)?;
    if s.groups.remove(name).is_some() {
        // `modified` also signals the key: readers blocked on the group answer NOGROUP.
        ctx.modified(key);
        ctx.reply.integer(1);
    } else {
        ctx.reply.integer(0);
    }
    Ok(())
}

/// XGROUP CREATECONSUMER key group consumer
pub fn createconsumer(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (key, name, consumer) = (args[2], args[3], args[4]);
    let now = ctx.db.now;
    let s = existing(ctx, key)?;
    let Some(g) = s.groups.get_mut(name) else {
        return Err(nogroup_for_key(key, name));
    };
    let created = g.create_consumer(consumer, now);
    if created {
        ctx.modified(key);
    }
    ctx.reply.integer(i64::from(created));
    Ok(())
}

/// XGROUP DELCONSUMER key group consumer
pub fn delconsumer(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (key, name, consumer) = (args[2], args[3], args[4]);
    let s = existing(ctx, key)?;
    let Some(g) = s.groups.get_mut(name) else {
        return Err(nogroup_for_key(key, name));
    };
    let pending = g.delete_consumer(consumer);
    if pending.is_some() {
        ctx.modified(key);
    }
    ctx.reply.integer(pending.unwrap_or(0) as i64);
    Ok(())
}

const HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Print this help.",
];

pub fn help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    write_help(ctx, HELP);
    Ok(())
}

pub fn write_help(ctx: &mut Ctx<'_>, lines: &[&str]) {
    ctx.reply.array(lines.len());
    for l in lines {
        ctx.reply.simple(l.as_bytes());
    }
}
