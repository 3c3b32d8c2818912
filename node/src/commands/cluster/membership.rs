//! CLUSTER FORGET and RESET: nodes leave this node's table. Both are saved before the
//! reply (in a topology group, FORGET is committed by the group first), then the bus
//! thread is told: FORGET so its gossip core blacklists the node for a minute, RESET so it
//! drops what it knew of the others and leaves its topology group.

use super::change::commit_then;
use super::cluster;
use crate::cluster::consensus::TopologyCommand;
use crate::cluster::reset::ResetKind;
use crate::cluster::{Cluster, ClusterError, HexId, NodeId};
use crate::command_framework::{CmdError, CmdResult, Ctx};
use rand::SeedableRng;

pub fn forget(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    if !c.in_group() {
        let node = c.change(|t| t.forget(args[2]))?;
        tell_bus_forget(c, node.id, node.bus_addr);
        ctx.reply.ok();
        return Ok(());
    }
    // Redis's checks on a copy, then the group removes the node everywhere.
    let checked = c.topology.read().clone().forget(args[2]);
    let node = match checked {
        Ok(node) => node,
        // Forgotten by the group through another node: gossip keeps it out already.
        Err(ClusterError::UnknownNode(_))
            if HexId::parse(args[2])
                .is_some_and(|id| c.take_forgotten(&id, std::time::Instant::now())) =>
        {
            ctx.reply.ok();
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let (id, bus_addr) = (node.id, node.bus_addr);
    let then = move |c: &Cluster| {
        // Forgotten here by this very command: a second FORGET of it is "Unknown node".
        c.take_forgotten(&id, std::time::Instant::now());
        tell_bus_forget(c, id, bus_addr);
    };
    commit_then(
        ctx,
        c,
        TopologyCommand::ForgetNode { id },
        Some(Box::new(then)),
    )
}

/// Has the bus thread blacklist a forgotten node. The request goes before the reply, and
/// the bus thread takes requests before the next messages it reads; handshakes gossip
/// starts in between are dropped by the core.
fn tell_bus_forget(c: &Cluster, id: NodeId, bus_addr: String) {
    if let Some(bus) = c.bus.get() {
        if !bus.forget(id, bus_addr) {
            tracing::warn!(%id, "CLUSTER FORGET: the bus thread is behind; no blacklist");
        }
    }
}

/// Declared ALL_KEYS: the key check and the flush of a replica's data see one state.
pub fn reset(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    if args.len() > 3 {
        return Err(CmdError::new(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLUSTER HELP.",
            String::from_utf8_lossy(args[1])
        )));
    }
    let kind = ResetKind::parse(args.get(2).copied()).ok_or(CmdError::Syntax)?;
    let keys: usize = ctx.db.shards_mut().map(|(_, s)| s.keys).sum();
    let mut rng = rand::rngs::StdRng::from_entropy();
    let done = c.change(|t| t.reset(kind, keys, &mut rng))?;
    if done.flush_data {
        // A replica no longer follows anyone: its copy of the data goes, as in Redis.
        let removed = ctx.db.clear_held() as u64;
        ctx.server.watches.touch_all();
        ctx.server.tracking.flushed(&ctx.server.clients);
        ctx.effects.dirty += removed;
    }
    if let Some(bus) = c.bus.get() {
        if !bus.reset() {
            tracing::warn!("CLUSTER RESET: the bus thread is behind; it forgets peers later");
        }
    }
    ctx.reply.ok();
    Ok(())
}
