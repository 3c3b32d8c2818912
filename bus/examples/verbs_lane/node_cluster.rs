//! Goal: three real node processes form a cluster whose bus runs on verbs UD datagrams
//! (addresses carry GID + QPN): each takes a third of the slots, node 0 meets the other two
//! by ip and port (the bus-port rendezvous tells their verbs addresses), gossip over soft-RoCE
//! spreads membership and slots, and every node reports `cluster_state:ok`, three known nodes,
//! and each node's verbs fabric address in CLUSTER NODES. Then an atomic slot migration
//! carries node 0's slots to node 1 over verbs (`node_migration`): each node also serves
//! clients on the RDMA device's address (`rdma-port` = port + 1000).

use std::fs::File;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::node_stream::{encode, reply_len};
use crate::{ensure, R, WAIT};

const PORTS: [u16; 3] = [7000, 7001, 7002];
const RANGES: [(&str, &str); 3] = [("0", "5460"), ("5461", "10922"), ("10923", "16383")];
/// Gossip under TCG emulation is slow; this bounds the wait for agreement.
const CONVERGE: Duration = Duration::from_secs(120);

/// The node processes, killed on drop.
struct Nodes(Vec<Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in self.0.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub(crate) fn node_bin() -> R<PathBuf> {
    Ok(match std::env::var_os("NODE_BIN") {
        Some(b) => PathBuf::from(b),
        None => std::env::current_exe()?
            .parent()
            .ok_or("no directory")?
            .join("node"),
    })
}

fn start(port: u16) -> R<Child> {
    let dir = format!("/tmp/cluster-{port}");
    std::fs::create_dir_all(&dir)?;
    let log = File::create(format!("{dir}/node.log"))?;
    Ok(Command::new(node_bin()?)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--dir", &dir])
        .args(["--cluster-enabled", "yes", "--cluster-secret", "lane"])
        .args(["--fabric-provider", "verbs"])
        .args(["--rdma-port", &(port + 1000).to_string()])
        .args(["--rdma-bind", &crate::rxe_ip().to_string()])
        .args(["--cluster-migration-link", "fabric"])
        // No password here, and the fabric listens on the device's (non-loopback) address:
        // protected mode would answer the migration's fabric link DENIED, as Redis answers
        // a replica from another host (a real cluster sets requirepass and masterauth).
        .args(["--protected-mode", "no"])
        .args(["--loglevel", "debug"])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?)
}

/// One command over TCP to a node on the guest's loopback; the reply's text.
fn call(port: u16, args: &[&str]) -> R<String> {
    call_at(IpAddr::from([127, 0, 0, 1]), port, args)
}

/// One command over TCP to `ip:port`; the reply's text (status, error, bulk body or integer).
pub(crate) fn call_at(ip: IpAddr, port: u16, args: &[&str]) -> R<String> {
    let mut s = TcpStream::connect((ip, port))?;
    s.set_read_timeout(Some(WAIT))?;
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    s.write_all(&encode(&args))?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let len = loop {
        if let Some(len) = reply_len(&got)? {
            break len;
        }
        let n = s.read(&mut buf)?;
        ensure(n > 0, "TCP connection closed before the reply")?;
        got.extend_from_slice(&buf[..n]);
    };
    let text = String::from_utf8_lossy(&got[..len]).into_owned();
    Ok(match text.as_bytes().first() {
        Some(b'$') => text
            .split_once("\r\n")
            .map_or("", |(_, b)| b)
            .trim_end()
            .to_string(),
        _ => text[1..].trim_end().to_string(),
    })
}

/// The nodes' logs, the last 60 lines of each (the console keeps a failing check's output).
fn logs() -> String {
    PORTS
        .iter()
        .map(|p| {
            let log =
                std::fs::read_to_string(format!("/tmp/cluster-{p}/node.log")).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            lines[lines.len().saturating_sub(60)..].join("\n")
        })
        .collect::<Vec<_>>()
        .join("\n----\n")
}

pub fn test_node_cluster() -> R {
    let mut nodes = Nodes(Vec::new());
    for p in PORTS {
        nodes.0.push(start(p)?);
    }
    let deadline = Instant::now() + WAIT;
    for p in PORTS {
        while call(p, &["PING"]).map(|r| r != "PONG").unwrap_or(true) {
            ensure(
                Instant::now() < deadline,
                format!("node {p} never answered; {}", logs()),
            )?;
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    for (p, (a, b)) in PORTS.iter().zip(RANGES) {
        ensure(
            call(*p, &["CLUSTER", "ADDSLOTSRANGE", a, b])? == "OK",
            "ADDSLOTSRANGE",
        )?;
    }
    for p in &PORTS[1..] {
        let r = call(PORTS[0], &["CLUSTER", "MEET", "127.0.0.1", &p.to_string()])?;
        ensure(r == "OK", format!("MEET: {r}"))?;
    }
    let deadline = Instant::now() + CONVERGE;
    loop {
        let mut all_ok = true;
        for p in PORTS {
            let info = call(p, &["CLUSTER", "INFO"])?;
            let nodes = call(p, &["CLUSTER", "NODES"])?;
            let verbs_addrs = nodes
                .lines()
                .filter(|l| l.contains("fabric-address=verbs/gid="))
                .count();
            all_ok &= info.contains("cluster_state:ok")
                && info.contains("cluster_known_nodes:3")
                && verbs_addrs == 3;
        }
        if all_ok {
            break;
        }
        ensure(
            Instant::now() < deadline,
            format!(
                "no agreement: {}\n{}",
                call(PORTS[0], &["CLUSTER", "NODES"]).unwrap_or_default(),
                logs()
            ),
        )?;
        std::thread::sleep(Duration::from_millis(500));
    }
    println!("{}", call(PORTS[0], &["CLUSTER", "NODES"])?);
    println!("3 nodes agree over verbs UD: cluster_state:ok");
    crate::node_migration::move_slots_over_verbs(PORTS[0], PORTS[1])
}
