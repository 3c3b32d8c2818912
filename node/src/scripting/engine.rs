//! One Lua 5.1 state per thread that runs commands, as Redis has one per server: the
//! libraries Redis gives scripts, the sandbox, and each script compiled once per thread into
//! a function kept by its SHA1. SCRIPT FLUSH bumps the cache's generation; a thread seeing a
//! new generation starts a fresh state, as Redis resets its Lua state on a flush.
//!
//! Per thread rather than shared: a script runs on the connection thread that received it,
//! holding every shard (see `run`), and an `mlua::Lua` is not shared between threads.

use super::convert::ScriptResp;
use super::{bit, cjson, cmsgpack, random, redis_lib};
use mlua::{ChunkMode, Function, Lua, LuaOptions, StdLib, Table, Value};
use std::collections::HashMap;

/// Most bytes one thread's Lua state may allocate: a script building a huge table fails
/// with "not enough memory" instead of taking the node's memory.
pub const LUA_MEMORY_LIMIT: usize = 1024 * 1024 * 1024;

/// Compiled scripts one state keeps; over this the state is rebuilt (the cache itself is
/// bounded the same way, see `node_state::scripts`).
const MAX_COMPILED: usize = crate::node_state::scripts::MAX_CACHED_SCRIPTS;

/// The chunk name of every script, so that errors read `user_script:1: ...` as in Redis.
pub const SCRIPT_SOURCE: &str = "@user_script";
/// The chunk name of every function library (`user_function:1: ...`).
pub const FUNCTION_SOURCE: &str = "@user_function";

const SANDBOX: &str = include_str!("sandbox.lua");

/// What one run of a script has set for itself (`redis.setresp`).
#[derive(Debug, Default, Clone, Copy)]
pub struct RunState {
    pub resp: ScriptResp,
}

pub struct Engine {
    pub lua: Lua,
    generation: u64,
    compiled: HashMap<[u8; 40], Function>,
    /// The real global table (KEYS and ARGV are set in it); scripts see it through `env`.
    pub globals: Table,
    /// The read-only view of the globals that scripts run in.
    env: Table,
    /// The environment of function libraries: the load API while `hidden.loading`, the
    /// scripts' globals otherwise (see `sandbox.lua`).
    pub fn_env: Table,
    /// The function libraries loaded into this state (`scripting::functions`).
    pub libraries: super::functions::LoadedLibraries,
    /// The real `pcall`, which FUNCTION LOAD runs a library's code under.
    pub pcall: Function,
    /// Per-run values the sandbox's `redis.call` reads (`dispatch`).
    pub hidden: Table,
    /// `xpcall` and the error handler that gives errors Redis's shape.
    pub xpcall: Function,
    pub handler: Function,
}

impl Engine {
    pub fn new(generation: u64) -> mlua::Result<Engine> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        lua.set_memory_limit(LUA_MEMORY_LIMIT)?;
        lua.set_app_data(RunState::default());
        let globals = lua.globals();
        let math: Table = globals.get("math")?;
        random::install(&lua, &math, random::Rand48::seeded(rand::random::<i32>()))?;
        globals.set("cjson", cjson::library(&lua)?)?;
        globals.set("cmsgpack", cmsgpack::library(&lua)?)?;
        globals.set("bit", bit::library(&lua)?)?;
        globals.set("redis", redis_lib::library(&lua)?)?;
        install_newproxy_watch(&lua, &globals)?;
        let hidden = lua.create_table()?;
        let (env, fn_env): (Table, Table) = lua
            .load(SANDBOX)
            .set_name("=sandbox")
            .set_mode(ChunkMode::Text)
            .call(hidden.clone())?;
        let xpcall: Function = globals.get("xpcall")?;
        let pcall: Function = globals.get("pcall")?;
        let handler = lua.create_function(super::errors::handler)?;
        Ok(Engine {
            lua,
            generation,
            compiled: HashMap::new(),
            globals,
            env,
            fn_env,
            libraries: Default::default(),
            pcall,
            hidden,
            xpcall,
            handler,
        })
    }

    /// The compiled function of the script `sha`, compiling `body` the first time.
    /// Err: Lua's compile error (`user_script:1: ...`).
    pub fn function(&mut self, sha: &[u8; 40], body: &[u8]) -> Result<Function, String> {
        if let Some(f) = self.compiled.get(sha) {
            return Ok(f.clone());
        }
        if self.compiled.len() >= MAX_COMPILED {
            self.compiled.clear();
        }
        let f = self
            .lua
            .load(body)
            .set_name(SCRIPT_SOURCE)
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => super::errors::message_of(&other),
            })?;
        self.compiled.insert(*sha, f.clone());
        Ok(f)
    }

    /// Sets KEYS and ARGV for the next run.
    pub fn set_arguments(&self, keys: &[&[u8]], argv: &[&[u8]]) -> mlua::Result<()> {
        let (keys, argv) = self.argument_tables(keys, argv)?;
        outside_the_limit(&self.lua, || {
            self.globals.raw_set("KEYS", keys)?;
            self.globals.raw_set("ARGV", argv)
        })
    }

    /// KEYS and ARGV as Lua lists (a function receives them as its two arguments).
    pub fn argument_tables(&self, keys: &[&[u8]], argv: &[&[u8]]) -> mlua::Result<(Table, Table)> {
        let list = |items: &[&[u8]]| -> mlua::Result<Table> {
            let t = self.lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, self.lua.create_string(item)?)?;
            }
            Ok(t)
        };
        outside_the_limit(&self.lua, || Ok((list(keys)?, list(argv)?)))
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Drops the compiled scripts (SCRIPT FLUSH seen through a new generation).
    pub fn script_count(&self) -> usize {
        self.compiled.len()
    }
}

/// Runs `f`, which copies into Lua what the node already holds in memory (a call's
/// arguments, a command's reply, the run's callbacks), with the state's memory limit lifted.
///
/// Why: while a limit is set, mlua wraps every table and string operation made from Rust in
/// a protected call that allocates a C closure, so that hitting the limit raises a Lua
/// error instead of unwinding through Rust. That was a quarter of EVAL's CPU (building KEYS
/// and ARGV alone: 10% of a one-`SET` script's). Without a limit mlua calls Lua directly,
/// and what `f` copies is bounded by the request or reply it comes from. The script's own
/// allocations stay bounded by [`LUA_MEMORY_LIMIT`], set again before `f` returns.
///
/// The collector is stopped meanwhile: an allocation may take a GC step, and a step may run
/// a script's `__gc` finalizer (a `newproxy` userdata left behind by any earlier script).
/// Run here, that script code would allocate past the limit, and an error it raised would
/// unwind through Rust frames no protected call encloses. Stopped, Lua runs no step (5.1
/// sets the threshold out of reach); it restarts after, under the limit and protection.
///
/// Only in a state where a script ever called `newproxy` (the one way a script makes a
/// userdata, the only values with finalizers in Lua 5.1): restarting the collector starts
/// a new cycle at once, which cost EVAL a fifth more CPU when done around every copy.
pub fn outside_the_limit<T>(lua: &Lua, f: impl FnOnce() -> T) -> T {
    let stop_gc = lua.app_data_ref::<ProxiesMade>().is_some();
    if stop_gc {
        lua.gc_stop();
    }
    let _ = lua.set_memory_limit(0);
    // Set again on the way out, also if `f` unwinds: the state outlives the command.
    let _restore = LimitRestore { lua, stop_gc };
    f()
}

struct LimitRestore<'l> {
    lua: &'l Lua,
    stop_gc: bool,
}

impl Drop for LimitRestore<'_> {
    fn drop(&mut self) {
        let _ = self.lua.set_memory_limit(LUA_MEMORY_LIMIT);
        if self.stop_gc {
            self.lua.gc_restart();
        }
    }
}

/// Marks a state in which a script called `newproxy` (see [`outside_the_limit`]).
struct ProxiesMade;

/// Wraps the base library's `newproxy` so that its first call marks the state.
fn install_newproxy_watch(lua: &Lua, globals: &Table) -> mlua::Result<()> {
    let Ok(Value::Function(real)) = globals.get::<Value>("newproxy") else {
        return Ok(());
    };
    let watched = lua.create_function(move |lua, args: mlua::MultiValue| {
        if lua.app_data_ref::<ProxiesMade>().is_none() {
            lua.set_app_data(ProxiesMade);
        }
        real.call::<mlua::MultiValue>(args)
    })?;
    globals.set("newproxy", watched)
}

/// The script's protocol for this run (`redis.setresp`), reset to RESP2 at each start.
pub fn run_state(lua: &Lua) -> RunState {
    lua.app_data_ref::<RunState>()
        .map(|s| *s)
        .unwrap_or_default()
}

pub fn set_run_state(lua: &Lua, state: RunState) {
    lua.set_app_data(state);
}

/// Whether a value is a table holding an `err` string (a Redis error reply).
pub fn error_text(v: &Value) -> Option<String> {
    let Value::Table(t) = v else { return None };
    match t.raw_get::<Value>("err").ok()? {
        Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    /// `set_memory_limit` answers the limit it replaces: 0 inside a lifted section, the
    /// state's limit again after it, also after one that panicked.
    #[test]
    fn the_limit_is_set_again_after_a_lifted_section_even_one_that_panics() {
        let engine = Engine::new(1).expect("Lua starts");
        let lua = &engine.lua;
        let inside = outside_the_limit(lua, || lua.set_memory_limit(0).expect("limit"));
        assert_eq!(inside, 0);
        assert_eq!(
            lua.set_memory_limit(LUA_MEMORY_LIMIT).unwrap(),
            LUA_MEMORY_LIMIT
        );
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            outside_the_limit(lua, || panic!("a copy that failed"))
        }));
        assert!(unwound.is_err());
        assert_eq!(
            lua.set_memory_limit(LUA_MEMORY_LIMIT).unwrap(),
            LUA_MEMORY_LIMIT
        );
    }

    /// A finalizer left by a script never runs inside a lifted section, and runs once the
    /// collector is back: garbage made inside the section is not collected there either.
    #[test]
    fn no_finalizer_runs_while_the_limit_is_lifted() {
        let engine = Engine::new(1).expect("Lua starts");
        let lua = &engine.lua;
        assert!(lua.app_data_ref::<ProxiesMade>().is_none());
        lua.load(
            "ran = 0
             local p = newproxy(true)
             getmetatable(p).__gc = function() ran = ran + 1 end
             p = nil",
        )
        .exec()
        .expect("a proxy with a finalizer");
        assert!(lua.app_data_ref::<ProxiesMade>().is_some());
        let ran = || lua.globals().get::<i64>("ran").expect("ran");
        outside_the_limit(lua, || {
            for i in 0..20_000 {
                let t = lua.create_table().expect("table");
                t.raw_set(
                    1,
                    lua.create_string(format!("garbage {i}")).expect("string"),
                )
                .expect("set");
            }
        });
        assert_eq!(ran(), 0, "a finalizer ran inside the lifted section");
        lua.gc_collect().expect("collect");
        lua.gc_collect().expect("collect");
        assert_eq!(ran(), 1);
    }
}
