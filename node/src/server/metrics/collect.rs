//! What a scrape shows. Names that redis_exporter also exports keep its names, labels and
//! units (`redis_*`), so dashboards built for Redis work unchanged; what only this store
//! has is `rdma_store_*`.

use super::exposition::{Exposition, Kind};
use crate::node_state::command_stats::CommandTotals;
use crate::node_state::stats::Stats;
use crate::server::admin::operations::Operations;
use crate::server::Server;
use proto::admin::v1 as pb;
use std::sync::atomic::Ordering::Relaxed;

/// Latency histogram buckets: 1024 ns x 2^k for k in 0..LATENCY_BUCKETS (about 1 µs to
/// 1.07 s), the command stats' own power-of-two ladder.
const LATENCY_BUCKETS: u32 = 21;

/// The scrape's text.
pub fn render(server: &Server, operations: Option<&Operations>) -> String {
    let mut e = Exposition::default();
    instance(&mut e, server);
    traffic(&mut e, server);
    commands(&mut e, server);
    replication(&mut e, server);
    fabric(&mut e, server);
    cluster(&mut e, server);
    if server.cluster.is_some() {
        super::migrations::migrations(&mut e, server);
    }
    if let Some(ops) = operations {
        admin_operations(&mut e, ops);
    }
    e.finish()
}

fn instance(e: &mut Exposition, server: &Server) {
    e.single("redis_up", Kind::Gauge, "Whether the node answers.", 1.0);
    e.single(
        "redis_uptime_in_seconds",
        Kind::Gauge,
        "Seconds since the node started.",
        server.started.elapsed().as_secs() as f64,
    );
    e.single(
        "redis_connected_clients",
        Kind::Gauge,
        "Client connections being served (TCP and fabric).",
        server.connected_clients() as f64,
    );
    e.single(
        "redis_blocked_clients",
        Kind::Gauge,
        "Clients waiting in a blocking command.",
        server.clients.blocked_count() as f64,
    );
    e.single(
        "redis_memory_used_bytes",
        Kind::Gauge,
        "Memory the dataset and the node use, as INFO used_memory.",
        server.memory.refresh_at(std::time::Instant::now()) as f64,
    );
    e.single(
        "redis_memory_max_bytes",
        Kind::Gauge,
        "maxmemory (0: no limit).",
        server.hot.maxmemory.load(Relaxed) as f64,
    );
    // As INFO keyspace: the keys of slots being imported are not counted before they are
    // this node's.
    let counts: Vec<(String, (usize, usize))> = server
        .dbs()
        .iter()
        .map(|k| (format!("db{}", k.index()), k.visible_counts()))
        .collect();
    let family = e.family("redis_db_keys", Kind::Gauge, "Keys in the database.");
    for (db, (keys, _)) in &counts {
        family.sample("", &[("db", db)], *keys as f64);
    }
    let family = e.family(
        "redis_db_keys_expiring",
        Kind::Gauge,
        "Keys with a time to live.",
    );
    for (db, (_, volatile)) in &counts {
        family.sample("", &[("db", db)], *volatile as f64);
    }
}

fn traffic(e: &mut Exposition, server: &Server) {
    let st = &server.stats;
    let counters: [(&'static str, &str, &std::sync::atomic::AtomicU64); 11] = [
        (
            "redis_connections_received_total",
            "Connections accepted.",
            &st.connections_received,
        ),
        (
            "redis_rejected_connections_total",
            "Connections refused (maxclients).",
            &st.rejected_connections,
        ),
        (
            "redis_commands_processed_total",
            "Commands run.",
            &st.commands_processed,
        ),
        (
            "redis_net_input_bytes_total",
            "Bytes read from clients.",
            &st.net_input_bytes,
        ),
        (
            "redis_net_output_bytes_total",
            "Bytes written to clients.",
            &st.net_output_bytes,
        ),
        (
            "redis_expired_keys_total",
            "Keys expired.",
            &st.expired_keys,
        ),
        (
            "redis_evicted_keys_total",
            "Keys evicted.",
            &st.evicted_keys,
        ),
        (
            "redis_keyspace_hits_total",
            "Key lookups that found the key.",
            &st.keyspace_hits,
        ),
        (
            "redis_keyspace_misses_total",
            "Key lookups that did not.",
            &st.keyspace_misses,
        ),
        (
            "redis_errors_total",
            "Error replies sent.",
            &st.error_replies,
        ),
        (
            "redis_pubsub_messages_total",
            "Messages published.",
            &st.pubsub_messages,
        ),
    ];
    for (name, help, counter) in counters {
        e.single(name, Kind::Counter, help, Stats::get(counter) as f64);
    }
}

fn commands(e: &mut Exposition, server: &Server) {
    let totals = server.command_stats.totals();
    let per_command = |e: &mut Exposition, value: fn(&CommandTotals) -> f64| {
        for (name, t) in &totals {
            e.sample("", &[("cmd", name)], value(t));
        }
    };
    e.family(
        "redis_commands_total",
        Kind::Counter,
        "Calls per command (INFO commandstats).",
    );
    per_command(e, |t| t.calls as f64);
    e.family(
        "redis_commands_duration_seconds_total",
        Kind::Counter,
        "Time spent per command.",
    );
    per_command(e, |t| t.usec as f64 / 1e6);
    e.family(
        "redis_commands_rejected_calls_total",
        Kind::Counter,
        "Calls refused before running (wrong arity, ACL, OOM...).",
    );
    per_command(e, |t| t.rejected_calls as f64);
    e.family(
        "redis_commands_failed_calls_total",
        Kind::Counter,
        "Calls that ran and answered an error.",
    );
    per_command(e, |t| t.failed_calls as f64);
    e.family(
        "rdma_store_command_latency_seconds",
        Kind::Histogram,
        "Per-command latency (while latency-tracking is on).",
    );
    for (name, t) in &totals {
        let cdf = t.power_of_two_cdf();
        let Some(&(_, timed)) = cdf.last() else {
            continue;
        };
        for k in 0..LATENCY_BUCKETS {
            let bound_ns = 1024u64 << k;
            let bound_us = (bound_ns - 1) / 1000;
            // The cdf lists (bound µs, calls below it) where the count grows, on this ladder.
            let below = cdf
                .iter()
                .take_while(|(b, _)| *b <= bound_us)
                .last()
                .map_or(0, |(_, n)| *n);
            let le = format!("{}", bound_ns as f64 / 1e9);
            e.sample("_bucket", &[("cmd", name), ("le", &le)], below as f64);
        }
        e.sample("_bucket", &[("cmd", name), ("le", "+Inf")], timed as f64);
        e.sample("_sum", &[("cmd", name)], t.usec as f64 / 1e6);
        e.sample("_count", &[("cmd", name)], timed as f64);
    }
}

fn replication(e: &mut Exposition, server: &Server) {
    let now = crate::clock::unix_millis();
    let replicas = server.replication.replicas(now);
    e.single(
        "redis_master_repl_offset",
        Kind::Gauge,
        "This node's replication offset.",
        server.replication.master_repl_offset() as f64,
    );
    e.single(
        "redis_connected_slaves",
        Kind::Gauge,
        "Replicas attached.",
        replicas.len() as f64,
    );
    let labels = |r: &crate::replication::report::ReplicaLine| {
        (
            r.ip.clone(),
            r.port.to_string(),
            if r.online { "online" } else { "wait_bgsave" },
        )
    };
    e.family(
        "redis_connected_slave_offset_bytes",
        Kind::Gauge,
        "Offset each replica acknowledged.",
    );
    for r in &replicas {
        let (ip, port, state) = labels(r);
        e.sample(
            "",
            &[
                ("slave_ip", &ip),
                ("slave_port", &port),
                ("slave_state", state),
            ],
            r.offset as f64,
        );
    }
    e.family(
        "redis_connected_slave_lag_seconds",
        Kind::Gauge,
        "Seconds since each replica's last acknowledgement.",
    );
    for r in &replicas {
        let (ip, port, state) = labels(r);
        e.sample(
            "",
            &[
                ("slave_ip", &ip),
                ("slave_port", &port),
                ("slave_state", state),
            ],
            r.lag_secs as f64,
        );
    }
    e.family(
        "rdma_store_replica_lag_bytes",
        Kind::Gauge,
        "Bytes each replica is behind this node's offset.",
    );
    let master = server.replication.master_repl_offset();
    for r in &replicas {
        let (ip, port, _) = labels(r);
        e.sample(
            "",
            &[("slave_ip", &ip), ("slave_port", &port)],
            master.saturating_sub(r.offset) as f64,
        );
    }
    let st = &server.stats;
    e.single(
        "redis_sync_full_total",
        Kind::Counter,
        "Full resyncs served.",
        Stats::get(&st.sync_full) as f64,
    );
    e.single(
        "redis_sync_partial_ok_total",
        Kind::Counter,
        "Partial resyncs accepted.",
        Stats::get(&st.sync_partial_ok) as f64,
    );
}

fn fabric(e: &mut Exposition, server: &Server) {
    let st = &server.stats;
    e.single(
        "rdma_store_fabric_connected_clients",
        Kind::Gauge,
        "Clients connected over the fabric.",
        Stats::get(&st.fabric_connected_clients) as f64,
    );
    e.single(
        "rdma_store_fabric_stranded_clients",
        Kind::Gauge,
        "Fabric clients held by a poller stuck inside one call.",
        Stats::get(&st.fabric_stranded_clients) as f64,
    );
    let counters: [(&'static str, &str, &std::sync::atomic::AtomicU64); 13] = [
        (
            "rdma_store_fabric_connections_received_total",
            "Fabric connections accepted.",
            &st.fabric_connections_received,
        ),
        (
            "rdma_store_fabric_protocol_errors_total",
            "Fabric clients cut off for breaking the protocol.",
            &st.fabric_protocol_errors,
        ),
        (
            "rdma_store_fabric_rx_readvertised_total",
            "Receive buffers advertised again.",
            &st.fabric_rx_readvertised,
        ),
        (
            "rdma_store_fabric_window_grows_total",
            "Fabric clients' receive buffers and reply staging grown with their traffic.",
            &st.fabric_window_grows,
        ),
        (
            "rdma_store_fabric_window_grow_failures_total",
            "Fabric client buffers that could not grow (registration failed) and kept their size.",
            &st.fabric_window_grow_failures,
        ),
        (
            "rdma_store_fabric_poller_stalls_total",
            "Times a fabric poller was found stuck inside one call.",
            &st.fabric_poller_stalls,
        ),
        (
            "rdma_store_fabric_poller_blocks_total",
            "Idle fabric pollers blocked on completion channels.",
            &st.fabric_poller_blocks,
        ),
        (
            "rdma_store_fabric_poller_bell_wakes_total",
            "Blocked fabric pollers woken by their doorbell.",
            &st.fabric_poller_bell_wakes,
        ),
        (
            "rdma_store_fabric_poller_idle_retries_total",
            "Idle fabric pollers that found work waiting before they could block.",
            &st.fabric_poller_idle_retries,
        ),
        (
            "rdma_store_fabric_poller_sleeps_total",
            "Idle fabric pollers' sleeps (providers without a wait descriptor).",
            &st.fabric_poller_sleeps,
        ),
        (
            "rdma_store_fabric_unauthenticated_closed_total",
            "Fabric clients closed before authenticating in time.",
            &st.fabric_unauthenticated_closed,
        ),
        (
            "rdma_store_fabric_clients_said_goodbye_total",
            "Fabric clients that closed saying goodbye.",
            &st.fabric_clients_said_goodbye,
        ),
        (
            "rdma_store_fabric_handshakes_dropped_total",
            "Fabric handshakes dropped (limits, malformed).",
            &st.fabric_handshakes_dropped,
        ),
    ];
    for (name, help, counter) in counters {
        e.single(name, Kind::Counter, help, Stats::get(counter) as f64);
    }
}

fn cluster(e: &mut Exposition, server: &Server) {
    let Some(cluster) = server.cluster.as_ref() else {
        e.single(
            "redis_cluster_enabled",
            Kind::Gauge,
            "Whether cluster mode is on.",
            0.0,
        );
        return;
    };
    e.single(
        "redis_cluster_enabled",
        Kind::Gauge,
        "Whether cluster mode is on.",
        1.0,
    );
    let (ok, assigned, known, sent, received, mine) = {
        let t = cluster.topology.read();
        let me = t.myself().id;
        let mine: Vec<u16> = (0..proto::slot::SLOT_COUNT as u16)
            .filter(|&s| t.owner(s).is_some_and(|o| o.id == me))
            .collect();
        (
            t.state() == crate::cluster::topology::Health::Ok,
            t.slots.assigned(),
            t.nodes.len(),
            t.stats.sent,
            t.stats.received,
            mine,
        )
    };
    e.single(
        "redis_cluster_state",
        Kind::Gauge,
        "1 when the cluster state is ok.",
        f64::from(u8::from(ok)),
    );
    e.single(
        "redis_cluster_slots_assigned",
        Kind::Gauge,
        "Slots with an owner.",
        assigned as f64,
    );
    e.single(
        "redis_cluster_known_nodes",
        Kind::Gauge,
        "Nodes this node knows.",
        known as f64,
    );
    e.single(
        "rdma_store_cluster_slots_owned",
        Kind::Gauge,
        "Slots this node serves as primary.",
        mine.len() as f64,
    );
    e.family(
        "rdma_store_bus_messages_sent_total",
        Kind::Counter,
        "Cluster bus messages sent, by type.",
    );
    for (i, name) in crate::cluster::stats::MESSAGE_TYPES.iter().enumerate() {
        e.sample("", &[("type", name)], sent[i] as f64);
    }
    e.family(
        "rdma_store_bus_messages_received_total",
        Kind::Counter,
        "Cluster bus messages received, by type.",
    );
    for (i, name) in crate::cluster::stats::MESSAGE_TYPES.iter().enumerate() {
        e.sample("", &[("type", name)], received[i] as f64);
    }
    if server.config.read().metrics.slot_detail {
        slot_detail(e, server, &mine);
    }
}

/// One series per owned slot that holds keys (`metrics-slot-detail yes`).
fn slot_detail(e: &mut Exposition, server: &Server, mine: &[u16]) {
    let rates = crate::server::admin::slot_stats::rates();
    let held: Vec<(u16, u64, u64)> = mine
        .iter()
        .map(|&s| {
            let (keys, bytes) = server.keyspace.slot_footprint(s);
            (s, keys, bytes)
        })
        .filter(|(_, keys, _)| *keys > 0)
        .collect();
    e.family("rdma_store_slot_keys", Kind::Gauge, "Keys per slot held.");
    for (slot, keys, _) in &held {
        e.sample("", &[("slot", &slot.to_string())], *keys as f64);
    }
    e.family(
        "rdma_store_slot_bytes",
        Kind::Gauge,
        "Approximate bytes per slot held.",
    );
    for (slot, _, bytes) in &held {
        e.sample("", &[("slot", &slot.to_string())], *bytes as f64);
    }
    e.family(
        "rdma_store_slot_ops_per_second",
        Kind::Gauge,
        "Keyed commands per second per slot (sampled while the admin API runs).",
    );
    for (slot, _, _) in &held {
        let rate = rates.get(usize::from(*slot)).copied().unwrap_or(0.0);
        e.sample("", &[("slot", &slot.to_string())], rate);
    }
}

fn admin_operations(e: &mut Exposition, ops: &Operations) {
    let list = ops.list();
    e.family(
        "rdma_store_operations",
        Kind::Gauge,
        "Admin operations this node coordinates, by kind and state.",
    );
    let mut counts: std::collections::BTreeMap<(String, String), u64> = Default::default();
    for op in &list {
        let kind = pb::OperationKind::try_from(op.kind)
            .map(|k| k.as_str_name().to_ascii_lowercase())
            .unwrap_or_else(|_| "unknown".into());
        let state = pb::OperationState::try_from(op.state)
            .map(|s| s.as_str_name().to_ascii_lowercase())
            .unwrap_or_else(|_| "unknown".into());
        *counts.entry((kind, state)).or_default() += 1;
    }
    for ((kind, state), n) in &counts {
        e.sample("", &[("kind", kind), ("state", state)], *n as f64);
    }
    e.family(
        "rdma_store_operation_slots_done",
        Kind::Gauge,
        "Slots moved by each running operation.",
    );
    let running: Vec<&pb::Operation> = list.iter().filter(|op| !op.is_terminal()).collect();
    for op in &running {
        let done = op.progress.as_ref().map_or(0, |p| p.slots_done);
        e.sample("", &[("id", &op.id)], done as f64);
    }
    e.family(
        "rdma_store_operation_slots_total",
        Kind::Gauge,
        "Slots each running operation moves in all.",
    );
    for op in &running {
        let total = op.progress.as_ref().map_or(0, |p| p.slots_total);
        e.sample("", &[("id", &op.id)], total as f64);
    }
}
