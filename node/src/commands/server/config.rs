//! CONFIG GET | SET | RESETSTAT | REWRITE | HELP, over the parameter table of
//! `config/params.rs`.

use crate::command_framework::args;
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::config::params::{Param, ALIASES, PARAMS};
use crate::node_state::glob;

const FLAGS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

pub static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "2.0.0",
        ..command(
            "config|get",
            -3,
            FLAGS,
            KeySpec::None,
            get,
            "server",
            "Returns the effective values of configuration parameters.",
        )
    },
    CommandSpec {
        since: "2.0.0",
        ..command(
            "config|set",
            -4,
            FLAGS,
            KeySpec::None,
            set,
            "server",
            "Sets configuration parameters in-flight.",
        )
    },
    CommandSpec {
        since: "2.0.0",
        ..command(
            "config|resetstat",
            2,
            FLAGS,
            KeySpec::None,
            resetstat,
            "server",
            "Resets the server's statistics.",
        )
    },
    CommandSpec {
        since: "2.8.0",
        ..command(
            "config|rewrite",
            2,
            FLAGS,
            KeySpec::None,
            rewrite,
            "server",
            "Persists the effective configuration to file.",
        )
    },
    CommandSpec {
        since: "5.0.0",
        ..command(
            "config|help",
            2,
            LOADING | STALE,
            KeySpec::None,
            help,
            "server",
            "Returns helpful text about the different subcommands.",
        )
    },
];

/// The container itself never runs: the dispatcher picks a subcommand.
pub fn container(_ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    Err(CmdError::Syntax)
}

fn index_of(name: &str) -> Option<usize> {
    let name = crate::config::params::canonical_name(name);
    PARAMS
        .iter()
        .position(|p| p.name.eq_ignore_ascii_case(name))
}

/// CONFIG GET pattern [pattern ...]: a pattern without glob characters names one parameter
/// and is echoed as given (Redis does so for aliases); a glob matches names and aliases in
/// any case, each listed under the name it matched. A name comes back once however many
/// patterns match it; a parameter and its alias are two names (Redis 7.0 lists both).
fn get(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut out: Vec<(String, String)> = Vec::new();
    let config = ctx.server.config.read();
    let mut add = |name: String, i: usize| {
        if !out.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
            out.push((name, (PARAMS[i].get)(&config)));
        }
    };
    for pattern in &args[2..] {
        if pattern.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
            for (i, p) in PARAMS.iter().enumerate() {
                if glob::matches(pattern, p.name.as_bytes(), true) {
                    add(p.name.to_string(), i);
                }
            }
            for (alias, canonical) in ALIASES {
                if let (true, Some(i)) = (
                    glob::matches(pattern, alias.as_bytes(), true),
                    index_of(canonical),
                ) {
                    add(alias.to_string(), i);
                }
            }
        } else if let Some(i) = index_of(&args::text(pattern)) {
            add(args::text(pattern), i);
        }
    }
    drop(config);
    ctx.reply.map(out.len());
    for (name, value) in &out {
        ctx.reply.bulk(name.as_bytes());
        ctx.reply.bulk(value.as_bytes());
    }
    Ok(())
}

fn set_failed(name: &str, reason: &str) -> CmdError {
    CmdError::new(format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}"
    ))
}

/// CONFIG SET name value [name value ...]: all or nothing. Names are checked first (unknown,
/// immutable, repeated), then the values are applied to a copy that replaces the running
/// configuration only if every one of them was accepted.
fn set(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let pairs = args[2..].chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return Err(CmdError::Syntax);
    }
    let mut changes: Vec<(&'static Param, String, String)> = Vec::with_capacity(pairs.len());
    for pair in pairs {
        let name = args::text(pair[0]);
        let Some(i) = index_of(&name) else {
            return err(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            ));
        };
        let param = &PARAMS[i];
        if changes.iter().any(|(p, _, _)| std::ptr::eq(*p, param)) {
            return Err(set_failed(&name, "duplicate parameter"));
        }
        changes.push((param, name, args::text(pair[1])));
    }
    let mut config = ctx.server.config.write();
    let mut next = config.clone();
    for (param, name, value) in &changes {
        let set = (param.set)(&mut next, value);
        // A parameter fixed at start may still be "set" to the value it has (tools that
        // re-apply a whole config do so); any other value, even one it would refuse at
        // start, needs a restart, which Redis's error names.
        if !param.runtime && (set.is_err() || (param.get)(&next) != (param.get)(&config)) {
            return Err(set_failed(name, "can't set immutable config"));
        }
        set.map_err(|reason| set_failed(name, &reason))?;
    }
    *config = next;
    ctx.server.config_applied(&config);
    for (param, _, _) in &changes {
        ctx.server.param_set(&config, param.name);
    }
    ctx.services.persistence().apply_config(&config);
    drop(config);
    // A lowered `maxmemory` evicts at once, as Redis's CONFIG SET does (its
    // `performEvictions`), not at the next write. CONFIG names no keys, so this command
    // holds no shard that eviction would take; what cannot be freed is left for the
    // next write to refuse.
    if changes.iter().any(|(p, _, _)| p.name == "maxmemory") {
        let _ = crate::command_framework::eviction::make_room(
            ctx.server,
            ctx.services.write_stream(),
            std::time::Instant::now,
        );
    }
    tracing::info!(
        params = ?changes.iter().map(|(p, _, _)| p.name).collect::<Vec<_>>(),
        "CONFIG SET"
    );
    ctx.reply.ok();
    Ok(())
}

fn resetstat(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    ctx.server.stats.reset();
    ctx.server.command_stats.reset();
    ctx.reply.ok();
    Ok(())
}

fn rewrite(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let config = ctx.server.config.read().clone();
    let Some(path) = config.file.as_deref() else {
        return err("ERR The server is running without a config file");
    };
    crate::config::rewrite::rewrite_file(path, &config).map_err(|e| {
        tracing::warn!(path = %path.display(), error = %e, "CONFIG REWRITE failed");
        CmdError::new(format!("ERR Rewriting config file: {e}"))
    })?;
    tracing::info!(path = %path.display(), "CONFIG REWRITE executed with success");
    ctx.reply.ok();
    Ok(())
}

const HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Prints this help.",
];

fn help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    crate::commands::introspection::reply_help(&mut ctx.reply, HELP);
    Ok(())
}
