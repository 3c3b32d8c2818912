//! Goal: standalone replication runs over verbs RC on soft-RoCE: a primary (`repl-fabric-port`
//! on the rxe address) and a replica (REPLICAOF, both `--fabric-provider verbs`) set the link up
//! over TCP, then the primary RDMA-WRITEs the stream into the replica's Ring and the replica
//! WRITEs its applied offset back. Writes on the primary reach the replica, `WAIT 1 5000`
//! answers 1, INFO replication on the primary lists the replica online at master_repl_offset.
//!
//! That the link is verbs, not something else: the primary logs the linked replica's fabric
//! endpoint (`verbs:gid=...`, an `ofi:` name on any other provider), and rxe0's packet counter
//! moves while the writes replicate (TCP between the nodes never touches rxe0).

use std::fs::File;
use std::net::IpAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::node_cluster::{call_at, node_bin};
use crate::{ensure, rxe_ip, R, WAIT};

const PRIMARY_PORT: u16 = 7100;
const REPLICA_PORT: u16 = 7101;
const REPL_FABRIC_PORT: u16 = 17100;
/// Keys written on the primary: enough for several ring WRITEs, few enough for emulation.
const KEYS: usize = 200;
/// rxe0's count of packets it sent (RDMA WRITEs and their ACKs among them).
const RXE_SENT_PKTS: &str = "/sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts";

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

fn dir(port: u16) -> String {
    format!("/tmp/repl-{port}")
}

/// A node on the rxe address over verbs; `extra` adds its role's flags. Its tracing log goes to
/// `node.log` (a log file has no colour codes), anything else it prints to `console.log`.
fn start(port: u16, extra: &[&str]) -> R<Child> {
    let dir = dir(port);
    std::fs::create_dir_all(&dir)?;
    let console = File::create(format!("{dir}/console.log"))?;
    let ip = rxe_ip().to_string();
    Ok(Command::new(node_bin()?)
        .args(["--port", &port.to_string(), "--bind", &ip])
        .args(["--save", "", "--dir", &dir])
        .args(["--logfile", &format!("{dir}/node.log")])
        // Clients come from the rxe address, not loopback, and there is no password.
        .args(["--protected-mode", "no"])
        .args(["--fabric-provider", "verbs", "--rdma-bind", &ip])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(console.try_clone()?)
        .stderr(console)
        .spawn()?)
}

fn log(port: u16) -> String {
    let dir = dir(port);
    let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).unwrap_or_default();
    format!("{}{}", read("node.log"), read("console.log"))
}

fn logs() -> String {
    format!(
        "primary log:\n{}\n----\nreplica log:\n{}",
        log(PRIMARY_PORT),
        log(REPLICA_PORT)
    )
}

fn call(port: u16, args: &[&str]) -> R<String> {
    call_at(rxe_ip(), port, args)
}

/// Polls `check` until it holds; fails with `what` and both logs after `WAIT`.
fn eventually(what: &str, mut check: impl FnMut() -> R<bool>) -> R {
    let deadline = Instant::now() + WAIT;
    while !check().unwrap_or(false) {
        ensure(
            Instant::now() < deadline,
            format!("{what}: not in time\n{}", logs()),
        )?;
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// The `name:value` fields of an INFO section.
fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// `key=value` inside an INFO value such as `slave0:ip=..,port=..,state=online,offset=..`.
fn sub_field(value: &str, key: &str) -> Option<String> {
    value
        .split(',')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .map(str::to_string)
}

fn rxe_sent_pkts() -> R<u64> {
    let text = std::fs::read_to_string(RXE_SENT_PKTS)
        .map_err(|e| format!("reading {RXE_SENT_PKTS}: {e}"))?;
    Ok(text.trim().parse()?)
}

pub fn test_replication_wait() -> R {
    let ip: IpAddr = rxe_ip();
    let mut nodes = Nodes(Vec::new());
    nodes.0.push(start(
        PRIMARY_PORT,
        &["--repl-fabric-port", &REPL_FABRIC_PORT.to_string()],
    )?);
    nodes.0.push(start(REPLICA_PORT, &[])?);
    for port in [PRIMARY_PORT, REPLICA_PORT] {
        eventually(&format!("node {port} answering PING"), || {
            Ok(call(port, &["PING"])? == "PONG")
        })?;
    }
    eventually("the primary's replication listener", || {
        Ok(log(PRIMARY_PORT).contains("accepting replication links (fabric)"))
    })?;
    // Before the link: arrives by the full sync.
    ensure(
        call(PRIMARY_PORT, &["SET", "before", "snapshot"])? == "OK",
        "SET before",
    )?;
    let primary_port = PRIMARY_PORT.to_string();
    let r = call(REPLICA_PORT, &["REPLICAOF", &ip.to_string(), &primary_port])?;
    ensure(r == "OK", format!("REPLICAOF: {r}\n{}", logs()))?;
    eventually("the full sync", || {
        Ok(call(REPLICA_PORT, &["GET", "before"])? == "snapshot")
    })?;
    eventually("master_link_status:up on the replica", || {
        let info = call(REPLICA_PORT, &["INFO", "replication"])?;
        Ok(info_field(&info, "master_link_status").as_deref() == Some("up"))
    })?;

    // The link's fabric endpoint, as the primary matched it to the REPLCONF.
    let primary_log = log(PRIMARY_PORT);
    let linked = primary_log
        .lines()
        .find(|l| l.contains("replica linked"))
        .ok_or_else(|| format!("no 'replica linked' line\n{}", logs()))?;
    ensure(
        linked.contains("peer=verbs:gid="),
        format!("the link is not on verbs: {linked}"),
    )?;

    // After the link: the stream, over RDMA WRITEs into the replica's ring.
    let sent_before = rxe_sent_pkts()?;
    for i in 0..KEYS {
        let (key, value) = (format!("key:{i}"), format!("value-{i}"));
        let r = call(PRIMARY_PORT, &["SET", &key, &value])?;
        ensure(r == "OK", format!("SET {key}: {r}"))?;
    }
    let r = call(PRIMARY_PORT, &["INCRBY", "counter", "41"])?;
    ensure(r == "41", format!("INCRBY: {r}"))?;
    let acked = call(PRIMARY_PORT, &["WAIT", "1", "5000"])?;
    ensure(
        acked == "1",
        format!("WAIT 1 5000 answered {acked}\n{}", logs()),
    )?;
    let sent = rxe_sent_pkts()? - sent_before;
    ensure(sent > 0, "rxe0 sent no packets while the writes replicated")?;

    // A replica in standalone mode serves reads; it refuses clients' writes.
    for i in 0..KEYS {
        let got = call(REPLICA_PORT, &["GET", &format!("key:{i}")])?;
        ensure(
            got == format!("value-{i}"),
            format!("replica key:{i} = {got:?}\n{}", logs()),
        )?;
    }
    ensure(
        call(REPLICA_PORT, &["GET", "counter"])? == "41",
        "replica counter",
    )?;
    let refused = call(REPLICA_PORT, &["SET", "x", "1"])?;
    ensure(
        refused.starts_with("READONLY"),
        format!("a write on the replica answered {refused}"),
    )?;

    // The primary lists the replica online at its own offset (no writes are in flight now).
    let mut last = String::new();
    eventually("slave0 online at master_repl_offset", || {
        last = call(PRIMARY_PORT, &["INFO", "replication"])?;
        let slave0 = info_field(&last, "slave0").unwrap_or_default();
        let master = info_field(&last, "master_repl_offset");
        Ok(
            info_field(&last, "connected_slaves").as_deref() == Some("1")
                && sub_field(&slave0, "state").as_deref() == Some("online")
                && master.is_some()
                && sub_field(&slave0, "offset") == master,
        )
    })?;
    let slave0 = info_field(&last, "slave0").unwrap_or_default();
    let master = info_field(&last, "master_repl_offset").unwrap_or_default();
    let offset: u64 = master.parse()?;
    ensure(offset > 0, "master_repl_offset did not move")?;
    println!("{}", linked.trim());
    println!("primary slave0:{slave0} master_repl_offset:{master}");
    println!(
        "{} writes replicated over verbs RC, WAIT 1 -> {acked}, rxe0 sent {sent} packets",
        KEYS + 1
    );
    forged_acks_move_nothing(&mut nodes)
}

/// The replica killed, a rogue at the primary's replication port WRITEs a forged applied
/// offset to every guessed key and address (`fabric_rogue forge-ack`): all refused, and WAIT
/// still counts no replica.
fn forged_acks_move_nothing(nodes: &mut Nodes) -> R {
    let replica = nodes.0.get_mut(1).ok_or("no replica process")?;
    replica.kill()?;
    replica.wait()?;
    ensure(
        call(PRIMARY_PORT, &["SET", "after", "the kill"])? == "OK",
        "SET after the kill",
    )?;
    let info = call(PRIMARY_PORT, &["INFO", "replication"])?;
    let offset: u64 = info_field(&info, "master_repl_offset")
        .ok_or("no master_repl_offset")?
        .parse()?;
    let p = crate::provider()?;
    let mut opts = crate::probe::ProbeOptions::stream(Duration::from_millis(500), false, 2);
    opts.victim = crate::probe::Victim::Bare;
    opts.len = 8;
    opts.value = offset;
    let make = |own: Option<&bus::RemoteRegion>| {
        crate::probe::attempts_of(&crate::guesses::guesses(
            own,
            crate::guesses::Density::LANE,
            11,
            &[],
        ))
    };
    let to = std::net::SocketAddr::new(rxe_ip(), REPL_FABRIC_PORT);
    let report = crate::probe::probe(&p, to, make, &opts)?;
    println!("{}", report.line());
    ensure(
        report.victim_held(),
        format!("a forged ack: {}", report.line()),
    )?;
    let waited = call(PRIMARY_PORT, &["WAIT", "1", "200"])?;
    ensure(
        waited == "0",
        format!("WAIT after the forgery answered {waited}"),
    )
}
