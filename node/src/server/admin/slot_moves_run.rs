//! Running a list of slot moves as one operation (MigrateSlots, Rebalance, DrainNode):
//! each move is an atomic slot migration started on its source (here, or by `CLUSTER
//! MIGRATESLOTS ... REQUESTID` over the source's client port) and followed in the topology
//! log's ledger, which every node applies: the operation's progress and outcome are the
//! log's. A move's request id derives from the operation's, so a retry of the request on
//! any node (after this one died) names the same migrations. A cancel aborts the running
//! move through the log (refused if its commit came first) and starts no other.

use super::operations::Tracked;
use super::peer::Peer;
use crate::cluster::consensus::TopologyCommand;
use crate::cluster::id::NodeId;
use crate::cluster::migration::planner::Move;
use crate::cluster::migration::{MigrationId, MigrationState};
use crate::server::slot_migration::{self, StartRequest};
use crate::server::Server;
use std::sync::Arc;
use std::time::{Duration, Instant};

const FOLLOW_POLL: Duration = Duration::from_millis(50);
/// How long a started migration may take to show in this node's ledger.
const OPEN_SEEN_WITHIN: Duration = Duration::from_secs(30);

/// What to run: the moves, then forget `drained` (DrainNode).
pub struct Plan {
    pub moves: Vec<Move>,
    pub drained: Option<NodeId>,
    /// The base of the moves' request ids in the log.
    pub request_base: String,
}

/// The log's request id of an operation's moves: the caller's request id (so a retry on
/// another node finds them), else the operation's own id.
pub fn request_base(request_id: &str, operation_id: &str) -> String {
    match request_id.is_empty() {
        true => format!("op:{operation_id}"),
        // Request ids are at most 256 bytes; the log's too: hash the longest ones.
        false if request_id.len() > 200 => {
            let h = request_id.bytes().fold(0xcbf29ce484222325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x100000001b3)
            });
            format!("admin:#{h:016x}")
        }
        false => format!("admin:{request_id}"),
    }
}

pub fn start(server: Arc<Server>, plan: Plan, op: Arc<Tracked>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("node-admin-slot-moves".into())
        .spawn(move || {
            let total: u64 = plan.moves.iter().map(|m| m.slots.slot_count() as u64).sum();
            op.update(|o| {
                let p = o.progress.get_or_insert_with(Default::default);
                p.slots_total = total as u32;
            });
            match run(&server, &plan, &op) {
                Ok(Ended::Done) => op.succeed(),
                Ok(Ended::Cancelled(why)) => op.cancelled(why),
                Ok(Ended::StoodDown) => tracing::info!(
                    operation = %op.id(),
                    "another node coordinates this operation now; this one stops following it"
                ),
                Err(why) => op.fail(why),
            }
        })
        .map(drop)
}

enum Ended {
    Done,
    Cancelled(String),
    /// The log names another coordinator (`Tracked::stood_down`).
    StoodDown,
}

fn run(server: &Arc<Server>, plan: &Plan, op: &Tracked) -> Result<Ended, String> {
    let mut slots_before = 0u64;
    let count = plan.moves.len();
    for (i, m) in plan.moves.iter().enumerate() {
        if op.stood_down() {
            return Ok(Ended::StoodDown);
        }
        if op.cancel_requested() {
            return Ok(Ended::Cancelled(format!(
                "cancelled after {i} of {count} moves"
            )));
        }
        op.running(&format!(
            "move {} of {count}: {} slots {} -> {}",
            i + 1,
            m.slots.slot_count(),
            m.source,
            m.target
        ));
        let request = format!("{}/{i}", plan.request_base);
        // A move the ledger has already (a resumed operation) is followed, not asked again:
        // its source may be gone since (a node that drained itself).
        let logged = server.cluster.as_ref().is_some_and(|c| {
            c.topology
                .read()
                .consensus
                .migrations
                .by_request_id(&request)
                .is_some()
        });
        let id = match logged {
            true => None,
            false => begin_move(server, m, &request)?,
        };
        match follow(server, op, &request, id, slots_before)? {
            MigrationState::Succeeded => {}
            MigrationState::Cancelled(why) => return Ok(Ended::Cancelled(why)),
            MigrationState::Failed(why) => {
                return Err(format!("move {} of {count} failed: {why}", i + 1))
            }
            // Followed until another node became the coordinator.
            MigrationState::Running => return Ok(Ended::StoodDown),
        }
        slots_before += m.slots.slot_count() as u64;
    }
    if let Some(drained) = plan.drained {
        op.running("forgetting the drained node");
        let cluster = server.cluster.as_ref().ok_or("not in cluster mode")?;
        // Already outside the log: this is a resumed operation whose coordinator forgot
        // itself (a node asked to drain itself cannot record its own end; the leader adopts
        // the operation and finds the forget done).
        let known = cluster.topology.read().consensus.nodes.contains(&drained);
        if known {
            cluster
                .propose(TopologyCommand::ForgetNode { id: drained })
                .map_err(|e| format!("forgetting {drained}: {e}"))?;
        }
    }
    Ok(Ended::Done)
}

/// Starts the move on its source; answers its migration id when this node started it
/// (else the log will show it under `request`).
fn begin_move(
    server: &Arc<Server>,
    m: &Move,
    request: &str,
) -> Result<Option<MigrationId>, String> {
    let cluster = server.cluster.as_ref().ok_or("not in cluster mode")?;
    let remote = {
        let t = cluster.topology.read();
        let n = t
            .index_of(&m.source)
            .and_then(|i| t.node(i))
            .ok_or_else(|| format!("the source {} is not known", m.source))?;
        (!n.is_myself()).then(|| (n.ip.clone(), n.port))
    };
    match remote {
        None => slot_migration::start(
            server,
            StartRequest {
                request_id: request.to_string(),
                ranges: m.slots.clone(),
                target: m.target,
            },
        )
        .map(Some)
        .map_err(|e| e.to_string()),
        Some((ip, port)) => {
            let mut args: Vec<Vec<u8>> = vec![b"CLUSTER".to_vec(), b"MIGRATESLOTS".to_vec()];
            args.push(b"SLOTSRANGE".to_vec());
            for (a, b) in m.slots.ranges() {
                args.push(a.to_string().into_bytes());
                args.push(b.to_string().into_bytes());
            }
            args.push(b"NODE".to_vec());
            args.push(m.target.to_string().into_bytes());
            args.push(b"REQUESTID".to_vec());
            args.push(request.as_bytes().to_vec());
            let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
            Peer::connect(server, &ip, port)
                .and_then(|mut p| p.call(&refs))
                .map_err(|e| format!("asking the source {} at {ip}:{port}: {e}", m.source))?;
            Ok(None)
        }
    }
}

/// Follows the migration named `request` in the ledger until it ends (or until this node
/// stands down: `Running` then), reporting progress and passing a cancel on to the log.
fn follow(
    server: &Server,
    op: &Tracked,
    request: &str,
    started: Option<MigrationId>,
    slots_before: u64,
) -> Result<MigrationState, String> {
    let cluster = server.cluster.as_ref().ok_or("not in cluster mode")?;
    let since = Instant::now();
    let mut abort_sent = false;
    loop {
        if op.stood_down() {
            return Ok(MigrationState::Running);
        }
        let record = {
            let t = cluster.topology.read();
            t.consensus.migrations.by_request_id(request).cloned()
        };
        match &record {
            None if since.elapsed() > OPEN_SEEN_WITHIN => {
                return Err(format!(
                    "the migration {request} was not opened within {}s",
                    OPEN_SEEN_WITHIN.as_secs()
                ))
            }
            None => {}
            Some(r) => {
                let local = started
                    .or(Some(r.id))
                    .and_then(|id| server.slot_migrations.get(id))
                    .map(|s| s.progress.lock().clone());
                op.update(|o| {
                    let p = o.progress.get_or_insert_with(Default::default);
                    p.slots_done = (slots_before + r.slots_done as u64) as u32;
                    if let Some(local) = &local {
                        p.keys_moved = local.keys_copied;
                        p.bytes_moved = local.bytes_streamed;
                    }
                });
                if !r.state.is_running() {
                    return Ok(r.state.clone());
                }
                if op.cancel_requested() && !abort_sent {
                    abort_sent = true;
                    let abort = TopologyCommand::MigrationAbort {
                        id: r.id.0,
                        reason: "cancelled by CancelOperation".into(),
                        cancelled: true,
                    };
                    if let Err(e) = cluster.propose(abort) {
                        tracing::warn!(migration = %r.id, error = %e, "cancel not proposed");
                        abort_sent = false;
                    }
                }
            }
        }
        std::thread::sleep(FOLLOW_POLL);
    }
}
