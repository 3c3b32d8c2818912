//! When the failover suite's cluster counts as healthy: every node says cluster_state:ok and
//! sees 3 primaries with one replica each and no failure flags, and every node flagged a
//! replica says `role:slave` in INFO replication with its link up and its applied offset
//! within [`IN_SYNC_SLACK`] of its primary's.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::bail;

use super::super::sync_client::SyncClient;
use crate::cluster::nodes::{parse_nodes, NodeRow};

pub const NODES: usize = 6;
pub const SHARDS: usize = 3;
/// A replica's offset read after its primary's, under writes, may be this far behind.
const IN_SYNC_SLACK: i64 = 64 * 1024;
const CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// CLUSTER NODES of the node on `port`.
pub fn cluster_nodes(c: &mut SyncClient) -> anyhow::Result<Vec<NodeRow>> {
    parse_nodes(&c.text(&["CLUSTER", "NODES"])?).map_err(anyhow::Error::msg)
}

/// Why the cluster is not healthy yet; `None` when it is.
pub fn unhealthy(ports: &[u16]) -> Option<String> {
    let mut views = Vec::new();
    let mut infos: Vec<(u16, BTreeMap<String, String>)> = Vec::new();
    for &port in ports {
        let read = (|| -> anyhow::Result<Option<String>> {
            let mut c = SyncClient::connect(port, CHECK_TIMEOUT)?;
            if !c.text(&["CLUSTER", "INFO"])?.contains("cluster_state:ok") {
                return Ok(Some(format!("port {port}: cluster_state not ok")));
            }
            views.push((port, cluster_nodes(&mut c)?));
            infos.push((port, c.info("replication")?));
            Ok(None)
        })();
        match read {
            Ok(None) => {}
            Ok(Some(why)) => return Some(why),
            Err(e) => return Some(format!("port {port}: {e:#}")),
        }
    }
    for (port, view) in &views {
        let primaries: Vec<&NodeRow> = view
            .iter()
            .filter(|n| n.has_flag("master") && !n.slot_ranges.is_empty())
            .collect();
        if view.len() != NODES || primaries.len() != SHARDS {
            return Some(format!(
                "port {port} sees {} nodes, {} primaries with slots",
                view.len(),
                primaries.len()
            ));
        }
        for n in view {
            if ["fail", "fail?", "handshake", "noaddr"]
                .iter()
                .any(|f| n.has_flag(f))
            {
                return Some(format!("port {port} flags {} {:?}", n.port(), n.flags));
            }
        }
        for p in &primaries {
            let replicas = view.iter().filter(|n| n.primary == p.id).count();
            if replicas != 1 {
                return Some(format!(
                    "port {port}: primary {} has {replicas} replicas",
                    p.port()
                ));
            }
        }
    }
    let flagged: Vec<u16> = views.first().map_or(Vec::new(), |(_, view)| {
        view.iter()
            .filter(|n| n.has_flag("slave"))
            .map(NodeRow::port)
            .collect()
    });
    let field =
        |info: &BTreeMap<String, String>, name: &str| info.get(name).cloned().unwrap_or_default();
    for (port, info) in &infos {
        let role = field(info, "role");
        if flagged.contains(port) && role != "slave" {
            return Some(format!(
                "port {port} is a replica in CLUSTER NODES but INFO replication says \
                 role:{role} (no replication link)"
            ));
        }
        if role == "slave" {
            let link = field(info, "master_link_status");
            if link != "up" {
                return Some(format!("replica {port}: link {link}"));
            }
            let primary_port = field(info, "master_port");
            let Some((_, primary)) = infos.iter().find(|(p, _)| p.to_string() == primary_port)
            else {
                return Some(format!("replica {port}: primary {primary_port} unknown"));
            };
            let number = |i: &BTreeMap<String, String>, name: &str, default: i64| {
                i.get(name)
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(default)
            };
            let behind =
                number(primary, "master_repl_offset", 0) - number(info, "slave_repl_offset", -1);
            if behind > IN_SYNC_SLACK {
                return Some(format!("replica {port}: {behind} bytes behind its primary"));
            }
        }
    }
    None
}

/// Waits until [`unhealthy`] says nothing; the time it took.
pub fn wait_healthy(ports: &[u16], timeout: Duration, what: &str) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let mut why = "not checked".to_string();
    while start.elapsed() < timeout {
        match unhealthy(ports) {
            None => return Ok(start.elapsed()),
            Some(reason) => why = reason,
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!(
        "{what}: cluster not healthy after {} s ({why})",
        timeout.as_secs()
    )
}
