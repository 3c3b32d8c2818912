//! What MigrateSlots, Rebalance and DrainNode are to move, checked before they become an
//! operation: a list of moves (source, target, slots), each one atomic slot migration.
//! Rebalance and DrainNode weigh slots by bytes, read from every primary with `CLUSTER
//! SLOT-STATS` (this node's own from its keyspace).

use super::peer::Peer;
use crate::cluster::id::NodeId;
use crate::cluster::migration::planner::{self, Holding, Move};
use crate::cluster::migration::SlotRanges;
use crate::server::Server;
use proto::admin::v1 as pb;
use proto::resp::Frame;
use tonic::Status;

/// Slots asked per CLUSTER SLOT-STATS call.
const SLOT_STATS_CHUNK: usize = 512;

/// Most slot ranges one MigrateSlots names.
const REQUEST_RANGES_MAX: usize = crate::cluster::consensus::command::MIGRATION_RANGES_MAX;

fn cluster(server: &Server) -> Result<&crate::cluster::Cluster, Status> {
    let c = server
        .cluster
        .as_ref()
        .ok_or_else(|| Status::failed_precondition("not in cluster mode"))?;
    if !c.in_group() {
        return Err(Status::failed_precondition(
            "the cluster has no topology group yet: atomic slot migration needs one",
        ));
    }
    Ok(c)
}

fn node_id(text: &str) -> Result<NodeId, Status> {
    NodeId::parse(text.as_bytes())
        .ok_or_else(|| Status::invalid_argument(format!("{text:?} is not a node id")))
}

/// MigrateSlots: every slot named must have one owner, the source; the target a primary.
pub fn migrate(
    server: &Server,
    ranges: &[pb::SlotRange],
    target: &str,
) -> Result<Vec<Move>, Status> {
    let c = cluster(server)?;
    let target = node_id(target)?;
    if ranges.len() > REQUEST_RANGES_MAX {
        return Err(Status::invalid_argument(format!(
            "at most {REQUEST_RANGES_MAX} slot ranges per request"
        )));
    }
    let raw: Vec<(u16, u16)> = ranges
        .iter()
        .map(|r| {
            let (s, e) = (u16::try_from(r.start), u16::try_from(r.end));
            match (s, e) {
                (Ok(s), Ok(e)) => Ok((s, e)),
                _ => Err(Status::invalid_argument("slot out of range")),
            }
        })
        .collect::<Result<_, _>>()?;
    let slots = SlotRanges::new(&raw).map_err(|e| Status::invalid_argument(e.to_string()))?;
    let t = c.topology.read();
    let target_node = t
        .index_of(&target)
        .and_then(|i| t.node(i))
        .ok_or_else(|| Status::not_found(format!("unknown node {target}")))?;
    if !target_node.is_primary() {
        return Err(Status::failed_precondition(format!(
            "the target {target} is not a primary"
        )));
    }
    let mut source = None;
    for slot in slots.slots() {
        let owner = t
            .owner(slot)
            .map(|n| n.id)
            .ok_or_else(|| Status::failed_precondition(format!("slot {slot} is unassigned")))?;
        match source {
            None => source = Some(owner),
            Some(s) if s != owner => {
                return Err(Status::invalid_argument(format!(
                "the slots belong to more than one node ({s} and {owner}): one request per source"
            )))
            }
            Some(_) => {}
        }
    }
    let source = source.expect("slots are not empty");
    if source == target {
        return Err(Status::failed_precondition(format!(
            "the slots already belong to {target}"
        )));
    }
    let weight = slots.slot_count() as u64;
    Ok(vec![Move {
        source,
        target,
        slots,
        weight,
    }])
}

/// A primary as the plan reads it: id, whether it is this node, address, slot ranges.
struct Primary {
    id: NodeId,
    myself: bool,
    ip: String,
    port: u16,
    ranges: Vec<(u16, u16)>,
}

/// Every primary's slots with their bytes. Blocking: asks each other primary.
fn holdings(server: &Server) -> Result<Vec<Holding>, Status> {
    let c = cluster(server)?;
    let primaries: Vec<Primary> = {
        let t = c.topology.read();
        t.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.is_primary() && !n.is_failed() && t.consensus.nodes.contains(&n.id))
            .map(|(i, n)| Primary {
                id: n.id,
                myself: n.is_myself(),
                ip: n.ip.clone(),
                port: n.port,
                ranges: t.slots.ranges_of(i as crate::cluster::slots::NodeIndex),
            })
            .collect()
    };
    let mut out = Vec::with_capacity(primaries.len());
    for Primary {
        id,
        myself,
        ip,
        port,
        ranges,
    } in primaries
    {
        let mut slots = Vec::new();
        if myself {
            for (a, b) in ranges {
                for s in a..=b {
                    slots.push((s, server.keyspace.slot_footprint(s).1));
                }
            }
        } else if !ranges.is_empty() {
            let mut peer = Peer::connect(server, &ip, port).map_err(|e| {
                Status::unavailable(format!("reading the slots of {id} at {ip}:{port}: {e}"))
            })?;
            // A reply of ~40 bytes per slot: chunks keep each under the peer call's limit.
            let chunks = ranges.into_iter().flat_map(|(a, b)| {
                (a..=b).step_by(SLOT_STATS_CHUNK).map(move |s| {
                    (
                        s,
                        (s as usize + SLOT_STATS_CHUNK - 1).min(b as usize) as u16,
                    )
                })
            });
            for (a, b) in chunks {
                let (a_text, b_text) = (a.to_string(), b.to_string());
                let reply = peer
                    .call(&[
                        b"CLUSTER",
                        b"SLOT-STATS",
                        b"SLOTSRANGE",
                        a_text.as_bytes(),
                        b_text.as_bytes(),
                    ])
                    .map_err(|e| Status::unavailable(format!("CLUSTER SLOT-STATS of {id}: {e}")))?;
                slots.extend(parse_slot_stats(&reply).ok_or_else(|| {
                    Status::internal(format!("{id} answered CLUSTER SLOT-STATS oddly"))
                })?);
            }
        }
        out.push(Holding { node: id, slots });
    }
    Ok(out)
}

/// `[[slot, {key-count, n, bytes, b}], ...]` (maps as flat arrays in RESP2).
fn parse_slot_stats(reply: &Frame) -> Option<Vec<(u16, u64)>> {
    let Frame::Array(entries) = reply else {
        return None;
    };
    entries
        .iter()
        .map(|e| {
            let Frame::Array(pair) = e else {
                return None;
            };
            let slot = match pair.first()? {
                Frame::Integer(s) => u16::try_from(*s).ok()?,
                _ => return None,
            };
            let fields = match pair.get(1)? {
                Frame::Array(f) => f,
                _ => return None,
            };
            let bytes = fields.chunks(2).find_map(|kv| match kv {
                [Frame::Bulk(k), Frame::Integer(v)] if &k[..] == b"bytes" => u64::try_from(*v).ok(),
                _ => None,
            })?;
            Some((slot, bytes))
        })
        .collect()
}

/// Rebalance: the moves that bring every primary within `threshold` of the mean bytes.
pub fn rebalance(server: &Server, threshold: f64) -> Result<Vec<Move>, Status> {
    if !(0.0..=1.0).contains(&threshold) {
        return Err(Status::invalid_argument(
            "threshold is a fraction of the mean, within 0..1",
        ));
    }
    Ok(planner::rebalance(&holdings(server)?, threshold))
}

/// DrainNode: the moves that empty `node` (a primary without replicas).
pub fn drain(server: &Server, node: &str) -> Result<(NodeId, Vec<Move>), Status> {
    let c = cluster(server)?;
    let id = node_id(node)?;
    {
        let t = c.topology.read();
        let n = t
            .index_of(&id)
            .and_then(|i| t.node(i))
            .ok_or_else(|| Status::not_found(format!("unknown node {id}")))?;
        if !n.is_primary() {
            return Err(Status::failed_precondition(format!(
                "{id} is a replica: forget it with CLUSTER FORGET instead"
            )));
        }
        if t.replicas_of(&id).next().is_some() {
            return Err(Status::failed_precondition(format!(
                "{id} has replicas: move or forget them first"
            )));
        }
        let primaries = t.nodes.iter().filter(|n| n.is_primary()).count();
        if primaries < 2 {
            return Err(Status::failed_precondition(
                "the only primary cannot be drained",
            ));
        }
    }
    Ok((id, planner::drain(&holdings(server)?, &id)))
}

/// The plan in words, for a dry run and the operation's description.
pub fn describe(moves: &[Move]) -> String {
    if moves.is_empty() {
        return "nothing to move".into();
    }
    moves
        .iter()
        .map(|m| {
            let ranges: Vec<String> = m
                .slots
                .ranges()
                .iter()
                .map(|(a, b)| {
                    if a == b {
                        a.to_string()
                    } else {
                        format!("{a}-{b}")
                    }
                })
                .collect();
            format!(
                "{} slots ({}) {} -> {}",
                m.slots.slot_count(),
                ranges.join(","),
                m.source,
                m.target
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
