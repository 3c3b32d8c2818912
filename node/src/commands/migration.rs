//! Moving keys between nodes, what `redis-cli --cluster reshard` drives: DUMP, RESTORE and
//! RESTORE-ASKING (`restore.rs`: one value as a payload in the snapshot format, with Redis's
//! payload layout and error texts) and MIGRATE (`migrate.rs`: DUMP here, RESTORE there,
//! delete here).

mod migrate;
mod restore;

use crate::command_framework::spec::{command, flags::*, KeySpec, KEY1};
use crate::command_framework::{CmdResult, CommandSpec, Ctx};
use crate::snapshot_format::dump;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "2.6.0",
        ..command(
            "dump",
            2,
            READONLY,
            KEY1,
            dump,
            "generic",
            "Returns a serialized representation of the value stored at a key.",
        )
    },
    CommandSpec {
        since: "2.6.0",
        ..command(
            "restore",
            -4,
            WRITE | DENYOOM,
            KEY1,
            restore::restore,
            "generic",
            "Creates a key from the serialized representation of a value.",
        )
    },
    CommandSpec {
        since: "3.0.0",
        ..command(
            "restore-asking",
            -4,
            WRITE | DENYOOM | ASKING,
            KEY1,
            restore::restore,
            "server",
            "An internal command for migrating keys in a cluster.",
        )
    },
    CommandSpec {
        since: "2.6.0",
        secrets: Some(migrate::secret_positions),
        ..command(
            "migrate",
            -6,
            WRITE | MOVABLE_KEYS,
            KeySpec::CustomWithRange {
                first: 3,
                last: 3,
                step: 1,
                find: migrate::key_positions,
            },
            migrate::migrate,
            "generic",
            "Atomically transfers a key from one Redis instance to another.",
        )
    },
];

/// DUMP key: the payload, or nil for a missing key.
fn dump(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Ctx { db, reply, .. } = ctx;
    match db.get(args[1]) {
        None => reply.null(),
        Some(entry) => reply.bulk(&dump::payload(&entry.value)),
    }
    Ok(())
}
