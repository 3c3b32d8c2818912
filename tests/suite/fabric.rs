//! The ofi lane (issue "The fabric", item 7): real node processes serving clients over the
//! fabric (`--rdma-port`, `ofi:tcp` and `ofi:shm` on 127.0.0.1) next to TCP, driven by the
//! `operator` binary: `cli --fabric` prints what it prints over TCP, what one transport writes
//! the other reads, `bench --fabric` runs without error replies and leaves exactly what it
//! wrote, a client killed mid-stream leaves the node serving, and a provider
//! this host lacks (verbs) stops the node at start with a clear message.
//!
//! Needs libfabric and redis-cli (scripts/install-deps.sh). Run:
//! `cargo test -p integration --test suite fabric::`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use integration::{
    as_user, free_port, is_root, operator, operator_binary, rogue_binary, Node, STARTUP_TIMEOUT,
};

/// Longest wait for the node to notice a killed client: its keepalive (every 3 s) must fail.
/// A bound against hanging, not a timing assertion.
const CLEANUP_DEADLINE: Duration = Duration::from_secs(60);

/// A node with a fabric listener on `provider`, and its fabric port.
pub(crate) struct FabricNode {
    pub(crate) node: Node,
    pub(crate) provider: &'static str,
    pub(crate) rdma_port: u16,
    /// The user it runs as (None: the test's).
    uid: Option<&'static str>,
}

impl FabricNode {
    pub(crate) fn start(provider: &'static str) -> FabricNode {
        Self::start_with(provider, None, &[])
    }

    /// As `start`, as user `uid` (see `integration::as_user`) and with `extra` flags.
    pub(crate) fn start_with(
        provider: &'static str,
        uid: Option<&'static str>,
        extra: &[&str],
    ) -> FabricNode {
        let rdma_port = free_port();
        let port = rdma_port.to_string();
        let mut args = vec![
            "--rdma-port",
            &port,
            "--rdma-bind",
            "127.0.0.1",
            "--fabric-provider",
            provider,
        ];
        args.extend_from_slice(extra);
        let node = Node::start_as(uid, &args);
        // TCP answers first; the fabric listener comes up after the provider loads.
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while !node.log().contains("ready to accept connections (fabric)") {
            assert!(
                Instant::now() < deadline,
                "no fabric listener; log: {}",
                node.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        FabricNode {
            node,
            provider,
            rdma_port,
            uid,
        }
    }

    /// `operator cli --fabric PROVIDER -p RDMA_PORT args...` as the node's user, interactive:
    /// commands go in by line, replies come out by line.
    fn interactive_cli(&self, args: &[&str]) -> Interactive {
        let port = self.rdma_port.to_string();
        let mut child = as_user(self.uid, &operator_binary())
            .args(["cli", "--fabric", self.provider, "-p", &port])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Interactive {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    /// An `INFO` field read over TCP (with the password when given).
    pub(crate) fn info_field(&self, password: Option<&str>, field: &str) -> u64 {
        let mut args = Vec::new();
        if let Some(p) = password {
            args.extend(["--no-auth-warning", "-a", p]);
        }
        args.extend(["INFO", "fabric"]);
        let info = self.node.cli(&args);
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in INFO: {info}"))
    }

    /// `operator cli --fabric PROVIDER -p RDMA_PORT args...`.
    fn cli(&self, args: &[&str]) -> Output {
        let port = self.rdma_port.to_string();
        let mut all = vec!["cli", "--fabric", self.provider, "-p", &port];
        all.extend_from_slice(args);
        operator(&all).output().expect("running operator cli")
    }

    /// The node's `connected_clients` as INFO over TCP reports it (redis-cli's own included).
    pub(crate) fn connected_clients(&self) -> u64 {
        let info = self.node.cli(&["INFO", "clients"]);
        info.lines()
            .find_map(|l| l.strip_prefix("connected_clients:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no connected_clients in INFO: {info}"))
    }
}

/// A running interactive `operator cli`.
struct Interactive {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Interactive {
    /// Sends one command line and returns the first line of its reply.
    fn call(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").unwrap();
        let mut reply = String::new();
        self.stdout.read_line(&mut reply).unwrap();
        reply.trim_end().to_string()
    }

    /// As `call`, for a command answered by an error: raw output ends an error with a
    /// blank line of its own, read here.
    fn call_error(&mut self, line: &str) -> String {
        let reply = self.call(line);
        let mut blank = String::new();
        self.stdout.read_line(&mut blank).unwrap();
        reply
    }
}

impl Drop for Interactive {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub(crate) fn cli_prints(node: &FabricNode, args: &[&str], expected: &str) {
    let out = node.cli(args);
    assert!(
        out.status.success(),
        "cli {args:?} over {}: {}\nlog: {}",
        node.provider,
        stderr(&out),
        node.node.log()
    );
    assert_eq!(
        stdout(&out),
        expected,
        "cli {args:?} over {}",
        node.provider
    );
}

/// `operator cli` over the fabric prints what redis-cli prints over TCP, and both transports
/// see the same keyspace.
fn cli_and_tcp_share_the_keyspace(provider: &'static str) {
    let node = FabricNode::start(provider);
    cli_prints(&node, &["PING"], "PONG\n");
    cli_prints(&node, &["SET", "written:fabric", "over the fabric"], "OK\n");
    cli_prints(&node, &["GET", "written:fabric"], "over the fabric\n");
    cli_prints(&node, &["--no-raw", "GET", "missing"], "(nil)\n");
    cli_prints(&node, &["--no-raw", "INCR", "n"], "(integer) 1\n");
    assert_eq!(node.node.cli(&["GET", "written:fabric"]), "over the fabric");
    assert_eq!(node.node.cli(&["SET", "written:tcp", "over tcp"]), "OK");
    cli_prints(&node, &["GET", "written:tcp"], "over tcp\n");
    // Interactive: several commands on one fabric connection.
    let port = node.rdma_port.to_string();
    let mut child = operator(&["cli", "--fabric", provider, "-p", &port])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"INCR n\nGET written:tcp\nDBSIZE\n")
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "2\nover tcp\n3\n");
}

#[test]
fn cli_over_ofi_tcp_and_tcp_share_the_keyspace() {
    cli_and_tcp_share_the_keyspace("ofi:tcp");
}

#[test]
fn cli_over_ofi_shm_and_tcp_share_the_keyspace() {
    cli_and_tcp_share_the_keyspace("ofi:shm");
}

/// `operator bench --fabric ofi:shm`, pipelined over 4 connections (each its own stream):
/// no error replies, one CSV row per test, the node's CPU per request (`--server-cpu`, read by
/// INFO over the fabric) in the last column, and the node holds exactly what was written.
#[test]
fn bench_over_ofi_shm_runs_without_errors_and_its_writes_land() {
    let node = FabricNode::start("ofi:shm");
    let port = node.rdma_port.to_string();
    let args = [
        "bench",
        "--fabric",
        "ofi:shm",
        "-p",
        &port,
        "-t",
        "set,get,incr,lpush",
        "-n",
        "2000",
        "-P",
        "16",
        "-c",
        "4",
        "--csv",
        "--server-cpu",
    ];
    let out = operator(&args).output().unwrap();
    assert!(
        out.status.success(),
        "bench failed ({}): {}\n{}\nlog: {}",
        out.status,
        stderr(&out),
        stdout(&out),
        node.node.log()
    );
    let csv = stdout(&out);
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    let titles: Vec<&str> = rows
        .iter()
        .map(|r| r.split(',').next().unwrap().trim_matches('"'))
        .collect();
    assert_eq!(titles, ["SET", "GET", "INCR", "LPUSH"], "{csv}");
    for row in &rows {
        let fields: Vec<&str> = row.split(',').map(|f| f.trim_matches('"')).collect();
        assert_eq!(fields.len(), 11, "{row}");
        assert_eq!(fields[9], "0", "errors in {row}");
        let cpu_us: f64 = fields[10].parse().unwrap();
        // Serving 2000 requests takes some CPU, and no real server spends a second per request.
        assert!(
            cpu_us > 0.0 && cpu_us < 1e6,
            "server CPU per request: {row}"
        );
    }
    // Without -r every SET writes one key and INCR one counter: exact counts are checkable.
    assert_eq!(node.node.cli(&["STRLEN", "key:__rand_int__"]), "3");
    assert_eq!(node.node.cli(&["GET", "counter:__rand_int__"]), "2000");
    assert_eq!(node.node.cli(&["LLEN", "mylist"]), "2000");
}

/// Goal: clients that close say goodbye, so the node drops their ends at once (not after its
/// silence limit, sending keepalives into the void meanwhile) and counts them; two
/// `operator bench` runs of 32 `ofi:tcp` clients in a row all connect (before, a new client
/// whose endpoint got the port of a client the node still held was refused: "already
/// connected to this endpoint").
#[test]
fn clients_that_leave_over_ofi_tcp_say_goodbye_and_are_dropped() {
    const CLIENTS: u64 = 32;
    let node = FabricNode::start("ofi:tcp");
    let port = node.rdma_port.to_string();
    let before = node.connected_clients();
    for run in 1..=2u64 {
        let args = [
            "bench", "--fabric", "ofi:tcp", "-p", &port, "-t", "get", "-n", "640", "-c", "32",
            "--csv",
        ];
        let out = operator(&args).output().unwrap();
        assert!(
            out.status.success(),
            "run {run} failed ({}): {}\nlog: {}",
            out.status,
            stderr(&out),
            node.node.log()
        );
        // The goodbyes were delivered before the process exited: counted as soon as the
        // poller has looked (well before the 10 s silence limit could close anything).
        wait_until(
            "the clients' goodbyes were not counted",
            CLEANUP_DEADLINE,
            || {
                node.info_field(None, "fabric_clients_said_goodbye") == run * CLIENTS
                    && node.connected_clients() == before
            },
        );
    }
}

/// Starts an `operator bench` over the fabric, waits until its 2 connections are counted, and
/// kills the process (SIGKILL: no close of any kind). Returns the client count before it.
fn kill_a_busy_client(node: &FabricNode) -> u64 {
    let before = node.connected_clients();
    let mut bench = busy_bench(node, &[]);
    wait_for_bench(node, before);
    bench.kill().unwrap();
    bench.wait().unwrap();
    before
}

/// `operator bench` over the node's fabric: 2 connections of SETs, with `extra` flags, until
/// killed.
pub(crate) fn busy_bench(node: &FabricNode, extra: &[&str]) -> Child {
    let port = node.rdma_port.to_string();
    let mut args = vec![
        "bench",
        "--fabric",
        node.provider,
        "-p",
        &port,
        "-t",
        "set",
        "-n",
        "1000000000",
        "-c",
        "2",
        "-q",
    ];
    args.extend_from_slice(extra);
    operator(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until a `busy_bench`'s 2 connections are counted above `before`.
pub(crate) fn wait_for_bench(node: &FabricNode, before: u64) {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    while node.connected_clients() < before + 2 {
        assert!(
            Instant::now() < deadline,
            "bench never connected; log: {}",
            node.node.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A client killed mid-stream leaves the node serving over both transports, new fabric
/// clients included.
fn a_killed_client_does_not_disturb_the_node(provider: &'static str) {
    let node = FabricNode::start(provider);
    kill_a_busy_client(&node);
    assert_eq!(node.node.cli(&["PING"]), "PONG");
    cli_prints(&node, &["SET", "after", "kill"], "OK\n");
    cli_prints(&node, &["GET", "after"], "kill\n");
}

#[test]
fn a_client_killed_mid_stream_over_ofi_tcp_does_not_disturb_the_node() {
    a_killed_client_does_not_disturb_the_node("ofi:tcp");
}

#[test]
fn a_client_killed_mid_stream_over_ofi_shm_does_not_disturb_the_node() {
    a_killed_client_does_not_disturb_the_node("ofi:shm");
}

/// The killed client's connections leave INFO's count. On RDM (ofi tcp, shm) there is no
/// connection state to break and keepalive SENDs to a dead peer do not reliably fail
/// (observed: shm never within 60 s), so the node drops a fabric client silent for 10 s
/// (`bus::stream::PEER_SILENCE_MAX`; live operator clients send keepalives every 3 s). A shm client
/// killed while it held the provider's lock leaves the poller serving it spinning inside
/// libfabric for good (seen once in CI): its clients then count as stranded, not connected.
#[test]
#[ignore = "slow (a 10 s silence per provider) and timing-sensitive under the full parallel suite \
            on 2 loaded cores; scripts/test.sh runs it on its own in the 'fabric liveness' step"]
fn a_killed_clients_connections_leave_the_count() {
    for provider in ["ofi:tcp", "ofi:shm"] {
        let node = FabricNode::start(provider);
        let before = kill_a_busy_client(&node);
        let deadline = Instant::now() + CLEANUP_DEADLINE;
        while node.connected_clients() > before {
            assert!(
                Instant::now() < deadline,
                "{provider}: the killed client's connections are still counted; log: {}",
                node.node.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // Left the count by being stranded (its poller stuck in libfabric, the shm case
        // above): then what matters is that new fabric clients are still served.
        if node.info_field(None, "fabric_stranded_clients") > 0 {
            assert!(
                node.node
                    .log()
                    .contains("fabric poller stuck inside one call"),
                "{provider}: stranded clients without a stuck poller; log: {}",
                node.node.log()
            );
            cli_prints(&node, &["PING"], "PONG\n");
        }
    }
}

/// verbs needs an RDMA device; on a host without one (every CI machine) the node refuses to
/// start and says why.
#[test]
fn a_node_asked_for_verbs_without_a_device_exits_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let (status, log) = Node::start_expecting_exit(
        dir.path(),
        &["--fabric-provider", "verbs", "--rdma-port", &port],
    );
    assert!(!status.success(), "{log}");
    assert!(log.contains("verbs is unavailable"), "{log}");
}

const PASSWORD: &str = "fabric-password-7f3a";
const SECRET_VALUE: &str = "secret-value-91c2";

/// Waits until `what` holds, polling every 100 ms (a bound against hanging, not a timing
/// assertion).
fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// With a password set, a fabric client that does not authenticate within 10 s is closed
/// (INFO fabric_unauthenticated_closed), while an authenticated one stays served.
#[test]
fn a_fabric_client_that_does_not_authenticate_is_closed() {
    let node = FabricNode::start_with("ofi:shm", None, &["--requirepass", PASSWORD]);
    let mut authed = node.interactive_cli(&["-a", PASSWORD]);
    assert_eq!(authed.call("PING"), "PONG");
    let _idle = node.interactive_cli(&[]);
    wait_until("the idle client never connected", STARTUP_TIMEOUT, || {
        node.info_field(Some(PASSWORD), "fabric_connected_clients") == 2
    });
    wait_until(
        "the idle unauthenticated client stayed",
        Duration::from_secs(30),
        || node.info_field(Some(PASSWORD), "fabric_unauthenticated_closed") == 1,
    );
    assert_eq!(
        node.info_field(Some(PASSWORD), "fabric_connected_clients"),
        1
    );
    assert_eq!(authed.call("PING"), "PONG");
}

/// `rdma-unauthenticated-max` bounds the clients waiting for AUTH: one more closes the
/// oldest.
#[test]
fn past_rdma_unauthenticated_max_the_oldest_waiting_client_is_closed() {
    let node = FabricNode::start_with(
        "ofi:shm",
        None,
        &["--requirepass", PASSWORD, "--rdma-unauthenticated-max", "2"],
    );
    let mut idle = Vec::new();
    for n in 1..=2 {
        idle.push(node.interactive_cli(&[]));
        wait_until("a client never connected", STARTUP_TIMEOUT, || {
            node.info_field(Some(PASSWORD), "fabric_connected_clients") == n
        });
    }
    assert_eq!(
        node.info_field(Some(PASSWORD), "fabric_unauthenticated_closed"),
        0
    );
    idle.push(node.interactive_cli(&[]));
    wait_until("the oldest was not closed", STARTUP_TIMEOUT, || {
        node.info_field(Some(PASSWORD), "fabric_unauthenticated_closed") == 1
    });
    assert_eq!(
        node.info_field(Some(PASSWORD), "fabric_connected_clients"),
        2
    );
}

/// The rogue (`bus/examples/fabric_rogue`) against a node with a password whose other
/// client is authenticated and has written a secret: every guessed key and address fails as
/// READ and WRITE, its own window is write-only, it never reads the password or the secret,
/// and (on shm) cross-memory attach into the node is refused. On shm, when the test runs as
/// root, node, clients and rogue run as uid 65534 (root may ptrace anyone), and a rogue of
/// another user cannot connect at all.
fn a_rogue_gets_nothing_from_a_node(provider: &'static str) {
    let uid = (provider == "ofi:shm" && is_root()).then_some("65534");
    let node = FabricNode::start_with(
        provider,
        uid,
        &[
            "--requirepass",
            PASSWORD,
            "--rdma-unauthenticated-max",
            "16",
        ],
    );
    let mut victim = node.interactive_cli(&["-a", PASSWORD]);
    assert_eq!(victim.call(&format!("SET secret {SECRET_VALUE}")), "OK");
    let addr = format!("127.0.0.1:{}", node.rdma_port);
    let pid = node.node.pid().to_string();
    let rogue = |as_uid: Option<&str>| {
        let mut c: Command = as_user(as_uid, &rogue_binary());
        c.args(["probe-stream", "--fabric", provider, "--addr", &addr]);
        c.args(["--secret", PASSWORD, "--secret", SECRET_VALUE]);
        c.args(["--parallel", "4"]);
        if provider == "ofi:shm" {
            c.args(["--pid", &pid]);
        }
        // Each refused attempt costs a new connection; rxm's set-up tick is 10 ms.
        c.env("FI_OFI_RXM_CM_PROGRESS_INTERVAL", "500");
        let out = c.output().unwrap();
        eprintln!("{}{}", stdout(&out), stderr(&out));
        out
    };
    let out = rogue(uid);
    let text = stdout(&out);
    assert!(out.status.success(), "the rogue got something: {text}");
    assert!(text.contains(" 0 succeeded,"), "{text}");
    assert!(text.contains("secret unseen"), "{text}");
    if provider == "ofi:shm" {
        assert!(
            text.contains("rogue-cma: 2 attempts, 0 succeeded"),
            "{text}"
        );
    }
    // The victim's session was not disturbed.
    assert_eq!(victim.call("GET secret"), SECRET_VALUE);
    if uid.is_some() {
        let other = rogue(Some("65533"));
        assert_eq!(other.status.code(), Some(2), "{}", stdout(&other));
        assert!(!stdout(&other).contains("rogue: "), "{}", stdout(&other));
    }
}

#[test]
fn a_rogue_gets_nothing_from_a_node_over_ofi_tcp() {
    a_rogue_gets_nothing_from_a_node("ofi:tcp");
}

#[test]
fn a_rogue_gets_nothing_from_a_node_over_ofi_shm() {
    a_rogue_gets_nothing_from_a_node("ofi:shm");
}

/// Idle or slow TCP connections to the fabric port never starve a real client: with 2,500
/// idle connections and 50 that sent half a HELLO, `operator cli --fabric ofi:tcp PING`
/// still answers at once, and INFO counts the handshakes the node dropped (evicted from its
/// table of 256, or silent past 2 s).
#[test]
fn idle_connections_to_the_fabric_port_do_not_starve_clients() {
    let node = FabricNode::start("ofi:tcp");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], node.rdma_port));
    let mut idle = Vec::new();
    for i in 0..2550 {
        let mut s = std::net::TcpStream::connect_timeout(&addr, STARTUP_TIMEOUT)
            .unwrap_or_else(|e| panic!("connection {i}: {e}"));
        if i >= 2500 {
            // Half a HELLO: magic, version, kind, then nothing.
            s.write_all(b"OFIB\x01\x01").unwrap();
        }
        idle.push(s);
    }
    let started = Instant::now();
    cli_prints(&node, &["PING"], "PONG\n");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "PING took {took:?} behind idle connections"
    );
    wait_until(
        "the dropped handshakes were not counted",
        STARTUP_TIMEOUT,
        || node.info_field(None, "fabric_handshakes_dropped") >= 2550 - 256,
    );
    drop(idle);
}

/// The node's resident memory (`VmRSS` of /proc/PID/status), in KiB.
fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {status}"))
}

/// Memory one unauthenticated fabric peer may cost the node (issue 15): its pre-auth
/// stream (8 KiB window, 4 KiB staging, 32 command receives), its session's small buffers,
/// and what libfabric keeps per peer of the hub (rxm connection, tcp endpoint). Measured
/// ~50 KiB.
const UNAUTHENTICATED_CLIENT_KIB: u64 = 64;
/// Idle clients measured at once: enough that allocator and page-table noise (a few hundred
/// KiB, no slack is given for it) is a small share of their total.
const IDLE_CLIENTS: u64 = 32;

/// Idle unauthenticated ofi:tcp clients share the fabric listener's endpoint (its hub), so
/// each costs the node its small pre-auth buffers and libfabric's per-peer state, not an
/// endpoint's buffer pools (~86 MiB each before the hub): at most 64 KiB each.
#[test]
fn idle_unauthenticated_ofi_tcp_clients_cost_the_node_little_memory() {
    idle_unauthenticated_clients_cost_the_node_little_memory("ofi:tcp");
}

/// Idle unauthenticated ofi:shm clients share a hub too (`SHM_HUB_PEERS` connections per
/// hub, whose 16 MiB shm region, ~8 MiB touched, the first client paid for here), so each
/// costs the node its small pre-auth buffers and shm's per-peer state (the pages of the
/// client's region the node writes to), not a region of its own: at most 64 KiB each.
#[test]
fn idle_unauthenticated_ofi_shm_clients_cost_the_node_little_memory() {
    idle_unauthenticated_clients_cost_the_node_little_memory("ofi:shm");
}

fn idle_unauthenticated_clients_cost_the_node_little_memory(provider: &'static str) {
    let node = FabricNode::start_with(
        provider,
        None,
        &[
            "--requirepass",
            PASSWORD,
            "--rdma-unauthenticated-max",
            "64",
        ],
    );
    // The hub's pools are paid once per listener: make them resident before measuring,
    // with an authenticated client that has used its full window.
    let mut first = node.interactive_cli(&["-a", PASSWORD]);
    assert_eq!(first.call("PING"), "PONG");
    assert_eq!(
        first.call(&format!("SET big {}", "x".repeat(100_000))),
        "OK"
    );
    let pid = node.node.pid();
    std::thread::sleep(Duration::from_millis(500));
    let before = vm_rss_kib(pid);
    let idle: Vec<Interactive> = (0..IDLE_CLIENTS)
        .map(|_| node.interactive_cli(&[]))
        .collect();
    wait_until("the idle clients never connected", STARTUP_TIMEOUT, || {
        node.info_field(Some(PASSWORD), "fabric_connected_clients") == IDLE_CLIENTS + 1
    });
    // Their adverts and the server's first keepalives have been exchanged.
    std::thread::sleep(Duration::from_millis(500));
    let after = vm_rss_kib(pid);
    let grown = after.saturating_sub(before);
    eprintln!(
        "{provider}: {IDLE_CLIENTS} idle unauthenticated clients: node VmRSS {before} -> {after} KiB, {} KiB per client",
        grown / IDLE_CLIENTS
    );
    assert!(
        grown <= IDLE_CLIENTS * UNAUTHENTICATED_CLIENT_KIB,
        "{provider}: {IDLE_CLIENTS} idle clients grew the node by {grown} KiB (> {UNAUTHENTICATED_CLIENT_KIB} KiB each)"
    );
    // Still served: the authenticated client, and a new one.
    assert_eq!(first.call("PING"), "PONG");
    let mut late = node.interactive_cli(&["-a", PASSWORD]);
    assert_eq!(late.call("PING"), "PONG");
    drop(idle);
}

/// Large values over ofi:shm arrive whole: shm moves a WRITE larger than the peer's share of
/// the SAR buffers in parts (with hubs of 32 peers that share is 256 KiB) and would handle
/// the IMM note behind it first, so the note waits for the WRITE's delivery
/// (`bus/src/ofi/note_gate.rs`). shm uses its SAR buffers (not a direct copy, CMA) only when
/// the sender may not ptrace the receiver: as root, node and clients run as uid 65534 (the
/// node is not dumpable, so CMA into it fails as it would for another user's job).
#[test]
fn ofi_shm_values_larger_than_a_clients_sar_share_arrive_whole() {
    let uid = is_root().then_some("65534");
    let node = FabricNode::start_with("ofi:shm", uid, &["--requirepass", PASSWORD]);
    let value_of = |i: usize| -> String {
        (0..600 * 1024)
            .map(|k: usize| {
                (b'a' + ((k.wrapping_mul(7) ^ (k >> 10) ^ (i * 13)) % 26) as u8) as char
            })
            .collect()
    };
    let mut clients: Vec<Interactive> = (0..32)
        .map(|_| node.interactive_cli(&["-a", PASSWORD]))
        .collect();
    for round in 0..2 {
        for (i, c) in clients.iter_mut().enumerate() {
            let value = value_of(i + round);
            assert_eq!(c.call(&format!("SET big:{i} {value}")), "OK", "client {i}");
        }
        for (i, c) in clients.iter_mut().enumerate() {
            let got = c.call(&format!("GET big:{i}"));
            assert!(
                got == value_of(i + round),
                "client {i} round {round}: value damaged"
            );
        }
    }
}

/// 32 authenticated ofi:tcp clients on the one hub, each writing and reading its own keys
/// while the others do the same.
#[test]
fn thirty_two_authenticated_ofi_tcp_clients_set_and_get() {
    let node = FabricNode::start_with("ofi:tcp", None, &["--requirepass", PASSWORD]);
    let pid = node.node.pid();
    let mut first = node.interactive_cli(&["-a", PASSWORD]);
    assert_eq!(first.call("PING"), "PONG");
    let before = vm_rss_kib(pid);
    let mut clients: Vec<Interactive> = (0..32)
        .map(|_| node.interactive_cli(&["-a", PASSWORD]))
        .collect();
    for round in 0..3 {
        for (i, c) in clients.iter_mut().enumerate() {
            assert_eq!(c.call(&format!("SET hub:{i} v{i}.{round}")), "OK");
        }
        for (i, c) in clients.iter_mut().enumerate() {
            assert_eq!(c.call(&format!("GET hub:{i}")), format!("v{i}.{round}"));
        }
    }
    let after = vm_rss_kib(pid);
    eprintln!(
        "32 authenticated clients: node VmRSS {before} -> {after} KiB, {} KiB per client",
        after.saturating_sub(before) / 32
    );
    assert_eq!(
        node.node
            .cli(&["-a", PASSWORD, "--no-auth-warning", "GET", "hub:31"]),
        "v31.2"
    );
}

/// Idle ofi:tcp clients let their pollers block on the listener endpoint's CQ descriptor
/// (`bus/src/ofi/hub.rs`) instead of sleeping in steps (~1,000 sleeps a second per poller
/// before): two pollers share the one hub, so a read by one may route the other's
/// arrivals, which rings the other's doorbell. After an idle second every client is still
/// answered, in turn and all at once.
#[test]
fn idle_ofi_tcp_clients_let_their_pollers_block() {
    let node = FabricNode::start_with(
        "ofi:tcp",
        None,
        &["--requirepass", PASSWORD, "--rdma-poll-threads", "2"],
    );
    let mut clients: Vec<Interactive> = (0..8)
        .map(|_| node.interactive_cli(&["-a", PASSWORD]))
        .collect();
    for c in clients.iter_mut() {
        assert_eq!(c.call("PING"), "PONG");
    }
    let counts = || {
        (
            node.info_field(Some(PASSWORD), "fabric_poller_blocks"),
            node.info_field(Some(PASSWORD), "fabric_poller_sleeps"),
            node.info_field(Some(PASSWORD), "fabric_poller_idle_retries"),
        )
    };
    for round in 0..3 {
        let (blocks, sleeps, retries) = counts();
        std::thread::sleep(Duration::from_secs(1));
        let (blocks_after, sleeps_after, retries_after) = counts();
        let (blocked, slept, retried) = (
            blocks_after - blocks,
            sleeps_after - sleeps,
            retries_after - retries,
        );
        eprintln!(
            "round {round}: an idle second with 8 ofi:tcp clients on 2 pollers: {blocked} \
             blocks, {slept} sleeps, {retried} looks that found work"
        );
        // Blocked pollers wake at most every 100 ms (and for keepalives and our INFO
        // reads); sleeping ones ~1,000 times a second each, and a poller whose descriptor
        // stays readable, or whose arming keeps saying "ready", thousands of times.
        assert!(blocked > 0, "no poller blocked");
        assert!(slept < 200, "pollers slept {slept} times in an idle second");
        assert!(
            blocked < 500,
            "pollers blocked {blocked} times in an idle second: a descriptor that stays readable"
        );
        assert!(
            retried < 500,
            "pollers found work {retried} times in an idle second: a spin"
        );
        for (i, c) in clients.iter_mut().enumerate() {
            assert_eq!(c.call(&format!("SET idle:{i} {round}")), "OK");
        }
    }
    // All at once: each client's request may be read by either poller.
    for (i, c) in clients.iter_mut().enumerate() {
        writeln!(c.stdin, "GET idle:{i}").unwrap();
    }
    for c in clients.iter_mut() {
        let mut reply = String::new();
        c.stdout.read_line(&mut reply).unwrap();
        assert_eq!(reply.trim_end(), "2");
    }
}

/// A RESP3 tracking client over the fabric gets its invalidation push through the fabric
/// writer (pushes are queued on the client and drained by whichever transport serves it),
/// ahead of the reply to its next command.
#[test]
fn a_tracking_client_over_ofi_tcp_gets_invalidations_written_by_tcp_clients() {
    let node = FabricNode::start("ofi:tcp");
    let mut cli = node.interactive_cli(&["-3"]);
    assert_eq!(cli.call("CLIENT TRACKING on"), "OK");
    assert_eq!(cli.call("GET tracked"), "");
    assert_eq!(node.node.cli(&["SET", "tracked", "1"]), "OK");
    assert_eq!(cli.call("PING"), "invalidate");
    let mut rest = String::new();
    for _ in 0..2 {
        cli.stdout.read_line(&mut rest).unwrap();
    }
    assert_eq!(rest, "tracked\nPONG\n");
}

/// Goal: ACL rules hold over the fabric as over TCP (one dispatch point): a restricted user
/// authenticated over `ofi:tcp` gets Redis's NOPERM for a forbidden command and key, and
/// its refusals land in the ACL LOG. Method: a user made over TCP, then `operator cli
/// --fabric` as that user.
#[test]
fn acl_rules_hold_over_the_fabric() {
    let node = FabricNode::start("ofi:tcp");
    assert_eq!(
        node.node
            .cli(&["ACL", "SETUSER", "mallory", "on", ">pw", "~app:*", "+get"]),
        "OK"
    );
    assert_eq!(node.node.cli(&["SET", "secret", "s"]), "OK");
    let mut c = node.interactive_cli(&[]);
    assert_eq!(c.call("AUTH mallory pw"), "OK");
    assert_eq!(c.call("GET app:1"), "");
    assert_eq!(
        c.call_error("GET secret"),
        "NOPERM this user has no permissions to access one of the keys used as arguments"
    );
    assert_eq!(
        c.call_error("FLUSHALL"),
        "NOPERM this user has no permissions to run the 'flushall' command"
    );
    let log = node.node.cli(&["ACL", "LOG"]);
    assert!(log.contains("flushall") && log.contains("secret"), "{log}");
    assert_eq!(node.node.cli(&["GET", "secret"]), "s");
}
