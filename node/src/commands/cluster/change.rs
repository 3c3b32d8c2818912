//! How a CLUSTER command changes the topology. While the node is in no topology group it
//! changes it by itself and saves, as Redis does. In a group the change is a Raft proposal:
//! Redis's checks run first on a copy (same errors, nothing changed), then the command is
//! proposed, and the reply waits until the change has applied on this node.
//!
//! The wait does not hold the connection's thread (with one io-thread, the only event loop
//! of every TCP client): the command blocks its client as BLPOP does, and the bus thread
//! wakes it when the outcome is in (`TimeoutReply::TopologyChange`).

use crate::cluster::consensus::TopologyCommand;
use crate::cluster::shared::{OnCommit, PendingChange};
use crate::cluster::{Cluster, ClusterError, Topology};
use crate::command_framework::ctx::{BlockRequest, TimeoutReply};
use crate::command_framework::{CmdResult, Ctx};

/// Changes the topology and answers `+OK` once the change is made. `local` is the Redis way
/// (checks and change); `proposal` says what the group must commit (None: nothing, the
/// change is already in place).
pub fn change_topology<R>(
    ctx: &mut Ctx<'_>,
    c: &Cluster,
    local: impl Fn(&mut Topology) -> Result<R, ClusterError>,
    proposal: impl FnOnce(&Topology, R) -> Option<TopologyCommand>,
) -> CmdResult {
    if !c.in_group() {
        c.change(|t| local(t).map(|_| ()))?;
        ctx.reply.ok();
        return Ok(());
    }
    let command = {
        let t = c.topology.read();
        let mut trial = t.clone();
        let checked = local(&mut trial)?;
        proposal(&t, checked)
    };
    match command {
        Some(command) => commit_then_ok(ctx, c, command),
        None => {
            ctx.reply.ok();
            Ok(())
        }
    }
}

/// Proposes `command` and answers `+OK` once the group committed it and it applied here
/// (or its error). The client waits blocked; inside EXEC, where nothing blocks, the
/// connection's thread waits instead.
pub fn commit_then_ok(ctx: &mut Ctx<'_>, c: &Cluster, command: TopologyCommand) -> CmdResult {
    commit_then(ctx, c, command, None)
}

/// [`commit_then_ok`], running `on_commit` after the change applied here and before `+OK`.
pub fn commit_then(
    ctx: &mut Ctx<'_>,
    c: &Cluster,
    command: TopologyCommand,
    on_commit: Option<OnCommit>,
) -> CmdResult {
    if ctx.in_exec {
        c.propose(command)?;
        if let Some(then) = on_commit {
            then(c);
        }
        ctx.reply.ok();
        return Ok(());
    }
    let client = ctx.client.shared.clone();
    let outcome = c.propose_then(command, Some(Box::new(move || client.wake())))?;
    ctx.client.pending_topology = Some(PendingChange { outcome, on_commit });
    ctx.effects.block = Some(BlockRequest {
        keys: Vec::new(),
        timeout: Some(Cluster::proposal_wait()),
        retry: Vec::new(),
        timeout_reply: TimeoutReply::TopologyChange,
    });
    Ok(())
}
