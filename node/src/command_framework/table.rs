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
        (usize::from(self.len) == name.len() && self.name[..name.len()] == *name).then_some(spec)
    }
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
