//! Command families, one file each. Every family exports `COMMANDS`, its table entries.

pub mod acl;
pub mod bitmaps;
pub mod cluster;
pub mod connection;
pub mod fcall;
pub mod functions;
pub mod geo;
pub mod hashes;
pub mod hyperloglog;
pub mod introspection;
pub mod keys;
pub mod lcs;
pub mod lists;
pub mod migration;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod streams;
pub mod strings;
pub mod transactions;
pub mod zsets;

use crate::command_framework::{table, CommandSpec};

/// Builds the command table from [`FAMILIES`] (once per process; `Server::new` calls it).
pub fn install_table() {
    table::install(FAMILIES);
}

/// Every family's commands; the table is built from these.
pub static FAMILIES: &[&[CommandSpec]] = &[
    connection::COMMANDS,
    strings::COMMANDS,
    bitmaps::COMMANDS,
    hyperloglog::COMMANDS,
    geo::COMMANDS,
    lcs::COMMANDS,
    keys::COMMANDS,
    sort::COMMANDS,
    lists::COMMANDS,
    hashes::COMMANDS,
    sets::COMMANDS,
    zsets::COMMANDS,
    streams::COMMANDS,
    transactions::COMMANDS,
    pubsub::COMMANDS,
    server::COMMANDS,
    introspection::COMMANDS,
    persistence::COMMANDS,
    migration::COMMANDS,
    cluster::COMMANDS,
    replication::COMMANDS,
    functions::COMMANDS,
    fcall::COMMANDS,
    acl::COMMANDS,
    scripting::COMMANDS,
];

#[cfg(test)]
mod tests {
    use crate::command_framework::table;

    /// The lookup's memo of the last name found answers only for those exact bytes: any
    /// other name, a prefix or an extension of it, another case, goes to the table.
    #[test]
    fn the_remembered_name_answers_only_for_itself() {
        super::install_table();
        let name_of = |n: &[u8]| table::lookup(n).map(|s| s.name);
        let sequence: [(&[u8], Option<&str>); 12] = [
            (b"GET", Some("get")),
            (b"GET", Some("get")),
            (b"GE", None),
            (b"GETEX", Some("getex")),
            (b"GET", Some("get")),
            (b"get", Some("get")),
            (b"GETT", None),
            (b"", None),
            (b"SET", Some("set")),
            (b"SeT", Some("set")),
            (b"ZRANGEBYSCORE", Some("zrangebyscore")),
            (b"ZRANGEBYSCORE\0\0\0\0", None),
        ];
        for (name, expected) in sequence {
            assert_eq!(name_of(name), expected, "{}", String::from_utf8_lossy(name));
        }
        // Names past the memo's length are found too, and never taken for a shorter one.
        let long = b"CLIENT-TRACKINGINFO-LONGER-THAN-16";
        assert_eq!(name_of(long), None);
        assert_eq!(
            name_of(b"georadiusbymember_ro"),
            Some("georadiusbymember_ro")
        );
        assert_eq!(name_of(b"georadiusbymember"), Some("georadiusbymember"));
    }

    #[test]
    fn the_single_key_shortcut_agrees_with_the_key_positions() {
        super::install_table();
        let mut specs = table::all();
        let subs: Vec<_> = specs.iter().flat_map(|s| s.subcommands.iter()).collect();
        specs.extend(subs);
        let mut shortcuts = 0;
        for spec in specs {
            for argc in 1..8 {
                let args = vec![&b"a"[..]; argc];
                if let Some(i) = spec.single_key_position(&args) {
                    assert_eq!(spec.key_positions(&args).as_slice(), &[i], "{}", spec.name);
                    shortcuts += 1;
                }
            }
        }
        assert!(shortcuts > 100, "GET, SET, LPUSH... take the shortcut");
    }

    /// Every write that names keys has a keyspace event, or is one Redis does not notify
    /// (listed here): a new write command must choose.
    #[test]
    fn every_keyed_write_has_a_keyspace_event() {
        use crate::command_framework::{flags, key_events};
        const SILENT_IN_REDIS: &[&str] = &[
            "flushall",
            "flushdb",
            "pfdebug",
            "pfcount",
            "xack",
            "xautoclaim",
            "xclaim",
            "xreadgroup",
            "move",
            "swapdb",
            "xgroup",
            "xgroup|help",
            "asking",
        ];
        super::install_table();
        let mut specs = table::all();
        let subs: Vec<_> = specs.iter().flat_map(|s| s.subcommands.iter()).collect();
        specs.extend(subs);
        let keyed_writes: Vec<&str> = specs
            .iter()
            .filter(|s| {
                s.has(flags::WRITE) && !matches!(s.keys, crate::command_framework::KeySpec::None)
            })
            .map(|s| s.name)
            .collect();
        assert!(keyed_writes.len() > 80, "{keyed_writes:?}");
        let missing: Vec<&str> = keyed_writes
            .into_iter()
            .filter(|n| key_events::for_command(n).is_none() && !SILENT_IN_REDIS.contains(n))
            .collect();
        assert!(missing.is_empty(), "writes without an event: {missing:?}");
        assert_eq!(
            key_events::for_command("xgroup|create").unwrap().name,
            "xgroup-create"
        );
    }
}
