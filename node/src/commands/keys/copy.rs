//! COPY source destination [DB destination-db] [REPLACE]: the destination gets a copy of the
//! source's value and TTL. This node has one database, so `DB` accepts only 0 and answers
//! Redis's error for any other.

use crate::command_framework::args::{self, is};
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::Entry;

pub fn copy(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (src, dst) = (args[1], args[2]);
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if is(args[i], "replace") {
            replace = true;
        } else if is(args[i], "db") && i + 1 < args.len() {
            let db = args::int(args[i + 1])?;
            // Redis reads the index as an int: a wider number is not an integer to it.
            if i32::try_from(db).is_err() {
                return Err(CmdError::NotInteger);
            }
            if db != 0 {
                return err("ERR DB index is out of range");
            }
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if src == dst {
        return err("ERR source and destination objects are the same");
    }
    let Some(source) = ctx.db.get(src) else {
        ctx.reply.integer(0);
        return Ok(());
    };
    let (value, expires_at) = (source.value.clone(), source.expires_at);
    if !replace && ctx.db.exists(dst) {
        ctx.reply.integer(0);
        return Ok(());
    }
    // A new object, as Redis makes: the copy starts with its own access time and frequency.
    let mut entry = Entry::new(value);
    entry.expires_at = expires_at;
    ctx.db.insert(dst, entry);
    ctx.modified(dst);
    // A list or sorted set copied into place serves the clients blocked on it.
    ctx.signal_ready(dst);
    ctx.reply.integer(1);
    Ok(())
}
