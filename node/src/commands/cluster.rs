//! Cluster commands: CLUSTER (subcommands in `cluster/`), READONLY, READWRITE, ASKING.
//! Without `cluster-enabled yes` every one answers "This instance has cluster support
//! disabled", after the arity check, as Redis does.

mod bus_state;
mod change;
mod epochs;
mod failover;
mod keys;
mod meet;
mod membership;
mod migrations;
mod replicas;
mod secret;
mod slot_stats;
mod slots;
mod view;

use crate::cluster::{Cluster, ClusterError};
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};

const CLUSTER: &str = "cluster";

/// A CLUSTER subcommand spec (arity, flags and summary as Redis 7.0.15's COMMAND DOCS).
const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: crate::command_framework::spec::Handler,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        since: "3.0.0",
        ..command(name, arity, flags, KeySpec::None, handler, CLUSTER, summary)
    }
}

const ADMIN_STALE: u32 = ADMIN | STALE;
/// The read-only views of the topology also answer while a replica loads a full sync's
/// snapshot (Redis answers them `-LOADING`): the topology is not part of the dataset being
/// loaded, and cluster clients and `redis-cli --cluster check` read it from any node,
/// replicas included, right after `--cluster create`.
const VIEW: u32 = LOADING | STALE;

static SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "cluster|addslots",
        -3,
        ADMIN_STALE,
        slots::addslots,
        "Assign new hash slots to receiving node",
    ),
    CommandSpec {
        since: "7.0.0",
        ..sub(
            "cluster|addslotsrange",
            -4,
            ADMIN_STALE,
            slots::addslotsrange,
            "Assign new hash slots to receiving node",
        )
    },
    sub(
        "cluster|delslots",
        -3,
        ADMIN_STALE,
        slots::delslots,
        "Set hash slots as unbound in receiving node",
    ),
    CommandSpec {
        since: "7.0.0",
        ..sub(
            "cluster|delslotsrange",
            -4,
            ADMIN_STALE,
            slots::delslotsrange,
            "Set hash slots as unbound in receiving node",
        )
    },
    sub(
        "cluster|flushslots",
        2,
        ADMIN_STALE,
        slots::flushslots,
        "Delete a node's own slots information",
    ),
    sub(
        "cluster|setslot",
        -4,
        ADMIN_STALE,
        slots::setslot,
        "Bind a hash slot to a specific node",
    ),
    sub(
        "cluster|saveconfig",
        2,
        ADMIN_STALE,
        view::saveconfig,
        "Forces the node to save cluster state on disk",
    ),
    sub(
        "cluster|info",
        2,
        VIEW,
        view::info,
        "Provides info about Redis Cluster node state",
    ),
    sub(
        "cluster|nodes",
        2,
        VIEW,
        view::nodes,
        "Get Cluster config for the node",
    ),
    sub(
        "cluster|slots",
        2,
        VIEW,
        view::slots,
        "Get array of Cluster slot to node mappings",
    ),
    CommandSpec {
        since: "7.0.0",
        ..sub(
            "cluster|shards",
            2,
            VIEW,
            view::shards,
            "Get array of cluster slots to node mappings",
        )
    },
    sub("cluster|myid", 2, VIEW, view::myid, "Return the node id"),
    CommandSpec {
        since: "7.2.0",
        ..sub(
            "cluster|myshardid",
            2,
            VIEW,
            view::myshardid,
            "Return the node's shard id",
        )
    },
    sub(
        "cluster|keyslot",
        3,
        VIEW,
        keys::keyslot,
        "Returns the hash slot of the specified key",
    ),
    sub(
        "cluster|countkeysinslot",
        3,
        STALE,
        keys::countkeysinslot,
        "Return the number of local keys in the specified hash slot",
    ),
    CommandSpec {
        since: "5.0.0",
        ..sub(
            "cluster|help",
            2,
            LOADING | STALE,
            view::help,
            "Show helpful text about the different subcommands",
        )
    },
    // Arity -3 rather than Redis's -4: one argument is a fabric address to greet directly.
    sub(
        "cluster|meet",
        -3,
        ADMIN_STALE,
        meet::meet,
        "Force a node cluster to handshake with another node",
    ),
    sub(
        "cluster|failover",
        -2,
        ADMIN_STALE,
        failover::failover,
        "Forces a replica to perform a manual failover of its master",
    ),
    sub(
        "cluster|replicate",
        3,
        ADMIN_STALE,
        replicas::replicate,
        "Reconfigure a node as a replica of the specified master node",
    ),
    CommandSpec {
        since: "5.0.0",
        ..sub(
            "cluster|replicas",
            3,
            ADMIN_STALE,
            replicas::replicas,
            "List replica nodes of the specified master node",
        )
    },
    sub(
        "cluster|slaves",
        3,
        ADMIN_STALE,
        replicas::replicas,
        "List replica nodes of the specified master node",
    ),
    sub(
        "cluster|forget",
        3,
        ADMIN_STALE,
        membership::forget,
        "Remove a node from the nodes table",
    ),
    // ALL_KEYS (not shown by COMMAND): the key check and a replica's flush are atomic.
    sub(
        "cluster|reset",
        -2,
        ADMIN_STALE | NOSCRIPT | ALL_KEYS,
        membership::reset,
        "Reset a Redis Cluster node",
    ),
    sub(
        "cluster|bumpepoch",
        2,
        ADMIN_STALE,
        epochs::bumpepoch,
        "Advance the cluster config epoch",
    ),
    // Ours: a node started without a cluster-secret takes one (operator cluster create).
    sub(
        "cluster|set-secret",
        3,
        ADMIN_STALE,
        secret::set_secret,
        "Give a node that has no cluster secret and knows no other node its cluster's secret",
    ),
    sub(
        "cluster|set-config-epoch",
        3,
        ADMIN_STALE,
        epochs::set_config_epoch,
        "Set the configuration epoch in a new node",
    ),
    sub(
        "cluster|count-failure-reports",
        3,
        ADMIN_STALE,
        bus_state::count_failure_reports,
        "Return the number of failure reports active for a given node",
    ),
    CommandSpec {
        since: "7.0.0",
        ..sub(
            "cluster|links",
            2,
            VIEW,
            bus_state::links,
            "Returns a list of all TCP links to and from peer nodes in cluster",
        )
    },
    CommandSpec {
        since: "8.0.0",
        ..sub(
            "cluster|slot-stats",
            -4,
            STALE,
            slot_stats::slot_stats,
            "Return an array of slot usage statistics for slots assigned to the current node",
        )
    },
    CommandSpec {
        since: "9.0.0",
        ..sub(
            "cluster|migrateslots",
            -5,
            ADMIN_STALE,
            migrations::migrateslots,
            "Migrate slots atomically to other nodes",
        )
    },
    CommandSpec {
        since: "9.0.0",
        ..sub(
            "cluster|getslotmigrations",
            2,
            ADMIN_STALE,
            migrations::getslotmigrations,
            "List the atomic slot migrations",
        )
    },
    CommandSpec {
        since: "9.0.0",
        ..sub(
            "cluster|cancelslotmigrations",
            2,
            ADMIN_STALE,
            migrations::cancelslotmigrations,
            "Cancel this node's atomic slot migrations",
        )
    },
    CommandSpec {
        since: "9.0.0",
        ..sub(
            "cluster|syncslots",
            -3,
            ADMIN_STALE,
            migrations::syncslots,
            "An atomic slot migration's link (internal)",
        )
    },
    sub(
        "cluster|getkeysinslot",
        4,
        STALE,
        keys::getkeysinslot,
        "Return local key names in the specified hash slot",
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
            "A container for cluster commands",
        )
    },
    CommandSpec {
        group: "connection",
        ..sub(
            "readonly",
            1,
            FAST | LOADING | STALE,
            readonly,
            "Enables read queries for a connection to a cluster replica node",
        )
    },
    CommandSpec {
        group: "connection",
        ..sub(
            "readwrite",
            1,
            FAST | LOADING | STALE,
            readwrite,
            "Disables read queries for a connection to a cluster replica node",
        )
    },
    CommandSpec {
        group: "connection",
        ..sub(
            "asking",
            1,
            FAST,
            asking,
            "Sent by cluster clients after an -ASK redirect",
        )
    },
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

/// Keys the node holds, those of slots being imported too: what Redis's "DB must be empty"
/// checks count (cluster mode has one database, the client's). Read a shard at a time through
/// the client's view: inside EXEC, which holds every shard, through its guards (locking a
/// shard again there deadlocked the thread).
fn keys_held(ctx: &mut Ctx<'_>) -> usize {
    (0..crate::db::SHARD_COUNT)
        .map(|shard| ctx.db.with_shard(shard, |s| s.keys))
        .sum()
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
