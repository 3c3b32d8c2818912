//! The keyspace event each command emits for the keys it changes, as Redis 7.0 names them.
//! A handler reports a change with [`Ctx::modified`](super::Ctx::modified), which records the
//! running command's event from this table; the few commands whose event depends on their
//! arguments or differs per key (RENAME, LMOVE, SMOVE, ZADD INCR...) rename it first with
//! [`Ctx::name_event`](super::Ctx::name_event), or add one with
//! [`Ctx::notify`](super::Ctx::notify).

use crate::config::keyspace_events::{GENERIC, HASH, LIST, SET, STREAM, STRING, ZSET};

/// What the event becomes when the changed key no longer exists afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenGone {
    /// `del` instead (EXPIRE in the past, GETDEL, a STORE with an empty result).
    Del,
    /// The event, then `del` (a pop or removal that emptied the key).
    AlsoDel,
    /// The event alone (RENAME's `rename_from`).
    Keep,
}

/// One command's event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandEvent {
    /// Its class (`config::keyspace_events::*`).
    pub class: u32,
    pub name: &'static str,
    pub when_gone: WhenGone,
}

const fn ev(class: u32, name: &'static str, when_gone: WhenGone) -> Option<CommandEvent> {
    Some(CommandEvent {
        class,
        name,
        when_gone,
    })
}

/// The event of the command named `name` (a subcommand as `parent|sub`), None for commands
/// that emit none (reads, and writes Redis does not notify such as XACK or PFCOUNT).
pub fn for_command(name: &str) -> Option<CommandEvent> {
    use WhenGone::{AlsoDel, Del, Keep};
    match name {
        // Generic.
        "del" | "unlink" | "migrate" | "getdel" => ev(GENERIC, "del", Del),
        "expire" | "pexpire" | "expireat" | "pexpireat" | "getex" => ev(GENERIC, "expire", Del),
        "persist" => ev(GENERIC, "persist", Keep),
        "rename" | "renamenx" => ev(GENERIC, "rename_to", Keep),
        "copy" => ev(GENERIC, "copy_to", Keep),
        "restore" | "restore-asking" => ev(GENERIC, "restore", Keep),
        "sort" => ev(LIST, "sortstore", Del),
        // Strings.
        "set" | "setnx" | "setex" | "psetex" | "getset" | "mset" | "msetnx" => {
            ev(STRING, "set", Keep)
        }
        "append" => ev(STRING, "append", Keep),
        "setrange" => ev(STRING, "setrange", Keep),
        "incr" | "decr" | "incrby" | "decrby" => ev(STRING, "incrby", Keep),
        "incrbyfloat" => ev(STRING, "incrbyfloat", Keep),
        "setbit" | "bitfield" => ev(STRING, "setbit", Keep),
        "bitop" => ev(STRING, "set", Del),
        "pfadd" | "pfmerge" => ev(STRING, "pfadd", Keep),
        // Lists.
        "lpush" | "lpushx" => ev(LIST, "lpush", Keep),
        "rpush" | "rpushx" => ev(LIST, "rpush", Keep),
        "lpop" | "blpop" => ev(LIST, "lpop", AlsoDel),
        "rpop" | "brpop" => ev(LIST, "rpop", AlsoDel),
        "linsert" => ev(LIST, "linsert", Keep),
        "lset" => ev(LIST, "lset", Keep),
        "lrem" => ev(LIST, "lrem", AlsoDel),
        "ltrim" => ev(LIST, "ltrim", AlsoDel),
        // LMOVE and LMPOP name their events by direction (`lists/pop.rs`).
        "lmove" | "blmove" | "rpoplpush" | "brpoplpush" | "lmpop" | "blmpop" => {
            ev(LIST, "lpop", AlsoDel)
        }
        // Sets.
        "sadd" => ev(SET, "sadd", Keep),
        "srem" => ev(SET, "srem", AlsoDel),
        "spop" => ev(SET, "spop", AlsoDel),
        "smove" => ev(SET, "srem", AlsoDel),
        "sinterstore" => ev(SET, "sinterstore", Del),
        "sunionstore" => ev(SET, "sunionstore", Del),
        "sdiffstore" => ev(SET, "sdiffstore", Del),
        // Hashes.
        "hset" | "hmset" | "hsetnx" => ev(HASH, "hset", Keep),
        "hdel" => ev(HASH, "hdel", AlsoDel),
        "hincrby" => ev(HASH, "hincrby", Keep),
        "hincrbyfloat" => ev(HASH, "hincrbyfloat", Keep),
        // Sorted sets (GEOADD is a ZADD in Redis, and notifies as one).
        "zadd" | "geoadd" => ev(ZSET, "zadd", Keep),
        "zincrby" => ev(ZSET, "zincr", Keep),
        "zrem" => ev(ZSET, "zrem", AlsoDel),
        "zremrangebyscore" => ev(ZSET, "zrembyscore", AlsoDel),
        "zremrangebyrank" => ev(ZSET, "zrembyrank", AlsoDel),
        "zremrangebylex" => ev(ZSET, "zrembylex", AlsoDel),
        "zpopmin" | "bzpopmin" | "zmpop" | "bzmpop" => ev(ZSET, "zpopmin", AlsoDel),
        "zpopmax" | "bzpopmax" => ev(ZSET, "zpopmax", AlsoDel),
        "zunionstore" => ev(ZSET, "zunionstore", Del),
        "zinterstore" => ev(ZSET, "zinterstore", Del),
        "zdiffstore" => ev(ZSET, "zdiffstore", Del),
        "zrangestore" => ev(ZSET, "zrangestore", Del),
        "georadius" | "georadiusbymember" => ev(ZSET, "georadiusstore", Del),
        "geosearchstore" => ev(ZSET, "geosearchstore", Del),
        // Streams (an emptied stream stays: `Keep`).
        "xadd" => ev(STREAM, "xadd", Keep),
        "xdel" => ev(STREAM, "xdel", Keep),
        "xtrim" => ev(STREAM, "xtrim", Keep),
        "xsetid" => ev(STREAM, "xsetid", Keep),
        "xgroup|create" => ev(STREAM, "xgroup-create", Keep),
        "xgroup|setid" => ev(STREAM, "xgroup-setid", Keep),
        "xgroup|destroy" => ev(STREAM, "xgroup-destroy", Keep),
        "xgroup|createconsumer" => ev(STREAM, "xgroup-createconsumer", Keep),
        "xgroup|delconsumer" => ev(STREAM, "xgroup-delconsumer", Keep),
        _ => None,
    }
}
