//! CLUSTER MYID MYSHARDID INFO NODES SLOTS SHARDS SAVECONFIG: views of the topology.

use super::cluster;
use crate::cluster::{nodes_text, replies};
use crate::command_framework::{CmdResult, Ctx};

pub fn myid(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let id = cluster(ctx)?.topology.read().myself().id;
    ctx.reply.bulk(id.as_bytes());
    Ok(())
}

pub fn myshardid(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let id = cluster(ctx)?.topology.read().myself().shard;
    ctx.reply.bulk(id.as_bytes());
    Ok(())
}

pub fn info(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let mut text = replies::info(&c.topology.read());
    if !c.serving_at(crate::clock::unix_millis()) {
        // Outside its serving lease the node answers keyed commands CLUSTERDOWN: its state
        // says so too, so that whoever waits for `cluster_state:ok` can then write.
        text = text.replacen("cluster_state:ok", "cluster_state:fail", 1);
    }
    replies::group_info(&c.group_view(), &mut text);
    // Ours: 1 while a restart fence holds the node (see `agent::restart_fence`).
    text.push_str(&format!(
        "cluster_restart_fence:{}\r\n",
        u8::from(c.is_fenced())
    ));
    ctx.reply.verbatim(text.as_bytes());
    Ok(())
}

pub fn nodes(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let text = nodes_text::cluster_nodes(&cluster(ctx)?.topology.read());
    ctx.reply.verbatim(text.as_bytes());
    Ok(())
}

pub fn slots(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    replies::slots(&c.topology.read(), &mut ctx.reply);
    Ok(())
}

pub fn shards(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    replies::shards(&c.topology.read(), &mut ctx.reply);
    Ok(())
}

pub fn saveconfig(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    cluster(ctx)?.save()?;
    ctx.reply.ok();
    Ok(())
}

/// CLUSTER HELP: Redis 7.0.15's lines in its order, plus MYSHARDID (7.2).
const HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "MYID",
    "    Return the node id.",
    "MYSHARDID",
    "    Return the node's shard id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SET-SECRET <secret>",
    "    Give a node without a cluster secret, alone, its cluster's secret (saved in dir).",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
    "HELP",
    "    Prints this help.",
];

pub fn help(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    cluster(ctx)?;
    crate::commands::introspection::reply_help(&mut ctx.reply, HELP);
    Ok(())
}
