//! Running one script for a client: the thread's Lua state, KEYS and ARGV, `redis.call`
//! bound to this client's context for the run, the kill/time hook, and the script's result
//! or error written as the client's reply.
//!
//! The script runs to completion on the connection thread that received it, holding every
//! shard (EVAL is declared ALL_KEYS), so it is atomic as in Redis. A script that ends within
//! `busy-reply-threshold` (nearly all) costs no thread switch. Once one runs past it, its
//! hook hands the io-thread's event loop to a fresh thread (tokio's `block_in_place`) and the
//! script goes on where it is: the other clients are read again, and the dispatcher answers
//! them BUSY (`RunningScript`) except for SCRIPT KILL and the few Redis lets through, as Redis
//! does once a script passes the threshold. Before it, nobody else's command runs on that
//! event loop, as in Redis.

use super::call::{acl_check_from_lua, dispatch_from_lua, CallRules, COUNTED_FIELD};
use super::convert::{lua_to_frame, write_reply};
use super::engine::{outside_the_limit, run_state, set_run_state, Engine, RunState};
use super::errors::{final_text, message_of};
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::db::Key;
use crate::node_state::scripts::Body;
use crate::node_state::stats::LocalStats;
use mlua::{HookTriggers, MultiValue, Value, VmState};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Instructions between two looks at SCRIPT KILL's flag (Redis checks every 100000).
const HOOK_EVERY: u32 = 100_000;

/// What SCRIPT KILL makes the script raise.
pub const KILLED_MESSAGE: &str = "Script killed by user with SCRIPT KILL...";

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// One script to run.
pub struct Script<'a> {
    pub sha: [u8; 40],
    pub body: Body,
    pub keys: &'a [&'a [u8]],
    pub argv: &'a [&'a [u8]],
    pub rules: CallRules,
}

/// Runs `script` and writes its reply (or returns its error).
pub fn run(ctx: &mut Ctx<'_>, script: Script<'_>) -> CmdResult {
    let server = ctx.server;
    with_engine(server, |engine| Ok(run_script_in(engine, ctx, script)))
        .map_err(|e| CmdError::Other(e.into()))?
}

fn run_script_in(engine: &mut Engine, ctx: &mut Ctx<'_>, script: Script<'_>) -> CmdResult {
    let sha_text = String::from_utf8_lossy(&script.sha).into_owned();
    let function = engine.function(&script.sha, &script.body).map_err(|e| {
        CmdError::Other(format!("ERR Error compiling script (new function): {e}").into())
    })?;
    engine
        .set_arguments(script.keys, script.argv)
        .map_err(|e| CmdError::Other(format!("ERR {}", message_of(&e)).into()))?;
    let kill = ctx.server.running_script.start(crate::clock::unix_millis());
    run_in(
        engine,
        ctx,
        Running {
            function,
            label: &sha_text,
            keys: script.keys,
            rules: script.rules,
        },
        kill,
    )
}

/// One FCALL to run.
pub struct FunctionCall<'a> {
    /// The function's name as FCALL gave it (any case).
    pub name: &'a str,
    pub keys: &'a [&'a [u8]],
    pub argv: &'a [&'a [u8]],
    pub rules: CallRules,
    /// The whole command, for FUNCTION STATS.
    pub command: &'a [&'a [u8]],
}

/// Runs the function `call` names (its library loaded into this thread's Lua state first if
/// it is new here) and writes its reply (or returns its error).
pub fn run_function(ctx: &mut Ctx<'_>, call: FunctionCall<'_>) -> CmdResult {
    let server = ctx.server;
    let set = server.functions.get();
    with_engine(server, |engine| {
        super::functions::sync(engine, &set);
        let Some((registered, function)) = engine.libraries.function(call.name) else {
            return Ok(Err(CmdError::new("ERR Function not found")));
        };
        Ok(run_function_in(engine, ctx, &call, registered, function))
    })
    .map_err(|e| CmdError::Other(e.into()))?
}

fn run_function_in(
    engine: &mut Engine,
    ctx: &mut Ctx<'_>,
    call: &FunctionCall<'_>,
    registered: String,
    function: mlua::Function,
) -> CmdResult {
    let args = engine
        .argument_tables(call.keys, call.argv)
        .and_then(|(keys, argv)| {
            engine.hidden.raw_set("keys", keys)?;
            engine.hidden.raw_set("argv", argv)?;
            engine.hidden.raw_set("fn", function)
        });
    if let Err(e) = args {
        return Err(CmdError::Other(format!("ERR {}", message_of(&e)).into()));
    }
    let trampoline: mlua::Function = engine
        .hidden
        .raw_get("call_function")
        .map_err(|e| CmdError::Other(format!("ERR {}", message_of(&e)).into()))?;
    let kill = ctx.server.running_script.start_function(
        crate::clock::unix_millis(),
        &registered,
        call.command,
    );
    let running = Running {
        function: trampoline,
        label: &registered,
        keys: call.keys,
        rules: call.rules,
    };
    let out = run_in(engine, ctx, running, kill);
    for field in ["keys", "argv", "fn"] {
        let _ = engine.hidden.raw_set(field, Value::Nil);
    }
    out
}

/// Runs `f` with this thread's Lua state, started (or restarted after SCRIPT FLUSH) first.
/// Err: the client's error text.
pub(super) fn with_engine<T>(
    server: &crate::node_state::NodeState,
    f: impl FnOnce(&mut Engine) -> Result<T, String>,
) -> Result<T, String> {
    ENGINE.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return Err("ERR a script cannot run a script".to_string());
        };
        let generation = server.scripts.generation();
        if slot.as_ref().is_none_or(|e| e.generation() != generation) {
            *slot = None;
            *slot =
                Some(Engine::new(generation).map_err(|e| format!("ERR cannot start Lua: {e}"))?);
        }
        let Some(engine) = slot.as_mut() else {
            return Err("ERR cannot start Lua".to_string());
        };
        f(engine)
    })
}

/// Hands this thread's event loop to another thread, when this is a worker of the io
/// runtime (always multi-threaded for this reason: see `app::run`): a worker busy in a
/// script neither polls the I/O driver nor lets another worker take it over, so without
/// this no other client would be read (and answered BUSY, or SCRIPT KILL heard) until the
/// script ends. The script goes on on this thread, which leaves the runtime's workers when
/// its connection next waits. Elsewhere (a fabric client's thread, loading at start) there
/// is no loop to hand over. Returns whether the loop is known to run elsewhere now; false
/// asks the caller to try again later.
///
/// `block_in_place` offers the worker to a fresh thread for as long as its closure runs and
/// takes it back at the end if that thread has not started yet: an empty closure would hand
/// nothing over. So the closure waits until a task spawned from it has run, which (with one
/// io-thread, the case that needs this) only the thread that took the worker can do.
fn hand_off_the_event_loop() -> bool {
    use std::sync::Arc;
    use tokio::runtime::{Handle, RuntimeFlavor};
    let Ok(handle) = Handle::try_current() else {
        return true;
    };
    if handle.runtime_flavor() != RuntimeFlavor::MultiThread {
        return true;
    }
    tokio::task::block_in_place(|| {
        let taken = Arc::new(AtomicBool::new(false));
        let probe = taken.clone();
        handle.spawn(async move { probe.store(true, Relaxed) });
        let deadline = Instant::now() + HAND_OFF_WAIT;
        while !taken.load(Relaxed) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(100));
        }
        taken.load(Relaxed)
    })
}

/// How long one try of [`hand_off_the_event_loop`] waits for the new thread to take over.
const HAND_OFF_WAIT: Duration = Duration::from_millis(100);

/// Compiles `body` into the thread's state (SCRIPT LOAD checks a script before caching it).
/// Err: the client's error text.
pub fn compile(
    server: &crate::node_state::NodeState,
    sha: &[u8; 40],
    body: &[u8],
) -> Result<(), String> {
    with_engine(server, |engine| {
        engine
            .function(sha, body)
            .map(|_| ())
            .map_err(|e| format!("ERR Error compiling script (new function): {e}"))
    })
}

/// The script's error reply; `counted` when it is a command's error that INFO errorstats
/// already counted when the command failed.
fn script_error(text: String, counted: bool) -> CmdError {
    if counted {
        CmdError::Counted(text.into())
    } else {
        CmdError::Other(text.into())
    }
}

/// What [`run_in`] runs: a script's chunk or a function's trampoline, the name errors give
/// it (the SHA1 or the function), the keys it declared, and what `redis.call` may do.
struct Running<'a> {
    function: mlua::Function,
    label: &'a str,
    keys: &'a [&'a [u8]],
    rules: CallRules,
}

/// Runs `running` under the kill hook, with `redis.call` bound to this client.
fn run_in(
    engine: &mut Engine,
    ctx: &mut Ctx<'_>,
    running: Running<'_>,
    kill: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> CmdResult {
    let Running {
        function,
        label,
        keys,
        rules,
    } = running;
    set_run_state(&engine.lua, RunState::default());
    // A tracking caller remembers the declared keys for any read the script makes.
    if ctx
        .client
        .tracking
        .remembers(ctx.client.shared.tracking.flags())
    {
        ctx.client.tracking.script_keys = keys.iter().map(|k| Key::from(*k)).collect();
    }
    // Past `busy-reply-threshold` the event loop goes to another thread, once (see the
    // module's comment); the threshold as it was when the script started.
    let started = Instant::now();
    let hand_off_after =
        Duration::from_millis(ctx.server.hot.busy_reply_threshold_ms.load(Relaxed));
    let handed_off = AtomicBool::new(false);
    engine.lua.set_hook(
        HookTriggers::new().every_nth_instruction(HOOK_EVERY),
        move |lua, _| {
            if !handed_off.load(Relaxed) && started.elapsed() >= hand_off_after {
                handed_off.store(hand_off_the_event_loop(), Relaxed);
            }
            if kill.load(Relaxed) {
                // From now on every instruction raises, so that a `pcall` catching the
                // error cannot keep the script going (Redis switches to a line hook).
                lua.set_hook(HookTriggers::new().every_nth_instruction(1), |_, _| {
                    Err(mlua::Error::runtime(KILLED_MESSAGE))
                });
                return Err(mlua::Error::runtime(KILLED_MESSAGE));
            }
            Ok(VmState::Continue)
        },
    );
    let mut stats = LocalStats::default();
    ctx.client.in_script = true;
    // A SELECT inside the script lasts for the script's run only (Redis 7).
    let caller_db = ctx.client.db;
    let outcome = {
        let ctx_cell = RefCell::new(&mut *ctx);
        let stats_cell = RefCell::new(&mut stats);
        let lua = &engine.lua;
        lua.scope(|scope| {
            // The run's two callbacks (see `outside_the_limit`).
            outside_the_limit(lua, || -> mlua::Result<()> {
                let dispatch = scope.create_function(|lua, args| {
                    let mut ctx = ctx_cell
                        .try_borrow_mut()
                        .map_err(|_| mlua::Error::runtime("redis.call is not reentrant"))?;
                    let mut stats = stats_cell
                        .try_borrow_mut()
                        .map_err(|_| mlua::Error::runtime("redis.call is not reentrant"))?;
                    dispatch_from_lua(lua, &mut ctx, rules, &mut stats, args)
                })?;
                engine.hidden.raw_set("dispatch", dispatch)?;
                let acl_check = scope.create_function(|_, args| {
                    let ctx = ctx_cell.try_borrow().map_err(|_| {
                        mlua::Error::runtime("redis.acl_check_cmd is not reentrant")
                    })?;
                    acl_check_from_lua(&ctx, args)
                })?;
                engine.hidden.raw_set("acl_check", acl_check)
            })?;
            let mut results: MultiValue = engine
                .xpcall
                .call((function.clone(), engine.handler.clone()))?;
            outside_the_limit(lua, || {
                engine.hidden.raw_set("dispatch", Value::Nil)?;
                engine.hidden.raw_set("acl_check", Value::Nil)?;
                let ok = matches!(results.pop_front(), Some(Value::Boolean(true)));
                let value = results.pop_front().unwrap_or(Value::Nil);
                let resp = run_state(lua).resp;
                let counted = match &value {
                    Value::Table(t) => t.raw_get::<bool>(COUNTED_FIELD).unwrap_or(false),
                    _ => false,
                };
                Ok(if ok {
                    Ok((lua_to_frame(&value, resp, 0), counted))
                } else {
                    Err((final_text(&value, label), counted))
                })
            })
        })
    };
    engine.lua.remove_hook();
    // A script that ran into the memory limit (or near it) leaves its garbage behind, and
    // Lua 5.1 has no emergency collection: the next script, even its compilation, would meet
    // the limit too. A full collection then, only then (it walks every live object).
    if engine.lua.used_memory() > super::engine::LUA_MEMORY_LIMIT / 2 {
        if let Err(e) = engine.lua.gc_collect() {
            tracing::warn!(error = %e, "collecting a script's garbage");
        }
    }
    if ctx.client.db != caller_db {
        if let Err(e) = ctx.switch_db(caller_db) {
            tracing::error!(error = %e, "cannot return to the caller's database after a script");
        }
        ctx.client.select(caller_db);
    }
    ctx.client.in_script = false;
    ctx.client.tracking.script_keys.clear();
    ctx.server.running_script.finish();
    stats.flush(&ctx.server.stats);
    match outcome {
        Ok(Ok((frame, counted))) => {
            if let proto::resp::Frame::Error(text) = &frame {
                // A script returning an error table: the reply is that error, as the
                // command's failure (Redis counts it in errorstats and failed_calls, once).
                return Err(script_error(
                    String::from_utf8_lossy(text).into_owned(),
                    counted,
                ));
            }
            write_reply(&frame, &mut ctx.reply);
            Ok(())
        }
        Ok(Err((text, counted))) => Err(script_error(text, counted)),
        Err(e) => Err(CmdError::Other(
            format!("ERR Error running script {label}: {}", message_of(&e)).into(),
        )),
    }
}
