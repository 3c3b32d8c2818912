//! The cluster config file (`cluster-config-file`, nodes.conf): the CLUSTER NODES lines plus
//! `vars currentEpoch N lastVoteEpoch M` (and `topologyVersion V` once the node applied
//! entries of a topology group's log: the log reopened at start must reach V). Text in,
//! topology out (and back); no I/O here.
//! Files written by Redis 7.0 (no shard ids) load too: shard ids are then made up, a
//! replica taking its primary's.

use super::flags::{bit, NodeFlags};
use super::id::{HexId, NodeId, ShardId};
use super::node::{ClusterNode, LinkState, HOSTNAME_MAX, IP_MAX};
use super::nodes_text::{write_node_line, LineKind, BUS_ADDR_PREFIX};
use super::slots::{parse_slot, NodeIndex, SlotMap};
use super::topology::{Topology, NODES_MAX};
use proto::bus::limits::BUS_ADDR_MAX;
use rand::Rng;
use std::collections::HashMap;

/// Largest config file accepted: 1000 nodes with every slot listed singly stays far below.
pub const CONFIG_FILE_MAX: usize = 16 * 1024 * 1024;
/// Most slot fields on one node line (every slot once, plus every open-slot marker).
const SLOT_FIELDS_MAX: usize = 2 * proto::slot::SLOT_COUNT;

/// Why a config file could not be read, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    pub line: usize,
    pub reason: String,
}

/// The file's text for `t` (handshake nodes are not saved: they are not members yet).
pub fn render(t: &Topology) -> String {
    let mut out = String::with_capacity(160 * (t.nodes.len() + 1));
    for node in t.nodes.iter().filter(|n| !n.flags.has(bit::HANDSHAKE)) {
        write_node_line(t, node, LineKind::ConfigFile, &mut out);
    }
    out.push_str(&format!(
        "vars currentEpoch {} lastVoteEpoch {}",
        t.current_epoch, t.last_vote_epoch
    ));
    let log_version = t.consensus.version.max(t.consensus.saved_version);
    if log_version > 0 {
        out.push_str(&format!(" {LOG_VERSION_VAR} {log_version}"));
    }
    out.push('\n');
    out
}

/// The var naming the topology log version the node had applied when it saved the file.
/// Redis skips vars it does not know, so the file stays readable there.
const LOG_VERSION_VAR: &str = "topologyVersion";

/// Parses a config file. `rng` makes up shard ids the file does not carry. The topology log
/// version goes to `consensus.saved_version`, not `version`: the log replays every entry
/// past the version the topology holds, so the topology starts from what the log restores.
pub fn parse(text: &str, rng: &mut impl Rng) -> Result<Topology, ParseError> {
    if text.len() > CONFIG_FILE_MAX {
        return Err(err(0, format!("file larger than {CONFIG_FILE_MAX} bytes")));
    }
    let mut nodes: Vec<ClusterNode> = Vec::new();
    let mut has_shard: Vec<bool> = Vec::new();
    let mut claims: Vec<(usize, Vec<&str>)> = Vec::new();
    let (mut current_epoch, mut last_vote_epoch, mut log_version) = (0u64, 0u64, 0u64);
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let fields: Vec<&str> = raw.split(' ').filter(|f| !f.is_empty()).collect();
        if fields.is_empty() {
            continue;
        }
        if fields[0] == "vars" {
            for pair in fields[1..].chunks(2) {
                let [name, value] = pair else {
                    return Err(err(line, "vars without a value".into()));
                };
                let value: u64 = value
                    .parse()
                    .map_err(|_| err(line, format!("bad number '{value}' for {name}")))?;
                match *name {
                    "currentEpoch" => current_epoch = value,
                    "lastVoteEpoch" => last_vote_epoch = value,
                    LOG_VERSION_VAR => log_version = value,
                    other => {
                        tracing::warn!(line, var = other, "unknown var in cluster config file")
                    }
                }
            }
            continue;
        }
        if fields.len() < 8 {
            return Err(err(
                line,
                format!("{} fields, a node line has at least 8", fields.len()),
            ));
        }
        if nodes.len() >= NODES_MAX {
            return Err(err(line, format!("more than {NODES_MAX} nodes")));
        }
        if fields.len() - 8 > SLOT_FIELDS_MAX {
            return Err(err(line, "too many slot fields".into()));
        }
        let (node, shard_given) = parse_node(&fields, rng).map_err(|r| err(line, r))?;
        if nodes.iter().any(|n| n.id == node.id) {
            return Err(err(line, format!("node {} listed twice", node.id)));
        }
        nodes.push(node);
        has_shard.push(shard_given);
        claims.push((line, fields[8..].to_vec()));
    }
    let myself = match nodes.iter().filter(|n| n.is_myself()).count() {
        1 => nodes.iter().position(|n| n.is_myself()).unwrap_or(0),
        0 => return Err(err(0, "no node is flagged myself".into())),
        _ => return Err(err(0, "more than one node is flagged myself".into())),
    };
    adopt_primary_shards(&mut nodes, &has_shard);
    let mut slots = SlotMap::default();
    for (index, (line, fields)) in claims.iter().enumerate() {
        for f in fields {
            claim(&mut slots, index as NodeIndex, f).map_err(|r| err(*line, r))?;
        }
    }
    let mut t = Topology::from_parts(nodes, myself as NodeIndex, slots);
    t.current_epoch = current_epoch;
    t.last_vote_epoch = last_vote_epoch;
    t.consensus.saved_version = log_version;
    Ok(t)
}

fn err(line: usize, reason: String) -> ParseError {
    ParseError { line, reason }
}

fn parse_node(f: &[&str], rng: &mut impl Rng) -> Result<(ClusterNode, bool), String> {
    let id = HexId::parse(f[0].as_bytes()).ok_or_else(|| format!("bad node id '{}'", f[0]))?;
    let mut parts = f[1].split(',');
    let addr = parts.next().unwrap_or("");
    let hostname = parts.next().unwrap_or("");
    let mut shard: Option<ShardId> = None;
    for aux in parts {
        match aux.split_once('=') {
            Some(("shard-id", v)) => {
                shard =
                    Some(HexId::parse(v.as_bytes()).ok_or_else(|| format!("bad shard-id '{v}'"))?)
            }
            // Other fields (tls-port...) are Redis 7.2's; nothing here uses them.
            Some(_) => {}
            None => return Err(format!("bad address field '{}'", f[1])),
        }
    }
    let (ip, ports) = addr
        .rsplit_once(':')
        .ok_or_else(|| format!("bad address '{addr}'"))?;
    let (port, cport) = match ports.split_once('@') {
        Some((p, c)) => (p, Some(c)),
        None => (ports, None),
    };
    let port: u16 = port.parse().map_err(|_| format!("bad port in '{addr}'"))?;
    let cport: u16 = match cport {
        Some(c) => c.parse().map_err(|_| format!("bad bus port in '{addr}'"))?,
        // Files older than Redis 4 had no bus port: it was the client port + 10000.
        None => port.saturating_add(10000),
    };
    if ip.len() > IP_MAX || hostname.len() > HOSTNAME_MAX {
        return Err("address or hostname too long".into());
    }
    let flags = NodeFlags::parse(f[2])?;
    let primary = match f[3] {
        "-" => None,
        p => Some(HexId::parse(p.as_bytes()).ok_or_else(|| format!("bad primary id '{p}'"))?),
    };
    let num = |s: &str, what: &str| s.parse::<u64>().map_err(|_| format!("bad {what} '{s}'"));
    // The link-state field may carry the fabric bus address instead (see nodes_text.rs).
    let (link, bus_addr) = match f[7] {
        "connected" => (LinkState::Connected, String::new()),
        "disconnected" => (LinkState::Disconnected, String::new()),
        other => match other.strip_prefix(BUS_ADDR_PREFIX) {
            Some(addr) if !addr.is_empty() && addr.len() <= BUS_ADDR_MAX => {
                (LinkState::Disconnected, addr.to_string())
            }
            _ => return Err(format!("bad link state '{other}'")),
        },
    };
    let given = shard.is_some();
    let node = ClusterNode {
        id,
        ip: ip.to_string(),
        port,
        cport,
        hostname: hostname.to_string(),
        shard: shard.unwrap_or_else(|| HexId::random(rng)),
        flags,
        primary,
        ping_sent: num(f[4], "ping-sent")?,
        pong_received: num(f[5], "pong-received")?,
        config_epoch: num(f[6], "config epoch")?,
        link,
        repl_offset: 0,
        repl_id: None,
        fenced: false,
        bus_addr,
    };
    Ok((node, given))
}

/// Replicas without a saved shard id join their primary's shard.
fn adopt_primary_shards(nodes: &mut [ClusterNode], has_shard: &[bool]) {
    let shards: HashMap<NodeId, ShardId> = nodes.iter().map(|n| (n.id, n.shard)).collect();
    for (node, given) in nodes.iter_mut().zip(has_shard) {
        if !given && node.is_replica() {
            if let Some(s) = node.primary.and_then(|p| shards.get(&p)) {
                node.shard = *s;
            }
        }
    }
}

/// Applies one slot field of node `index`: `N`, `N-M`, `[N->-id]` or `[N-<-id]`.
fn claim(slots: &mut SlotMap, index: NodeIndex, field: &str) -> Result<(), String> {
    if let Some(inner) = field.strip_prefix('[').and_then(|f| f.strip_suffix(']')) {
        let (slot, dir, id) = if let Some((s, id)) = inner.split_once("->-") {
            (s, true, id)
        } else if let Some((s, id)) = inner.split_once("-<-") {
            (s, false, id)
        } else {
            return Err(format!("bad open-slot marker '{field}'"));
        };
        let slot = parse_slot(slot.as_bytes()).ok_or_else(|| format!("bad slot in '{field}'"))?;
        let id = HexId::parse(id.as_bytes()).ok_or_else(|| format!("bad node id in '{field}'"))?;
        if dir {
            slots.migrating.insert(slot, id);
        } else {
            slots.importing.insert(slot, id);
        }
        return Ok(());
    }
    let (start, end) = match field.split_once('-') {
        Some((a, b)) => (a, b),
        None => (field, field),
    };
    let bad = || format!("bad slot range '{field}'");
    let start = parse_slot(start.as_bytes()).ok_or_else(bad)?;
    let end = parse_slot(end.as_bytes()).ok_or_else(bad)?;
    if start > end {
        return Err(bad());
    }
    for slot in start..=end {
        if slots.owner(slot).is_some() {
            return Err(format!("slot {slot} claimed twice"));
        }
        slots.set_owner(slot, Some(index));
    }
    Ok(())
}
