//! The slot migration metrics (`rdma_store_slot_migration*` on `metrics-port`): after a
//! migration the source's scrape counts it started and committed, the keys it copied, the
//! slots it moved and its write pauses; the target, which drove nothing, shows zeros.

use super::metrics::{has, parsed, scrape};
use super::slot_migration::{
    field, id, keys_in, node_owning, set_all, start_migration, wait_for_end,
};
use integration::cluster::{cluster_node_with, form_cluster};
use integration::{free_port, Node};

/// The value of the sample `name{labels}` in a parsed scrape (`type name{labels} value`).
fn value(samples: &[String], kind: &str, name: &str) -> f64 {
    let prefix = format!("{kind} {name} ");
    samples
        .iter()
        .find_map(|s| s.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` in:\n{}", samples.join("\n")))
        .parse()
        .unwrap()
}

#[test]
fn slot_migration_metrics_count_what_the_source_moved() {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let nodes: Vec<Node> = ports
        .iter()
        .map(|p| cluster_node_with("migrate-metrics", &["--metrics-port", &p.to_string()]))
        .collect();
    form_cluster(&nodes, 0);
    let source = node_owning(&nodes, 0);
    let target = nodes.iter().find(|n| id(n) != id(source)).unwrap();
    let metrics_port = |n: &Node| ports[nodes.iter().position(|m| m.port == n.port).unwrap()];
    let keys = keys_in(0, 99, 500);
    set_all(&mut source.client(), &keys);
    let before = parsed(&scrape(metrics_port(source), None).1);
    for line in [
        "counter rdma_store_slot_migrations_started_total{} 0.0",
        "gauge rdma_store_slot_migrations_running{} 0.0",
    ] {
        assert!(has(&before, line), "no `{line}` in:\n{}", before.join("\n"));
    }
    assert_eq!(
        source.cli(&["CONFIG", "SET", "cluster-migration-slots-per-batch", "50"]),
        "OK"
    );
    start_migration(source, 0, 99, &id(target), "metrics");
    let m = wait_for_end(source, "metrics");
    assert_eq!(field(&m, "state"), "success", "{m:?}");
    // The driver leaves the registry a moment after the log shows the end.
    let port = metrics_port(source);
    integration::cluster::wait_until("the source's driver to finish", &[source], || {
        has(
            &parsed(&scrape(port, None).1),
            "gauge rdma_store_slot_migrations_running{} 0.0",
        )
    });
    let after = parsed(&scrape(port, None).1);
    for line in [
        "counter rdma_store_slot_migrations_started_total{} 1.0",
        "counter rdma_store_slot_migrations_committed_total{} 1.0",
        "counter rdma_store_slot_migrations_aborted_total{reason=failed} 0.0",
        "counter rdma_store_slot_migrations_aborted_total{reason=cancelled} 0.0",
        "counter rdma_store_slot_migration_slots_moved_total{} 100.0",
        &format!(
            "counter rdma_store_slot_migration_keys_copied_total{{}} {}.0",
            keys.len()
        ),
    ] {
        assert!(has(&after, line), "no `{line}` in:\n{}", after.join("\n"));
    }
    let bytes = value(&after, "counter", "rdma_store_slot_migration_bytes_total{}");
    assert!(
        bytes >= (keys.len() * 10) as f64,
        "{bytes} bytes for {} keys",
        keys.len()
    );
    // Two batches of 50 slots: each pauses at least once, for some time.
    let pauses = value(
        &after,
        "counter",
        "rdma_store_slot_migration_write_pauses_total{}",
    );
    assert!(pauses >= 2.0, "{pauses} pauses");
    let paused = value(
        &after,
        "counter",
        "rdma_store_slot_migration_write_pause_seconds_total{}",
    );
    assert!(paused > 0.0, "{paused} s paused");
    let on_target = parsed(&scrape(metrics_port(target), None).1);
    assert!(
        has(
            &on_target,
            "counter rdma_store_slot_migrations_started_total{} 0.0"
        ),
        "{}",
        on_target.join("\n")
    );
}
