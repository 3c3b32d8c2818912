//! Goal: a rogue local process gets nothing out of a victim's fabric memory over `ofi:tcp`
//! and `ofi:shm` (issue 15): every guessed key and address fails as READ and as WRITE, its
//! own stream window is write-only, no other client's password or data is read, the victim's
//! memory is unchanged; on shm, cross-memory attach into the victim is refused, and a rogue of
//! another Unix user cannot even connect. Also: an environment that would make ofi_rxm
//! expose memory stops `ofi:tcp` from opening.
//!
//! Method: this binary (harness = false) plays three processes. The victim serves Streams
//! (one per connection, like a node's fabric listener), holds a legitimate client's Stream
//! whose unread RX holds "AUTH <password>" and a secret value, a ring and an ack word
//! registered as replication registers them, and a staging buffer of secrets; it keeps
//! polling every connection so the rogue's operations are really processed. The rogue is
//! `bus/examples/fabric_rogue` (its modules, through `#[path]`): guesses from its own advert
//! and from nothing, a canary write into its own window to prove the victim worked its
//! queue. When the test runs as root (root may ptrace anyone, which would make CMA succeed),
//! victim and rogue run as uid 65534 through `setpriv`.
//!
//! Run: `cargo test -p bus --test ofi_rogue`. Needs libfabric.

// Shared with the example binary, which uses parts this test does not.
#[allow(dead_code)]
#[path = "../examples/fabric_rogue/cma.rs"]
mod cma;
#[allow(dead_code)]
#[path = "../examples/fabric_rogue/guesses.rs"]
mod guesses;
#[allow(dead_code)]
#[path = "../examples/fabric_rogue/probe.rs"]
mod probe;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bus::ofi::{OfiKind, OfiProvider};
use bus::ring::layout::RING_HEADER_LEN;
use bus::stream::{Stream, RX_SIZE_MIN};
use bus::{Access, BusError, EndpointConfig, Listener, Provider, Region, RemoteRegion};

const PASSWORD: &str = "victim-password-0x5ec12e7";
const SECRET_VALUE: &str = "top-secret-value-d47a";
/// The legitimate client's request, left unread in the victim's RX for it.
fn legit_request() -> String {
    format!("AUTH {PASSWORD}\r\nSET k {SECRET_VALUE}\r\n")
}
const ACK_VALUE: u64 = 0x1234_5678;
const RING_DATA: usize = 64 * 1024;
const STEP: Duration = Duration::from_secs(30);
/// Streams the victim keeps for rogue connections; older ones are dropped.
const ROGUE_STREAMS_MAX: usize = 16;
const NOBODY: &str = "65534";
const OTHER_UID: &str = "65533";

/// A sample of each kind of guess: every refused attempt costs the rogue a new connection
/// (see `probe.rs`), tens of milliseconds each.
fn density_for(_kind: OfiKind) -> guesses::Density {
    guesses::Density::SAMPLED
}

fn kind_from_env() -> OfiKind {
    OfiKind::from_name(&std::env::var("OFI_ROGUE_PROVIDER").unwrap()).unwrap()
}

fn hex(r: &RemoteRegion) -> String {
    format!("{:x}:{:x}:{:x}", r.addr, r.len, r.rkey)
}

// ------------------------------------------------------------------- victim (child process)

fn run_victim() {
    let kind = kind_from_env();
    let provider = OfiProvider::open(kind).unwrap();
    // Send queues of 64 (a Stream needs its 224 receives): ofi_rxm sizes its per-endpoint
    // buffer pools by the queue depths, and each rogue attempt costs a connection here.
    let config = EndpointConfig {
        send_wr: 64,
        cq_size: 64 + 1024,
        ..EndpointConfig::default()
    };
    let mut listener = provider
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)), &config)
        .unwrap();
    let addr = listener.local_addr();

    // A legitimate client, in a thread: its request lands in the RX of its server stream.
    let stop = Arc::new(AtomicBool::new(false));
    let client = {
        let provider = provider.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let conn = provider
                .connect(addr, &EndpointConfig::default(), STEP)
                .unwrap();
            let mut s = Stream::client(conn, RX_SIZE_MIN).unwrap();
            let start = Instant::now();
            let mut sent = 0;
            let req = legit_request();
            while !stop.load(Ordering::Relaxed) {
                let _ = s.progress(start.elapsed());
                if sent < req.len() {
                    sent += s.write(&req.as_bytes()[sent..]).unwrap_or(0);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let conn = listener.accept(STEP).unwrap().expect("legit client");
    let mut legit = Stream::server(conn, RX_SIZE_MIN).unwrap();
    let start = Instant::now();
    while legit.readable() < legit_request().len() {
        assert!(start.elapsed() < STEP, "the legit request never landed");
        legit.progress(start.elapsed()).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    // Replication's regions, registered as RingReader and RingWriter/Shipper do.
    let ring = provider
        .register(
            RING_HEADER_LEN + RING_DATA,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap();
    let ack = provider
        .register(8, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    ack.store_u64(0, ACK_VALUE).unwrap();
    let staging = provider.register(4096, Access::NONE).unwrap();
    staging.write(0, PASSWORD.as_bytes()).unwrap();
    println!(
        "ready {addr} {} {} {}",
        std::process::id(),
        hex(&ring.remote().unwrap()),
        hex(&ack.remote().unwrap())
    );
    std::io::stdout().flush().unwrap();

    let done = Arc::new(AtomicBool::new(false));
    {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
            done.store(true, Ordering::Relaxed);
        });
    }
    let mut rogues: Vec<Stream<_>> = Vec::new();
    while !done.load(Ordering::Relaxed) {
        let now = start.elapsed();
        if let Ok(Some(conn)) = listener.accept(Duration::from_micros(100)) {
            if let Ok(s) = Stream::server(conn, RX_SIZE_MIN) {
                if rogues.len() == ROGUE_STREAMS_MAX {
                    rogues.remove(0);
                }
                rogues.push(s);
            }
        }
        rogues.retain_mut(|s| s.progress(now).is_ok());
        let _ = legit.progress(now);
    }
    stop.store(true, Ordering::Relaxed);
    client.join().unwrap();

    let mut changes = Vec::new();
    let mut got = vec![0u8; legit_request().len()];
    let n = legit.read(&mut got).unwrap_or(0);
    if n != got.len() || got != legit_request().as_bytes() {
        changes.push("the legit client's stream");
    }
    let mut bytes = vec![0u8; ring.len()];
    ring.read(0, &mut bytes).unwrap();
    if bytes.iter().any(|b| *b != 0) {
        changes.push("the ring");
    }
    if ack.load_u64(0).unwrap() != ACK_VALUE {
        changes.push("the ack word");
    }
    let mut pw = vec![0u8; PASSWORD.len()];
    staging.read(0, &mut pw).unwrap();
    if pw != PASSWORD.as_bytes() {
        changes.push("the staging buffer");
    }
    if changes.is_empty() {
        println!("intact");
    } else {
        println!("CHANGED {changes:?}");
        std::process::exit(1);
    }
}

// -------------------------------------------------------------------- rogue (child process)

fn run_rogue() {
    let kind = kind_from_env();
    let addr: SocketAddr = std::env::var("OFI_ROGUE_ADDR").unwrap().parse().unwrap();
    if kind == OfiKind::Shm {
        // As the example does: injected WRITEs would "complete" whether or not they landed.
        bus::ofi::answer_writes();
    }
    let provider = match OfiProvider::open(kind) {
        Ok(p) => p,
        Err(e) => {
            println!("rogue-open-failed {e}");
            std::process::exit(3);
        }
    };
    let mut opts = probe::ProbeOptions::stream(Duration::from_millis(200), kind == OfiKind::Shm, 8);
    opts.secrets = vec![PASSWORD.into(), SECRET_VALUE.into()];
    let density = density_for(kind);
    let make = |own: Option<&RemoteRegion>| {
        probe::attempts_of(&guesses::guesses(own, density, 0x5eed, &[]))
    };
    let report = match probe::probe(&provider, addr, make, &opts) {
        Ok(r) => r,
        Err(e) => {
            println!("rogue-connect-failed {e}");
            std::process::exit(3);
        }
    };
    println!("{}", report.line());
    for b in &report.breaches {
        println!("rogue-breach: {b}");
    }
    let mut held = report.victim_held();
    if kind == OfiKind::Shm {
        // Real virtual addresses inside the victim: its ring and ack word (told by the test)
        // and the rogue's own window.
        let pid: i32 = std::env::var("OFI_ROGUE_PID").unwrap().parse().unwrap();
        let mut addrs: Vec<u64> = std::env::var("OFI_ROGUE_VAS")
            .unwrap()
            .split(',')
            .map(|a| u64::from_str_radix(a, 16).unwrap())
            .collect();
        addrs.extend(report.own.map(|o| o.addr));
        let cma = cma::try_cma(pid, &addrs, 64);
        println!("{}", cma.line());
        held &= cma.succeeded == 0;
    }
    std::process::exit(if held { 0 } else { 1 });
}

// ------------------------------------------------------------------------------ the driver

struct ChildGuard(Child);

impl Drop for ChildGuard {
    /// SIGTERM first: libfabric's shm removes its /dev/shm files on SIGTERM, not SIGKILL.
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_some() {
            return;
        }
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if self.0.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// This binary as `role`, as user `uid` when the test runs as root.
fn this_binary_as(role: &str, uid: Option<&str>) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut c = match uid {
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
            ]);
            c.arg(exe);
            c
        }
        None => Command::new(exe),
    };
    c.env("OFI_ROGUE_ROLE", role);
    // Each rogue attempt costs a new connection, whose set-up ofi_rxm advances only on its
    // connection-management tick (10 ms by default): a shorter tick for both processes
    // makes the run faster and changes nothing about memory access.
    c.env("FI_OFI_RXM_CM_PROGRESS_INTERVAL", "500");
    c
}

fn run_against(kind: OfiKind, root: bool) {
    let victim_uid = root.then_some(NOBODY);
    let mut victim = this_binary_as("victim", victim_uid)
        .env("OFI_ROGUE_PROVIDER", kind.name())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(victim.stdout.take().unwrap());
    let mut stdin = victim.stdin.take().unwrap();
    let victim = ChildGuard(victim);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields.first(), Some(&"ready"), "victim said {line:?}");
    let (addr, pid) = (fields[1], fields[2]);
    let vas: Vec<&str> = fields[3..5]
        .iter()
        .map(|a| a.split(':').next().unwrap())
        .collect();

    let rogue = |uid: Option<&str>| {
        let started = Instant::now();
        let out = this_binary_as("rogue", uid)
            .env("OFI_ROGUE_PROVIDER", kind.name())
            .env("OFI_ROGUE_ADDR", addr)
            .env("OFI_ROGUE_PID", pid)
            .env("OFI_ROGUE_VAS", vas.join(","))
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        eprintln!(
            "ofi_rogue: {} rogue{} ({:.1?}):\n{text}",
            kind.name(),
            uid.map(|u| format!(" as uid {u}")).unwrap_or_default(),
            started.elapsed()
        );
        (out.status, text)
    };
    let (status, text) = rogue(victim_uid);
    assert!(
        status.success(),
        "{}: the rogue got something: {text}",
        kind.name()
    );
    let report = text.lines().next().unwrap_or("");
    // Not vacuous: thousands of attempts, all answered by the victim.
    let attempts: u64 = report
        .strip_prefix("rogue: ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let d = density_for(kind);
    let least = 2 * (4 * d.low_keys + 2 * d.key_steps + d.page_steps);
    assert!(attempts > least + 2 * d.random as u64, "{report}");
    if kind == OfiKind::Shm {
        assert!(text.contains("rogue-cma: "), "{text}");
        if root {
            // Another user cannot open the victim's 0600 shm endpoint at all.
            let (status, text) = rogue(Some(OTHER_UID));
            assert_eq!(status.code(), Some(3), "{text}");
            assert!(text.contains("rogue-connect-failed"), "{text}");
        }
    }
    writeln!(stdin, "done").unwrap();
    let mut verdict = String::new();
    out.read_line(&mut verdict).unwrap();
    assert_eq!(verdict.trim(), "intact", "{}", kind.name());
    drop(victim);
}

/// FI_OFI_RXM_USE_RNDV_WRITE would make rxm register receive buffers remotely writable:
/// `ofi:tcp` must refuse to open under it (checked in a child, which has the variable).
fn env_guard_refuses_write_rendezvous() {
    let out = this_binary_as("env-guard", None)
        .env("FI_OFI_RXM_USE_RNDV_WRITE", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("FI_OFI_RXM_USE_RNDV_WRITE"), "{text}");
}

fn run_env_guard() {
    match OfiProvider::open(OfiKind::Tcp) {
        Err(e @ BusError::Unavailable { .. }) => println!("refused: {e}"),
        other => {
            println!("opened anyway: {other:?}");
            std::process::exit(1);
        }
    }
}

fn main() {
    match std::env::var("OFI_ROGUE_ROLE").as_deref() {
        Ok("victim") => return run_victim(),
        Ok("rogue") => return run_rogue(),
        Ok("env-guard") => return run_env_guard(),
        _ => {}
    }
    let root = is_root();
    env_guard_refuses_write_rendezvous();
    for kind in [OfiKind::Tcp, OfiKind::Shm] {
        if std::env::var("OFI_ROGUE_ONLY").is_ok_and(|only| only != kind.name()) {
            continue;
        }
        eprintln!("ofi_rogue: {}", kind.name());
        run_against(kind, root);
        eprintln!("ofi_rogue: {} held", kind.name());
    }
}
