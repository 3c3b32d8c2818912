//! The topology as the admin API's `Cluster` message.

use crate::cluster::flags::bit;
use crate::cluster::node::ClusterNode;
use crate::cluster::topology::Health;
use crate::cluster::Topology;
use proto::admin::v1 as pb;

/// The topology of `cluster` now, as this node sees it.
pub fn cluster_message(cluster: &crate::cluster::Cluster) -> pb::Cluster {
    let group = cluster.group_view();
    let t = cluster.topology.read();
    let nodes = t
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| node_message(&t, i, n))
        .collect();
    pb::Cluster {
        version: group.version,
        state: match t.state() {
            Health::Ok => pb::ClusterState::Ok,
            Health::Fail => pb::ClusterState::Fail,
        } as i32,
        nodes,
        leader_id: group.leader.map(|id| id.to_string()).unwrap_or_default(),
        current_epoch: t.current_epoch,
        answered_by: t.myself().id.to_string(),
    }
}

fn node_message(t: &Topology, index: usize, n: &ClusterNode) -> pb::Node {
    let slots = if n.is_primary() {
        t.slots
            .ranges_of(index as crate::cluster::slots::NodeIndex)
            .into_iter()
            .map(|(start, end)| pb::SlotRange {
                start: start.into(),
                end: end.into(),
            })
            .collect()
    } else {
        Vec::new()
    };
    pb::Node {
        id: n.id.to_string(),
        ip: n.ip.clone(),
        port: n.port.into(),
        bus_port: n.cport.into(),
        hostname: n.hostname.clone(),
        fabric_address: n.bus_addr.clone(),
        role: if n.is_replica() {
            pb::Role::Replica
        } else {
            pb::Role::Primary
        } as i32,
        primary_id: n.primary.map(|id| id.to_string()).unwrap_or_default(),
        health: health(n) as i32,
        slots,
        shard_id: n.shard.to_string(),
        config_epoch: t.node_epoch(n),
        replication_offset: n.repl_offset,
        link_connected: n.is_myself() || n.link == crate::cluster::node::LinkState::Connected,
        myself: n.is_myself(),
    }
}

fn health(n: &ClusterNode) -> pb::NodeHealth {
    if n.flags.has(bit::HANDSHAKE) {
        pb::NodeHealth::Handshake
    } else if n.flags.has(bit::FAIL) {
        pb::NodeHealth::Failed
    } else if n.flags.has(bit::PFAIL) {
        pb::NodeHealth::Suspected
    } else if n.fenced {
        pb::NodeHealth::Fenced
    } else {
        pb::NodeHealth::Ok
    }
}

/// What a watcher is told about: the message without the fields that move with every
/// write or ping (replication offsets, link state).
pub fn watched_part(c: &pb::Cluster) -> pb::Cluster {
    let mut c = c.clone();
    for n in &mut c.nodes {
        n.replication_offset = 0;
        n.link_connected = false;
    }
    c
}
