//! Failover(replica): the replica runs Redis's manual failover
//! (`server::repl_link::manual_failover`): default mode pauses its primary's writes until
//! it has caught up, FORCE does not ask the primary. Asked of this node, it runs here; of
//! another node, that node is sent `CLUSTER FAILOVER [FORCE]` and the operation follows
//! the topology until the replica is a primary.

use super::operations::Tracked;
use super::peer::Peer;
use crate::cluster::NodeId;
use crate::server::repl_link::manual_failover::{self, FailoverMode, MANUAL_FAILOVER_TIMEOUT};
use crate::server::Server;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::Status;

/// How long a promotion asked of another node may take to show in this node's topology:
/// the primary's pause, the proposal, and gossip's slack.
const PROMOTION_SEEN_WITHIN: Duration = Duration::from_secs(20);
const PROMOTION_POLL: Duration = Duration::from_millis(50);

/// The failover of `replica`, checked before it becomes an operation.
pub struct FailoverPlan {
    pub replica: NodeId,
    pub mode: FailoverMode,
    /// Where to ask, when the replica is another node.
    remote: Option<(String, u16)>,
}

/// Redis's checks of CLUSTER FAILOVER, made here so that the caller hears them at once.
pub fn plan(server: &Server, replica: &str, force: bool) -> Result<FailoverPlan, Status> {
    let cluster = server
        .cluster
        .as_ref()
        .ok_or_else(|| Status::failed_precondition("not in cluster mode"))?;
    let id = NodeId::parse(replica.as_bytes())
        .ok_or_else(|| Status::invalid_argument(format!("{replica:?} is not a node id")))?;
    let t = cluster.topology.read();
    let node = t
        .index_of(&id)
        .and_then(|i| t.node(i))
        .ok_or_else(|| Status::not_found(format!("unknown node {id}")))?;
    if !node.is_replica() {
        return Err(Status::failed_precondition(format!(
            "node {id} is not a replica"
        )));
    }
    let primary = node
        .primary
        .and_then(|p| t.index_of(&p))
        .and_then(|i| t.node(i));
    let Some(primary) = primary else {
        return Err(Status::failed_precondition(format!(
            "the primary of {id} is unknown"
        )));
    };
    if !force && primary.is_failed() {
        return Err(Status::failed_precondition(
            "the primary is down or failed: use force",
        ));
    }
    let remote = (!node.is_myself()).then(|| (node.ip.clone(), node.port));
    if let Some((ip, port)) = &remote {
        if ip.is_empty() || *port == 0 {
            return Err(Status::failed_precondition(format!(
                "the address of {id} is not known yet"
            )));
        }
    }
    Ok(FailoverPlan {
        replica: id,
        mode: if force {
            FailoverMode::Force
        } else {
            FailoverMode::Default
        },
        remote,
    })
}

/// Runs the failover on its own thread, reporting to `op`.
pub fn start(server: Arc<Server>, plan: FailoverPlan, op: Arc<Tracked>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("node-admin-failover".into())
        .spawn(move || {
            if op.stop_if_cancelled() {
                return;
            }
            if !op.past_point_of_no_return() {
                return;
            }
            match run(&server, &plan, &op) {
                // Another node coordinates it now and records its end.
                _ if op.stood_down() => {}
                Ok(()) => op.succeed(),
                Err(why) => op.fail(why),
            }
        })
        .map(drop)
}

fn run(server: &Server, plan: &FailoverPlan, op: &Tracked) -> Result<(), String> {
    let Some((host, port)) = &plan.remote else {
        op.running("failing over (this node is the replica)");
        return manual_failover::run(server, plan.mode).map_err(|e| e.to_string());
    };
    op.running("asking the replica to fail over");
    let mut args: Vec<&[u8]> = vec![b"CLUSTER", b"FAILOVER"];
    if plan.mode == FailoverMode::Force {
        args.push(b"FORCE");
    }
    Peer::connect(server, host, *port)
        .and_then(|mut p| p.call(&args))
        .map_err(|e| format!("asking {host}:{port}: {e}"))?;
    op.running("waiting for the promotion");
    let deadline = Instant::now() + PROMOTION_SEEN_WITHIN.max(MANUAL_FAILOVER_TIMEOUT);
    let cluster = server.cluster.as_ref().ok_or("not in cluster mode")?;
    loop {
        let promoted = {
            let t = cluster.topology.read();
            t.index_of(&plan.replica)
                .and_then(|i| t.node(i))
                .is_some_and(|n| n.is_primary())
        };
        if promoted {
            return Ok(());
        }
        if op.stood_down() {
            // The coordinator the log names now follows the promotion.
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{} was not promoted within {}s (its log says why)",
                plan.replica,
                PROMOTION_SEEN_WITHIN.as_secs()
            ));
        }
        std::thread::sleep(PROMOTION_POLL);
    }
}
