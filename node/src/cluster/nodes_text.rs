//! CLUSTER NODES text, byte for byte as redis-server 7.0.15 prints it (redis-cli parses it
//! to learn the whole topology), and the node lines of the config file, which add the
//! shard id as Redis 7.2's nodes.conf does (`ip:port@cport,hostname,shard-id=...`).

use super::node::ClusterNode;
use super::topology::Topology;
use std::fmt::Write;

/// Marks the fabric bus address in a config-file line.
///
/// Where the address goes: Redis's nodes.conf has no place for it. Fields after the eighth are
/// slots (Redis would read an extra field as slot 0), and Redis 7.2 refuses unknown
/// `key=value` aux fields of the address field as a corrupt file (the address text has `=`
/// and `,` besides). The eighth field, the link state, is the one Redis's loader never reads
/// (links are always down at start), so the config file writes `bus=<address>` there when
/// the address is known, and `connected`/`disconnected` as before when not. CLUSTER NODES
/// keeps printing the link state.
pub const BUS_ADDR_PREFIX: &str = "bus=";

/// The aux field naming a node's fabric bus address in CLUSTER NODES (and the key of the
/// same in CLUSTER SHARDS).
pub const FABRIC_ADDR_KEY: &str = "fabric-address";

/// Whether a line is for CLUSTER NODES or for the config file.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    Reply,
    ConfigFile,
}

/// Writes one node's line, `\n`-terminated.
pub fn write_node_line(t: &Topology, node: &ClusterNode, kind: LineKind, out: &mut String) {
    let _ = write!(out, "{} {}:{}@{}", node.id, node.ip, node.port, node.cport);
    match kind {
        // The fabric address goes after the hostname as an aux field (Redis 7.2's
        // `,hostname,key=value` shape), with its ':' written as '/' and its ',' (verbs
        // addresses have some) as ';': redis-benchmark takes the port after the field's last
        // ':' (Redis's `@cport` then falls off in atoi), and aux fields are split at ','.
        LineKind::Reply if !node.bus_addr.is_empty() => {
            let _ = write!(
                out,
                ",{},{FABRIC_ADDR_KEY}={}",
                node.hostname,
                node.bus_addr.replace(':', "/").replace(',', ";")
            );
        }
        LineKind::Reply if !node.hostname.is_empty() => {
            let _ = write!(out, ",{}", node.hostname);
        }
        LineKind::Reply => {}
        LineKind::ConfigFile => {
            let _ = write!(out, ",{},shard-id={}", node.hostname, node.shard);
        }
    }
    out.push(' ');
    node.flags.write(out);
    match node.primary {
        Some(p) if node.is_replica() => {
            let _ = write!(out, " {p}");
        }
        _ => out.push_str(" -"),
    }
    let _ = write!(
        out,
        " {} {} {} ",
        node.ping_sent,
        node.pong_received,
        t.node_epoch(node),
    );
    if kind == LineKind::ConfigFile && !node.bus_addr.is_empty() {
        let _ = write!(out, "{BUS_ADDR_PREFIX}{}", node.bus_addr);
    } else {
        out.push_str(node.link_name());
    }
    if let Some(index) = t.index_of(&node.id) {
        for (start, end) in t.slots.ranges_of(index) {
            if start == end {
                let _ = write!(out, " {start}");
            } else {
                let _ = write!(out, " {start}-{end}");
            }
        }
    }
    if node.is_myself() {
        write_open_slots(t, out);
    }
    out.push('\n');
}

/// `[slot->-target]` / `[slot-<-source]` markers in slot order; a slot both migrating and
/// importing shows as migrating, as Redis prints it.
fn write_open_slots(t: &Topology, out: &mut String) {
    let mut migrating = t.slots.migrating.iter().peekable();
    let mut importing = t.slots.importing.iter().peekable();
    loop {
        let next_m = migrating.peek().map(|(s, _)| **s);
        let next_i = importing.peek().map(|(s, _)| **s);
        match (next_m, next_i) {
            (None, None) => break,
            (Some(m), i) if i.is_none_or(|i| m <= i) => {
                if let Some((slot, id)) = migrating.next() {
                    let _ = write!(out, " [{slot}->-{id}]");
                }
                if i == Some(m) {
                    importing.next();
                }
            }
            _ => {
                if let Some((slot, id)) = importing.next() {
                    let _ = write!(out, " [{slot}-<-{id}]");
                }
            }
        }
    }
}

/// The CLUSTER NODES reply text: every node, in table order.
pub fn cluster_nodes(t: &Topology) -> String {
    let mut out = String::with_capacity(128 * t.nodes.len());
    for node in &t.nodes {
        write_node_line(t, node, LineKind::Reply, &mut out);
    }
    out
}
