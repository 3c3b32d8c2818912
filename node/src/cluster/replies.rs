//! CLUSTER SLOTS, CLUSTER SHARDS and CLUSTER INFO replies, in redis-server 7.0.15's shapes
//! (RESP2 and RESP3), from a topology. Endpoints are ips: Redis's default
//! `cluster-preferred-endpoint-type ip`.

use super::node::ClusterNode;
use super::stats::MESSAGE_TYPES;
use super::topology::Topology;
use proto::resp::Reply;
use std::fmt::Write;

/// CLUSTER SLOTS: one entry per run of slots with one owner, in slot order: start, end,
/// the primary, then its replicas that are not failed.
pub fn slots(t: &Topology, reply: &mut Reply<'_>) {
    let runs = t.slots.runs();
    reply.array(runs.len());
    for (start, end, owner) in runs {
        let Some(primary) = t.node(owner) else {
            // Unreachable: owners always index the table. Keep the reply well-formed.
            reply.array(2);
            reply.integer(start as i64);
            reply.integer(end as i64);
            continue;
        };
        let replicas: Vec<&ClusterNode> = t
            .replicas_of(&primary.id)
            .filter(|r| !r.is_failed())
            .collect();
        reply.array(3 + replicas.len());
        reply.integer(start as i64);
        reply.integer(end as i64);
        slots_node(primary, reply);
        for r in replicas {
            slots_node(r, reply);
        }
    }
}

fn slots_node(n: &ClusterNode, reply: &mut Reply<'_>) {
    reply.array(4);
    reply.bulk(n.ip.as_bytes());
    reply.integer(n.port as i64);
    reply.bulk(n.id.as_bytes());
    // The networking details other than the preferred endpoint (the ip).
    if n.hostname.is_empty() {
        reply.map(0);
    } else {
        reply.map(1);
        reply.bulk(b"hostname");
        reply.bulk(n.hostname.as_bytes());
    }
}

/// CLUSTER SHARDS: one shard per primary in table order, with its slot ranges and its
/// nodes (the primary first, then every replica).
pub fn shards(t: &Topology, reply: &mut Reply<'_>) {
    let primaries: Vec<(usize, &ClusterNode)> = t
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.is_primary())
        .collect();
    reply.array(primaries.len());
    for (index, primary) in primaries {
        reply.map(2);
        reply.bulk(b"slots");
        let ranges = t.slots.ranges_of(index as u16);
        reply.array(ranges.len() * 2);
        for (start, end) in ranges {
            reply.integer(start as i64);
            reply.integer(end as i64);
        }
        reply.bulk(b"nodes");
        let replicas: Vec<&ClusterNode> = t.replicas_of(&primary.id).collect();
        reply.array(1 + replicas.len());
        shard_node(primary, reply);
        for r in replicas {
            shard_node(r, reply);
        }
    }
}

fn shard_node(n: &ClusterNode, reply: &mut Reply<'_>) {
    let fields = 7 + usize::from(!n.hostname.is_empty()) + usize::from(!n.bus_addr.is_empty());
    reply.map(fields);
    reply.bulk(b"id");
    reply.bulk(n.id.as_bytes());
    reply.bulk(b"port");
    reply.integer(n.port as i64);
    reply.bulk(b"ip");
    reply.bulk(n.ip.as_bytes());
    reply.bulk(b"endpoint");
    reply.bulk(n.ip.as_bytes());
    if !n.hostname.is_empty() {
        reply.bulk(b"hostname");
        reply.bulk(n.hostname.as_bytes());
    }
    if !n.bus_addr.is_empty() {
        reply.bulk(super::nodes_text::FABRIC_ADDR_KEY.as_bytes());
        reply.bulk(n.bus_addr.as_bytes());
    }
    reply.bulk(b"role");
    reply.bulk(if n.is_replica() {
        b"replica"
    } else {
        b"master"
    });
    reply.bulk(b"replication-offset");
    reply.integer(n.repl_offset.min(i64::MAX as u64) as i64);
    reply.bulk(b"health");
    let health: &[u8] = if n.is_failed() {
        b"fail"
    } else if n.is_replica() && n.repl_offset == 0 {
        b"loading"
    } else {
        b"online"
    };
    reply.bulk(health);
}

/// CLUSTER INFO text (CRLF lines). Per-type message counters appear only when non-zero.
pub fn info(t: &Topology) -> String {
    let mut out = String::with_capacity(512);
    let (ok, pfail, fail) = t.slot_health();
    let mut field = |name: &str, value: &dyn std::fmt::Display| {
        let _ = write!(out, "{name}:{value}\r\n");
    };
    field("cluster_state", &t.state().name());
    field("cluster_slots_assigned", &t.slots.assigned());
    field("cluster_slots_ok", &ok);
    field("cluster_slots_pfail", &pfail);
    field("cluster_slots_fail", &fail);
    field("cluster_known_nodes", &t.nodes.len());
    field("cluster_size", &t.size());
    field("cluster_current_epoch", &t.current_epoch);
    field("cluster_my_epoch", &t.node_epoch(t.myself()));
    for (counts, dir) in [(&t.stats.sent, "sent"), (&t.stats.received, "received")] {
        for (name, count) in MESSAGE_TYPES.iter().zip(counts.iter()) {
            if *count != 0 {
                field(&format!("cluster_stats_messages_{name}_{dir}"), count);
            }
        }
        field(
            &format!("cluster_stats_messages_{dir}"),
            &counts.iter().sum::<u64>(),
        );
    }
    field("total_cluster_links_buffer_limit_exceeded", &0);
    out
}

/// CLUSTER INFO's lines on the Raft topology group (ours; Redis has none): the group (its
/// founder's id, `-` while in none), the topology version, the leader and the members.
pub fn group_info(g: &super::shared::GroupView, out: &mut String) {
    let id = |n: &Option<super::id::NodeId>| n.map_or("-".to_string(), |n| n.to_string());
    let _ = write!(
        out,
        "cluster_topology_group:{}\r\ncluster_topology_version:{}\r\n\
         cluster_topology_leader:{}\r\ncluster_topology_voters:{}\r\n\
         cluster_topology_learners:{}\r\n",
        id(&g.group),
        g.version,
        id(&g.leader),
        g.voters,
        g.learners
    );
}
