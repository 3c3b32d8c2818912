//! Generic key commands: DEL UNLINK EXISTS TYPE TOUCH KEYS RENAME RENAMENX COPY RANDOMKEY, the
//! expiry commands (`expire.rs`), SCAN (`scan.rs`) and OBJECT (`object.rs`).

mod copy;
mod encoding;
mod expire;
mod object;
pub mod other_db;
mod scan;

#[cfg(test)]
mod tests;

use crate::command_framework::key_events::WhenGone;
use crate::command_framework::spec::{command, flags::*, KeySpec, ALL_ARGS_KEYS, KEY1, KEY1_2};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::config::keyspace_events::GENERIC as GENERIC_EVENTS;
use crate::db::Key;
use crate::node_state::glob;
use rand::Rng;

/// Random picks RANDOMKEY tries before falling back to a walk of the keyspace. Each pick that
/// lands on an expired key deletes it, so the tries make progress; the walk then bounds the
/// command by the keyspace's size even when nearly every key has expired.
const RANDOMKEY_TRIES: usize = 100;

const GENERIC: &str = "generic";

pub static COMMANDS: &[CommandSpec] = &[
    command("del", -2, WRITE, ALL_ARGS_KEYS, del, GENERIC, "Deletes one or more keys."),
    CommandSpec { since: "4.0.0", ..command("unlink", -2, WRITE | FAST, ALL_ARGS_KEYS, del, GENERIC, "Asynchronously deletes one or more keys.") },
    command("exists", -2, READONLY | FAST, ALL_ARGS_KEYS, exists, GENERIC, "Determines whether one or more keys exist."),
    command("type", 2, READONLY | FAST, KEY1, key_type, GENERIC, "Determines the type of value stored at a key."),
    CommandSpec { since: "3.2.1", ..command("touch", -2, READONLY | FAST, ALL_ARGS_KEYS, touch, GENERIC, "Returns the number of existing keys out of those specified after updating the time they were last accessed.") },
    command("expire", -3, WRITE | FAST, KEY1, expire::expire, GENERIC, "Sets the expiration time of a key in seconds."),
    CommandSpec { since: "2.6.0", ..command("pexpire", -3, WRITE | FAST, KEY1, expire::pexpire, GENERIC, "Sets the expiration time of a key in milliseconds.") },
    CommandSpec { since: "1.2.0", ..command("expireat", -3, WRITE | FAST, KEY1, expire::expireat, GENERIC, "Sets the expiration time of a key to a Unix timestamp.") },
    CommandSpec { since: "2.6.0", ..command("pexpireat", -3, WRITE | FAST, KEY1, expire::pexpireat, GENERIC, "Sets the expiration time of a key to a Unix milliseconds timestamp.") },
    CommandSpec { since: "7.0.0", ..command("expiretime", 2, READONLY | FAST, KEY1, expire::expiretime, GENERIC, "Returns the expiration time of a key as a Unix timestamp.") },
    CommandSpec { since: "7.0.0", ..command("pexpiretime", 2, READONLY | FAST, KEY1, expire::pexpiretime, GENERIC, "Returns the expiration time of a key as a Unix milliseconds timestamp.") },
    command("ttl", 2, READONLY | FAST, KEY1, expire::ttl, GENERIC, "Returns the expiration time in seconds of a key."),
    CommandSpec { since: "2.6.0", ..command("pttl", 2, READONLY | FAST, KEY1, expire::pttl, GENERIC, "Returns the expiration time in milliseconds of a key.") },
    CommandSpec { since: "2.2.0", ..command("persist", 2, WRITE | FAST, KEY1, expire::persist, GENERIC, "Removes the expiration time of a key.") },
    command("keys", 2, READONLY | ALL_KEYS, KeySpec::None, keys, GENERIC, "Returns all key names that match a pattern."),
    CommandSpec { since: "2.8.0", ..command("scan", -2, READONLY, KeySpec::None, scan::scan, GENERIC, "Iterates over the key names in the database.") },
    command("rename", 3, WRITE, KEY1_2, rename, GENERIC, "Renames a key and overwrites the destination."),
    command("renamenx", 3, WRITE | FAST, KEY1_2, renamenx, GENERIC, "Renames a key only when the target key name doesn't exist."),
    CommandSpec { since: "6.2.0", ..command("copy", -3, WRITE | DENYOOM, KEY1_2, copy::copy, GENERIC, "Copies the value of a key to a new key.") },
    command("move", 3, WRITE | FAST, KEY1, other_db::move_key, GENERIC, "Moves a key to another database."),
    CommandSpec { since: "4.0.0", ..command("swapdb", 3, WRITE | FAST, KeySpec::None, other_db::swapdb, GENERIC, "Swaps two Redis databases.") },
    command("randomkey", 1, READONLY | ALL_KEYS, KeySpec::None, randomkey, GENERIC, "Returns a random key name from the database."),
    CommandSpec {
        since: "2.2.3",
        subcommands: object::SUBCOMMANDS,
        ..command("object", -2, 0, KeySpec::None, object::container, GENERIC, "A container for object introspection commands.")
    },
];

/// DEL and UNLINK: values are freed when their entry drops, so both delete in place.
fn del(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut deleted = 0;
    for key in &args[1..] {
        if ctx.db.remove(key).is_some() {
            deleted += 1;
            ctx.modified(key);
        }
    }
    ctx.reply.integer(deleted);
    Ok(())
}

/// EXISTS counts a key as many times as it is named.
fn exists(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let found = args[1..].iter().filter(|k| ctx.db.exists(k)).count();
    ctx.reply.integer(found as i64);
    Ok(())
}

fn key_type(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let name = match ctx.db.peek(args[1]) {
        Some(entry) => entry.value.kind().name(),
        None => "none",
    };
    ctx.reply.simple(name.as_bytes());
    Ok(())
}

fn touch(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let found = args[1..].iter().filter(|k| ctx.db.get(k).is_some()).count();
    ctx.reply.integer(found as i64);
    Ok(())
}

/// KEYS: every live key matching the pattern. The whole keyspace is locked (ALL_KEYS); the
/// reply is as large as the matching keyspace, which is why Redis warns against KEYS.
fn keys(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let pattern = args[1];
    let match_all = pattern == b"*";
    let now = ctx.db.now;
    let mut found: Vec<Key> = Vec::new();
    // Slots being imported are not listed before they are this node's.
    let hidden = ctx.db.keyspace().hidden();
    for (_, shard) in ctx.db.shards_mut() {
        for (_, table) in shard.visible_tables(hidden) {
            for (key, entry) in table.iter() {
                if !entry.is_expired(now) && (match_all || glob::matches(pattern, key, false)) {
                    found.push(key.to_key());
                }
            }
        }
    }
    ctx.reply.array(found.len());
    for key in &found {
        ctx.reply.bulk(key);
    }
    Ok(())
}

fn rename(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    rename_generic(ctx, args, false)
}

fn renamenx(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    rename_generic(ctx, args, true)
}

/// RENAME and RENAMENX: the entry moves whole, TTL included, replacing any destination.
fn rename_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], nx: bool) -> CmdResult {
    let (src, dst) = (args[1], args[2]);
    if !ctx.db.exists(src) {
        return Err(CmdError::NoSuchKey);
    }
    if src == dst {
        if nx {
            ctx.reply.integer(0);
        } else {
            ctx.reply.ok();
        }
        return Ok(());
    }
    if nx && ctx.db.exists(dst) {
        ctx.reply.integer(0);
        return Ok(());
    }
    // The key keeps its access stamps under the new name, as Redis moves the object whole.
    let (entry, access) = ctx.db.take(src).ok_or(CmdError::NoSuchKey)?;
    ctx.db.insert_with_access(dst, entry, access);
    ctx.name_event(GENERIC_EVENTS, "rename_from", WhenGone::Keep);
    ctx.modified(src);
    ctx.name_event(GENERIC_EVENTS, "rename_to", WhenGone::Keep);
    ctx.modified(dst);
    // A list or sorted set moved into place serves the clients blocked on its new name, as
    // a push there would (Redis signals every key a write adds).
    ctx.signal_ready(dst);
    if nx {
        ctx.reply.integer(1);
    } else {
        ctx.reply.ok();
    }
    Ok(())
}

/// RANDOMKEY: a uniformly chosen live key; expired keys met on the way are deleted. Keys of
/// slots being imported are not drawn before they are this node's.
fn randomkey(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let mut rng = rand::thread_rng();
    let hidden = ctx.db.keyspace().hidden();
    for _ in 0..RANDOMKEY_TRIES {
        let total: usize = ctx
            .db
            .shards_mut()
            .map(|(_, s)| s.visible_keys(hidden))
            .sum();
        if total == 0 {
            ctx.reply.null();
            return Ok(());
        }
        let Some((key, expired)) = nth_key(ctx, rng.gen_range(0..total)) else {
            break;
        };
        if !expired {
            ctx.reply.bulk(&key);
            return Ok(());
        }
        ctx.db.remove(&key);
    }
    // Mostly expired keys: walk for a live one instead of drawing on.
    let now = ctx.db.now;
    let live = ctx.db.shards_mut().find_map(|(_, shard)| {
        shard.visible_tables(hidden).find_map(|(_, t)| {
            t.iter()
                .find(|(_, e)| !e.is_expired(now))
                .map(|(k, _)| k.to_key())
        })
    });
    match live {
        Some(key) => ctx.reply.bulk(&key),
        None => ctx.reply.null(),
    }
    Ok(())
}

/// The `n`th visible key in shard, table and insertion order, and whether it has expired.
fn nth_key(ctx: &mut Ctx<'_>, mut n: usize) -> Option<(Key, bool)> {
    let now = ctx.db.now;
    let hidden = ctx.db.keyspace().hidden();
    for (_, shard) in ctx.db.shards_mut() {
        let visible = shard.visible_keys(hidden);
        if n >= visible {
            n -= visible;
            continue;
        }
        for (_, table) in shard.visible_tables(hidden) {
            if n < table.len() {
                return table
                    .get_index(n)
                    .map(|(k, e)| (k.to_key(), e.is_expired(now)));
            }
            n -= table.len();
        }
        return None;
    }
    None
}
