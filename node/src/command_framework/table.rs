//! The command table: every family's specs, looked up by name without allocating.
//!
//! The families are given by the layer above (`commands::install_table`, called by whoever starts a node): the
//! framework knows how a command is described and run, not which commands exist.

use super::spec::CommandSpec;
use crate::node_state::command_stats::CountedCommand;
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
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
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
