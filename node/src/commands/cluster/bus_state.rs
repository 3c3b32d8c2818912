//! CLUSTER COUNT-FAILURE-REPORTS and LINKS: the gossip core's per-node state, read from the
//! copy the bus thread publishes every tick (`Cluster::peer_view`), so the command never
//! waits for that thread. Nodes the table no longer has (forgotten since the copy) are left
//! out.

use super::cluster;
use crate::cluster::NodeId;
use crate::command_framework::{CmdResult, Ctx};
use std::collections::HashSet;

pub fn count_failure_reports(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let id = {
        let t = c.topology.read();
        t.nodes[t.lookup_arg(args[2])? as usize].id
    };
    let count = c.peer_view.read().get(&id).map_or(0, |p| p.fail_reports);
    ctx.reply.integer(count as i64);
    Ok(())
}

/// One map per link, in Redis's field order. The bus is datagrams: no link has a send
/// buffer of its own (messages leave at once), and each is always read-polled (`r`).
pub fn links(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let members: HashSet<NodeId> = c
        .topology
        .read()
        .nodes
        .iter()
        .filter(|n| !n.is_myself())
        .map(|n| n.id)
        .collect();
    let links: Vec<(&str, NodeId, u64)> = c
        .peer_view
        .read()
        .peers
        .iter()
        .filter(|p| members.contains(&p.id))
        .flat_map(|p| {
            let to = p.link_to_since_ms.map(|at| ("to", p.id, at));
            let from = p.link_from_since_ms.map(|at| ("from", p.id, at));
            to.into_iter().chain(from)
        })
        .collect();
    ctx.reply.array(links.len());
    for (direction, id, since) in links {
        ctx.reply.map(6);
        ctx.reply.bulk(b"direction");
        ctx.reply.bulk(direction.as_bytes());
        ctx.reply.bulk(b"node");
        ctx.reply.bulk(id.as_bytes());
        ctx.reply.bulk(b"create-time");
        ctx.reply.integer(since as i64);
        ctx.reply.bulk(b"events");
        ctx.reply.bulk(b"r");
        ctx.reply.bulk(b"send-buffer-allocated");
        ctx.reply.integer(0);
        ctx.reply.bulk(b"send-buffer-used");
        ctx.reply.integer(0);
    }
    Ok(())
}
