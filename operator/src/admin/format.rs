//! The admin API's messages as text for people and as JSON for scripts.

use super::json::{self, Json};
use proto::admin::v1 as pb;

pub fn state_name(state: i32) -> &'static str {
    match pb::OperationState::try_from(state) {
        Ok(pb::OperationState::Pending) => "PENDING",
        Ok(pb::OperationState::Running) => "RUNNING",
        Ok(pb::OperationState::Succeeded) => "SUCCEEDED",
        Ok(pb::OperationState::Failed) => "FAILED",
        Ok(pb::OperationState::Cancelled) => "CANCELLED",
        _ => "UNSPECIFIED",
    }
}

pub fn kind_name(kind: i32) -> &'static str {
    match pb::OperationKind::try_from(kind) {
        Ok(pb::OperationKind::MigrateSlots) => "MIGRATE_SLOTS",
        Ok(pb::OperationKind::Rebalance) => "REBALANCE",
        Ok(pb::OperationKind::AddNode) => "ADD_NODE",
        Ok(pb::OperationKind::DrainNode) => "DRAIN_NODE",
        Ok(pb::OperationKind::Failover) => "FAILOVER",
        _ => "UNSPECIFIED",
    }
}

fn role_name(role: i32) -> &'static str {
    match pb::Role::try_from(role) {
        Ok(pb::Role::Primary) => "primary",
        Ok(pb::Role::Replica) => "replica",
        _ => "unknown",
    }
}

fn health_name(h: i32) -> &'static str {
    match pb::NodeHealth::try_from(h) {
        Ok(pb::NodeHealth::Ok) => "ok",
        Ok(pb::NodeHealth::Suspected) => "suspected",
        Ok(pb::NodeHealth::Failed) => "failed",
        Ok(pb::NodeHealth::Handshake) => "handshake",
        Ok(pb::NodeHealth::Fenced) => "fenced",
        _ => "unknown",
    }
}

fn cluster_state_name(s: i32) -> &'static str {
    match pb::ClusterState::try_from(s) {
        Ok(pb::ClusterState::Ok) => "ok",
        Ok(pb::ClusterState::Fail) => "fail",
        _ => "unknown",
    }
}

pub fn operation_json(op: &pb::Operation) -> Json {
    let p = op.progress.clone().unwrap_or_default();
    json::object([
        ("id", json::string(&op.id)),
        ("request_id", json::string(&op.request_id)),
        ("kind", json::string(kind_name(op.kind))),
        ("state", json::string(state_name(op.state))),
        (
            "progress",
            json::object([
                ("slots_done", json::number(p.slots_done)),
                ("slots_total", json::number(p.slots_total)),
                ("keys_moved", json::number(p.keys_moved)),
                ("bytes_moved", json::number(p.bytes_moved)),
                ("phase", json::string(&p.phase)),
            ]),
        ),
        ("start_time_unix_ms", json::number(op.start_time_unix_ms)),
        ("end_time_unix_ms", json::number(op.end_time_unix_ms)),
        ("error", json::string(&op.error)),
        ("description", json::string(&op.description)),
        ("coordinator_id", json::string(&op.coordinator_id)),
    ])
}

/// One line: id, kind, state, phase or error.
pub fn operation_line(op: &pb::Operation) -> String {
    let phase = op.progress.as_ref().map(|p| p.phase.as_str()).unwrap_or("");
    let detail = if op.error.is_empty() {
        phase
    } else {
        &op.error
    };
    format!(
        "{} {} {} {}{}",
        op.id,
        kind_name(op.kind),
        state_name(op.state),
        op.description,
        if detail.is_empty() {
            String::new()
        } else {
            format!(": {detail}")
        }
    )
}

/// The closing line of a finished operation.
pub fn operation_summary(op: &pb::Operation) -> String {
    let secs = op.end_time_unix_ms.saturating_sub(op.start_time_unix_ms) as f64 / 1000.0;
    let mut line = format!(
        "{} {} in {secs:.1}s: {}",
        op.id,
        state_name(op.state),
        op.description
    );
    if !op.error.is_empty() {
        line.push_str(&format!(" ({})", op.error));
    }
    line
}

fn ranges_text(ranges: &[pb::SlotRange]) -> String {
    ranges
        .iter()
        .map(|r| match r.start == r.end {
            true => r.start.to_string(),
            false => format!("{}-{}", r.start, r.end),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn ranges_json(ranges: &[pb::SlotRange]) -> Json {
    json::array(ranges.iter().map(|r| {
        json::object([
            ("start", json::number(r.start)),
            ("end", json::number(r.end)),
        ])
    }))
}

pub fn cluster_json(c: &pb::Cluster) -> Json {
    json::object([
        ("version", json::number(c.version)),
        ("state", json::string(cluster_state_name(c.state))),
        ("leader_id", json::string(&c.leader_id)),
        ("current_epoch", json::number(c.current_epoch)),
        ("answered_by", json::string(&c.answered_by)),
        (
            "nodes",
            json::array(c.nodes.iter().map(|n| {
                json::object([
                    ("id", json::string(&n.id)),
                    ("ip", json::string(&n.ip)),
                    ("port", json::number(n.port)),
                    ("bus_port", json::number(n.bus_port)),
                    ("hostname", json::string(&n.hostname)),
                    ("fabric_address", json::string(&n.fabric_address)),
                    ("role", json::string(role_name(n.role))),
                    ("primary_id", json::string(&n.primary_id)),
                    ("health", json::string(health_name(n.health))),
                    ("slots", ranges_json(&n.slots)),
                    ("shard_id", json::string(&n.shard_id)),
                    ("config_epoch", json::number(n.config_epoch)),
                    ("replication_offset", json::number(n.replication_offset)),
                    ("link_connected", json::boolean(n.link_connected)),
                    ("myself", json::boolean(n.myself)),
                ])
            })),
        ),
    ])
}

pub fn cluster_text(c: &pb::Cluster) -> String {
    let mut out = format!(
        "cluster state {} version {} epoch {} leader {} (answered by {})\n",
        cluster_state_name(c.state),
        c.version,
        c.current_epoch,
        if c.leader_id.is_empty() {
            "-"
        } else {
            &c.leader_id
        },
        c.answered_by
    );
    for n in &c.nodes {
        let role = match n.primary_id.is_empty() {
            true => role_name(n.role).to_string(),
            false => format!("{} of {}", role_name(n.role), n.primary_id),
        };
        out.push_str(&format!(
            "{} {}:{} {} {} fabric={} slots={}\n",
            n.id,
            n.ip,
            n.port,
            role,
            health_name(n.health),
            if n.fabric_address.is_empty() {
                "-"
            } else {
                &n.fabric_address
            },
            ranges_text(&n.slots)
        ));
    }
    out
}

pub fn slot_stats_json(s: &pb::SlotStats) -> Json {
    json::object([
        ("slot", json::number(s.slot)),
        ("keys", json::number(s.keys)),
        ("bytes", json::number(s.bytes)),
        ("ops_per_sec", json::float(s.ops_per_sec)),
        ("owner_id", json::string(&s.owner_id)),
    ])
}
