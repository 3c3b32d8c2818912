//! ACL LIST, USERS, WHOAMI, CAT, GENPASS, HELP.

use crate::command_framework::acl_check::user_of;
use crate::command_framework::args;
use crate::command_framework::error::err;
use crate::command_framework::{CmdResult, Ctx};
use crate::node_state::acl::catalog::{self, CATEGORIES};
use rand::RngCore;

pub fn list(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let lines = ctx.server.acl.describe_all();
    ctx.reply.array(lines.len());
    for l in lines {
        ctx.reply.bulk(l.as_bytes());
    }
    Ok(())
}

pub fn users(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let names = ctx.server.acl.usernames();
    ctx.reply.array(names.len());
    for n in names {
        ctx.reply.bulk(n.as_bytes());
    }
    Ok(())
}

pub fn whoami(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let name = user_of(ctx.server, ctx.client).name.clone();
    ctx.reply.bulk(name.as_bytes());
    Ok(())
}

/// ACL CAT [category]: the categories, or the commands and subcommands of one (the same
/// categories COMMAND INFO shows).
pub fn cat(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    match args.len() {
        2 => {
            ctx.reply.array(CATEGORIES.len());
            for c in CATEGORIES {
                ctx.reply.bulk(c.as_bytes());
            }
        }
        3 => {
            let name = args::text(args[2]);
            let Some(bit) = catalog::category_bit(&name) else {
                return err(format!("ERR Unknown category '{name}'"));
            };
            let names = catalog::get().in_category(bit);
            ctx.reply.array(names.len());
            for n in names {
                ctx.reply.bulk(n.as_bytes());
            }
        }
        _ => {
            return err(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
                args::text(args[1])
            ))
        }
    }
    Ok(())
}

/// Most bits ACL GENPASS gives (Redis's bound).
const GENPASS_BITS_MAX: i64 = 4096;

/// ACL GENPASS [bits]: random hex from the OS's generator, 256 bits unless asked.
pub fn genpass(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let bits = match args.get(2) {
        None => 256,
        Some(a) => match args::int(a) {
            Ok(b) if (1..=GENPASS_BITS_MAX).contains(&b) => b,
            _ => return err("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"),
        },
    };
    let chars = (bits as usize).div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let mut hex = String::with_capacity(chars + 1);
    for b in bytes {
        hex.push(char::from(b"0123456789abcdef"[(b >> 4) as usize]));
        hex.push(char::from(b"0123456789abcdef"[(b & 15) as usize]));
    }
    hex.truncate(chars);
    ctx.reply.bulk(hex.as_bytes());
    Ok(())
}

const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Prints this help.",
];

pub fn help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    crate::commands::introspection::reply_help(&mut ctx.reply, HELP);
    Ok(())
}
