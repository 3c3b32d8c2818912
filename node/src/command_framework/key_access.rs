//! The access flags of a command's keys, as Redis 7.0's key specs give them (COMMAND INFO's
//! key specs, COMMAND GETKEYSANDFLAGS): whether a key is read (RO), read and written (RW),
//! overwritten without being read (OW) or removed (RM), and what happens to its data
//! (access, update, insert, delete). ACL rules and proxies route on these.

use crate::command_framework::spec::flags::{READONLY, WRITE};
use crate::command_framework::CommandSpec;

type Flags = &'static [&'static str];

const RO: Flags = &["RO"];
const RO_ACCESS: Flags = &["RO", "access"];
const RW_ACCESS_UPDATE: Flags = &["RW", "access", "update"];
const RW_ACCESS_DELETE: Flags = &["RW", "access", "delete"];
const RW_UPDATE: Flags = &["RW", "update"];
const RW_INSERT: Flags = &["RW", "insert"];
const RW_DELETE: Flags = &["RW", "delete"];
const OW_UPDATE: Flags = &["OW", "update"];
const OW_INSERT: Flags = &["OW", "insert"];
const RM_DELETE: Flags = &["RM", "delete"];

/// Commands whose keys all have the same flags (the first key's flags for the commands
/// that [`flags_of_key`] handles key by key).
const SAME_FOR_EVERY_KEY: &[(&str, Flags)] = &[
    // Strings.
    ("get", RO_ACCESS),
    ("mget", RO_ACCESS),
    ("getrange", RO_ACCESS),
    ("substr", RO_ACCESS),
    ("strlen", RO),
    // MEMORY USAGE looks at the key's size, not its data.
    ("memory|usage", RO),
    ("mset", OW_UPDATE),
    ("msetnx", OW_INSERT),
    ("setex", OW_UPDATE),
    ("psetex", OW_UPDATE),
    ("setnx", OW_INSERT),
    ("getset", RW_ACCESS_UPDATE),
    ("getdel", RW_ACCESS_DELETE),
    ("getex", RW_ACCESS_UPDATE),
    ("append", RW_INSERT),
    ("setrange", RW_UPDATE),
    ("incr", RW_ACCESS_UPDATE),
    ("decr", RW_ACCESS_UPDATE),
    ("incrby", RW_ACCESS_UPDATE),
    ("decrby", RW_ACCESS_UPDATE),
    ("incrbyfloat", RW_ACCESS_UPDATE),
    // Keys.
    ("del", RM_DELETE),
    ("unlink", RM_DELETE),
    ("exists", RO),
    ("type", RO),
    ("touch", RO),
    ("ttl", RO_ACCESS),
    ("pttl", RO_ACCESS),
    ("expiretime", RO_ACCESS),
    ("pexpiretime", RO_ACCESS),
    ("expire", RW_UPDATE),
    ("pexpire", RW_UPDATE),
    ("expireat", RW_UPDATE),
    ("pexpireat", RW_UPDATE),
    ("persist", RW_UPDATE),
    ("dump", RO_ACCESS),
    ("restore", OW_UPDATE),
    ("move", RW_ACCESS_DELETE),
    // Lists.
    ("lpush", RW_INSERT),
    ("rpush", RW_INSERT),
    ("lpushx", RW_INSERT),
    ("rpushx", RW_INSERT),
    ("lpop", RW_ACCESS_DELETE),
    ("rpop", RW_ACCESS_DELETE),
    ("blpop", RW_ACCESS_DELETE),
    ("brpop", RW_ACCESS_DELETE),
    ("lmpop", RW_ACCESS_DELETE),
    ("blmpop", RW_ACCESS_DELETE),
    ("llen", RO),
    ("lrange", RO_ACCESS),
    ("lindex", RO_ACCESS),
    ("lset", RW_UPDATE),
    ("linsert", RW_INSERT),
    ("lrem", RW_DELETE),
    ("ltrim", RW_DELETE),
    // Hashes.
    ("hset", RW_UPDATE),
    ("hmset", RW_UPDATE),
    ("hsetnx", RW_INSERT),
    ("hdel", RW_DELETE),
    ("hincrby", RW_ACCESS_UPDATE),
    ("hincrbyfloat", RW_ACCESS_UPDATE),
    ("hlen", RO),
    ("hexists", RO),
    ("hstrlen", RO),
    // Sets.
    ("sadd", RW_INSERT),
    ("srem", RW_DELETE),
    ("spop", RW_ACCESS_DELETE),
    ("scard", RO),
    ("sismember", RO),
    ("sintercard", RO_ACCESS),
    // Sorted sets.
    ("zadd", RW_UPDATE),
    ("zincrby", RW_ACCESS_UPDATE),
    ("zrem", RW_DELETE),
    ("zremrangebyscore", RW_DELETE),
    ("zremrangebyrank", RW_DELETE),
    ("zremrangebylex", RW_DELETE),
    ("zpopmin", RW_ACCESS_DELETE),
    ("zpopmax", RW_ACCESS_DELETE),
    ("bzpopmin", RW_ACCESS_DELETE),
    ("bzpopmax", RW_ACCESS_DELETE),
    ("zmpop", RW_ACCESS_DELETE),
    ("bzmpop", RW_ACCESS_DELETE),
    ("zcard", RO),
    ("zintercard", RO_ACCESS),
    // Writes that hand the key's data out: ACL rules must demand read access too, else a
    // write-only (`%W~`) user could read through them.
    ("bitfield", RW_ACCESS_UPDATE),
    ("migrate", RW_ACCESS_DELETE),
    ("xreadgroup", RW_ACCESS_UPDATE),
    ("xclaim", RW_ACCESS_UPDATE),
    ("xautoclaim", RW_ACCESS_UPDATE),
];

/// Commands whose first key is a source and whose other key is a destination.
const SOURCE_THEN_DESTINATION: &[(&str, Flags, Flags)] = &[
    ("rename", RW_ACCESS_DELETE, OW_UPDATE),
    ("renamenx", RW_ACCESS_DELETE, OW_INSERT),
    ("copy", RO_ACCESS, OW_UPDATE),
    ("lmove", RW_ACCESS_DELETE, RW_INSERT),
    ("blmove", RW_ACCESS_DELETE, RW_INSERT),
    ("rpoplpush", RW_ACCESS_DELETE, RW_INSERT),
    ("brpoplpush", RW_ACCESS_DELETE, RW_INSERT),
    ("smove", RW_ACCESS_DELETE, RW_INSERT),
    // GEORADIUS[BYMEMBER] read their key; the key after STORE/STOREDIST is written over.
    ("georadius", RO_ACCESS, OW_UPDATE),
    ("georadiusbymember", RO_ACCESS, OW_UPDATE),
];

/// Commands whose first key is the destination and the rest are read.
const DESTINATION_THEN_SOURCES: &[&str] = &[
    "sinterstore",
    "sunionstore",
    "sdiffstore",
    "zunionstore",
    "zinterstore",
    "zdiffstore",
    "zrangestore",
    "geosearchstore",
];

/// The flags of the key at argument `position` (the `nth` key, from 0) of `args`.
pub fn flags_of_key(spec: &CommandSpec, args: &[&[u8]], position: usize, nth: usize) -> Flags {
    let name = spec.name;
    match name {
        // SET reads the old value only with GET.
        "set" => {
            let get = args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
            return if get { RW_ACCESS_UPDATE } else { OW_UPDATE };
        }
        // SORT reads its key; the key after STORE is written over.
        "sort" => {
            let store = position >= 2 && args[position - 1].eq_ignore_ascii_case(b"store");
            return if store { OW_UPDATE } else { RO_ACCESS };
        }
        _ => {}
    }
    if let Some((_, source, destination)) =
        SOURCE_THEN_DESTINATION.iter().find(|(n, _, _)| *n == name)
    {
        return if nth == 0 { source } else { destination };
    }
    if DESTINATION_THEN_SOURCES.contains(&name) {
        // Redis 7.0's SINTERSTORE alone marks its destination RW (its key spec says so).
        let destination = if name == "sinterstore" {
            RW_UPDATE
        } else {
            OW_UPDATE
        };
        return if nth == 0 { destination } else { RO_ACCESS };
    }
    if let Some((_, flags)) = SAME_FOR_EVERY_KEY.iter().find(|(n, _)| *n == name) {
        return flags;
    }
    by_command_flags(spec)
}

/// Flags for a command without a key spec of its own here: a write may read and change its
/// keys, a read command reads them.
pub fn by_command_flags(spec: &CommandSpec) -> Flags {
    if spec.has(WRITE) {
        RW_UPDATE
    } else if spec.has(READONLY) {
        RO_ACCESS
    } else {
        RO
    }
}
