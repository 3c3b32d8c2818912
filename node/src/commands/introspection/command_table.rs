//! COMMAND [COUNT | INFO | DOCS | GETKEYS | GETKEYSANDFLAGS | LIST | HELP]: the command table
//! as Redis 7.0 describes it to clients.

use crate::command_framework::args::{self, is};
use crate::command_framework::categories::categories;
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags, flags::*, KeySpec};
use crate::command_framework::table;
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::node_state::glob;
use proto::resp::Reply;

const FLAGS: u32 = LOADING | STALE;

pub static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "2.8.13",
        ..command(
            "command|count",
            2,
            FLAGS,
            KeySpec::None,
            count,
            "server",
            "Returns a count of commands.",
        )
    },
    CommandSpec {
        since: "2.8.13",
        ..command(
            "command|info",
            -2,
            FLAGS,
            KeySpec::None,
            info,
            "server",
            "Returns information about one, multiple or all commands.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "command|docs",
            -2,
            FLAGS,
            KeySpec::None,
            docs,
            "server",
            "Returns documentary information about one, multiple or all commands.",
        )
    },
    CommandSpec {
        since: "2.8.13",
        ..command(
            "command|getkeys",
            -4,
            FLAGS,
            KeySpec::None,
            getkeys,
            "server",
            "Extracts the key names from an arbitrary command.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "command|getkeysandflags",
            -4,
            FLAGS,
            KeySpec::None,
            getkeysandflags,
            "server",
            "Extracts the key names and access flags for an arbitrary command.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "command|list",
            -2,
            FLAGS,
            KeySpec::None,
            list,
            "server",
            "Returns a list of command names.",
        )
    },
    CommandSpec {
        since: "5.0.0",
        ..command(
            "command|help",
            2,
            FLAGS,
            KeySpec::None,
            help,
            "server",
            "Returns helpful text about the different subcommands.",
        )
    },
];

fn flag_names(spec: &CommandSpec) -> Vec<&'static str> {
    flags::NAMES
        .iter()
        .filter(|(f, _)| spec.has(*f))
        .map(|(_, n)| *n)
        .collect()
}

fn simple_set(reply: &mut Reply<'_>, items: &[&str]) {
    reply.set(items.len());
    for i in items {
        reply.simple(i.as_bytes());
    }
}

/// One COMMAND INFO entry: [name, arity, flags, first, last, step, categories, tips,
/// key specs, subcommands].
fn reply_info(reply: &mut Reply<'_>, spec: &CommandSpec) {
    reply.array(10);
    reply.bulk(spec.name.as_bytes());
    reply.integer(spec.arity as i64);
    simple_set(reply, &flag_names(spec));
    let (first, last, step) = spec.key_triple();
    reply.integer(first);
    reply.integer(last);
    reply.integer(step);
    let cats: Vec<String> = categories(spec).iter().map(|c| format!("@{c}")).collect();
    let cats: Vec<&str> = cats.iter().map(String::as_str).collect();
    simple_set(reply, &cats);
    reply.set(0);
    reply_key_specs(reply, spec);
    reply.array(spec.subcommands.len());
    for sub in spec.subcommands {
        reply_info(reply, sub);
    }
}

fn reply_key_specs(reply: &mut Reply<'_>, spec: &CommandSpec) {
    let (begin, find) = match spec.keys {
        KeySpec::None => {
            reply.set(0);
            return;
        }
        KeySpec::Range { first, last, step } => (
            Some(first),
            Some((if last < 0 { last } else { last - first }, step)),
        ),
        KeySpec::Custom(_) | KeySpec::CustomWithRange { .. } => (None, None),
    };
    reply.set(1);
    reply.map(3);
    reply.bulk(b"flags");
    simple_set(
        reply,
        crate::command_framework::key_access::by_command_flags(spec),
    );
    reply.bulk(b"begin_search");
    reply.map(2);
    reply.bulk(b"type");
    match begin {
        Some(index) => {
            reply.bulk(b"index");
            reply.bulk(b"spec");
            reply.map(1);
            reply.bulk(b"index");
            reply.integer(index as i64);
        }
        None => {
            reply.bulk(b"unknown");
            reply.bulk(b"spec");
            reply.map(0);
        }
    }
    reply.bulk(b"find_keys");
    reply.map(2);
    reply.bulk(b"type");
    match find {
        Some((lastkey, keystep)) => {
            reply.bulk(b"range");
            reply.bulk(b"spec");
            reply.map(3);
            reply.bulk(b"lastkey");
            reply.integer(lastkey as i64);
            reply.bulk(b"keystep");
            reply.integer(keystep as i64);
            reply.bulk(b"limit");
            reply.integer(0);
        }
        None => {
            reply.bulk(b"unknown");
            reply.bulk(b"spec");
            reply.map(0);
        }
    }
}

/// A command or `container|sub` by name, any case.
fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    match name.iter().position(|&b| b == b'|') {
        None => table::lookup(name),
        Some(bar) => table::lookup_sub(table::lookup(&name[..bar])?, &name[bar + 1..]),
    }
}

/// Bare COMMAND: every command's info.
pub fn all(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let specs = table::all();
    ctx.reply.array(specs.len());
    for spec in specs {
        reply_info(&mut ctx.reply, spec);
    }
    Ok(())
}

fn count(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    ctx.reply.integer(table::count() as i64);
    Ok(())
}

/// COMMAND INFO [name ...]: unknown names answer null; no names means every command.
fn info(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() == 2 {
        return all(ctx, args);
    }
    ctx.reply.array(args.len() - 2);
    for name in &args[2..] {
        match lookup(name) {
            Some(spec) => reply_info(&mut ctx.reply, spec),
            None => ctx.reply.null(),
        }
    }
    Ok(())
}

fn reply_doc(reply: &mut Reply<'_>, spec: &CommandSpec) {
    let has_subs = !spec.subcommands.is_empty();
    reply.map(3 + has_subs as usize);
    reply.bulk(b"summary");
    reply.bulk(spec.summary.as_bytes());
    reply.bulk(b"since");
    reply.bulk(spec.since.as_bytes());
    reply.bulk(b"group");
    reply.bulk(spec.group.as_bytes());
    if has_subs {
        reply.bulk(b"subcommands");
        reply.map(spec.subcommands.len());
        for sub in spec.subcommands {
            reply.bulk(sub.name.as_bytes());
            reply_doc(reply, sub);
        }
    }
}

/// COMMAND DOCS [name ...]: a map of name to docs; unknown names are left out.
fn docs(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let specs: Vec<&CommandSpec> = if args.len() == 2 {
        table::all()
    } else {
        args[2..].iter().filter_map(|n| lookup(n)).collect()
    };
    ctx.reply.map(specs.len());
    for spec in specs {
        ctx.reply.bulk(spec.name.as_bytes());
        reply_doc(&mut ctx.reply, spec);
    }
    Ok(())
}

/// The spec and argument indexes of the keys of a full command line, with Redis's errors.
fn keys_of(full: &[&[u8]]) -> Result<(&'static CommandSpec, Vec<usize>), CmdError> {
    let mut spec =
        table::lookup(full[0]).ok_or_else(|| CmdError::new("ERR Invalid command specified"))?;
    if !spec.subcommands.is_empty() && full.len() >= 2 {
        spec = table::lookup_sub(spec, full[1])
            .ok_or_else(|| CmdError::new("ERR Invalid command specified"))?;
    }
    if matches!(spec.keys, KeySpec::None) {
        return err("ERR The command has no key arguments");
    }
    if !spec.arity_ok(full.len()) {
        return err("ERR Invalid number of arguments specified for command");
    }
    let positions = spec.key_positions(full).to_vec();
    if positions.is_empty() && !NO_MANDATORY_KEYS.contains(&spec.name) {
        return err("ERR Invalid arguments specified for command");
    }
    Ok((spec, positions))
}

/// Commands Redis 7.0 flags `no_mandatory_keys`: a line of theirs naming no key is valid, and
/// COMMAND GETKEYS answers it with an empty list instead of an error.
const NO_MANDATORY_KEYS: &[&str] = &[
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
];

fn getkeys(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let full = &args[2..];
    let (_, positions) = keys_of(full)?;
    ctx.reply.array(positions.len());
    for i in positions {
        ctx.reply.bulk(full[i]);
    }
    Ok(())
}

fn getkeysandflags(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let full = &args[2..];
    let (spec, positions) = keys_of(full)?;
    ctx.reply.array(positions.len());
    for (nth, i) in positions.into_iter().enumerate() {
        ctx.reply.array(2);
        ctx.reply.bulk(full[i]);
        simple_set(
            &mut ctx.reply,
            crate::command_framework::key_access::flags_of_key(spec, full, i, nth),
        );
    }
    Ok(())
}

enum ListFilter<'a> {
    All,
    Module,
    Category(String),
    Pattern(&'a [u8]),
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]: names of
/// commands and of their subcommands (`config|get`).
fn list(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let filter = match &args[2..] {
        [] => ListFilter::All,
        [by, kind, value] if is(by, "filterby") => {
            if is(kind, "module") {
                ListFilter::Module
            } else if is(kind, "aclcat") {
                ListFilter::Category(args::lower(value))
            } else if is(kind, "pattern") {
                ListFilter::Pattern(value)
            } else {
                return Err(CmdError::Syntax);
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    let mut names: Vec<&'static str> = Vec::new();
    for spec in table::all() {
        for s in std::iter::once(spec).chain(spec.subcommands.iter()) {
            let keep = match &filter {
                ListFilter::All => true,
                // No modules are ever loaded.
                ListFilter::Module => false,
                ListFilter::Category(c) => categories(s).contains(&c.as_str()),
                ListFilter::Pattern(p) => glob::matches(p, s.name.as_bytes(), true),
            };
            if keep {
                names.push(s.name);
            }
        }
    }
    ctx.reply.array(names.len());
    for n in names {
        ctx.reply.bulk(n.as_bytes());
    }
    Ok(())
}

const HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
    "HELP",
    "    Prints this help.",
];

fn help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    super::reply_help(&mut ctx.reply, HELP);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> &'static CommandSpec {
        crate::commands::install_table();
        lookup(name.as_bytes()).unwrap_or_else(|| panic!("{name} in the table"))
    }

    #[test]
    fn categories_as_redis_derives_them() {
        assert_eq!(categories(spec("get")), ["read", "string", "fast"]);
        assert_eq!(categories(spec("del")), ["keyspace", "write", "slow"]);
        assert_eq!(
            categories(spec("keys")),
            ["keyspace", "read", "slow", "dangerous"]
        );
        assert_eq!(
            categories(spec("config|set")),
            ["admin", "slow", "dangerous"]
        );
        assert_eq!(categories(spec("config")), ["slow"]);
        assert_eq!(
            categories(spec("restore-asking")),
            ["keyspace", "write", "slow", "dangerous"]
        );
        assert_eq!(
            categories(spec("migrate")),
            ["keyspace", "write", "slow", "dangerous"]
        );
        assert_eq!(
            categories(spec("client|kill")),
            ["admin", "slow", "dangerous", "connection"]
        );
    }

    #[test]
    fn lookup_descends_into_containers() {
        assert_eq!(spec("CONFIG|get").name, "config|get");
        assert!(lookup(b"config|nosuch").is_none());
        assert!(lookup(b"nosuch").is_none());
    }

    #[test]
    fn getkeys_errors_as_redis() {
        crate::commands::install_table();
        let keys = |w: &[&str]| {
            let a: Vec<&[u8]> = w.iter().map(|s| s.as_bytes()).collect();
            keys_of(&a).map(|(_, p)| p).map_err(|e| e.to_string())
        };
        assert_eq!(keys(&["set", "a", "b"]).unwrap(), [1]);
        assert_eq!(keys(&["mset", "a", "1", "b", "2"]).unwrap(), [1, 3]);
        assert_eq!(keys(&["object", "encoding", "k"]).unwrap(), [2]);
        assert_eq!(
            keys(&["nosuch", "a"]).unwrap_err(),
            "ERR Invalid command specified"
        );
        assert_eq!(
            keys(&["config", "nosuch"]).unwrap_err(),
            "ERR Invalid command specified"
        );
        assert_eq!(
            keys(&["ping"]).unwrap_err(),
            "ERR The command has no key arguments"
        );
        assert_eq!(
            keys(&["get", "a", "b"]).unwrap_err(),
            "ERR Invalid number of arguments specified for command"
        );
    }
}
