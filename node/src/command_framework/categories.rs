//! A command's ACL categories, derived from its group and flags as Redis derives them, so
//! that COMMAND INFO and ACL rules (`+@read`, ACL CAT) agree.

use super::spec::flags::*;
use super::CommandSpec;
use crate::node_state::acl::catalog::{self, CATEGORIES};

/// Commands Redis marks @dangerous although they are not admin commands.
const DANGEROUS: &[&str] = &[
    "keys",
    "flushdb",
    "flushall",
    "info",
    "sort",
    "sort_ro",
    "migrate",
    "restore",
    "restore-asking",
    "swapdb",
    "lastsave",
    "role",
];

/// Commands Redis puts in @keyspace although their group is not `generic`.
const KEYSPACE_OUTSIDE_GENERIC: &[&str] = &["restore-asking"];

/// The category a command's group implies (Redis declares these per command; the group
/// is the same information for the commands this node has).
fn group_category(group: &str) -> Option<&'static str> {
    Some(match group {
        "generic" => "keyspace",
        "string" => "string",
        "list" => "list",
        "hash" => "hash",
        "set" => "set",
        "sorted-set" | "sorted_set" | "sortedset" | "zset" => "sortedset",
        "bitmap" => "bitmap",
        "hyperloglog" => "hyperloglog",
        "geo" => "geo",
        "stream" => "stream",
        "connection" => "connection",
        "transactions" | "transaction" => "transaction",
        "scripting" => "scripting",
        _ => return None,
    })
}

/// A command's ACL categories (without `@`), from its group and flags as Redis derives them.
pub fn categories(spec: &CommandSpec) -> Vec<&'static str> {
    let top = spec.name.split('|').next().unwrap_or(spec.name);
    let has = |c: &str| -> bool {
        match c {
            "write" => spec.has(WRITE),
            "read" => spec.has(READONLY) && spec.group != "scripting",
            "admin" => spec.has(ADMIN),
            "dangerous" => spec.has(ADMIN) || DANGEROUS.contains(&top),
            "pubsub" => spec.has(PUBSUB),
            "fast" => spec.has(FAST),
            "slow" => !spec.has(FAST),
            "blocking" => spec.has(BLOCKING),
            "keyspace" if KEYSPACE_OUTSIDE_GENERIC.contains(&top) => true,
            // A container has only what its flags give it (`@slow`).
            other => spec.subcommands.is_empty() && group_category(spec.group) == Some(other),
        }
    };
    CATEGORIES.iter().copied().filter(|c| has(c)).collect()
}

/// The category bits of a command (see [`catalog::CATEGORIES`]).
pub fn category_bits(spec: &CommandSpec) -> u32 {
    categories(spec)
        .iter()
        .filter_map(|c| catalog::category_bit(c))
        .fold(0, |bits, b| bits | b)
}

/// The catalog entry of a command and its subcommands, for the ACL layer.
pub fn described(spec: &CommandSpec) -> catalog::Described {
    catalog::Described {
        name: spec.name,
        categories: category_bits(spec),
        no_auth: spec.has(NO_AUTH),
        subcommands: spec.subcommands.iter().map(described).collect(),
    }
}
