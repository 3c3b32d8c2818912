//! Errors raised in a script, shaped as Redis 7.0 shapes them.
//!
//! The script runs under `xpcall` with [`handler`], which turns whatever was raised into an
//! error table `{err=..., source=..., line=...}` (Redis's `__redis__err__handler`): a table
//! raised by `redis.call` keeps its `err`; anything else becomes `ERR <message>`; `source`
//! and `line` say where in the script it happened. The client then reads
//! `<err> script: <sha>, on @user_script:<line>.` ([`final_text`]).

use super::engine::{FUNCTION_SOURCE, SCRIPT_SOURCE};
use mlua::{Lua, Table, Value};

/// Most stack levels searched for the script's own frame.
const MAX_LEVELS: usize = 64;

/// The message of an error raised by Rust code (a library function, the kill hook), without
/// mlua's wrapping ("runtime error: ", callback tracebacks).
pub fn message_of(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => message_of(cause),
        mlua::Error::MemoryError(m) => m.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::BadArgument { cause, .. } => message_of(cause),
        mlua::Error::WithContext { cause, .. } => message_of(cause),
        other => other.to_string(),
    }
}

/// The `xpcall` message handler.
pub fn handler(lua: &Lua, raised: Value) -> mlua::Result<Table> {
    let table = match raised {
        Value::Table(t) if matches!(t.raw_get::<Value>("err"), Ok(Value::String(_))) => t,
        other => {
            let message = match &other {
                Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                Value::Error(e) => message_of(e),
                Value::Nil => "nil".to_string(),
                v => v.to_string().unwrap_or_else(|_| v.type_name().to_string()),
            };
            let t = lua.create_table()?;
            t.raw_set("err", format!("ERR {message}"))?;
            t
        }
    };
    for level in 0..MAX_LEVELS {
        let Some(frame) = lua.inspect_stack(level) else {
            break;
        };
        let source = frame.source().source;
        if let Some(source @ (SCRIPT_SOURCE | FUNCTION_SOURCE)) = source.as_deref() {
            t_set_position(&table, source, frame.curr_line())?;
            break;
        }
    }
    Ok(table)
}

fn t_set_position(t: &Table, source: &str, line: i32) -> mlua::Result<()> {
    t.raw_set("source", source)?;
    t.raw_set("line", line)
}

/// The client's error for a script that raised `raised` (the handler's table).
pub fn final_text(raised: &Value, sha: &str) -> String {
    let Value::Table(t) = raised else {
        // A raw Lua error the handler could not shape (out of memory: the handler itself
        // could not allocate): its text, as Redis words it (`%.100s` of it).
        return match raised {
            Value::String(s) => {
                let text = String::from_utf8_lossy(&s.as_bytes()).into_owned();
                let text: String = text.chars().take(100).collect();
                format!("ERR Error running script {sha}, {}", text.trim_end())
            }
            _ => format!("ERR Error running script {sha}, execution failure"),
        };
    };
    let err = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        _ => "ERR execution failure".to_string(),
    };
    let err = err.trim_end_matches(['\r', '\n']).to_string();
    match (t.raw_get::<Value>("source"), t.raw_get::<Value>("line")) {
        (Ok(Value::String(source)), Ok(line @ (Value::Integer(_) | Value::Number(_)))) => {
            let line = match line {
                Value::Integer(i) => i,
                Value::Number(n) => n as i64,
                _ => 0,
            };
            format!(
                "{err} script: {sha}, on {}:{line}.",
                String::from_utf8_lossy(&source.as_bytes())
            )
        }
        _ => err,
    }
}

/// `redis.error_reply`'s table text: `-` dropped, `ERR` added when there is no code (Redis's
/// `luaPushErrorBuff`), line ends trimmed.
pub fn error_reply_text(message: &str) -> String {
    let message = message.strip_prefix('-').unwrap_or(message);
    let (code, rest) = match message.split_once(' ') {
        Some((code, rest)) if !code.is_empty() => (code, rest),
        _ => ("ERR", message),
    };
    let rest = rest.trim_matches(['\r', '\n']);
    format!("{code} {rest}").trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_reply_texts_get_a_code() {
        assert_eq!(
            error_reply_text("MY_ERR_CODE custom msg"),
            "MY_ERR_CODE custom msg"
        );
        assert_eq!(error_reply_text("-WRONG thing"), "WRONG thing");
        assert_eq!(error_reply_text(""), "ERR");
        assert_eq!(error_reply_text("oops"), "ERR oops");
    }
}
