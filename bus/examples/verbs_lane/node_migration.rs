//! Goal: an atomic slot migration between two real nodes carries its data over verbs: the
//! cluster of `node_cluster` (each node also serving clients on the RDMA device's address,
//! `cluster-migration-link fabric`) moves node 0's slots, holding a few keys, to node 1; the
//! source reports the move done over `fabric/verbs`, and every key reads back at node 1.

use std::time::{Duration, Instant};

use crate::node_cluster::call_at;
use crate::{ensure, R};

/// Under TCG emulation a move of 5461 slots (six batches) takes seconds; this bounds the
/// wait for a topology leader and the move (the lane kills a check after 180 s, without
/// its diagnosis).
const MOVE_MAX: Duration = Duration::from_secs(120);
const KEYS_TRIED: usize = 60;

fn call(port: u16, args: &[&str]) -> R<String> {
    call_at([127, 0, 0, 1].into(), port, args)
}

/// Moves slots 0-5460 from the node on `source` to the node on `target`.
pub fn move_slots_over_verbs(source: u16, target: u16) -> R {
    // Atomic migration goes through the topology group: wait until every node has a leader.
    let deadline = Instant::now() + MOVE_MAX;
    for p in [source, target] {
        loop {
            let info = call(p, &["CLUSTER", "INFO"])?;
            let leader = info
                .lines()
                .find_map(|l| l.strip_prefix("cluster_topology_leader:"))
                .unwrap_or("-")
                .trim()
                .to_string();
            if leader != "-" && !leader.is_empty() {
                break;
            }
            ensure(
                Instant::now() < deadline,
                format!(
                    "{}\nno topology leader on {p}: {info}",
                    logs(&[source, target])
                ),
            )?;
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let mut keys = Vec::new();
    for i in 0..KEYS_TRIED {
        let key = format!("moving:{i}");
        let slot: u16 = call(source, &["CLUSTER", "KEYSLOT", &key])?.parse()?;
        if slot <= 5460 {
            let value = format!("value-of-{key}");
            ensure(call(source, &["SET", &key, &value])? == "OK", "SET")?;
            keys.push((key, value));
        }
    }
    ensure(!keys.is_empty(), "no key fell in slots 0-5460")?;
    let target_id = call(target, &["CLUSTER", "MYID"])?;
    let started = call(
        source,
        &[
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            "0",
            "5460",
            "NODE",
            &target_id,
            "REQUESTID",
            "verbs-move",
        ],
    )?;
    ensure(started == "OK", format!("MIGRATESLOTS: {started}"))?;
    let listed = loop {
        let listed = call(source, &["CLUSTER", "GETSLOTMIGRATIONS"])?;
        if field(&listed, "state").is_some_and(|s| s != "running") {
            break listed;
        }
        ensure(
            Instant::now() < deadline,
            format!(
                "the move did not end: {}\n{}",
                listed.replace("\r\n", " "),
                logs(&[source, target])
            ),
        )?;
        std::thread::sleep(Duration::from_millis(200));
    };
    ensure(
        field(&listed, "state").as_deref() == Some("success")
            && field(&listed, "link").as_deref() == Some("fabric/verbs"),
        format!(
            "{}\nthe move over verbs: {}",
            logs(&[source, target]),
            listed.replace("\r\n", " ")
        ),
    )?;
    for (key, value) in &keys {
        let got = call(target, &["GET", key])?;
        ensure(
            &got == value,
            format!("{key} at the target: {got:?}, wanted {value:?}"),
        )?;
    }
    println!(
        "{} keys in 5461 slots moved over fabric/verbs: {}",
        keys.len(),
        listed.replace("\r\n", " ")
    );
    Ok(())
}

/// What the nodes logged about the migration, its links and the fabric (the lane shows the
/// last 60 lines of a failing check: the reason goes after this).
fn logs(ports: &[u16]) -> String {
    ports
        .iter()
        .map(|p| {
            let log =
                std::fs::read_to_string(format!("/tmp/cluster-{p}/node.log")).unwrap_or_default();
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| {
                    ["migrat", "link", "fabric", "closed", "WARN", "ERROR"]
                        .iter()
                        .any(|w| l.contains(w))
                        && !l.contains("raft_id=")
                })
                .collect();
            format!(
                "node {p}:\n{}",
                lines[lines.len().saturating_sub(25)..].join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value of `name` in a GETSLOTMIGRATIONS reply holding one migration (RESP2: a flat
/// array of bulk strings, `$len` lines before each).
fn field(listed: &str, name: &str) -> Option<String> {
    let items: Vec<&str> = listed
        .split("\r\n")
        .filter(|l| !l.starts_with(['$', '*']))
        .collect();
    let at = items.iter().position(|i| *i == name)?;
    items.get(at + 1).map(|v| v.to_string())
}
