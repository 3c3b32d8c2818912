//! ACL: Redis 7.0's users and rules (the registry is `node_state::acl`; the check every
//! request passes is `command_framework::acl_check`). Subcommands: users (`users.rs`:
//! SETUSER GETUSER DELUSER), listings (`listing.rs`: LIST USERS WHOAMI CAT GENPASS HELP),
//! the log (`log.rs`), the file (`file.rs`: SAVE LOAD), DRYRUN (`dryrun.rs`), and the
//! disconnections a change of users causes (`disconnect.rs`).

mod disconnect;
mod dryrun;
mod file;
mod listing;
mod log;
mod users;

pub use file::load_at_start;

use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    since: "6.0.0",
    subcommands: SUBCOMMANDS,
    ..command(
        "acl",
        -2,
        0,
        KeySpec::None,
        container,
        "server",
        "A container for Access List Control commands.",
    )
}];

const ADMIN_FLAGS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;
const PLAIN_FLAGS: u32 = NOSCRIPT | LOADING | STALE;

static SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "acl|cat",
        -2,
        PLAIN_FLAGS,
        listing::cat,
        "Lists the ACL categories, or the commands inside a category.",
    ),
    sub(
        "acl|deluser",
        -3,
        ADMIN_FLAGS,
        users::deluser,
        "Deletes ACL users, and terminates their connections.",
    ),
    sub(
        "acl|dryrun",
        -4,
        ADMIN_FLAGS,
        dryrun::dryrun,
        "Simulates the execution of a command by a user, without executing the command.",
    ),
    sub(
        "acl|genpass",
        -2,
        PLAIN_FLAGS,
        listing::genpass,
        "Generates a pseudorandom, secure password that can be used to identify ACL users.",
    ),
    sub(
        "acl|getuser",
        3,
        ADMIN_FLAGS,
        users::getuser,
        "Lists the ACL rules of a user.",
    ),
    sub(
        "acl|help",
        2,
        LOADING | STALE,
        listing::help,
        "Returns helpful text about the different subcommands.",
    ),
    sub(
        "acl|list",
        2,
        ADMIN_FLAGS,
        listing::list,
        "Dumps the effective rules in ACL file format.",
    ),
    sub(
        "acl|load",
        2,
        ADMIN_FLAGS,
        file::load,
        "Reloads the rules from the configured ACL file.",
    ),
    sub(
        "acl|log",
        -2,
        ADMIN_FLAGS,
        log::log,
        "Lists recent security events generated due to ACL rules.",
    ),
    sub(
        "acl|save",
        2,
        ADMIN_FLAGS,
        file::save,
        "Saves the effective ACL rules in the configured ACL file.",
    ),
    CommandSpec {
        secrets: Some(setuser_secret_positions),
        ..sub(
            "acl|setuser",
            -3,
            ADMIN_FLAGS,
            users::setuser,
            "Creates and modifies an ACL user and its rules.",
        )
    },
    sub(
        "acl|users",
        2,
        ADMIN_FLAGS,
        listing::users,
        "Lists all ACL users.",
    ),
    sub(
        "acl|whoami",
        2,
        PLAIN_FLAGS,
        listing::whoami,
        "Returns the authenticated username of the current connection.",
    ),
];

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: crate::command_framework::spec::Handler,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        since: "6.0.0",
        ..command(
            name,
            arity,
            flags,
            KeySpec::None,
            handler,
            "server",
            summary,
        )
    }
}

fn container(_ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    Err(CmdError::Syntax)
}

/// ACL SETUSER's passwords (`>pass`, `<pass`), redacted wherever arguments are recorded.
fn setuser_secret_positions(args: &[&[u8]]) -> smallvec::SmallVec<[usize; 2]> {
    (3..args.len())
        .filter(|&i| args[i].first().is_some_and(|&b| b == b'>' || b == b'<'))
        .collect()
}
