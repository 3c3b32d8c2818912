//! Replication commands: WAIT and ROLE (clients of a primary), REPLICAOF / SLAVEOF (make this
//! node follow a primary or stop), REPLCONF (a replica setting its link up).

use crate::clock::unix_millis;
use crate::command_framework::args;
use crate::command_framework::ctx::{BlockRequest, ReplicaStreamAsk, TimeoutReply};
use crate::command_framework::error::err;
use crate::command_framework::spec::{command, flags::*, KeySpec};
use crate::command_framework::{CmdError, CmdResult, CommandSpec, Ctx};
use crate::replication::psync::PsyncRequest;
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
    CommandSpec {
        since: "5.0.0",
        ..command(
            "replicaof",
            3,
            ADMIN | NOSCRIPT | STALE,
            KeySpec::None,
            replicaof,
            "server",
            "Configures a server as replica of another, or promotes it to a master.",
        )
    },
    CommandSpec {
        since: "1.0.0",
        ..command(
            "slaveof",
            3,
            ADMIN | NOSCRIPT | STALE,
            KeySpec::None,
            replicaof,
            "server",
            "Sets a Redis server as a replica of another, or promotes it to being a master.",
        )
    },
    CommandSpec {
        since: "3.0.0",
        ..command(
            "replconf",
            -1,
            ADMIN | NOSCRIPT | LOADING | STALE,
            KeySpec::None,
            replconf,
            "server",
            "An internal command for configuring the replication stream.",
        )
    },
    CommandSpec {
        since: "1.0.0",
        ..command(
            "sync",
            1,
            ADMIN | NOSCRIPT | NO_MULTI,
            KeySpec::None,
            sync,
            "server",
            "An internal command used in replication.",
        )
    },
    CommandSpec {
        since: "2.8.0",
        ..command(
            "psync",
            3,
            ADMIN | NOSCRIPT | NO_MULTI,
            KeySpec::None,
            psync,
            "server",
            "An internal command used in replication.",
        )
    },
];

/// SYNC: the connection becomes a consumer of the replication stream (a full sync's snapshot,
/// then the stream); the server layer serves it (`server::tcp_replica`). No reply here.
fn sync(ctx: &mut Ctx<'_>, _args: &[&[u8]]) -> CmdResult {
    ctx.effects.replica_stream = Some(ReplicaStreamAsk {
        psync: PsyncRequest { history: None },
        status_line: false,
    });
    Ok(())
}

/// PSYNC <replid> <offset>: as SYNC, after `+FULLRESYNC <replid> <offset>`, or `+CONTINUE`
/// when the named history is still in the backlog.
fn psync(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let psync = PsyncRequest::parse(args).map_err(|e| CmdError::new(e.to_string()))?;
    ctx.effects.replica_stream = Some(ReplicaStreamAsk {
        psync,
        status_line: true,
    });
    Ok(())
}

/// Longest write pause a replica may ask for (Redis pauses for twice its 5 s manual
/// failover timeout).
pub const FAILOVER_PAUSE_MS_MAX: u64 = 10_000;

/// REPLICAOF host port | NO ONE (Redis's `replicaofCommand`): follow a primary (its link
/// starts in the background) or stop following and accept writes again.
fn replicaof(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    if ctx.server.cluster.is_some() {
        return err("ERR REPLICAOF not allowed in cluster mode.");
    }
    if args[1].eq_ignore_ascii_case(b"no") && args[2].eq_ignore_ascii_case(b"one") {
        if ctx.server.replica_of.stop() {
            // Outside cluster mode no topology grants epochs.
            ctx.server.replication.promote(0, &mut rand::thread_rng());
            tracing::info!("MASTER MODE enabled (user request)");
        }
        ctx.reply.ok();
        return Ok(());
    }
    let port = args::int(args[2])?;
    // Port 0 is taken, as Redis takes it: a replica whose link never comes up (Redis's
    // suite makes a stale replica that way).
    let port = u16::try_from(port).map_err(|_| CmdError::new("ERR Invalid master port"))?;
    let host = String::from_utf8_lossy(args[1]).into_owned();
    match ctx.services.replication_links().follow(&host, port) {
        Ok(true) => ctx.reply.ok(),
        Ok(false) => ctx
            .reply
            .simple(b"OK Already connected to specified master"),
        Err(e) => return Err(CmdError::new(format!("ERR {e}"))),
    }
    Ok(())
}

/// REPLCONF: `listening-port`, `capa`, `ack` and friends are accepted (Redis replicas send
/// them); ours: `RDMA-PORT` (where the replication listener is) and `RDMA-LINK <endpoint>
/// <listening-port> <LinkRequest>` (link the fabric connection from `endpoint`; the reply is
/// the `LinkAccept`). RDMA-LINK holds the connection's runtime thread until the link is set
/// up (at most `LINK_SETUP_TIMEOUT`; a full sync builds its snapshot in that time): rare, and
/// bounded, but other clients of that thread wait meanwhile.
///
/// In cluster mode a link must be proven: `RDMA-PORT` answers `[port, challenge]` (16 random
/// bytes, kept for this connection) and `RDMA-LINK` takes a sixth argument,
/// `HMAC-SHA256(cluster-secret, ...)` over the challenge, the endpoint and the request
/// (`proto::bus::link_proof`); without it, or wrong, `NOPERM`. A standalone node keeps Redis's
/// rule: `requirepass` (the replica's `masterauth`) guards it.
fn replconf(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let Some(sub) = args.get(1) else {
        ctx.reply.ok();
        return Ok(());
    };
    if sub.eq_ignore_ascii_case(b"rdma-port") {
        let port = match ctx.services.replication_links().link_port() {
            0 => return err("ERR this node accepts no replication links (repl-fabric-port 0)"),
            p => i64::from(p),
        };
        if ctx.server.cluster.is_some() {
            let mut challenge = [0u8; proto::bus::link_proof::CHALLENGE_LEN];
            rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut challenge);
            ctx.client.repl_link_challenge = Some(challenge);
            ctx.reply.array(2);
            ctx.reply.integer(port);
            ctx.reply.bulk(&challenge);
        } else {
            ctx.reply.integer(port);
        }
        return Ok(());
    }
    if sub.eq_ignore_ascii_case(b"failover-pause") {
        // A replica of ours coordinates CLUSTER FAILOVER: pause clients' writes, then answer
        // the offset every write admitted before the pause ends at. Writes feed the backlog
        // while they hold their shards, so with every shard taken once, none is half-fed.
        let [_, _, ms] = args else {
            return Err(CmdError::Syntax);
        };
        let ms = u64::try_from(args::int(ms)?)
            .ok()
            .filter(|ms| (1..=FAILOVER_PAUSE_MS_MAX).contains(ms))
            .ok_or_else(|| CmdError::new("ERR invalid pause time"))?;
        let replication = &ctx.server.replication;
        replication.pause_writes(unix_millis() + ms);
        ctx.server.dbs().barrier();
        ctx.reply
            .integer(i64::try_from(replication.master_repl_offset()).unwrap_or(i64::MAX));
        return Ok(());
    }
    if sub.eq_ignore_ascii_case(b"rdma-link") {
        // A fenced node gives no sync: its dataset may lack what its replicas hold.
        if ctx.server.cluster.as_ref().is_some_and(|c| c.is_fenced()) {
            return err("LOADING restart fence: waiting for the topology");
        }
        // Standalone: `<endpoint> <listening-port> <LinkRequest>`. Cluster mode adds the proof
        // of the cluster secret over this connection's challenge, then the replica's name
        // (`[<node id> [<incarnation>]]`) so that its primary can watch it through gossip.
        let (endpoint, port, request_bytes, named) = match args {
            [_, _, endpoint, port, request] if ctx.server.cluster.is_none() => {
                (*endpoint, *port, *request, &[][..])
            }
            [_, _, _, _, _] => return err(LINK_NOT_PROVEN),
            [_, _, endpoint, port, request, proof, named @ ..]
                if ctx.server.cluster.is_some() && named.len() <= 2 =>
            {
                check_link_proof(ctx, endpoint, request, proof)?;
                (*endpoint, *port, *request, named)
            }
            _ => return Err(CmdError::Syntax),
        };
        let mut node = crate::node_state::services::replication_links::ReplicaNode::default();
        if let Some(id) = named.first() {
            node.id = Some(
                crate::cluster::NodeId::parse(id)
                    .ok_or_else(|| CmdError::new("ERR Invalid node name"))?,
            );
        }
        if let Some(incarnation) = named.get(1) {
            node.incarnation = Some(
                std::str::from_utf8(incarnation)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or(CmdError::Syntax)?,
            );
        }
        let port = u16::try_from(args::int(port)?).map_err(|_| CmdError::Syntax)?;
        let request = crate::replication::handshake::LinkRequest::decode(request_bytes)
            .map_err(|e| CmdError::new(format!("ERR {e}")))?;
        let addr = crate::node_state::replication::ReplicaAddr {
            ip: ctx.client.shared.peer.ip().to_string(),
            port,
        };
        let endpoint = String::from_utf8_lossy(endpoint).into_owned();
        match ctx
            .services
            .replication_links()
            .link(endpoint, request, addr, node)
        {
            Ok(accept) => ctx.reply.bulk(&accept),
            Err(e) => return Err(CmdError::new(e)),
        }
        return Ok(());
    }
    // Redis's other subcommands (listening-port, ip-address, capa, ack, getack): accepted.
    if args.len() % 2 == 1 {
        ctx.reply.ok();
        return Ok(());
    }
    Err(CmdError::Syntax)
}

const LINK_NOT_PROVEN: &str =
    "NOPERM replication link refused: no proof of the cluster secret over this connection's challenge";

/// Checks a cluster-mode RDMA-LINK's proof against this connection's challenge (which it
/// uses up, right or wrong).
fn check_link_proof(ctx: &mut Ctx<'_>, endpoint: &[u8], request: &[u8], proof: &[u8]) -> CmdResult {
    let Some(challenge) = ctx.client.repl_link_challenge.take() else {
        return err(LINK_NOT_PROVEN);
    };
    let secret = ctx.server.config.read().cluster.secret.clone();
    if proto::bus::link_proof::check_link_proof(
        secret.as_bytes(),
        &challenge,
        endpoint,
        request,
        proof,
    ) {
        Ok(())
    } else {
        tracing::warn!(
            client = ctx.client.shared.id,
            "REPLCONF RDMA-LINK with a wrong proof of the cluster secret"
        );
        err(LINK_NOT_PROVEN)
    }
}

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
    let frame = ctx
        .server
        .replication
        .role_reply(ctx.server.replica_of.primary_link().as_ref(), unix_millis());
    let mut out = bytes::BytesMut::new();
    proto::resp::encode::encode(&frame, &mut out);
    ctx.reply.raw(&out);
    Ok(())
}
