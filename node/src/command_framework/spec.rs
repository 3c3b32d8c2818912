//! How a command is described in the table.

use super::{CmdResult, Ctx};

/// Command flags, named as `COMMAND INFO` prints them.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const FAST: u32 = 1 << 9;
    /// Runs before authentication (AUTH, HELLO, QUIT...).
    pub const NO_AUTH: u32 = 1 << 10;
    /// Not allowed inside MULTI (WATCH, SUBSCRIBE...).
    pub const NO_MULTI: u32 = 1 << 11;
    /// Works on the whole keyspace: the dispatcher locks every shard (KEYS, FLUSHALL...).
    pub const ALL_KEYS: u32 = 1 << 12;
    /// Executed immediately even inside MULTI (EXEC, DISCARD, MULTI, WATCH, QUIT, RESET).
    pub const TXN_CONTROL: u32 = 1 << 13;
    /// Allowed while the client is in RESP2 subscribed mode.
    pub const SUBSCRIBED_OK: u32 = 1 << 14;
    pub const MOVABLE_KEYS: u32 = 1 << 15;
    /// Counts as preceded by ASKING: cluster routing serves it on an importing slot
    /// (RESTORE-ASKING, which MIGRATE sends in cluster mode).
    pub const ASKING: u32 = 1 << 16;
    /// Reads keys that patterns in its arguments name (SORT's BY and GET): every shard is
    /// locked when the arguments hold one (see [`names_pattern_keys`]).
    pub const PATTERN_KEYS: u32 = 1 << 17;
    /// Not a write, yet may feed the replication stream (PUBLISH, PFCOUNT): held by a
    /// CLIENT PAUSE WRITE as writes are.
    pub const MAY_REPLICATE: u32 = 1 << 18;

    /// Whether a PATTERN_KEYS command's arguments may name keys through a pattern: any `BY`
    /// or `GET` keyword after the key. It may also match a key or pattern spelled so, which
    /// only locks more than needed.
    pub fn names_pattern_keys(args: &[&[u8]]) -> bool {
        args.iter()
            .skip(2)
            .any(|a| a.eq_ignore_ascii_case(b"by") || a.eq_ignore_ascii_case(b"get"))
    }

    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
    ];
}

/// Where a command's keys are among its arguments (argument 0 is the command name).
#[derive(Clone, Copy)]
pub enum KeySpec {
    None,
    /// Keys at `first`, `first + step`, ... up to `last` (negative: counted from the end,
    /// -1 being the last argument).
    Range {
        first: i32,
        last: i32,
        step: i32,
    },
    /// Computed from the arguments (numkeys-style commands); returns argument indexes.
    Custom(fn(&[&[u8]]) -> smallvec::SmallVec<[usize; 16]>),
    /// Computed from the arguments like `Custom`, for a command whose usual form still has
    /// a fixed key range that `COMMAND INFO` reports (MIGRATE: 3, 3, 1; its `KEYS` form
    /// moves the keys).
    CustomWithRange {
        first: i32,
        last: i32,
        step: i32,
        find: fn(&[&[u8]]) -> smallvec::SmallVec<[usize; 16]>,
    },
}

pub type Handler = fn(&mut Ctx<'_>, &[&[u8]]) -> CmdResult;

/// Finds the argument indexes that hold secrets.
pub type SecretPositions = fn(&[&[u8]]) -> smallvec::SmallVec<[usize; 2]>;

pub struct CommandSpec {
    /// Lower-case name; `parent|sub` for subcommands.
    pub name: &'static str,
    /// Redis arity: exact argument count when positive, minimum when negative.
    pub arity: i32,
    pub flags: u32,
    pub keys: KeySpec,
    pub handler: Handler,
    /// Redis's command group (`string`, `list`, `generic`, `server`...).
    pub group: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    /// Subcommands (CONFIG GET, CLIENT LIST...); when non-empty, `handler` is not called:
    /// the dispatcher picks the subcommand by the second argument.
    pub subcommands: &'static [CommandSpec],
    /// Argument indexes holding secrets (MIGRATE's AUTH password), shown as `(redacted)`
    /// wherever arguments are recorded (SLOWLOG), as Redis redacts them.
    pub secrets: Option<SecretPositions>,
}

impl crate::node_state::command_stats::CountedCommand for CommandSpec {
    fn counted_name(&self) -> &'static str {
        self.name
    }
}

impl CommandSpec {
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        if self.arity >= 0 {
            argc == self.arity as usize
        } else {
            argc >= (-self.arity) as usize
        }
    }

    /// The argument index of the command's only key, when its spec fixes exactly one
    /// (`key_positions` would return just it); `None` for every other shape.
    pub fn single_key_position(&self, args: &[&[u8]]) -> Option<usize> {
        match self.keys {
            KeySpec::Range { first, last, .. } if first > 0 && first == last => {
                let i = first as usize;
                (i < args.len()).then_some(i)
            }
            _ => None,
        }
    }

    /// Argument indexes of the keys of this invocation.
    pub fn key_positions(&self, args: &[&[u8]]) -> smallvec::SmallVec<[usize; 16]> {
        match self.keys {
            KeySpec::None => smallvec::SmallVec::new(),
            KeySpec::Range { first, last, step } => {
                let argc = args.len() as i32;
                let last = if last < 0 {
                    argc + last
                } else {
                    last.min(argc - 1)
                };
                let mut out = smallvec::SmallVec::new();
                let mut i = first;
                while i > 0 && i <= last && i < argc {
                    out.push(i as usize);
                    i += step.max(1);
                }
                out
            }
            KeySpec::Custom(f) | KeySpec::CustomWithRange { find: f, .. } => f(args),
        }
    }

    /// (first, last, step) as `COMMAND INFO` reports them.
    pub fn key_triple(&self) -> (i64, i64, i64) {
        match self.keys {
            KeySpec::None | KeySpec::Custom(_) => (0, 0, 0),
            KeySpec::Range { first, last, step }
            | KeySpec::CustomWithRange {
                first, last, step, ..
            } => (first as i64, last as i64, step as i64),
        }
    }
}

/// A spec with the common defaults; families fill in the rest with struct update syntax.
pub const fn command(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: Handler,
    group: &'static str,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
        handler,
        group,
        summary,
        since: "1.0.0",
        subcommands: &[],
        secrets: None,
    }
}

/// Keys: just argument 1.
pub const KEY1: KeySpec = KeySpec::Range {
    first: 1,
    last: 1,
    step: 1,
};
/// Keys: every argument from 1.
pub const ALL_ARGS_KEYS: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 1,
};
/// Keys: arguments 1 and 2.
pub const KEY1_2: KeySpec = KeySpec::Range {
    first: 1,
    last: 2,
    step: 1,
};
