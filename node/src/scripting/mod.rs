//! Lua scripting with Redis 7.0's semantics: the engine of EVAL and of Functions (the
//! commands are in `commands::scripting`, `commands::functions` and `commands::fcall`).
//!
//! - `engine`: one Lua 5.1 state per command thread, with Redis's libraries and sandbox.
//! - `run`: one script (or function) run for a client; `call`: `redis.call` into the node's
//!   dispatch.
//! - `functions`: FUNCTION LOAD's libraries in a thread's Lua state.
//! - `convert`: replies to Lua values and back; `errors`: Redis's error shapes.
//! - `redis_lib`, `cjson`, `cmsgpack`, `bit`, `random`: the libraries scripts see.
//!
//! A script's writes reach replicas and the AOF as the commands it ran (MULTI/EXEC-wrapped
//! when more than one), collected by the dispatch as for EXEC: never as the EVAL itself.

pub mod bit;
pub mod call;
pub mod cjson;
pub mod cmsgpack;
pub mod convert;
pub mod engine;
pub mod errors;
pub mod functions;
pub mod random;
pub mod redis_lib;
pub mod run;

pub use call::CallRules;
pub use redis_lib::sha1_hex;
pub use run::{compile, run, run_function, FunctionCall, Script};
