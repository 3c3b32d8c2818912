//! `operator cluster create HOST:PORT... [--replicas N]`: checks every node is an empty
//! cluster-mode node that knows no other, gives the primaries their slots, introduces every
//! node to the first (CLUSTER MEET; gossip does the rest over the fabric bus), makes the
//! replicas follow their primaries, and waits until every node sees all of them and says
//! `cluster_state:ok`.

use super::nodes::parse_nodes;
use super::plan::plan;
use super::session::{split_addr, NodeSession};
use std::time::{Duration, Instant};

/// How long to wait for the cluster to agree before giving up.
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

pub async fn create(
    addrs: &[String],
    replicas: usize,
    password: Option<&str>,
) -> Result<String, String> {
    let layout = plan(addrs.len(), replicas)?;
    let mut nodes = Vec::with_capacity(addrs.len());
    for a in addrs {
        split_addr(a)?;
        nodes.push(NodeSession::open(a, password).await?);
    }
    let mut secrets = Vec::with_capacity(nodes.len());
    for n in nodes.iter_mut() {
        secrets.push(n.config_get("cluster-secret").await?);
    }
    let secret_plan = super::secret::plan(&secrets)?;
    let mut ids = Vec::with_capacity(nodes.len());
    for n in nodes.iter_mut() {
        if n.info_field("cluster_known_nodes").await? != "1" {
            return Err(format!("{} already knows other nodes", n.addr));
        }
        if n.info_field("cluster_slots_assigned").await? != "0" {
            return Err(format!("{} already has slots", n.addr));
        }
        if n.text(&["DBSIZE"]).await? != "0" {
            return Err(format!("{} is not empty", n.addr));
        }
        ids.push(n.text(&["CLUSTER", "MYID"]).await?);
    }
    let mut report = String::new();
    if let super::secret::SecretPlan::Give {
        secret,
        to,
        generated,
    } = &secret_plan
    {
        for &i in to {
            nodes[i].text(&["CLUSTER", "SET-SECRET", secret]).await?;
        }
        report.push_str(&format!(
            "{} {} node(s) the cluster secret (each keeps it in its dir, file cluster-secret)\n",
            if *generated {
                "generated a cluster secret and gave"
            } else {
                "gave"
            },
            to.len()
        ));
    }
    for &(i, first, last) in &layout.primaries {
        let (a, b) = (first.to_string(), last.to_string());
        nodes[i].text(&["CLUSTER", "ADDSLOTSRANGE", &a, &b]).await?;
        report.push_str(&format!(
            "primary {} {} slots {a}-{b}\n",
            nodes[i].addr, ids[i]
        ));
    }
    let (first, rest) = nodes.split_first_mut().expect("plan checked the count");
    for other in rest.iter() {
        let (host, port) = split_addr(&other.addr)?;
        first
            .text(&["CLUSTER", "MEET", &host, &port.to_string()])
            .await?;
    }
    wait_until_all_known(&mut nodes, addrs.len(), None).await?;
    for &(r, p) in &layout.replicas {
        nodes[r].text(&["CLUSTER", "REPLICATE", &ids[p]]).await?;
        report.push_str(&format!("replica {} of {}\n", nodes[r].addr, nodes[p].addr));
    }
    wait_until_all_known(&mut nodes, addrs.len(), Some(layout.replicas.len())).await?;
    report.push_str(&format!("cluster of {} nodes is ok\n", addrs.len()));
    Ok(report)
}

/// Waits until every node lists `count` nodes, none in handshake, and (with `replicas` given)
/// that many of them as replicas, and says `cluster_state:ok`.
async fn wait_until_all_known(
    nodes: &mut [NodeSession],
    count: usize,
    replicas: Option<usize>,
) -> Result<(), String> {
    let deadline = Instant::now() + JOIN_TIMEOUT;
    loop {
        let mut done = true;
        for n in nodes.iter_mut() {
            let rows = parse_nodes(&n.text(&["CLUSTER", "NODES"]).await?)?;
            let joined = rows.len() == count && rows.iter().all(|r| !r.has_flag("handshake"));
            done &= joined
                && match replicas {
                    None => true,
                    Some(want) => {
                        rows.iter().filter(|r| r.has_flag("slave")).count() == want
                            && n.info_field("cluster_state").await? == "ok"
                    }
                };
            if !done {
                break;
            }
        }
        if done {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the nodes did not agree within {}s",
                JOIN_TIMEOUT.as_secs()
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}
