//! Cluster commands: CLUSTER (subcommands in `cluster/`), READONLY, READWRITE, ASKING.
//! Without `cluster-enabled yes` every one answers "This instance has cluster support
//! disabled", after the arity check, as Redis does.

mod keys;
mod slots;
mod view;

use crate::cluster::{Cluster, ClusterError};
use crate::command::spec::{command, flags::*, KeySpec};
use crate::command::{CmdError, CmdResult, CommandSpec, Ctx};

const CLUSTER: &str = "cluster";

/// A CLUSTER subcommand spec (Redis 7.0's arity and flags).
const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: crate::command::spec::Handler,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        since: "3.0.0",
        ..command(name, arity, flags, KeySpec::None, handler, CLUSTER, summary)
    }
}

const ADMIN_STALE: u32 = ADMIN | STALE;

static SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "cluster|addslots",
        -3,
        ADMIN_STALE,
        slots::addslots,
        "Assigns new hash slots to a node.",
    ),
    CommandSpec {
        since: "7.0.0",
        ..sub(
            "cluster|addslotsrange",
            -4,
            ADMIN_STALE,
            slots::addslotsrange,
            "Assigns new hash slot ranges to a node.",
        )
    },
    sub(
        "cluster|delslots",
        -3,
        ADMIN_STALE,
        slots::delslots,
        "Sets hash slots as unbound for a node.",
    ),
    CommandSpec {
        since: "7.0.0",
        ..sub(
            "cluster|delslotsrange",
            -4,
            ADMIN_STALE,
            slots::delslotsrange,
            "Sets hash slot ranges as unbound for a node.",
        )
    },
    sub(
        "cluster|flushslots",
        2,
        ADMIN_STALE,
        slots::flushslots,
        "Deletes all slots information from a node.",
    ),
    sub(
        "cluster|setslot",
        -4,
        ADMIN_STALE,
        slots::setslot,
        "Binds a hash slot to a node.",
    ),
    sub(
        "cluster|saveconfig",
        2,
        ADMIN_STALE,
        view::saveconfig,
        "Forces a node to save the cluster configuration to disk.",
    ),
    sub(
        "cluster|info",
        2,
        STALE,
        view::info,
        "Returns information about the state of a node.",
    ),
    sub(
        "cluster|nodes",
        2,
        STALE,
        view::nodes,
        "Returns the cluster configuration for a node.",
    ),
    sub(
        "cluster|slots",
        2,
        STALE,
        view::slots,
        "Returns the mapping of cluster slots to nodes.",
    ),
    CommandSpec {
        since: "7.0.0",
        ..sub(
            "cluster|shards",
            2,
            STALE,
            view::shards,
            "Returns the mapping of cluster slots to shards.",
        )
    },
    sub(
        "cluster|myid",
        2,
        STALE,
        view::myid,
        "Returns the ID of a node.",
    ),
    CommandSpec {
        since: "7.2.0",
        ..sub(
            "cluster|myshardid",
            2,
            STALE,
            view::myshardid,
            "Returns the shard ID of a node.",
        )
    },
    sub(
        "cluster|keyslot",
        3,
        STALE,
        keys::keyslot,
        "Returns the hash slot for a key.",
    ),
    sub(
        "cluster|countkeysinslot",
        3,
        STALE,
        keys::countkeysinslot,
        "Returns the number of keys in a hash slot.",
    ),
    sub(
        "cluster|getkeysinslot",
        4,
        STALE,
        keys::getkeysinslot,
        "Returns the key names in a hash slot.",
    ),
];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "3.0.0",
        subcommands: SUBCOMMANDS,
        ..command(
            "cluster",
            -2,
            0,
            KeySpec::None,
            container,
            CLUSTER,
            "A container for Redis Cluster commands.",
        )
    },
    sub(
        "readonly",
        1,
        FAST | LOADING | STALE,
        readonly,
        "Enables read-only queries for a connection to a Redis Cluster replica node.",
    ),
    sub(
        "readwrite",
        1,
        FAST | LOADING | STALE,
        readwrite,
        "Enables read-write queries for a connection to a Reids Cluster replica node.",
    ),
    sub(
        "asking",
        1,
        FAST,
        asking,
        "Signals that a cluster client is following an -ASK redirect.",
    ),
];

/// The container itself never runs: the dispatcher picks a subcommand.
fn container(_ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    Err(CmdError::Syntax)
}

/// The cluster state, or Redis's error when cluster mode is off.
fn cluster<'a>(ctx: &Ctx<'a>) -> Result<&'a Cluster, CmdError> {
    ctx.server
        .cluster
        .as_ref()
        .ok_or_else(|| CmdError::new("ERR This instance has cluster support disabled"))
}

impl From<ClusterError> for CmdError {
    fn from(e: ClusterError) -> Self {
        CmdError::new(e.to_string())
    }
}

fn readonly(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    cluster(ctx)?;
    ctx.client.cluster_readonly = true;
    ctx.reply.ok();
    Ok(())
}

fn readwrite(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    cluster(ctx)?;
    ctx.client.cluster_readonly = false;
    ctx.reply.ok();
    Ok(())
}

fn asking(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    cluster(ctx)?;
    ctx.client.cluster_asking = true;
    ctx.reply.ok();
    Ok(())
}
