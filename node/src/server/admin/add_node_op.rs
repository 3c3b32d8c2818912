//! AddNode(address, replica_of): what `redis-cli --cluster add-node` does, through the
//! nodes' own commands: the new node must be empty (knows only itself, holds no key); it is
//! told `CLUSTER MEET` this node, the operation waits until this node's topology has it as
//! a member, then (for a replica) it is told `CLUSTER REPLICATE <primary>` until it takes,
//! and the operation waits until the topology shows it so.

use super::operations::Tracked;
use super::peer::{text, Peer};
use crate::cluster::NodeId;
use crate::server::repl_link::control::ControlError;
use crate::server::Server;
use proto::resp::Frame;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::Status;

/// How long each step (joining, becoming a replica) may take: MEET's own retries (15 s)
/// plus gossip and a topology commit.
const STEP_WITHIN: Duration = Duration::from_secs(30);
const STEP_POLL: Duration = Duration::from_millis(100);

pub struct AddNodePlan {
    host: String,
    port: u16,
    replica_of: Option<NodeId>,
}

impl AddNodePlan {
    /// The plan as the topology log records it.
    pub fn recorded(&self) -> crate::cluster::op_journal::OperationPlan {
        crate::cluster::op_journal::OperationPlan::AddNode {
            host: self.host.clone(),
            port: self.port,
            replica_of: self.replica_of,
        }
    }

    /// A recorded plan carried on by another coordinator: its checks were made when the
    /// request came (the steps skip what the topology shows done).
    pub fn resumed(host: String, port: u16, replica_of: Option<NodeId>) -> Self {
        AddNodePlan {
            host,
            port,
            replica_of,
        }
    }
}

/// Checks the request before it becomes an operation.
pub fn plan(
    server: &Server,
    address: &str,
    replica_of: Option<&str>,
) -> Result<AddNodePlan, Status> {
    let cluster = server
        .cluster
        .as_ref()
        .ok_or_else(|| Status::failed_precondition("not in cluster mode"))?;
    refuse_to_send_secrets_unguarded(server)?;
    let (host, port) = address
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.trim_matches(['[', ']']), p.parse::<u16>().ok()?)))
        .filter(|(h, p)| !h.is_empty() && *p != 0)
        .ok_or_else(|| Status::invalid_argument(format!("{address:?} is not HOST:PORT")))?;
    let replica_of = match replica_of {
        None => None,
        Some(p) => {
            let id = NodeId::parse(p.as_bytes())
                .ok_or_else(|| Status::invalid_argument(format!("{p:?} is not a node id")))?;
            let t = cluster.topology.read();
            let node = t
                .index_of(&id)
                .and_then(|i| t.node(i))
                .ok_or_else(|| Status::not_found(format!("unknown node {id}")))?;
            if !node.is_primary() {
                return Err(Status::failed_precondition(format!(
                    "{id} is not a primary"
                )));
            }
            Some(id)
        }
    };
    Ok(AddNodePlan {
        host: host.to_string(),
        port,
        replica_of,
    })
}

/// AddNode logs in to the address it is given with this node's `masterauth`. With no
/// admin-token any local process may call it, so it could name an address of its own and
/// collect the password: refused then.
fn refuse_to_send_secrets_unguarded(server: &Server) -> Result<(), Status> {
    let config = server.config.read();
    let has_secret = config.masterauth.as_ref().is_some_and(|p| !p.is_empty());
    if has_secret && config.admin.token.is_empty() {
        return Err(Status::permission_denied(
            "AddNode would send masterauth to the address given, and admin-token is empty \
             (any local process may call this API): set admin-token first",
        ));
    }
    Ok(())
}

pub fn start(server: Arc<Server>, plan: AddNodePlan, op: Arc<Tracked>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("node-admin-add-node".into())
        .spawn(move || match run(&server, &plan, &op) {
            Ok(()) => op.succeed(),
            Err(Stop::Cancelled | Stop::StoodDown) => {}
            Err(Stop::Failed(why)) => op.fail(why),
        })
        .map(drop)
}

enum Stop {
    Cancelled,
    /// The log names another coordinator (`Tracked::stood_down`).
    StoodDown,
    Failed(String),
}

impl From<String> for Stop {
    fn from(why: String) -> Self {
        Stop::Failed(why)
    }
}

fn run(server: &Server, plan: &AddNodePlan, op: &Tracked) -> Result<(), Stop> {
    let cluster = server
        .cluster
        .as_ref()
        .ok_or("not in cluster mode".to_string())?;
    let at = format!("{}:{}", plan.host, plan.port);
    let call_failed = |what: &str, e: ControlError| format!("{what} of {at}: {e}");
    op.running("asking the new node who it is");
    let mut peer =
        Peer::connect(server, &plan.host, plan.port).map_err(|e| call_failed("connecting", e))?;
    let id = peer
        .call(&[b"CLUSTER", b"MYID"])
        .map_err(|e| call_failed("CLUSTER MYID", e))?;
    let id = text(&id)
        .and_then(|t| NodeId::parse(t.as_bytes()))
        .ok_or_else(|| format!("{at} answered CLUSTER MYID with no node id"))?;
    op.update(|o| o.description = format!("{} (node {id})", o.description));
    let member = |id: &NodeId| {
        let t = cluster.topology.read();
        t.index_of(id)
            .and_then(|i| t.node(i))
            .is_some_and(|n| !n.flags.has(crate::cluster::flags::bit::HANDSHAKE))
    };
    if !member(&id) {
        check_empty(&mut peer, &at)?;
        cancelled(op)?;
        op.running("meeting");
        let (my_ip, my_port) = {
            let t = cluster.topology.read();
            (t.myself().ip.clone(), t.myself().port)
        };
        let my_ip = match my_ip.is_empty() {
            false => my_ip,
            true => peer
                .local_ip()
                .map(|ip| ip.to_string())
                .ok_or_else(|| "this node's address is unknown".to_string())?,
        };
        let port = my_port.to_string();
        peer.call(&[b"CLUSTER", b"MEET", my_ip.as_bytes(), port.as_bytes()])
            .map_err(|e| call_failed("CLUSTER MEET", e))?;
        wait_for(op, "joining", || member(&id))?;
    }
    let Some(primary) = plan.replica_of else {
        return Ok(());
    };
    cancelled(op)?;
    // A node outside the topology group makes CLUSTER REPLICATE's change in gossip only,
    // and the group does not take that in when it joins: the step then never shows in the
    // topology. Asked once the node is in the group, REPLICATE goes through the log.
    wait_for(
        op,
        "waiting for the new node to join the topology group",
        || in_topology_group(&mut peer),
    )?;
    op.running("becoming a replica");
    let is_replica = || {
        let t = cluster.topology.read();
        t.index_of(&id)
            .and_then(|i| t.node(i))
            .is_some_and(|n| n.is_replica() && n.primary == Some(primary))
    };
    let deadline = Instant::now() + STEP_WITHIN;
    let primary_text = primary.to_string();
    // The new node may not have heard of the primary yet, or not be in the topology
    // group yet: asked again until it takes or the step's time is up.
    loop {
        match peer.call(&[b"CLUSTER", b"REPLICATE", primary_text.as_bytes()]) {
            Ok(_) => break,
            Err(e) if Instant::now() >= deadline => {
                return Err(call_failed("CLUSTER REPLICATE", e).into())
            }
            Err(ControlError::Refused(why)) => {
                tracing::debug!(%why, "AddNode: CLUSTER REPLICATE refused, asking again");
            }
            Err(e) => return Err(call_failed("CLUSTER REPLICATE", e).into()),
        }
        cancelled(op)?;
        std::thread::sleep(STEP_POLL);
    }
    wait_for(
        op,
        "waiting for the topology to show the replica",
        is_replica,
    )
}

/// Whether the node behind `peer` says it is in a topology group (CLUSTER INFO
/// `cluster_topology_group` other than `-`); false when it cannot be asked.
fn in_topology_group(peer: &mut Peer) -> bool {
    peer.call(&[b"CLUSTER", b"INFO"])
        .ok()
        .as_ref()
        .and_then(text)
        .and_then(|t| info_field(&t, "cluster_topology_group"))
        .is_some_and(|g| !matches!(g.as_str(), "" | "-"))
}

/// The value of `name` in an INFO-style text (`name:value` lines), trimmed.
fn info_field(text: &str, name: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// As redis-cli: a node that knows others or holds keys is not added.
fn check_empty(peer: &mut Peer, at: &str) -> Result<(), String> {
    let info = peer
        .call(&[b"CLUSTER", b"INFO"])
        .map_err(|e| format!("CLUSTER INFO of {at}: {e}"))?;
    let known = text(&info)
        .and_then(|t| info_field(&t, "cluster_known_nodes"))
        .and_then(|n| n.parse::<u64>().ok())
        // Fail closed: a node whose INFO we cannot read is not known to be empty.
        .ok_or_else(|| format!("CLUSTER INFO of {at} has no cluster_known_nodes"))?;
    let keys = match peer.call(&[b"DBSIZE"]) {
        Ok(Frame::Integer(n)) => n,
        Ok(other) => return Err(format!("DBSIZE of {at} answered {other:?}")),
        Err(e) => return Err(format!("DBSIZE of {at}: {e}")),
    };
    if known > 1 || keys > 0 {
        return Err(format!(
            "{at} is not empty: it knows {known} nodes and holds {keys} keys (a new node knows only itself and holds none)"
        ));
    }
    Ok(())
}

fn cancelled(op: &Tracked) -> Result<(), Stop> {
    if op.stood_down() {
        return Err(Stop::StoodDown);
    }
    match op.stop_if_cancelled() {
        true => Err(Stop::Cancelled),
        false => Ok(()),
    }
}

fn wait_for(op: &Tracked, phase: &str, mut done: impl FnMut() -> bool) -> Result<(), Stop> {
    op.running(phase);
    let deadline = Instant::now() + STEP_WITHIN;
    while !done() {
        cancelled(op)?;
        if Instant::now() >= deadline {
            return Err(Stop::Failed(format!(
                "{phase}: not done within {}s",
                STEP_WITHIN.as_secs()
            )));
        }
        std::thread::sleep(STEP_POLL);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::info_field;

    #[test]
    fn info_fields_are_found_by_their_whole_name() {
        let text = "cluster_state:ok\r\ncluster_known_nodes_seen:9\r\ncluster_known_nodes:4\r\n\
                    cluster_topology_group:-\r\n";
        assert_eq!(
            info_field(text, "cluster_known_nodes").as_deref(),
            Some("4")
        );
        assert_eq!(
            info_field(text, "cluster_topology_group").as_deref(),
            Some("-")
        );
        assert_eq!(info_field(text, "cluster_size"), None);
    }
}
