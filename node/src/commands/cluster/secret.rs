//! CLUSTER SET-SECRET <secret> (ours, not Redis's): gives a node started without a
//! `cluster-secret` the one its cluster will use, so that `operator cluster create` can
//! generate one for nodes that have none. Taken only by a node that has no secret and knows
//! no other node: a cluster's nodes must all change it at once, which this does not do, and
//! a secret once set is what keeps other local processes off the bus. Saved (0600) in `dir`
//! before the reply, so a restart keeps it.

use super::cluster;
use crate::cluster::secret::SECRET_MIN;
use crate::command_framework::error::err;
use crate::command_framework::{CmdResult, Ctx};
use crate::config::params::CLUSTER_SECRET_MAX;

pub fn set_secret(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let Ok(secret) = std::str::from_utf8(args[2]) else {
        return err("ERR the cluster secret must be text");
    };
    if secret.len() < SECRET_MIN || secret.len() > CLUSTER_SECRET_MAX {
        return err(format!(
            "ERR the cluster secret must be {SECRET_MIN} to {CLUSTER_SECRET_MAX} bytes (`operator cluster secret` prints one)"
        ));
    }
    if secret
        .chars()
        .any(|ch| ch.is_control() || ch.is_whitespace())
    {
        return err("ERR the cluster secret must be one word without control characters");
    }
    let current = ctx.server.config.read().cluster.secret.clone();
    if current == secret {
        ctx.reply.ok();
        return Ok(());
    }
    if !current.is_empty() {
        return err("ERR this node already has a cluster secret; it is fixed once set");
    }
    if c.topology.read().nodes.len() > 1 {
        return err(
            "ERR a node that knows other nodes cannot take a secret: give every node of a cluster the same one at start",
        );
    }
    let dir = ctx.server.config.read().dir.clone();
    if let Err(e) = ctx.services.cluster_secret_file().save(&dir, secret) {
        tracing::warn!(error = %e, "cluster secret not saved");
        return err(format!("ERR the cluster secret could not be saved: {e}"));
    }
    ctx.server.config.write().cluster.secret = secret.to_string();
    c.secret_changed();
    tracing::info!("cluster secret set (CLUSTER SET-SECRET) and saved");
    ctx.reply.ok();
    Ok(())
}
