//! `operator cluster status`: one node's view of the cluster as a table.

use super::nodes::parse_nodes;
use super::session::NodeSession;

pub async fn status(addr: &str, password: Option<&str>) -> Result<String, String> {
    let mut node = NodeSession::open(addr, password).await?;
    let state = node.info_field("cluster_state").await?;
    let epoch = node.info_field("cluster_current_epoch").await?;
    let version = node.info_field("cluster_topology_version").await?;
    let leader = node.info_field("cluster_topology_leader").await?;
    let voters = node.info_field("cluster_topology_voters").await?;
    let learners = node.info_field("cluster_topology_learners").await?;
    let rows = parse_nodes(&node.text(&["CLUSTER", "NODES"]).await?)?;
    let mut out = format!(
        "cluster_state: {state}  current_epoch: {epoch}  nodes: {}  topology: version {version} \
         leader {leader} voters {voters} learners {learners}\n",
        rows.len()
    );
    out.push_str(&format!(
        "{:<40}  {:<21}  {:<7}  {:<6}  {:<12}  {:<40}  fabric address\n",
        "id", "address", "role", "slots", "link", "primary"
    ));
    for r in &rows {
        let role = if r.has_flag("master") {
            "primary"
        } else {
            "replica"
        };
        let mut link = r.link.clone();
        if r.has_flag("fail") {
            link = "FAIL".into();
        } else if r.has_flag("fail?") {
            link = "PFAIL".into();
        }
        out.push_str(&format!(
            "{:<40}  {:<21}  {:<7}  {:<6}  {:<12}  {:<40}  {}\n",
            r.id, r.addr, role, r.slots, link, r.primary, r.fabric_addr
        ));
    }
    Ok(out)
}
