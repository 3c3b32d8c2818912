//! CLUSTER FAILOVER [FORCE|TAKEOVER]: Redis 7.0.15's checks and errors, then the failover
//! runs in the background (`server::repl_link::manual_failover`, through [`ManualFailover`]) and the reply is +OK at
//! once, as in Redis.

use super::cluster;
use crate::command_framework::{CmdError, CmdResult, Ctx};
use crate::node_state::services::failover::FailoverMode;
#[cfg(doc)]
use crate::node_state::services::ManualFailover;

pub fn failover(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let c = cluster(ctx)?;
    let mode = match args {
        [_, _] => FailoverMode::Default,
        [_, _, opt] if opt.eq_ignore_ascii_case(b"force") => FailoverMode::Force,
        [_, _, opt] if opt.eq_ignore_ascii_case(b"takeover") => FailoverMode::Takeover,
        _ => return Err(CmdError::Syntax),
    };
    {
        let t = c.topology.read();
        let me = t.myself();
        if !me.is_replica() {
            return Err(CmdError::new(
                "ERR You should send CLUSTER FAILOVER to a replica",
            ));
        }
        let primary = me
            .primary
            .and_then(|id| t.index_of(&id))
            .and_then(|i| t.node(i));
        let Some(primary) = primary else {
            return Err(CmdError::new(
                "ERR I'm a replica but my master is unknown to me",
            ));
        };
        if mode == FailoverMode::Default && primary.is_failed() {
            return Err(CmdError::new(
                "ERR Master is down or failed, please use CLUSTER FAILOVER FORCE",
            ));
        }
    }
    if !c.in_group() {
        return Err(CmdError::new(
            "ERR the topology group is not formed yet: failover needs its majority",
        ));
    }
    ctx.services
        .failover()
        .start(mode)
        .map_err(|e| CmdError::new(format!("ERR {e}")))?;
    ctx.reply.ok();
    Ok(())
}
