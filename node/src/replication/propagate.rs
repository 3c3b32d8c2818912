//! What a replica must execute to reach the primary's state after a write: the executed
//! command rewritten so that it no longer depends on the primary's clock, its random choices
//! or its float formatting, as Redis rewrites commands before propagating them (`call()` with
//! `rewriteClientCommandVector`). The result is RESP-encoded into the backlog by
//! [`encode_stream`].
//!
//! The dispatcher calls [`propagate`] after a command that changed the dataset (its
//! `Effects::dirty` > 0), with the command's arguments and what the handler decided
//! ([`WriteEffect`]): the absolute expiry it computed, the members it popped, the value it
//! stored. A command that changed nothing is not propagated at all.

/// Members per SREM when SPOP's pops are propagated, as Redis batches them (1024): one huge
/// SPOP must not become one unbounded command on the replica.
pub const SREM_BATCH_MAX: usize = 1024;

/// What a write decided that its arguments do not say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum WriteEffect {
    /// Nothing: the arguments replay to the same state.
    #[default]
    None,
    /// The absolute expiry (unix ms) set on the key: EXPIRE family, SETEX/PSETEX,
    /// SET EX/PX/EXAT/PXAT, GETEX EX/PX/EXAT/PXAT, RESTORE with a relative TTL.
    ExpiresAtMs(u64),
    /// The key was deleted because the expiry asked for is already past.
    KeyDeleted,
    /// GETEX PERSIST removed the key's TTL.
    Persisted,
    /// The value stored: INCRBYFLOAT, HINCRBYFLOAT (as replied).
    NewValue(Vec<u8>),
    /// The members SPOP removed.
    Popped(Vec<Vec<u8>>),
    /// The key that served a pop among several keys, and how many elements it gave:
    /// BLPOP, BRPOP, BZPOPMIN, BZPOPMAX, BLMPOP, LMPOP, BZMPOP, ZMPOP.
    Served { key: Vec<u8>, count: usize },
    /// The commands a replica runs instead of the write, already rewritten by the handler
    /// (streams: the generated XADD ID, exact trims, XREADGROUP's claims and group IDs).
    Commands(Vec<Argv>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PropagateError {
    #[error("'{command}' cannot be replicated without {needed}")]
    MissingEffect {
        command: String,
        needed: &'static str,
    },
    #[error("'{command}' does not replicate with effect {effect}")]
    UnexpectedEffect { command: String, effect: String },
    #[error("'{command}' has arguments it could not have executed with")]
    BadArgs { command: String },
}

/// One command as a replica receives it: its arguments, the name first.
pub type Argv = Vec<Vec<u8>>;

/// The commands a replica executes for the write `argv` (name first) that had `effect`.
/// Empty when the write needs nothing replicated.
pub fn propagate(argv: &[&[u8]], effect: &WriteEffect) -> Result<Vec<Argv>, PropagateError> {
    let Some(name) = argv.first() else {
        return Ok(Vec::new());
    };
    let name = name.to_ascii_lowercase();
    let command = || String::from_utf8_lossy(&name).into_owned();
    let arg = |i: usize| -> Result<&[u8], PropagateError> {
        argv.get(i)
            .copied()
            .ok_or_else(|| PropagateError::BadArgs { command: command() })
    };
    let missing = |needed| PropagateError::MissingEffect {
        command: command(),
        needed,
    };
    let out = match (name.as_slice(), effect) {
        // EXPIRE family: always an absolute PEXPIREAT, or the DEL it amounted to.
        (b"expire" | b"pexpire" | b"expireat" | b"pexpireat", WriteEffect::ExpiresAtMs(at)) => {
            vec![cmd(&[b"PEXPIREAT", arg(1)?, &num(*at)])]
        }
        (b"pexpireat", WriteEffect::None) => vec![owned(argv)],
        (b"expire" | b"pexpire" | b"expireat", WriteEffect::None) => {
            return Err(missing("the absolute expiry"))
        }
        (
            b"expire" | b"pexpire" | b"expireat" | b"pexpireat" | b"getex" | b"setex" | b"psetex"
            | b"restore" | b"restore-asking",
            WriteEffect::KeyDeleted,
        ) => vec![cmd(&[b"DEL", arg(1)?])],

        // SET with a TTL: SET key value PXAT ms. NX/XX/GET are dropped: the SET happened.
        (b"setex" | b"psetex", WriteEffect::ExpiresAtMs(at)) => {
            vec![cmd(&[b"SET", arg(1)?, arg(3)?, b"PXAT", &num(*at)])]
        }
        (b"setex" | b"psetex", WriteEffect::None) => return Err(missing("the absolute expiry")),
        (b"set", effect) => vec![rewrite_set(argv, effect).map_err(|e| match e {
            SetProblem::NeedsExpiry => missing("the absolute expiry"),
            SetProblem::Unexpected => unexpected(&name, effect),
            SetProblem::BadArgs => PropagateError::BadArgs { command: command() },
        })?],

        (b"getex", WriteEffect::ExpiresAtMs(at)) => {
            vec![cmd(&[b"PEXPIREAT", arg(1)?, &num(*at)])]
        }
        (b"getex", WriteEffect::Persisted) => vec![cmd(&[b"PERSIST", arg(1)?])],
        // Without options GETEX changes nothing; with them the caller must say what it did,
        // or a TTL change would silently never reach the replica.
        (b"getex", WriteEffect::None) if argv.len() <= 2 => Vec::new(),
        (b"getex", WriteEffect::None) => return Err(missing("what GETEX did to the TTL")),

        (b"incrbyfloat", WriteEffect::NewValue(v)) => {
            vec![cmd(&[b"SET", arg(1)?, v, b"KEEPTTL"])]
        }
        (b"hincrbyfloat", WriteEffect::NewValue(v)) => {
            vec![cmd(&[b"HSET", arg(1)?, arg(2)?, v])]
        }
        (b"incrbyfloat" | b"hincrbyfloat", WriteEffect::None) => {
            return Err(missing("the resulting value"))
        }

        (b"spop", WriteEffect::Popped(members)) => {
            let key = arg(1)?;
            members
                .chunks(SREM_BATCH_MAX)
                .map(|batch| {
                    let mut c = cmd(&[b"SREM", key]);
                    c.extend(batch.iter().cloned());
                    c
                })
                .collect()
        }
        (b"spop", WriteEffect::None) => return Err(missing("the popped members")),

        (b"restore" | b"restore-asking", WriteEffect::ExpiresAtMs(at)) => {
            let mut c = owned(argv);
            c[0] = b"RESTORE".to_vec();
            *c.get_mut(2)
                .ok_or_else(|| PropagateError::BadArgs { command: command() })? = num(*at);
            if !argv[3..].iter().any(|a| a.eq_ignore_ascii_case(b"absttl")) {
                c.push(b"ABSTTL".to_vec());
            }
            vec![c]
        }

        (b"restore" | b"restore-asking", WriteEffect::None) => {
            let relative =
                arg(2)? != b"0" && !argv[3..].iter().any(|a| a.eq_ignore_ascii_case(b"absttl"));
            if relative {
                return Err(missing("the absolute expiry"));
            }
            vec![owned(argv)]
        }

        (b"brpoplpush", WriteEffect::None) => vec![cmd(&[b"RPOPLPUSH", arg(1)?, arg(2)?])],
        (b"blmove", WriteEffect::None) => {
            vec![cmd(&[b"LMOVE", arg(1)?, arg(2)?, arg(3)?, arg(4)?])]
        }
        (
            b"blpop" | b"brpop" | b"bzpopmin" | b"bzpopmax" | b"blmpop" | b"lmpop" | b"bzmpop"
            | b"zmpop",
            WriteEffect::Served { key, count },
        ) => served_pop(&name, argv, key, *count)
            .ok_or_else(|| PropagateError::BadArgs { command: command() })?,
        (
            b"blpop" | b"brpop" | b"bzpopmin" | b"bzpopmax" | b"blmpop" | b"lmpop" | b"bzmpop"
            | b"zmpop",
            WriteEffect::None,
        ) => return Err(missing("the key that served the pop")),

        // GETDEL deleted the key: a replica runs the DEL (as Redis rewrites it).
        (b"getdel", WriteEffect::None) => vec![cmd(&[b"DEL", arg(1)?])],

        // MIGRATE's handler records each key it moved away as a DEL (`Outgoing::key_removed`):
        // the command itself must never reach a replica, which would migrate again.
        (b"migrate", WriteEffect::None) => Vec::new(),

        (b"eval" | b"evalsha" | b"eval_ro" | b"evalsha_ro" | b"fcall" | b"fcall_ro", _) => {
            return Err(unexpected(&name, effect))
        }
        (_, WriteEffect::None) => vec![owned(argv)],
        (_, WriteEffect::Commands(commands)) => commands.clone(),
        (_, effect) => return Err(unexpected(&name, effect)),
    };
    Ok(out)
}

/// What a replica executes for a key the primary expired (lazily or actively) or evicted:
/// replicas never expire keys on their own clock, they wait for this DEL.
pub fn key_removed(key: &[u8]) -> Argv {
    cmd(&[b"DEL", key])
}

/// The commands of one transaction, wrapped in MULTI/EXEC when there is more than one, so
/// that a replica applies them atomically as the primary did.
pub fn transaction(commands: Vec<Argv>) -> Vec<Argv> {
    if commands.len() < 2 {
        return commands;
    }
    let mut out = Vec::with_capacity(commands.len() + 2);
    out.push(cmd(&[b"MULTI"]));
    out.extend(commands);
    out.push(cmd(&[b"EXEC"]));
    out
}

/// Appends `commands` as RESP arrays of bulk strings: the bytes that go into the backlog.
pub fn encode_into(commands: &[Argv], out: &mut Vec<u8>) {
    let mut digits = itoa::Buffer::new();
    for c in commands {
        out.push(b'*');
        out.extend_from_slice(digits.format(c.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        for a in c {
            out.push(b'$');
            out.extend_from_slice(digits.format(a.len()).as_bytes());
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// `commands` as RESP multibulk.
pub fn encode_stream(commands: &[Argv]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(commands, &mut out);
    out
}

enum SetProblem {
    NeedsExpiry,
    Unexpected,
    BadArgs,
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL] as what it did:
/// `SET key value [PXAT ms | KEEPTTL]`, or the DEL of an expiry already past.
fn rewrite_set(argv: &[&[u8]], effect: &WriteEffect) -> Result<Argv, SetProblem> {
    let (key, value) = match argv {
        [_, key, value, ..] => (*key, *value),
        _ => return Err(SetProblem::BadArgs),
    };
    let mut has_expiry = false;
    let mut keep_ttl = false;
    let mut i = 3;
    while i < argv.len() {
        let a = argv[i];
        if [&b"ex"[..], b"px", b"exat", b"pxat"]
            .iter()
            .any(|o| a.eq_ignore_ascii_case(o))
        {
            has_expiry = true;
            i += 1; // its amount
        } else if a.eq_ignore_ascii_case(b"keepttl") {
            keep_ttl = true;
        }
        i += 1;
    }
    match (has_expiry, effect) {
        (true, WriteEffect::ExpiresAtMs(at)) => Ok(cmd(&[b"SET", key, value, b"PXAT", &num(*at)])),
        (true, WriteEffect::KeyDeleted) => Ok(cmd(&[b"DEL", key])),
        (true, WriteEffect::None) => Err(SetProblem::NeedsExpiry),
        (false, WriteEffect::None) if keep_ttl => Ok(cmd(&[b"SET", key, value, b"KEEPTTL"])),
        (false, WriteEffect::None) => Ok(cmd(&[b"SET", key, value])),
        _ => Err(SetProblem::Unexpected),
    }
}

/// A pop that chose its key (or could take fewer than asked) as the plain pop on that key.
/// `None` when the arguments do not hold the key or the direction.
fn served_pop(name: &[u8], argv: &[&[u8]], key: &[u8], count: usize) -> Option<Vec<Argv>> {
    if count == 0 {
        return Some(Vec::new());
    }
    // Where the keys start and whether a numkeys argument precedes them.
    let (first_key, counted) = match name {
        b"blpop" | b"brpop" | b"bzpopmin" | b"bzpopmax" => (1, false),
        b"lmpop" | b"zmpop" => (2, true),
        _ => (3, true), // blmpop, bzmpop: timeout, numkeys
    };
    let last_key = if counted {
        let n: usize = std::str::from_utf8(argv.get(first_key - 1)?)
            .ok()?
            .parse()
            .ok()?;
        first_key + n.checked_sub(1)?
    } else {
        argv.len().checked_sub(2)? // the timeout is last
    };
    if !argv.get(first_key..=last_key)?.contains(&key) {
        return None;
    }
    let c = num(count as u64);
    let pop: Argv = match name {
        b"blpop" => cmd(&[b"LPOP", key]),
        b"brpop" => cmd(&[b"RPOP", key]),
        b"bzpopmin" => cmd(&[b"ZPOPMIN", key]),
        b"bzpopmax" => cmd(&[b"ZPOPMAX", key]),
        _ => {
            let side = argv.get(last_key + 1)?;
            let verb: &[u8] = if side.eq_ignore_ascii_case(b"left") {
                b"LPOP"
            } else if side.eq_ignore_ascii_case(b"right") {
                b"RPOP"
            } else if side.eq_ignore_ascii_case(b"min") {
                b"ZPOPMIN"
            } else if side.eq_ignore_ascii_case(b"max") {
                b"ZPOPMAX"
            } else {
                return None;
            };
            cmd(&[verb, key, &c])
        }
    };
    Some(vec![pop])
}

fn unexpected(name: &[u8], effect: &WriteEffect) -> PropagateError {
    PropagateError::UnexpectedEffect {
        command: String::from_utf8_lossy(name).into_owned(),
        effect: format!("{effect:?}").chars().take(64).collect(),
    }
}

fn cmd(parts: &[&[u8]]) -> Argv {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn owned(argv: &[&[u8]]) -> Argv {
    cmd(argv)
}

fn num(n: u64) -> Vec<u8> {
    itoa::Buffer::new().format(n).as_bytes().to_vec()
}

#[cfg(test)]
mod tests;
