//! COPY source destination [DB destination-db] [REPLACE]: the destination gets a copy of the
//! source's value and TTL, in the client's database or in `DB`'s (both held for the command,
//! see `other_db.rs`).

use crate::command_framework::args::is;
use crate::command_framework::error::err;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::config::keyspace_events::GENERIC;
use crate::db::keyspace::shard_of_slot;
use crate::db::Entry;

pub fn copy(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let (src, dst) = (args[1], args[2]);
    let here = ctx.db.db_index();
    let mut target = here;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if is(args[i], "replace") {
            replace = true;
        } else if is(args[i], "db") && i + 1 < args.len() {
            target = super::other_db::db_index(ctx, args[i + 1], None)?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    // Cluster mode has database 0 only: `db_index` refused any other, as Redis 7.0 does.
    if src == dst && target == here {
        return err("ERR source and destination objects are the same");
    }
    if target != here {
        let mut shards = [src, dst].map(|k| shard_of_slot(proto::slot::key_slot(k)));
        shards.sort_unstable();
        let shards: &[usize] = if shards[0] == shards[1] {
            &shards[..1]
        } else {
            &shards
        };
        ctx.hold_dbs(&[target], Some(shards))?;
    }
    let Some(source) = ctx.db.get(src) else {
        ctx.reply.integer(0);
        return Ok(());
    };
    let (value, expires_at) = (source.value.clone(), source.expires_at);
    let there = ctx.held_db(target).expect("held above");
    let exists = if target == here {
        there.exists(dst)
    } else {
        // Another database's expired key is not deleted here (no DEL of it is streamed).
        there.get_shared(dst).is_some()
    };
    if !replace && exists {
        ctx.reply.integer(0);
        return Ok(());
    }
    // A new object, as Redis makes: the copy starts with its own access time and frequency.
    let mut entry = Entry::new(value);
    entry.expires_at = expires_at;
    there.insert(dst, entry);
    ctx.modified_in(target, dst, GENERIC, "copy_to");
    // A list or sorted set copied into place serves the clients blocked on it.
    if target == here {
        ctx.signal_ready(dst);
    }
    ctx.reply.integer(1);
    Ok(())
}
