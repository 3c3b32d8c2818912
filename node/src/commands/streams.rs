//! Streams, with Redis 7.0's replies and error texts: XADD XTRIM XDEL XSETID (`write`),
//! XLEN XRANGE XREVRANGE XREAD (`read`), XGROUP (`groups`), XREADGROUP (`readgroup`), XACK
//! XPENDING (`pending`), XCLAIM XAUTOCLAIM (`claim`), XINFO (`info`). `reply` writes
//! entries, `options` parses the trimming options XADD and XTRIM share, `blocking` the
//! waits of XREAD and XREADGROUP.
//!
//! Replication: writes whose arguments do not replay to the same state are rewritten, as
//! Redis rewrites them: XADD with `*` or `ms-*` carries the ID it generated, approximate or
//! limited trims (`~`, `LIMIT`) become exact ones (`=`) to the length or first ID they
//! reached, and XREADGROUP, XCLAIM and XAUTOCLAIM replicate as one `XCLAIM ... FORCE JUSTID
//! LASTID` per entry they delivered or claimed, `XGROUP SETID ... ENTRIESREAD` for the
//! group's new last ID and `XGROUP CREATECONSUMER` for a consumer they created.

mod blocking;
mod claim;
mod groups;
mod info;
mod options;
mod pending;
mod read;
mod readgroup;
mod reply;
mod write;

use crate::command_framework::spec::{command, flags::*, KeySpec, KEY1};
use crate::command_framework::{CmdError, CommandSpec};
use crate::db::stream::{id, Stream, StreamId};
use crate::db::{Locked, Value};
use smallvec::SmallVec;

const GROUP: &str = "stream";

/// Keys of subcommands (`XGROUP CREATE key ...`, `XINFO STREAM key`): argument 2.
const KEY2: KeySpec = KeySpec::Range {
    first: 2,
    last: 2,
    step: 1,
};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec { since: "5.0.0", ..command("xadd", -5, WRITE | DENYOOM | FAST, KEY1, write::xadd, GROUP, "Appends a new message to a stream. Creates the key if it doesn't exist.") },
    CommandSpec { since: "5.0.0", ..command("xtrim", -4, WRITE, KEY1, write::xtrim, GROUP, "Deletes messages from the beginning of a stream.") },
    CommandSpec { since: "5.0.0", ..command("xdel", -3, WRITE | FAST, KEY1, write::xdel, GROUP, "Returns the number of messages after removing them from a stream.") },
    CommandSpec { since: "5.0.0", ..command("xsetid", -3, WRITE | DENYOOM | FAST, KEY1, write::xsetid, GROUP, "An internal command for replicating stream values.") },
    CommandSpec { since: "5.0.0", ..command("xlen", 2, READONLY | FAST, KEY1, read::xlen, GROUP, "Return the number of messages in a stream.") },
    CommandSpec { since: "5.0.0", ..command("xrange", -4, READONLY, KEY1, read::xrange, GROUP, "Returns the messages from a stream within a range of IDs.") },
    CommandSpec { since: "5.0.0", ..command("xrevrange", -4, READONLY, KEY1, read::xrevrange, GROUP, "Returns the messages from a stream within a range of IDs in reverse order.") },
    CommandSpec { since: "5.0.0", ..command("xread", -4, READONLY | BLOCKING | MOVABLE_KEYS, KeySpec::Custom(xread_keys), read::xread, GROUP, "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.") },
    CommandSpec { since: "5.0.0", ..command("xreadgroup", -7, WRITE | BLOCKING | MOVABLE_KEYS, KeySpec::Custom(xread_keys), readgroup::xreadgroup, GROUP, "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.") },
    CommandSpec { since: "5.0.0", ..command("xack", -4, WRITE | FAST, KEY1, pending::xack, GROUP, "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.") },
    CommandSpec { since: "5.0.0", ..command("xpending", -3, READONLY, KEY1, pending::xpending, GROUP, "Returns the information and entries from a stream consumer group's pending entries list.") },
    CommandSpec { since: "5.0.0", ..command("xclaim", -6, WRITE | FAST, KEY1, claim::xclaim, GROUP, "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.") },
    CommandSpec { since: "6.2.0", ..command("xautoclaim", -6, WRITE | FAST, KEY1, claim::xautoclaim, GROUP, "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.") },
    CommandSpec {
        since: "5.0.0",
        subcommands: XGROUP_SUBCOMMANDS,
        ..command("xgroup", -2, 0, KeySpec::None, groups::container, GROUP, "A container for consumer groups commands.")
    },
    CommandSpec {
        since: "5.0.0",
        subcommands: XINFO_SUBCOMMANDS,
        ..command("xinfo", -2, 0, KeySpec::None, groups::container, GROUP, "A container for stream introspection commands.")
    },
];

static XGROUP_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "5.0.0",
        ..command(
            "xgroup|create",
            -5,
            WRITE | DENYOOM,
            KEY2,
            groups::create,
            GROUP,
            "Creates a consumer group.",
        )
    },
    CommandSpec {
        since: "5.0.0",
        ..command(
            "xgroup|setid",
            -5,
            WRITE,
            KEY2,
            groups::setid,
            GROUP,
            "Sets the last-delivered ID of a consumer group.",
        )
    },
    CommandSpec {
        since: "5.0.0",
        ..command(
            "xgroup|destroy",
            4,
            WRITE,
            KEY2,
            groups::destroy,
            GROUP,
            "Destroys a consumer group.",
        )
    },
    CommandSpec {
        since: "6.2.0",
        ..command(
            "xgroup|createconsumer",
            5,
            WRITE | DENYOOM,
            KEY2,
            groups::createconsumer,
            GROUP,
            "Creates a consumer in a consumer group.",
        )
    },
    CommandSpec {
        since: "5.0.0",
        ..command(
            "xgroup|delconsumer",
            5,
            WRITE,
            KEY2,
            groups::delconsumer,
            GROUP,
            "Deletes a consumer from a consumer group.",
        )
    },
    CommandSpec {
        since: "5.0.0",
        ..command(
            "xgroup|help",
            2,
            LOADING | STALE,
            KeySpec::None,
            groups::help,
            GROUP,
            "Returns helpful text about the different subcommands.",
        )
    },
];

static XINFO_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "5.0.0",
        ..command(
            "xinfo|stream",
            -3,
            READONLY,
            KEY2,
            info::stream,
            GROUP,
            "Returns information about a stream.",
        )
    },
    CommandSpec {
        since: "5.0.0",
        ..command(
            "xinfo|groups",
            3,
            READONLY,
            KEY2,
            info::groups,
            GROUP,
            "Returns a list of the consumer groups of a stream.",
        )
    },
    CommandSpec {
        since: "5.0.0",
        ..command(
            "xinfo|consumers",
            4,
            READONLY,
            KEY2,
            info::consumers,
            GROUP,
            "Returns a list of the consumers in a consumer group.",
        )
    },
    CommandSpec {
        since: "5.0.0",
        ..command(
            "xinfo|help",
            2,
            LOADING | STALE,
            KeySpec::None,
            info::help,
            GROUP,
            "Returns helpful text about the different subcommands.",
        )
    },
];

/// The keys of XREAD/XREADGROUP: the first half of the arguments after `STREAMS`. An odd
/// count yields no keys: the handler then answers its error before touching any key.
fn xread_keys(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    let Some(at) = streams_keyword(args) else {
        return SmallVec::new();
    };
    let rest = args.len() - at - 1;
    if rest == 0 || !rest.is_multiple_of(2) {
        return SmallVec::new();
    }
    (at + 1..at + 1 + rest / 2).collect()
}

/// Index of the `STREAMS` keyword, found the way the option parser walks the arguments
/// (BLOCK, COUNT take a value, GROUP two; so a key or group named "streams" is not it).
fn streams_keyword(args: &[&[u8]]) -> Option<usize> {
    let mut i = 1;
    while i < args.len() {
        let a = args[i];
        let more = args.len() - i - 1;
        if (a.eq_ignore_ascii_case(b"block") || a.eq_ignore_ascii_case(b"count")) && more > 0 {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"group") && more >= 2 {
            i += 3;
        } else if a.eq_ignore_ascii_case(b"streams") && more > 0 {
            return Some(i);
        } else {
            i += 1;
        }
    }
    None
}

/// The stream at `key`: None when there is no key, WRONGTYPE when it holds another type.
fn stream_at<'a>(db: &'a mut Locked<'_>, key: &[u8]) -> Result<Option<&'a mut Stream>, CmdError> {
    match db.get(key) {
        None => Ok(None),
        Some(entry) => match &mut entry.value {
            Value::Stream(s) => Ok(Some(s)),
            _ => Err(CmdError::WrongType),
        },
    }
}

const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

fn invalid_id() -> CmdError {
    CmdError::new(INVALID_ID)
}

/// A strict ID argument (no `-`, `+`).
fn strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    id::parse_strict(arg).ok_or_else(invalid_id)
}

/// The start of an interval (`-`, an ID, `(ID`), exclusive starts moved past.
fn range_start(arg: &[u8]) -> Result<StreamId, CmdError> {
    let (id, exclusive) = id::parse_interval(arg, 0).ok_or_else(invalid_id)?;
    if exclusive {
        return id
            .incr()
            .ok_or_else(|| CmdError::new("ERR invalid start ID for the interval"));
    }
    Ok(id)
}

/// The end of an interval (`+`, an ID, `(ID`), exclusive ends moved before.
fn range_end(arg: &[u8]) -> Result<StreamId, CmdError> {
    let (id, exclusive) = id::parse_interval(arg, u64::MAX).ok_or_else(invalid_id)?;
    if exclusive {
        return id
            .decr()
            .ok_or_else(|| CmdError::new("ERR invalid end ID for the interval"));
    }
    Ok(id)
}

/// An integer argument, with Redis's generic error or the one given.
fn int_or(arg: &[u8], error: &'static str) -> Result<i64, CmdError> {
    proto::resp::request::parse_i64(arg).ok_or_else(|| CmdError::new(error))
}

fn int(arg: &[u8]) -> Result<i64, CmdError> {
    proto::resp::request::parse_i64(arg).ok_or(CmdError::NotInteger)
}

/// The NOGROUP error most commands answer for a missing key or group.
fn no_group(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::new(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xread_key_positions() {
        let a: Vec<&[u8]> = vec![b"xread", b"COUNT", b"2", b"STREAMS", b"a", b"b", b"0", b"0"];
        assert_eq!(xread_keys(&a).as_slice(), &[4, 5]);
        let g: Vec<&[u8]> = vec![
            b"xreadgroup",
            b"GROUP",
            b"streams",
            b"c",
            b"STREAMS",
            b"k",
            b">",
        ];
        assert_eq!(xread_keys(&g).as_slice(), &[5]);
        let odd: Vec<&[u8]> = vec![b"xread", b"STREAMS", b"a", b"b", b"0"];
        assert!(xread_keys(&odd).is_empty());
        let none: Vec<&[u8]> = vec![b"xread", b"COUNT", b"STREAMS"];
        assert!(xread_keys(&none).is_empty());
    }
}
