//! The command table: every family's specs, looked up by name without allocating.
//!
//! The families are given by the layer above (`commands::install_table`, called by whoever starts a node): the
//! framework knows how a command is described and run, not which commands exist.

use super::spec::CommandSpec;
use crate::node_state::command_stats::CountedCommand;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Longest command name; longer first arguments cannot be commands.
pub const MAX_COMMAND_NAME_LEN: usize = 32;

type Table = HashMap<&'static [u8], &'static CommandSpec, ahash::RandomState>;

static TABLE: OnceLock<Table> = OnceLock::new();

/// Builds the table from `families` once per process; later calls change nothing (every
/// caller passes the same static list).
pub fn install(families: &'static [&'static [CommandSpec]]) {
    TABLE.get_or_init(|| build(families));
    crate::node_state::acl::catalog::install(
        families
            .iter()
            .flat_map(|f| f.iter())
            .map(super::categories::described)
            .collect(),
    );
}

fn table() -> &'static Table {
    TABLE
        .get()
        .expect("the command table is installed (`commands::install_table`) before any lookup")
}

fn build(families: &'static [&'static [CommandSpec]]) -> Table {
    let mut map = HashMap::with_hasher(ahash::RandomState::new());
    for family in families {
        for spec in family.iter() {
            debug_assert!(
                spec.name.len() <= MAX_COMMAND_NAME_LEN
                    && spec.name == spec.name.to_ascii_lowercase()
            );
            let previous = map.insert(spec.name.as_bytes(), spec);
            assert!(previous.is_none(), "command {} defined twice", spec.name);
        }
    }
    map
}

/// The spec of a command name, any case.
///
/// The last name found on this thread is remembered as sent (same bytes, same case): a
/// pipeline, a benchmark, a bulk load repeat one command, and comparing a few bytes costs a
/// tenth of lowering, hashing and probing the table (~180 instructions per command,
/// callgrind). The table never changes once installed, so the memo cannot go stale.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    if let Some(spec) = LAST_FOUND.with(|last| last.get().matches(name)) {
        return Some(spec);
    }
    let found = lookup_in_table(name);
    if let Some(spec) = found {
        if let Some(memo) = Memo::of(name, spec) {
            LAST_FOUND.with(|last| last.set(memo));
        }
    }
    found
}

/// Names up to this long are remembered by [`lookup`] (every command's but a few).
const MEMO_NAME_MAX: usize = 16;

thread_local! {
    static LAST_FOUND: Cell<Memo> = const { Cell::new(Memo::EMPTY) };
}

/// A name as a client sent it and the spec it named.
#[derive(Clone, Copy)]
struct Memo {
    len: u8,
    name: [u8; MEMO_NAME_MAX],
    spec: Option<&'static CommandSpec>,
}

impl Memo {
    const EMPTY: Memo = Memo {
        len: 0,
        name: [0; MEMO_NAME_MAX],
        spec: None,
    };

    fn of(name: &[u8], spec: &'static CommandSpec) -> Option<Memo> {
        if name.len() > MEMO_NAME_MAX {
            return None;
        }
        let mut memo = Memo {
            len: name.len() as u8,
            spec: Some(spec),
            ..Memo::EMPTY
        };
        memo.name[..name.len()].copy_from_slice(name);
        Some(memo)
    }

    fn matches(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        let spec = self.spec?;
        (usize::from(self.len) == name.len() && same_short(&self.name[..name.len()], name))
            .then_some(spec)
    }
}

/// `a == b` for two byte strings of the same length, at most [`MEMO_NAME_MAX`], by two loads
/// of each that may overlap. Why: comparing slices of a length not known when compiling calls
/// libc's `memcmp`, about 20 instructions for a three-letter name (callgrind), a third of
/// the remembered lookup.
fn same_short(a: &[u8], b: &[u8]) -> bool {
    debug_assert!(a.len() == b.len() && a.len() <= MEMO_NAME_MAX);
    let len = a.len();
    match len {
        0 => true,
        // The first, middle and last bytes are every byte of a name this short.
        1..=3 => a[0] == b[0] && a[len / 2] == b[len / 2] && a[len - 1] == b[len - 1],
        4..=7 => word4(a, 0) == word4(b, 0) && word4(a, len - 4) == word4(b, len - 4),
        _ => word8(a, 0) == word8(b, 0) && word8(a, len - 8) == word8(b, len - 8),
    }
}

fn word4(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_ne_bytes(word)
}

fn word8(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(word)
}

fn lookup_in_table(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.len() > MAX_COMMAND_NAME_LEN {
        return None;
    }
    let mut buf = [0u8; MAX_COMMAND_NAME_LEN];
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    table().get(&*lower).copied()
}

/// A subcommand of `parent` by name, any case.
pub fn lookup_sub(parent: &'static CommandSpec, name: &[u8]) -> Option<&'static CommandSpec> {
    parent.subcommands.iter().find(|s| {
        s.name
            .rsplit('|')
            .next()
            .is_some_and(|n| n.as_bytes().eq_ignore_ascii_case(name))
    })
}

/// Every command, sorted by name (COMMAND, COMMAND LIST, COMMAND DOCS).
pub fn all() -> Vec<&'static CommandSpec> {
    let mut v: Vec<_> = table().values().copied().collect();
    v.sort_by_key(|s| s.name);
    v
}

pub fn count() -> usize {
    table().len()
}

/// Every command and subcommand, as INFO commandstats counts them.
pub fn counted() -> Vec<&'static dyn CountedCommand> {
    let mut out: Vec<&'static dyn CountedCommand> = Vec::new();
    for spec in all() {
        out.push(spec);
        out.extend(
            spec.subcommands
                .iter()
                .map(|s| s as &'static dyn CountedCommand),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The overlapping loads see every byte: at every length the memo keeps, a name equals
    /// its copy and differs from it with any one byte changed.
    #[test]
    fn same_short_compares_every_byte() {
        for len in 0..=MEMO_NAME_MAX {
            let a: Vec<u8> = (0..len as u8).map(|i| b'a' + i).collect();
            let mut b = a.clone();
            assert!(same_short(&a, &b), "len {len}");
            for at in 0..len {
                b[at] ^= 0x20;
                assert!(!same_short(&a, &b), "len {len}, byte {at} changed");
                b[at] = a[at];
            }
        }
    }
}
