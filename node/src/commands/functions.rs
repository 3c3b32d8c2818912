//! FUNCTION (Redis 7.0 Functions): LOAD, DELETE, FLUSH, DUMP, RESTORE, LIST, STATS, KILL and
//! HELP. FCALL is in `commands::fcall`; the libraries are `node_state::functions`, running
//! their code is `scripting::functions`.
//!
//! The subcommands that change the libraries write (a replica refuses them from clients) and
//! replicate as themselves, as Redis propagates them; they lock every shard, so that a
//! snapshot taken with every shard held sees a library either loaded or not.

use crate::command_framework::args;
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::node_state::functions::{flag, FunctionError, RestorePolicy, MAX_LIBRARY_CODE_BYTES};
use crate::snapshot_format::function_payload;
use std::sync::Arc;

const CHANGE: u32 = WRITE | NOSCRIPT | ALL_KEYS;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    since: "7.0.0",
    subcommands: SUBCOMMANDS,
    ..command(
        "function",
        -2,
        0,
        KeySpec::None,
        container,
        "scripting",
        "A container for function commands.",
    )
}];

static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "7.0.0",
        ..command(
            "function|load",
            -3,
            CHANGE | DENYOOM,
            KeySpec::None,
            load,
            "scripting",
            "Creates a library.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "function|delete",
            3,
            CHANGE,
            KeySpec::None,
            delete,
            "scripting",
            "Deletes a library and its functions.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "function|flush",
            -2,
            CHANGE,
            KeySpec::None,
            flush,
            "scripting",
            "Deletes all libraries and functions.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "function|restore",
            -3,
            CHANGE | DENYOOM,
            KeySpec::None,
            restore,
            "scripting",
            "Restores all libraries from a payload.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "function|dump",
            2,
            NOSCRIPT,
            KeySpec::None,
            dump,
            "scripting",
            "Dumps all libraries into a serialized binary payload.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "function|list",
            -2,
            NOSCRIPT,
            KeySpec::None,
            list,
            "scripting",
            "Returns information about all libraries.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "function|stats",
            2,
            NOSCRIPT,
            KeySpec::None,
            stats,
            "scripting",
            "Returns information about a function during execution.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "function|kill",
            2,
            NOSCRIPT,
            KeySpec::None,
            kill,
            "scripting",
            "Terminates a function during execution.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "function|help",
            2,
            LOADING | STALE,
            KeySpec::None,
            help,
            "scripting",
            "Returns helpful text about the different subcommands.",
        )
    },
];

fn container(_ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    Err(CmdError::Syntax)
}

/// Redis's `addReplySubcommandSyntaxError`.
fn subcommand_syntax(args: &[&[u8]]) -> CmdError {
    CmdError::new(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
        String::from_utf8_lossy(args[1])
    ))
}

fn change_error(e: FunctionError) -> CmdError {
    CmdError::Other(e.to_string().into())
}

/// A change to the dataset's state: counts for `save` rules and replicates the command.
fn changed(ctx: &mut Ctx<'_>) {
    ctx.effects.dirty += 1;
}

/// FUNCTION LOAD [REPLACE] code: runs the code once to learn its functions, then adds the
/// library. Answers the library's name.
fn load(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut replace = false;
    for option in &args[2..args.len() - 1] {
        if args::is(option, "replace") {
            replace = true;
        } else {
            return err(format!(
                "ERR Unknown option given: {}",
                String::from_utf8_lossy(option)
            ));
        }
    }
    let code = args[args.len() - 1];
    if code.len() > MAX_LIBRARY_CODE_BYTES {
        return err(format!(
            "ERR library code of {} bytes is over the limit of {MAX_LIBRARY_CODE_BYTES} bytes",
            code.len()
        ));
    }
    // Refused before running the code, after the name and engine checks, as Redis does.
    if !replace {
        if let Ok(meta) = crate::scripting::functions::parse_metadata(code) {
            let checked = crate::node_state::functions::valid_name(meta.name.as_bytes())
                && meta.engine.eq_ignore_ascii_case("lua");
            if checked
                && ctx
                    .server
                    .functions
                    .get()
                    .libraries
                    .contains_key(&meta.name)
            {
                return Err(change_error(FunctionError::LibraryExists(meta.name)));
            }
        }
    }
    let library = crate::scripting::functions::load_library(ctx.server, Arc::from(code))
        .map_err(|e| CmdError::Other(e.into()))?;
    let name = library.name.clone();
    ctx.server
        .functions
        .load(library, replace)
        .map_err(change_error)?;
    changed(ctx);
    ctx.reply.bulk(name.as_bytes());
    Ok(())
}

fn delete(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let name = String::from_utf8_lossy(args[2]);
    ctx.server.functions.delete(&name).map_err(change_error)?;
    changed(ctx);
    ctx.reply.ok();
    Ok(())
}

/// FUNCTION FLUSH [ASYNC | SYNC]: either way at once.
fn flush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(subcommand_syntax(args));
    }
    if let Some(mode) = args.get(2) {
        if !(args::is(mode, "async") || args::is(mode, "sync")) {
            return err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
        }
    }
    ctx.server.functions.flush();
    changed(ctx);
    ctx.reply.ok();
    Ok(())
}

fn dump(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let set = ctx.server.functions.get();
    let payload = function_payload::encode(set.libraries.values().map(|lib| &lib.code[..]));
    ctx.reply.bulk(&payload);
    Ok(())
}

/// FUNCTION RESTORE payload [FLUSH | APPEND | REPLACE]: every library of the payload or none.
fn restore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if args.len() > 4 {
        return Err(subcommand_syntax(args));
    }
    let policy =
        match args.get(3) {
            None => RestorePolicy::Append,
            Some(p) if args::is(p, "flush") => RestorePolicy::Flush,
            Some(p) if args::is(p, "append") => RestorePolicy::Append,
            Some(p) if args::is(p, "replace") => RestorePolicy::Replace,
            Some(_) => return err(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ),
        };
    let codes =
        function_payload::decode(args[2]).map_err(|e| CmdError::Other(e.to_string().into()))?;
    let libraries = crate::scripting::functions::load_all(ctx.server, codes)
        .map_err(|e| CmdError::Other(e.into()))?;
    ctx.server
        .functions
        .restore(libraries, policy)
        .map_err(change_error)?;
    changed(ctx);
    ctx.reply.ok();
    Ok(())
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
fn list(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        let arg = args[i];
        if !with_code && args::is(arg, "withcode") {
            with_code = true;
        } else if pattern.is_none() && args::is(arg, "libraryname") {
            let Some(p) = args.get(i + 1) else {
                return err("ERR library name argument was not given");
            };
            pattern = Some(p);
            i += 1;
        } else {
            return err(format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(arg)
            ));
        }
        i += 1;
    }
    let set = ctx.server.functions.get();
    let shown: Vec<_> = set
        .libraries
        .values()
        .filter(|lib| {
            pattern.is_none_or(|p| crate::node_state::glob::matches(p, lib.name.as_bytes(), true))
        })
        .collect();
    let reply = &mut ctx.reply;
    reply.array(shown.len());
    for lib in shown {
        reply.map(if with_code { 4 } else { 3 });
        reply.bulk(b"library_name");
        reply.bulk(lib.name.as_bytes());
        reply.bulk(b"engine");
        reply.bulk(b"LUA");
        reply.bulk(b"functions");
        reply.array(lib.functions.len());
        for f in &lib.functions {
            reply.map(3);
            reply.bulk(b"name");
            reply.bulk(f.name.as_bytes());
            reply.bulk(b"description");
            match &f.description {
                Some(d) => reply.bulk(d.as_bytes()),
                None => reply.null(),
            }
            reply.bulk(b"flags");
            let names: Vec<&str> = flag::NAMES
                .iter()
                .filter(|(bit, _)| f.flags & bit != 0)
                .map(|(_, name)| *name)
                .collect();
            reply.set(names.len());
            for name in names {
                reply.bulk(name.as_bytes());
            }
        }
        if with_code {
            reply.bulk(b"library_code");
            reply.bulk(&lib.code);
        }
    }
    Ok(())
}

/// FUNCTION STATS: the function running now, and the libraries' counts.
fn stats(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let set = ctx.server.functions.get();
    let running = ctx.server.running_script.running_function();
    let reply = &mut ctx.reply;
    reply.map(2);
    reply.bulk(b"running_script");
    match running {
        None => reply.null(),
        Some(run) => {
            reply.map(3);
            reply.bulk(b"name");
            reply.bulk(run.name.as_bytes());
            reply.bulk(b"command");
            reply.array(run.command.len());
            for arg in &run.command {
                reply.bulk(arg);
            }
            reply.bulk(b"duration_ms");
            let now = crate::clock::unix_millis();
            reply.integer(now.saturating_sub(run.started_ms) as i64);
        }
    }
    reply.bulk(b"engines");
    reply.map(1);
    reply.bulk(b"LUA");
    reply.map(2);
    reply.bulk(b"libraries_count");
    reply.integer(set.libraries.len() as i64);
    reply.bulk(b"functions_count");
    reply.integer(set.function_count() as i64);
    Ok(())
}

fn kill(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    super::scripting::kill_running(ctx, true)
}

fn help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    const LINES: &[&str] = &[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
        "      libraries with the new libraries (notice that even on this option there is a chance of failure",
        "      in case of functions name collision with another library).",
        "HELP",
        "    Prints this help.",
    ];
    crate::commands::introspection::reply_help(&mut ctx.reply, LINES);
    Ok(())
}
