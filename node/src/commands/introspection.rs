//! Looking at the node from a client: INFO (`info.rs`, host readings in `host.rs`), CLIENT
//! (`client.rs`), COMMAND (`command_table.rs`, key flags in `command_framework::key_access`), LATENCY
//! (`latency.rs`), MEMORY (`memory.rs`), MONITOR (`monitor.rs`) and SLOWLOG (`slowlog.rs`).

mod client;
mod client_control;
mod client_tracking;
mod command_table;
mod host;
mod info;
mod latency;
mod memory;
mod monitor;
mod slowlog;

use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use proto::resp::Reply;

pub static COMMANDS: &[CommandSpec] = &[
    command(
        "info",
        -1,
        LOADING | STALE,
        KeySpec::None,
        info::info,
        "server",
        "Returns information and statistics about the server.",
    ),
    CommandSpec {
        since: "2.4.0",
        subcommands: client::SUBCOMMANDS,
        ..command(
            "client",
            -2,
            0,
            KeySpec::None,
            container,
            "connection",
            "A container for client connection commands.",
        )
    },
    CommandSpec {
        since: "2.8.13",
        subcommands: command_table::SUBCOMMANDS,
        ..command(
            "command",
            -1,
            LOADING | STALE,
            KeySpec::None,
            command_table::all,
            "server",
            "Returns detailed information about all commands.",
        )
    },
    command(
        "monitor",
        1,
        ADMIN | NOSCRIPT | LOADING | STALE,
        KeySpec::None,
        monitor::monitor,
        "server",
        "Listens for all requests received by the server in real-time.",
    ),
    CommandSpec {
        since: "2.8.13",
        subcommands: latency::SUBCOMMANDS,
        ..command(
            "latency",
            -2,
            0,
            KeySpec::None,
            container,
            "server",
            "A container for latency diagnostics commands.",
        )
    },
    CommandSpec {
        since: "4.0.0",
        subcommands: memory::SUBCOMMANDS,
        ..command(
            "memory",
            -2,
            0,
            KeySpec::None,
            container,
            "server",
            "A container for memory diagnostics commands.",
        )
    },
    CommandSpec {
        since: "2.2.12",
        subcommands: slowlog::SUBCOMMANDS,
        ..command(
            "slowlog",
            -2,
            0,
            KeySpec::None,
            container,
            "server",
            "A container for slow log commands.",
        )
    },
];

/// The handler of a container whose arity needs a subcommand: never called, the
/// dispatcher picks the subcommand.
fn container(_ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    Err(CmdError::Syntax)
}

/// A HELP reply: one status line per line of text, as Redis's `addReplyHelp` writes them.
pub fn reply_help(reply: &mut Reply<'_>, lines: &[&str]) {
    reply.array(lines.len());
    for line in lines {
        reply.simple(line.as_bytes());
    }
}

/// A client name as CLIENT SETNAME accepts it: no spaces or newlines, bounded length.
/// Empty clears the name.
pub fn validate_client_name(name: &[u8]) -> Result<Option<String>, CmdError> {
    if name.is_empty() {
        return Ok(None);
    }
    if name.len() > crate::node_state::client::MAX_CLIENT_NAME_LEN
        || name.iter().any(|&b| !(b'!'..=b'~').contains(&b))
    {
        return Err(CmdError::new(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(Some(String::from_utf8_lossy(name).into_owned()))
}
