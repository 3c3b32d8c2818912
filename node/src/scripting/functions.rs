//! Function libraries (Redis 7.0 Functions) in a thread's Lua state: reading a library's
//! `#!lua name=<lib>` line, running its code once with the load API so that it registers
//! its functions, and keeping each thread's state in step with the node's libraries
//! (`node_state::functions`).
//!
//! FUNCTION LOAD runs the code on the thread that received it, to check it and learn what it
//! registers; every other thread loads it again the first time it runs an FCALL after the
//! change (a library's code only defines functions, so running it again is harmless).

use super::engine::{Engine, FUNCTION_SOURCE};
use super::errors::message_of;
use crate::node_state::functions::{valid_name, FunctionInfo, Library, LibrarySet, RestorePolicy};
use mlua::{ChunkMode, Function, HookTriggers, MultiValue, Table, Value, VmState};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest a library's code may run while loading (Redis's `FUNCTION LOAD timeout`).
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);
/// Instructions between two looks at the clock while loading.
const LOAD_HOOK_EVERY: u32 = 100_000;
/// Most parts the `#!` line may have (it holds an engine and a name).
const MAX_METADATA_PARTS: usize = 16;

/// What a library's first line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub engine: String,
    pub name: String,
    /// Where the code after the `#!` line starts (at its newline, so line numbers hold).
    pub body_start: usize,
}

/// Reads `#!<engine> name=<lib>` (Redis 7.0's texts).
pub fn parse_metadata(code: &[u8]) -> Result<Metadata, String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid library metadata".into());
    };
    let parts = match split_args(&code[..end]) {
        Some(parts) if !parts.is_empty() => parts,
        _ => return Err("ERR Invalid library metadata".into()),
    };
    let engine = String::from_utf8_lossy(&parts[0][2..]).into_owned();
    let mut name = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(String::from_utf8_lossy(&part[5..]).into_owned());
            continue;
        }
        return Err(format!(
            "ERR Invalid metadata value given: {}",
            String::from_utf8_lossy(part)
        ));
    }
    let Some(name) = name else {
        return Err("ERR Library name was not given".into());
    };
    Ok(Metadata {
        engine,
        name,
        body_start: end,
    })
}

/// Splits a line into words as Redis's `sdssplitargs` does: blanks separate, `"..."` (with
/// `\n`, `\xHH`... escapes) and `'...'` quote, a closing quote must end its word. None when
/// the quoting is unbalanced.
fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            break;
        }
        if out.len() >= MAX_METADATA_PARTS {
            return None;
        }
        let mut word = Vec::new();
        while let Some(&c) = line.get(i) {
            match c {
                b' ' | b'\t' | b'\r' | b'\n' => break,
                b'"' | b'\'' => {
                    i += 1;
                    loop {
                        let &q = line.get(i)?;
                        if q == c {
                            i += 1;
                            break;
                        }
                        if c == b'"' && q == b'\\' {
                            let &e = line.get(i + 1)?;
                            let hex = line.get(i + 2..i + 4).and_then(|h| {
                                u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
                            });
                            match (e, hex) {
                                (b'x', Some(byte)) => {
                                    word.push(byte);
                                    i += 4;
                                    continue;
                                }
                                (b'n', _) => word.push(b'\n'),
                                (b'r', _) => word.push(b'\r'),
                                (b't', _) => word.push(b'\t'),
                                (b'b', _) => word.push(8),
                                (b'a', _) => word.push(7),
                                (other, _) => word.push(other),
                            }
                            i += 2;
                        } else if c == b'\'' && q == b'\\' && line.get(i + 1) == Some(&b'\'') {
                            word.push(b'\'');
                            i += 2;
                        } else {
                            word.push(q);
                            i += 1;
                        }
                    }
                    if line.get(i).is_some_and(|b| !b.is_ascii_whitespace()) {
                        return None;
                    }
                }
                other => {
                    word.push(other);
                    i += 1;
                }
            }
        }
        out.push(word);
    }
    Some(out)
}

/// The functions loaded into one thread's Lua state.
#[derive(Default)]
pub struct LoadedLibraries {
    /// The node's library generation this state matches.
    generation: Option<u64>,
    /// Library name to the code it was loaded from.
    code: HashMap<String, Arc<[u8]>>,
    /// Lower-cased function name to its registered name and callback.
    functions: HashMap<String, (String, Function)>,
}

impl LoadedLibraries {
    /// The function FCALL names (any case): its registered name and its callback.
    pub fn function(&self, name: &str) -> Option<(String, Function)> {
        self.functions.get(&name.to_ascii_lowercase()).cloned()
    }
}

/// Brings the thread's state in step with `set`: libraries gone or replaced are dropped,
/// new ones loaded.
pub fn sync(engine: &mut Engine, set: &LibrarySet) {
    if engine.libraries.generation == Some(set.generation) {
        return;
    }
    let mut code = HashMap::new();
    let mut functions = HashMap::new();
    for (name, lib) in &set.libraries {
        let kept = engine
            .libraries
            .code
            .get(name)
            .is_some_and(|loaded| Arc::ptr_eq(loaded, &lib.code));
        if kept {
            for info in &lib.functions {
                let key = info.name.to_ascii_lowercase();
                if let Some(f) = engine.libraries.functions.get(&key) {
                    functions.insert(key, f.clone());
                }
            }
        } else {
            match compile_library(engine, &lib.code) {
                Ok((_, callbacks)) => {
                    for (registered, f) in callbacks {
                        functions.insert(registered.to_ascii_lowercase(), (registered, f));
                    }
                }
                Err(e) => {
                    tracing::warn!(library = %name, error = %e, "function library did not load");
                    continue;
                }
            }
        }
        code.insert(name.clone(), lib.code.clone());
    }
    engine.libraries = LoadedLibraries {
        generation: Some(set.generation),
        code,
        functions,
    };
}

/// FUNCTION LOAD's check: reads the metadata, runs the code, and returns the library it
/// defines (the caller publishes it). Err: the client's error text.
pub fn load_library(
    server: &crate::node_state::NodeState,
    code: Arc<[u8]>,
) -> Result<Library, String> {
    super::run::with_engine(server, |engine| {
        compile_library(engine, &code).map(|(lib, _)| lib)
    })
}

/// Runs each code of a payload or a snapshot; the libraries, or the first error. Two
/// libraries of one name among them are refused.
pub fn load_all(
    server: &crate::node_state::NodeState,
    codes: Vec<Box<[u8]>>,
) -> Result<Vec<Library>, String> {
    let mut libraries: Vec<Library> = Vec::with_capacity(codes.len());
    for code in codes {
        let lib = load_library(server, Arc::from(code))?;
        if libraries.iter().any(|l| l.name == lib.name) {
            return Err(format!("ERR Library '{}' already exists", lib.name));
        }
        libraries.push(lib);
    }
    Ok(libraries)
}

/// A loaded snapshot's libraries replace the node's (a restart, an AOF base, a full sync).
/// A library that no longer loads is logged and left out: the keys still load.
pub fn replace_from_snapshot(server: &crate::node_state::NodeState, codes: Vec<Box<[u8]>>) {
    let mut libraries = Vec::with_capacity(codes.len());
    for code in codes {
        match load_library(server, Arc::from(code)) {
            Ok(lib) => libraries.push(lib),
            Err(e) => {
                tracing::error!(error = %e, "a function library of the snapshot did not load")
            }
        }
    }
    let count = libraries.len();
    if let Err(e) = server.functions.restore(libraries, RestorePolicy::Flush) {
        tracing::error!(error = %e, "the snapshot's function libraries did not load");
    } else if count > 0 {
        tracing::info!(libraries = count, "function libraries loaded");
    }
}

/// Reads the metadata and runs a library's code in `engine` in load mode. Returns the
/// library and the callbacks it registered, by registered name.
fn compile_library(
    engine: &mut Engine,
    code: &Arc<[u8]>,
) -> Result<(Library, Vec<(String, Function)>), String> {
    let meta = parse_metadata(code)?;
    if !valid_name(meta.name.as_bytes()) {
        return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    if !meta.engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{}' not found", meta.engine));
    }
    let chunk = engine
        .lua
        .load(&code[meta.body_start..])
        .set_name(FUNCTION_SOURCE)
        .set_mode(ChunkMode::Text)
        .set_environment(engine.fn_env.clone())
        .into_function()
        .map_err(|e| format!("ERR Error compiling function: {}", message_of(&e)))?;
    let registered = run_loader(engine, chunk)?;
    if registered.is_empty() {
        return Err("ERR No functions registered".into());
    }
    let functions = registered
        .iter()
        .map(|(info, _)| info.clone())
        .collect::<Vec<_>>();
    let callbacks = registered
        .into_iter()
        .map(|(info, f)| (info.name, f))
        .collect();
    Ok((
        Library {
            name: meta.name,
            code: code.clone(),
            functions,
        },
        callbacks,
    ))
}

/// Runs a library's chunk with the load API and the load timeout; what it registered.
fn run_loader(
    engine: &mut Engine,
    chunk: Function,
) -> Result<Vec<(FunctionInfo, Function)>, String> {
    let lua_err = |e: mlua::Error| format!("ERR {}", message_of(&e));
    let list = engine.lua.create_table().map_err(lua_err)?;
    engine
        .hidden
        .raw_set("registered", list.clone())
        .map_err(lua_err)?;
    engine.hidden.raw_set("loading", true).map_err(lua_err)?;
    let started = Instant::now();
    engine.lua.set_hook(
        HookTriggers::new().every_nth_instruction(LOAD_HOOK_EVERY),
        move |lua, _| {
            if started.elapsed() > LOAD_TIMEOUT {
                // Every instruction raises from now on, so that a `pcall` cannot go on.
                lua.set_hook(HookTriggers::new().every_nth_instruction(1), |_, _| {
                    Err(mlua::Error::runtime("FUNCTION LOAD timeout"))
                });
                return Err(mlua::Error::runtime("FUNCTION LOAD timeout"));
            }
            Ok(VmState::Continue)
        },
    );
    let outcome = engine.pcall.call::<MultiValue>(chunk);
    engine.lua.remove_hook();
    let _ = engine.hidden.raw_set("loading", Value::Nil);
    let _ = engine.hidden.raw_set("registered", Value::Nil);
    let mut results = outcome.map_err(lua_err)?;
    if !matches!(results.pop_front(), Some(Value::Boolean(true))) {
        let message = match results.pop_front().unwrap_or(Value::Nil) {
            Value::Table(t) => match t.raw_get::<Value>("err") {
                Ok(Value::String(s)) => s.to_string_lossy(),
                _ => "ERR unknown error".to_string(),
            },
            Value::String(s) => format!("ERR {}", s.to_string_lossy()),
            Value::Error(e) => format!("ERR {}", message_of(&e)),
            other => format!("ERR {}", other.type_name()),
        };
        return Err(format!("ERR Error registering functions: {message}"));
    }
    read_registered(&list).map_err(lua_err)
}

fn read_registered(list: &Table) -> mlua::Result<Vec<(FunctionInfo, Function)>> {
    let mut out = Vec::new();
    for entry in list.clone().sequence_values::<Table>() {
        let entry = entry?;
        let name: mlua::String = entry.raw_get("name")?;
        let description: Option<mlua::String> = entry.raw_get("description")?;
        let flags: i64 = entry.raw_get("flags")?;
        let callback: Function = entry.raw_get("callback")?;
        out.push((
            FunctionInfo {
                name: name.to_string_lossy(),
                description: description.map(|d| d.to_string_lossy()),
                flags: flags as u8,
            },
            callback,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_lines_as_redis_reads_them() {
        let m = parse_metadata(b"#!lua name=lib\nreturn").unwrap();
        assert_eq!(
            (m.engine.as_str(), m.name.as_str(), m.body_start),
            ("lua", "lib", 14)
        );
        assert_eq!(parse_metadata(b"#!lua name=\"foo\"\n").unwrap().name, "foo");
        assert_eq!(parse_metadata(b"#! name=t\n").unwrap().engine, "");
        let e = |c: &[u8]| parse_metadata(c).unwrap_err();
        assert_eq!(e(b"return 1"), "ERR Missing library metadata");
        assert_eq!(e(b"#!lua name=x"), "ERR Invalid library metadata");
        assert_eq!(e(b"#!lua\n"), "ERR Library name was not given");
        assert_eq!(
            e(b"#!lua name=a foo=bar\n"),
            "ERR Invalid metadata value given: foo=bar"
        );
        assert_eq!(
            e(b"#!lua name=a name=b\n"),
            "ERR Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(e(b"#!lua name=\"a\n"), "ERR Invalid library metadata");
    }
}
