//! Command families, one file each. Every family exports `COMMANDS`, its table entries.

pub mod bitmaps;
pub mod cluster;
pub mod connection;
pub mod functions;
pub mod geo;
pub mod hashes;
pub mod hyperloglog;
pub mod introspection;
pub mod keys;
pub mod lcs;
pub mod lists;
pub mod migration;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod server;
pub mod sets;
pub mod sort;
pub mod strings;
pub mod transactions;
pub mod zsets;

use crate::command_framework::CommandSpec;

/// Every family's commands; the table is built from these.
pub static FAMILIES: &[&[CommandSpec]] = &[
    connection::COMMANDS,
    strings::COMMANDS,
    bitmaps::COMMANDS,
    hyperloglog::COMMANDS,
    geo::COMMANDS,
    lcs::COMMANDS,
    keys::COMMANDS,
    sort::COMMANDS,
    lists::COMMANDS,
    hashes::COMMANDS,
    sets::COMMANDS,
    zsets::COMMANDS,
    transactions::COMMANDS,
    pubsub::COMMANDS,
    server::COMMANDS,
    introspection::COMMANDS,
    persistence::COMMANDS,
    migration::COMMANDS,
    cluster::COMMANDS,
    replication::COMMANDS,
    functions::COMMANDS,
];
