//! Errors a command answers with, carrying Redis's exact texts (code prefix included).

use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CmdError {
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    #[error("ERR syntax error")]
    Syntax,
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    #[error("ERR value is not a valid float")]
    NotFloat,
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    #[error("ERR no such key")]
    NoSuchKey,
    #[error("ERR index out of range")]
    IndexOutOfRange,
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(String),
    #[error("OOM command not allowed when used memory > 'maxmemory'.")]
    OutOfMemory,
    #[error("NOAUTH Authentication required.")]
    NoAuth,
    /// Any other error; the text starts with its code (`ERR ...`, `BUSYKEY ...`).
    #[error("{0}")]
    Other(Cow<'static, str>),
    /// An error already counted in INFO errorstats when it happened (a script's error that
    /// is the error of a command it ran, as Redis's `ignore_error_stats_update`); the command
    /// still counts as failed.
    #[error("{0}")]
    Counted(Cow<'static, str>),
}

impl CmdError {
    /// An error with a fixed or formatted text; the text must start with its code.
    pub fn new(text: impl Into<Cow<'static, str>>) -> Self {
        let text = text.into();
        debug_assert!(
            text.split(' ')
                .next()
                .is_some_and(|c| c.chars().all(|ch| ch.is_ascii_uppercase())),
            "error text needs a code: {text}"
        );
        CmdError::Other(text)
    }
}

/// `Err(CmdError::new(...))` in one call.
pub fn err<T>(text: impl Into<Cow<'static, str>>) -> Result<T, CmdError> {
    Err(CmdError::new(text))
}
