//! Scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD / EXISTS / FLUSH /
//! KILL (Redis 7.0). The engine is `crate::scripting`.
//!
//! EVAL is declared ALL_KEYS: a script may touch keys it did not declare (outside cluster
//! mode), so it locks every shard and runs as one atomic step, as on Redis's single thread.
//! Its declared keys (`numkeys`) route it in cluster mode (CROSSSLOT, MOVED).

use crate::command_framework::args;
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::node_state::scripts::{KillOutcome, NOTBUSY_ERROR, UNKILLABLE_ERROR};
use crate::scripting::{sha1_hex, CallRules, Script};
use smallvec::SmallVec;
use std::sync::Arc;

const EVAL_FLAGS: u32 = NOSCRIPT | STALE | MAY_REPLICATE | MOVABLE_KEYS | ALL_KEYS;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "2.6.0",
        ..command(
            "eval",
            -3,
            EVAL_FLAGS,
            KeySpec::Custom(script_keys),
            eval,
            "scripting",
            "Executes a server-side Lua script.",
        )
    },
    CommandSpec {
        since: "2.6.0",
        ..command(
            "evalsha",
            -3,
            EVAL_FLAGS,
            KeySpec::Custom(script_keys),
            evalsha,
            "scripting",
            "Executes a server-side Lua script by SHA1 digest.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "eval_ro",
            -3,
            EVAL_FLAGS | READONLY,
            KeySpec::Custom(script_keys),
            eval_ro,
            "scripting",
            "Executes a read-only server-side Lua script.",
        )
    },
    CommandSpec {
        since: "7.0.0",
        ..command(
            "evalsha_ro",
            -3,
            EVAL_FLAGS | READONLY,
            KeySpec::Custom(script_keys),
            evalsha_ro,
            "scripting",
            "Executes a read-only server-side Lua script by SHA1 digest.",
        )
    },
    CommandSpec {
        since: "2.6.0",
        subcommands: SCRIPT_SUBCOMMANDS,
        ..command(
            "script",
            -2,
            0,
            KeySpec::None,
            container,
            "scripting",
            "A container for Lua scripts management commands.",
        )
    },
];

static SCRIPT_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "2.6.0",
        ..command(
            "script|load",
            3,
            NOSCRIPT | STALE,
            KeySpec::None,
            script_load,
            "scripting",
            "Loads a server-side Lua script to the script cache.",
        )
    },
    CommandSpec {
        since: "2.6.0",
        ..command(
            "script|exists",
            -3,
            NOSCRIPT,
            KeySpec::None,
            script_exists,
            "scripting",
            "Determines whether server-side Lua scripts exist in the script cache.",
        )
    },
    CommandSpec {
        since: "2.6.0",
        ..command(
            "script|flush",
            -2,
            NOSCRIPT,
            KeySpec::None,
            script_flush,
            "scripting",
            "Removes all server-side Lua scripts from the script cache.",
        )
    },
    CommandSpec {
        since: "2.6.0",
        ..command(
            "script|kill",
            2,
            NOSCRIPT,
            KeySpec::None,
            script_kill,
            "scripting",
            "Terminates a server-side Lua script during execution.",
        )
    },
    CommandSpec {
        since: "5.0.0",
        ..command(
            "script|help",
            2,
            LOADING | STALE,
            KeySpec::None,
            script_help,
            "scripting",
            "Returns helpful text about the different subcommands.",
        )
    },
];

fn container(_ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    Err(CmdError::Syntax)
}

/// The keys of `EVAL script numkeys key... arg...`: none when numkeys is not a count the
/// arguments hold (the command then fails before touching a key).
pub(crate) fn script_keys(args: &[&[u8]]) -> SmallVec<[usize; 16]> {
    match numkeys(args) {
        Ok(n) => (3..3 + n).collect(),
        Err(_) => SmallVec::new(),
    }
}

pub(crate) fn numkeys(args: &[&[u8]]) -> Result<usize, CmdError> {
    let n = args::int(args[2])?;
    if n < 0 {
        return err("ERR Number of keys can't be negative");
    }
    if n as u64 > (args.len() - 3) as u64 {
        return err("ERR Number of keys can't be greater than number of args");
    }
    Ok(n as usize)
}

/// What a script's `#!lua` line asks for.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Shebang {
    present: bool,
    no_writes: bool,
    no_cluster: bool,
    cross_slot: bool,
    allow_oom: bool,
    allow_stale: bool,
}

/// Reads `#!lua [flags=a,b]` from the script's first line (Redis 7.0's error texts).
fn shebang(body: &[u8]) -> Result<Shebang, CmdError> {
    let Some(rest) = body.strip_prefix(b"#!") else {
        return Ok(Shebang::default());
    };
    let line_end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    let line = String::from_utf8_lossy(&rest[..line_end]);
    let mut parts = line.split_whitespace();
    if parts.next() != Some("lua") {
        return err("ERR Unexpected engine in script shebang");
    }
    let mut out = Shebang {
        present: true,
        ..Shebang::default()
    };
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return err("ERR Unknown lua shebang option");
        };
        for flag in list.split(',').filter(|f| !f.is_empty()) {
            match flag {
                "no-writes" => out.no_writes = true,
                "no-cluster" => out.no_cluster = true,
                "allow-cross-slot-keys" => out.cross_slot = true,
                "allow-oom" => out.allow_oom = true,
                "allow-stale" => out.allow_stale = true,
                _ => return err("ERR Unexpected flag in script shebang"),
            }
        }
    }
    Ok(out)
}

/// The body Lua compiles: the `#!` of a shebang line made a comment, so that line numbers
/// stay those of the script as sent.
fn lua_body(body: &[u8]) -> Arc<[u8]> {
    if body.starts_with(b"#!") {
        let mut owned = body.to_vec();
        owned[..2].copy_from_slice(b"--");
        Arc::from(owned)
    } else {
        Arc::from(body)
    }
}

fn eval(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    eval_body(ctx, args, false)
}

fn eval_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    eval_body(ctx, args, true)
}

fn evalsha(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    eval_cached(ctx, args, false)
}

fn evalsha_ro(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    eval_cached(ctx, args, true)
}

fn eval_body(ctx: &mut Ctx<'_>, args: &[&[u8]], read_only: bool) -> CmdResult {
    let n = numkeys(args)?;
    let sha = sha1_hex(args[1]);
    let flags = shebang(args[1])?;
    let body = match ctx.server.scripts.get(&sha) {
        Some(body) => body,
        None => {
            let body = lua_body(args[1]);
            // Compiled before caching: a script that does not compile is not kept.
            crate::scripting::compile(ctx.server, &sha, &body)
                .map_err(|e| CmdError::Other(e.into()))?;
            ctx.server
                .scripts
                .insert(sha, body.clone(), false)
                .map_err(|e| CmdError::Other(e.to_string().into()))?;
            body
        }
    };
    execute(ctx, args, n, sha, body, flags, read_only)
}

fn eval_cached(ctx: &mut Ctx<'_>, args: &[&[u8]], read_only: bool) -> CmdResult {
    let n = numkeys(args)?;
    let Some(sha) = parse_sha(args[1]) else {
        return err("NOSCRIPT No matching script. Please use EVAL.");
    };
    let Some(body) = ctx.server.scripts.get(&sha) else {
        return err("NOSCRIPT No matching script. Please use EVAL.");
    };
    let flags = shebang(&original_first_line(&body))?;
    execute(ctx, args, n, sha, body, flags, read_only)
}

/// The cached body's shebang as sent (`lua_body` turned `#!` into `--`).
fn original_first_line(body: &[u8]) -> Vec<u8> {
    let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
    let line = &body[..end];
    match line.strip_prefix(b"--lua") {
        Some(rest) => [&b"#!lua"[..], rest].concat(),
        None => Vec::new(),
    }
}

fn execute(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    n: usize,
    sha: [u8; 40],
    body: Arc<[u8]>,
    flags: Shebang,
    read_only: bool,
) -> CmdResult {
    if flags.no_cluster && ctx.server.cluster.is_some() {
        return err("ERR Can not run script on cluster, 'no-cluster' flag is set.");
    }
    if flags.present && !flags.allow_stale {
        refuse_on_stale_replica(ctx)?;
    }
    // A script with a shebang declares whether it writes: one that may is refused at once
    // when memory is over the limit (unless `allow-oom`), as Redis 7 does.
    if flags.present
        && !flags.no_writes
        && !flags.allow_oom
        && !read_only
        && ctx.client.oom_before_script
    {
        return Err(CmdError::OutOfMemory);
    }
    if flags.present && !flags.no_writes && !read_only {
        refuse_writing_script(ctx)?;
    }
    let keys = &args[3..3 + n];
    let slot = keys.first().map(|k| proto::slot::key_slot(k));
    crate::scripting::run(
        ctx,
        Script {
            sha,
            body,
            keys,
            argv: &args[3 + n..],
            rules: CallRules {
                read_only: read_only || flags.no_writes,
                slot,
                cross_slot: flags.cross_slot,
                allow_oom: flags.allow_oom,
            },
        },
    )
}

/// A script that declares it may write is refused where writes are not allowed, before it
/// runs (Redis 7's `scriptPrepareForRun`): too few good replicas.
pub(crate) fn refuse_writing_script(ctx: &Ctx<'_>) -> CmdResult {
    if !ctx.client.primary_link
        && !crate::command_framework::dispatch::good_replicas_enough(ctx.server)
    {
        return err(crate::replication::ack::NOREPLICAS_ERROR);
    }
    Ok(())
}

/// A script or function without `allow-stale` is refused on a replica whose link is down
/// under `replica-serve-stale-data no` (Redis 7's `scriptPrepareForRun`); a script without a
/// shebang is not (Redis's compatibility mode).
pub(crate) fn refuse_on_stale_replica(ctx: &Ctx<'_>) -> CmdResult {
    if crate::command_framework::dispatch::refuses_stale(ctx.server, ctx.client) {
        return err(STALE_SCRIPT_ERROR);
    }
    Ok(())
}

/// Redis 7.0's refusal of a script without `allow-stale` on a stale replica.
pub const STALE_SCRIPT_ERROR: &str = "MASTERDOWN Link with MASTER is down, replica-serve-stale-data is set to 'no' and 'allow-stale' flag is not set on the script.";

/// 40 hex digits, lower-cased (EVALSHA accepts either case).
fn parse_sha(arg: &[u8]) -> Option<[u8; 40]> {
    if arg.len() != 40 || !arg.iter().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut sha = [0u8; 40];
    for (out, b) in sha.iter_mut().zip(arg) {
        *out = b.to_ascii_lowercase();
    }
    Some(sha)
}

/// SCRIPT LOAD script: compiled (a script that does not compile is refused), cached, and
/// its SHA1 answered.
fn script_load(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    shebang(args[2])?;
    let sha = sha1_hex(args[2]);
    let body = lua_body(args[2]);
    crate::scripting::compile(ctx.server, &sha, &body).map_err(|e| CmdError::Other(e.into()))?;
    ctx.server
        .scripts
        .insert(sha, body, true)
        .map_err(|e| CmdError::Other(e.to_string().into()))?;
    ctx.reply.bulk(&sha);
    Ok(())
}

fn script_exists(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    ctx.reply.array(args.len() - 2);
    for arg in &args[2..] {
        let known = parse_sha(arg).is_some_and(|sha| ctx.server.scripts.contains(&sha));
        ctx.reply.integer(known as i64);
    }
    Ok(())
}

/// SCRIPT FLUSH [ASYNC|SYNC]: either way at once (the cache is dropped in one step; each
/// thread's Lua state is rebuilt before its next script).
fn script_flush(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    match args.get(2) {
        None => {}
        Some(mode) if args.len() == 3 && (args::is(mode, "async") || args::is(mode, "sync")) => {}
        Some(_) => return err("ERR SCRIPT FLUSH only support SYNC|ASYNC option"),
    }
    ctx.server.scripts.flush();
    ctx.reply.ok();
    Ok(())
}

fn script_kill(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    kill_running(ctx, false)
}

/// SCRIPT KILL (`function` false) and FUNCTION KILL (true): each stops only its own kind; the
/// other kind running is answered BUSY naming the KILL that would stop it.
pub(crate) fn kill_running(ctx: &mut Ctx<'_>, function: bool) -> CmdResult {
    match ctx.server.running_script.kill(function) {
        KillOutcome::Killed => {
            ctx.reply.ok();
            Ok(())
        }
        KillOutcome::NotBusy => err(NOTBUSY_ERROR),
        KillOutcome::Unkillable => err(UNKILLABLE_ERROR),
        KillOutcome::OtherKind if function => err(crate::node_state::scripts::BUSY_ERROR),
        KillOutcome::OtherKind => err(crate::node_state::scripts::BUSY_FUNCTION_ERROR),
    }
}

fn script_help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    const LINES: &[&str] = &[
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache. Very dangerous on replicas.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
        "HELP",
        "    Prints this help.",
    ];
    crate::commands::introspection::reply_help(&mut ctx.reply, LINES);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lua_library_reports_the_servers_version() {
        assert_eq!(
            crate::scripting::redis_lib::REDIS_VERSION,
            crate::commands::connection::REDIS_COMPAT_VERSION
        );
    }

    #[test]
    fn shebang_flags_and_errors() {
        assert_eq!(shebang(b"return 1").unwrap(), Shebang::default());
        let s = shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap();
        assert!(s.present && s.no_writes && !s.no_cluster);
        assert_eq!(
            shebang(b"#!python\n").unwrap_err().to_string(),
            "ERR Unexpected engine in script shebang"
        );
        assert_eq!(
            shebang(b"#!lua name=x\n").unwrap_err().to_string(),
            "ERR Unknown lua shebang option"
        );
        assert_eq!(
            shebang(b"#!lua flags=bad\n").unwrap_err().to_string(),
            "ERR Unexpected flag in script shebang"
        );
        assert_eq!(
            original_first_line(&lua_body(b"#!lua flags=no-writes\nreturn 1")),
            b"#!lua flags=no-writes"
        );
    }

    #[test]
    fn keys_follow_numkeys() {
        let args: Vec<&[u8]> = vec![b"eval", b"s", b"2", b"a", b"b", b"c"];
        assert_eq!(script_keys(&args).as_slice(), &[3, 4]);
        let bad: Vec<&[u8]> = vec![b"eval", b"s", b"3", b"a"];
        assert!(script_keys(&bad).is_empty());
        assert_eq!(
            numkeys(&[b"eval", b"s", b"-1"]).unwrap_err().to_string(),
            "ERR Number of keys can't be negative"
        );
    }
}
