//! CLUSTER REPLICATE, REPLICAS and SLAVES. REPLICATE changes the topology only (flags,
//! primary, shard), saved before the reply (in a topology group, committed by it first): the node then advertises itself as a replica
//! on the bus; copying the primary's data is replication's job, not done here yet.

use super::change::change_topology;
use super::cluster;
use crate::cluster::consensus::TopologyCommand;
use crate::cluster::nodes_text::{write_node_line, LineKind};
use crate::command_framework::{CmdResult, Ctx};

pub fn replicate(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let keys = super::keys_held(ctx);
    change_topology(
        ctx,
        c,
        |t| {
            t.replicate(args[2], keys)?;
            Ok(t.myself().primary)
        },
        |t, primary| {
            Some(TopologyCommand::SetReplicaOf {
                replica: t.myself().id,
                primary: primary?,
            })
        },
    )
}

/// Each replica's CLUSTER NODES line, without its newline (Redis's `clusterGenNodeDescription`).
pub fn replicas(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let t = c.topology.read();
    let lines: Vec<String> = t
        .replicas_arg(args[2])?
        .into_iter()
        .map(|n| {
            let mut line = String::new();
            write_node_line(&t, n, LineKind::Reply, &mut line);
            line.pop();
            line
        })
        .collect();
    drop(t);
    ctx.reply.array(lines.len());
    for l in &lines {
        ctx.reply.bulk(l.as_bytes());
    }
    Ok(())
}
