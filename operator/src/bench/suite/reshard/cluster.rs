//! The reshard suite's clusters: three primaries of one server kind (Debian's redis-server
//! or our node), no replicas, made a cluster by `redis-cli --cluster create`; for our node
//! also its topology group formed (atomic slot migration goes through it). Every wait is
//! bounded.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};

use super::super::failover::ServerKind;
use super::super::server_process::{free_cluster_port, make_dir, run_bounded, ServerProcess};
use super::super::sync_client::{info_fields, slot_ports, SyncClient};
use crate::cluster::nodes::{parse_nodes, NodeRow};

pub const PRIMARIES: usize = 3;
const CREATE_TIMEOUT: Duration = Duration::from_secs(120);
const FORM_TIMEOUT: Duration = Duration::from_secs(120);
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// A running cluster: its servers (stopped on drop) and their ports.
pub struct Cluster {
    pub kind: ServerKind,
    pub servers: Vec<ServerProcess>,
    pub ports: Vec<u16>,
    /// One server's command line, ports and paths by name.
    pub command: String,
}

impl Cluster {
    pub fn stop(&mut self) {
        for s in &mut self.servers {
            s.stop();
        }
    }

    /// CLUSTER NODES as the first server sees it.
    pub fn nodes(&self) -> anyhow::Result<Vec<NodeRow>> {
        let mut c = SyncClient::connect(self.ports[0], CHECK_TIMEOUT)?;
        parse_nodes(&c.text(&["CLUSTER", "NODES"])?).map_err(anyhow::Error::msg)
    }

    /// The owner's port of every slot, as the server on `port` sees it.
    pub fn slot_map(&self, port: u16) -> anyhow::Result<Vec<u16>> {
        let mut c = SyncClient::connect(port, CHECK_TIMEOUT)?;
        slot_ports(&c.request(&["CLUSTER", "SLOTS"])?)
    }
}

/// A server's argv, and the values its report line shows by name (value, name).
type ServerLine = (Vec<String>, Vec<(String, String)>);

/// The command line of one member.
fn argv(
    kind: ServerKind,
    node_bin: &Path,
    port: u16,
    dir: &Path,
    taken: &mut Vec<u16>,
    migration_link: &str,
) -> anyhow::Result<ServerLine> {
    let mut names = vec![
        (port.to_string(), "$PORT".to_string()),
        (dir.display().to_string(), "$DIR".to_string()),
    ];
    let words = |s: &[&str]| s.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let port_text = port.to_string();
    let dir_text = dir.display().to_string();
    let argv = match kind {
        ServerKind::Redis => words(&[
            "redis-server",
            "--port",
            &port_text,
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--dir",
            &dir_text,
        ]),
        ServerKind::Node => {
            let repl_port = free_cluster_port(taken)?;
            names.push((repl_port.to_string(), "$REPL_FABRIC_PORT".to_string()));
            let rdma_port = free_cluster_port(taken)?;
            names.push((rdma_port.to_string(), "$RDMA_PORT".to_string()));
            names.push((node_bin.display().to_string(), "node".to_string()));
            words(&[
                &node_bin.display().to_string(),
                "--port",
                &port_text,
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dir",
                &dir_text,
                "--cluster-enabled",
                "yes",
                "--cluster-secret",
                "bench-reshard",
                "--fabric-provider",
                "ofi:tcp",
                "--rdma-bind",
                "127.0.0.1",
                "--repl-fabric-port",
                &repl_port.to_string(),
                "--rdma-port",
                &rdma_port.to_string(),
                "--cluster-migration-link",
                migration_link,
            ])
        }
    };
    Ok((argv, names))
}

/// Starts three servers of `kind` under `work` and makes them one cluster.
pub fn start(
    kind: ServerKind,
    node_bin: &Path,
    work: &Path,
    migration_link: &str,
) -> anyhow::Result<Cluster> {
    let mut taken = Vec::new();
    let mut cluster = Cluster {
        kind,
        servers: Vec::new(),
        ports: Vec::new(),
        command: String::new(),
    };
    for i in 0..PRIMARIES {
        let port = free_cluster_port(&mut taken)?;
        let dir = make_dir(&work.join(format!("{}-{i}-{port}", kind.name())))?;
        let (argv, names) = argv(kind, node_bin, port, &dir, &mut taken, migration_link)?;
        let server = ServerProcess::new(port, argv, dir.join("server.log"));
        if i == 0 {
            let names: Vec<(&str, &str)> = names
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            cluster.command = server.shown(&names);
        }
        cluster.servers.push(server);
        cluster.ports.push(port);
    }
    for server in cluster.servers.iter_mut() {
        server.start()?;
    }
    let mut create = vec!["redis-cli".to_string(), "--cluster".into(), "create".into()];
    create.extend(cluster.ports.iter().map(|p| format!("127.0.0.1:{p}")));
    create.push("--cluster-yes".into());
    let out = run_bounded(&create, CREATE_TIMEOUT)?;
    if !out.success || !out.stdout.contains("[OK] All 16384 slots covered.") {
        bail!(
            "redis-cli --cluster create failed:\n{}{}",
            out.stdout,
            out.stderr
        );
    }
    wait_formed(&cluster)?;
    Ok(cluster)
}

/// Until every member says cluster_state:ok and sees every member; for our node also one
/// topology group with a leader on every member.
fn wait_formed(cluster: &Cluster) -> anyhow::Result<()> {
    let deadline = Instant::now() + FORM_TIMEOUT;
    loop {
        let why = not_formed(cluster);
        match why {
            None => return Ok(()),
            Some(why) if Instant::now() > deadline => {
                bail!("{} cluster not formed: {why}", cluster.kind.name())
            }
            Some(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn not_formed(cluster: &Cluster) -> Option<String> {
    let mut groups = Vec::new();
    for &port in &cluster.ports {
        let read = (|| -> anyhow::Result<(String, usize)> {
            let mut c = SyncClient::connect(port, CHECK_TIMEOUT)?;
            let info = c.text(&["CLUSTER", "INFO"])?;
            let nodes = parse_nodes(&c.text(&["CLUSTER", "NODES"])?).map_err(|e| anyhow!(e))?;
            Ok((info, nodes.len()))
        })();
        let (info, known) = match read {
            Ok(r) => r,
            Err(e) => return Some(format!("port {port}: {e:#}")),
        };
        let fields = info_fields(&info);
        let field = |name: &str| fields.get(name).cloned().unwrap_or_default();
        if field("cluster_state") != "ok" || known != PRIMARIES {
            return Some(format!(
                "port {port}: state {}, knows {known}",
                field("cluster_state")
            ));
        }
        if cluster.kind == ServerKind::Node {
            if field("cluster_topology_leader") == "-" || field("cluster_topology_group") == "-" {
                return Some(format!("port {port}: no topology group with a leader yet"));
            }
            groups.push(field("cluster_topology_group"));
        }
    }
    if groups.iter().any(|g| *g != groups[0]) {
        return Some(format!("topology groups differ: {groups:?}"));
    }
    None
}
