//! Replication commands clients send to a primary: WAIT and ROLE.

use crate::command::args;
use crate::command::ctx::{BlockRequest, TimeoutReply};
use crate::command::error::err;
use crate::command::spec::{command, flags::*, KeySpec};
use crate::command::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::server::unix_millis;
use std::time::Duration;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        since: "3.0.0",
        ..command(
            "wait",
            3,
            NOSCRIPT,
            KeySpec::None,
            wait,
            "generic",
            "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.",
        )
    },
    CommandSpec {
        since: "2.8.12",
        ..command(
            "role",
            1,
            NOSCRIPT | LOADING | STALE | FAST,
            KeySpec::None,
            role,
            "server",
            "Returns the replication role.",
        )
    },
];

/// Longest WAIT timeout honoured: Redis refuses only what overflows its clock; a year is
/// more than any client waits.
const WAIT_TIMEOUT_MAX: Duration = Duration::from_secs(365 * 24 * 3600);

/// WAIT numreplicas timeout: how many replicas acknowledged this client's last write, once
/// `numreplicas` did or `timeout` ms passed (0: no timeout). Answers at once when the count is
/// already reached or the client cannot block (inside EXEC), as Redis's `waitCommand`.
fn wait(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let numreplicas = args::int(args[1])?;
    let timeout_ms = proto::resp::request::parse_i64(args[2])
        .ok_or_else(|| CmdError::new("ERR timeout is not an integer or out of range"))?;
    if timeout_ms < 0 {
        return err("ERR timeout is negative");
    }
    let offset = ctx.client.repl_offset;
    let replication = &ctx.server.replication;
    if numreplicas <= 0 || ctx.in_exec {
        ctx.reply.integer(replication.count_acked(offset) as i64);
        return Ok(());
    }
    let wanted = usize::try_from(numreplicas).unwrap_or(usize::MAX);
    match replication
        .wait(&ctx.client.shared, offset, wanted)
        .map_err(|e| CmdError::new(e.to_string()))?
    {
        Ok(acked) => ctx.reply.integer(acked as i64),
        Err(_) => {
            let timeout = (timeout_ms > 0)
                .then(|| Duration::from_millis(timeout_ms as u64).min(WAIT_TIMEOUT_MAX));
            ctx.effects.block = Some(BlockRequest {
                keys: Vec::new(),
                timeout,
                retry: args.iter().map(|a| a.to_vec()).collect(),
                timeout_reply: TimeoutReply::ReplicaAcks { offset },
            });
        }
    }
    Ok(())
}

/// ROLE: `master <offset> [[ip port offset] ...]`.
fn role(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    let frame = ctx.server.replication.role_reply(unix_millis());
    let mut out = bytes::BytesMut::new();
    proto::resp::encode::encode(&frame, &mut out);
    ctx.reply.raw(&out);
    Ok(())
}
