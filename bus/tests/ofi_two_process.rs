//! Goal: the `ofi` provider works between two real processes, for `tcp;ofi_rxm` and `shm`:
//! connect/accept, SEND/RECV both ways, RDMA WRITE, WRITE WITH IMM (the target sees the
//! immediate on a consumed receive, after the data), READ, a WRITE with a wrong rkey failing
//! with `RemoteAccess` while both processes carry on, and a datagram round trip.
//!
//! Method: this binary (harness = false) is both sides. Run plainly, it is the initiator: for
//! each provider and rendezvous (fabric, and EFA's TCP socket) it re-executes itself with
//! `OFI_TEST_ROLE=target`, reads the target's address
//! from its stdout, and drives the steps above, checking every completion and byte. The target
//! answers messages and checks what lands in its memory; it exits non-zero on any surprise.
//!
//! Needs libfabric (`scripts/install-deps.sh` installs libfabric1). Without it the test fails
//! with the provider's `Unavailable` message rather than passing silently; set
//! `OFI_TEST_SKIP_UNAVAILABLE=1` to turn that into a skip.
//! Run: `cargo test -p bus --test ofi_two_process`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bus::ofi::{OfiKind, OfiProvider, Rendezvous};
use bus::{
    Access, BusError, Completion, Connection, DatagramEndpoint, EndpointAddr, EndpointConfig,
    Listener, LocalSlice, Op, Provider, Region, RemoteRegion, RemoteSlice, WorkError,
};

type Conn = <OfiProvider as Provider>::Conn;
type Reg = <OfiProvider as Provider>::Region;

/// Every wait in the test is bounded by this (the whole run takes well under a second).
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
const MSG_SLOT: usize = 256;
const MSG_SLOTS: usize = 16;
const DATA_LEN: usize = 64 * 1024;
/// Where the target keeps bytes for the READ test.
const READ_AT: usize = 32 * 1024;
const IMM: u32 = 0x00C0_FFEE;

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A connection with message buffers: SENDs and RECVs of short text messages.
struct Peer {
    conn: Conn,
    recv: Reg,
    send: Reg,
    next_send: usize,
    backlog: Vec<Completion>,
}

impl Peer {
    fn new(provider: &OfiProvider, conn: Conn) -> Peer {
        let recv = provider
            .register(MSG_SLOT * MSG_SLOTS, Access::LOCAL_WRITE)
            .unwrap();
        let send = provider
            .register(MSG_SLOT * MSG_SLOTS, Access::SEND)
            .unwrap();
        let mut p = Peer {
            conn,
            recv,
            send,
            next_send: 0,
            backlog: Vec::new(),
        };
        for slot in 0..MSG_SLOTS {
            p.post_recv(slot as u64);
        }
        p
    }

    fn post_recv(&mut self, slot: u64) {
        let dst = LocalSlice {
            region: self.recv.clone(),
            offset: slot as usize * MSG_SLOT,
            len: MSG_SLOT,
        };
        self.conn.post_recv(slot, dst).unwrap();
    }

    /// wr_ids of our sends start at 1000 so they never look like receive slots.
    fn send_text(&mut self, text: &str) -> u64 {
        let slot = self.next_send % MSG_SLOTS;
        self.next_send += 1;
        self.send.write(slot * MSG_SLOT, text.as_bytes()).unwrap();
        let src = LocalSlice {
            region: self.send.clone(),
            offset: slot * MSG_SLOT,
            len: text.len(),
        };
        let wr_id = 1000 + slot as u64;
        let deadline = Instant::now() + STEP_TIMEOUT;
        // `Full` means "poll, then post again" (tcp;ofi_rxm says so until its connection to
        // the peer is up).
        while let Err(e) = self.conn.post_send(wr_id, src.clone()) {
            assert!(matches!(e, BusError::Full { .. }), "post_send: {e}");
            assert!(Instant::now() < deadline, "post_send stayed Full");
            let mut out = Vec::new();
            self.conn.poll(&mut out, 16).unwrap();
            self.backlog.extend(out);
        }
        wr_id
    }

    /// The text of a receive completion; reposts the buffer.
    fn take_text(&mut self, c: &Completion) -> String {
        assert_eq!(c.op, Op::Recv, "{c:?}");
        assert_eq!(c.status, Ok(()), "{c:?}");
        let mut buf = vec![0u8; c.byte_len as usize];
        self.recv
            .read(c.wr_id as usize * MSG_SLOT, &mut buf)
            .unwrap();
        self.post_recv(c.wr_id);
        String::from_utf8(buf).unwrap()
    }

    /// Polls until a completion matching `want` arrives; others wait in the backlog.
    fn expect(&mut self, what: &str, want: impl Fn(&Completion) -> bool) -> Completion {
        if let Some(i) = self.backlog.iter().position(&want) {
            return self.backlog.remove(i);
        }
        let deadline = Instant::now() + STEP_TIMEOUT;
        let mut out = Vec::new();
        while Instant::now() < deadline {
            out.clear();
            self.conn.poll(&mut out, 16).unwrap();
            let mut found = None;
            for c in out.drain(..) {
                if found.is_none() && want(&c) {
                    found = Some(c);
                } else {
                    self.backlog.push(c);
                }
            }
            if let Some(c) = found {
                return c;
            }
            self.conn.wait(Duration::from_millis(5)).unwrap();
        }
        panic!("timed out waiting for {what}; backlog {:?}", self.backlog);
    }

    fn expect_text(&mut self) -> String {
        self.reap_sends();
        let c = self.expect("a message", |c| c.op == Op::Recv);
        self.take_text(&c)
    }

    /// Drops completions of our own sends (checking they succeeded).
    fn reap_sends(&mut self) {
        self.backlog.retain(|c| {
            if c.op == Op::Send {
                assert_eq!(c.status, Ok(()), "{c:?}");
                false
            } else {
                true
            }
        });
    }
}

fn kind_from_env() -> OfiKind {
    let name = std::env::var("OFI_TEST_PROVIDER").unwrap();
    OfiKind::from_name(&name).unwrap()
}

fn rendezvous_from_env() -> Rendezvous {
    match std::env::var("OFI_TEST_RENDEZVOUS").as_deref() {
        Ok("socket") => Rendezvous::TcpSocket,
        _ => Rendezvous::Fabric,
    }
}

fn rendezvous_name(r: Rendezvous) -> &'static str {
    match r {
        Rendezvous::TcpSocket => "socket",
        Rendezvous::Fabric => "fabric",
    }
}

// ---------------------------------------------------------------- target (child process)

fn run_target() {
    let kind = kind_from_env();
    let rendezvous = rendezvous_from_env();
    let provider = OfiProvider::open(kind).unwrap().with_rendezvous(rendezvous);
    let config = EndpointConfig::default();
    let data = provider
        .register(
            DATA_LEN,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        )
        .unwrap();
    data.write(READ_AT, &pattern(7, 4096)).unwrap();
    // A real port is picked by the system; shm's fabric "port" only names the endpoint, so
    // make it unique per run.
    let port = match (kind, rendezvous) {
        (OfiKind::Shm, Rendezvous::Fabric) => 20000 + (std::process::id() % 20000) as u16,
        _ => 0,
    };
    let mut listener = provider
        .listen(SocketAddr::from(([127, 0, 0, 1], port)), &config)
        .unwrap();
    let mut dgram = provider.datagram(&config).unwrap();
    println!("ready {}", listener.local_addr());
    let conn = listener
        .accept(STEP_TIMEOUT)
        .unwrap()
        .expect("no connection came");
    let mut peer = Peer::new(&provider, conn);
    let r = data.remote().unwrap();
    peer.send_text(&format!("region {} {} {}", r.addr, r.len, r.rkey));
    peer.send_text(&format!("dgram {}", dgram.local()));

    let deadline = Instant::now() + 3 * STEP_TIMEOUT;
    let mut out = Vec::new();
    let mut buf = vec![0u8; dgram.mtu()];
    // After the initiator's wrong-key WRITE the connection may be dead (it is on tcp, as an RC
    // QP would be on verbs); from then on its errors are expected.
    let mut connection_may_fail = false;
    loop {
        assert!(
            Instant::now() < deadline,
            "target: the initiator never said bye"
        );
        out.clear();
        peer.conn.poll(&mut out, 16).unwrap();
        for c in out.drain(..) {
            if connection_may_fail && c.status.is_err() {
                eprintln!("target: expected failure after the wrong-key write: {c:?}");
                continue;
            }
            match c.op {
                Op::Send => assert_eq!(c.status, Ok(()), "{c:?}"),
                Op::RecvWriteImm => {
                    assert_eq!(c.status, Ok(()), "{c:?}");
                    // The data of the WRITE WITH IMM and of the plain WRITE before it must
                    // be in place when the immediate is seen.
                    let mut got = vec![0u8; 4096];
                    data.read(4096, &mut got).unwrap();
                    let imm_data_ok = got == pattern(2, 4096);
                    data.read(0, &mut got).unwrap();
                    let write_ok = got == pattern(1, 4096);
                    peer.post_recv(c.wr_id);
                    peer.send_text(&format!(
                        "imm {:#x} len {} data {} write {}",
                        c.imm.unwrap_or(0),
                        c.byte_len,
                        imm_data_ok,
                        write_ok
                    ));
                }
                Op::Recv => match peer.take_text(&c).as_str() {
                    "ping" => _ = peer.send_text("pong"),
                    "bad-write-next" => {
                        connection_may_fail = true;
                        peer.send_text("ok");
                    }
                    other => panic!("target: unexpected message {other:?}"),
                },
                other => panic!("target: unexpected completion {other:?} {c:?}"),
            }
        }
        while let Some(meta) = dgram.try_recv(&mut buf).unwrap() {
            let mut reply = b"pong:".to_vec();
            reply.extend_from_slice(&buf[..meta.len]);
            if &buf[..meta.len] == b"check" {
                // The wrong-key WRITE was posted before this datagram was sent, so it waits in
                // the connection's queue: one more poll makes the provider handle it.
                let mut ignored = Vec::new();
                let _ = peer.conn.poll(&mut ignored, 16);
                let mut got = vec![0u8; 64];
                data.read(0, &mut got).unwrap();
                reply.extend_from_slice(if got == pattern(1, 64) {
                    &b" unchanged"[..]
                } else {
                    &b" CHANGED"[..]
                });
            }
            dgram.send_to(&meta.from, &reply).unwrap();
            if &buf[..meta.len] == b"bye" {
                // Keep progressing a little so the reply leaves before the endpoint closes.
                let end = Instant::now() + Duration::from_millis(200);
                while Instant::now() < end {
                    let _ = dgram.try_recv(&mut buf);
                }
                return;
            }
        }
    }
}

// ------------------------------------------------------------- initiator (test process)

struct ChildGuard(Child);

impl Drop for ChildGuard {
    /// A target left running (the initiator failed) gets SIGTERM first: libfabric's shm
    /// provider removes its /dev/shm files on SIGTERM, not on SIGKILL.
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

fn spawn_target(kind: OfiKind, rendezvous: Rendezvous) -> (ChildGuard, SocketAddr) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("OFI_TEST_ROLE", "target")
        .env("OFI_TEST_PROVIDER", kind.name())
        .env("OFI_TEST_RENDEZVOUS", rendezvous_name(rendezvous))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let guard = ChildGuard(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("target said {line:?}"))
        .parse()
        .unwrap();
    (guard, addr)
}

fn run_initiator(kind: OfiKind, rendezvous: Rendezvous) {
    let provider = match OfiProvider::open(kind) {
        Ok(p) => p.with_rendezvous(rendezvous),
        Err(e @ BusError::Unavailable { .. })
            if std::env::var_os("OFI_TEST_SKIP_UNAVAILABLE").is_some() =>
        {
            eprintln!("skipping {}: {e}", kind.name());
            return;
        }
        Err(e) => panic!("{}: {e}", kind.name()),
    };
    let (mut child, addr) = spawn_target(kind, rendezvous);
    let config = EndpointConfig::default();
    let conn = provider.connect(addr, &config, STEP_TIMEOUT).unwrap();
    assert_eq!(conn.peer().provider_family(), "ofi");
    let mut peer = Peer::new(&provider, conn);

    // SEND/RECV: the target's first messages carry its region and datagram address.
    let region_msg = peer.expect_text();
    let fields: Vec<u64> = region_msg
        .strip_prefix("region ")
        .unwrap_or_else(|| panic!("got {region_msg:?}"))
        .split(' ')
        .map(|f| f.parse().unwrap())
        .collect();
    let remote = RemoteRegion {
        addr: fields[0],
        len: fields[1],
        rkey: fields[2],
    };
    assert_eq!(remote.len, DATA_LEN as u64);
    let dgram_msg = peer.expect_text();
    let target_dgram: EndpointAddr = dgram_msg
        .strip_prefix("dgram ")
        .unwrap_or_else(|| panic!("got {dgram_msg:?}"))
        .parse()
        .unwrap();
    peer.send_text("ping");
    assert_eq!(peer.expect_text(), "pong");

    // WRITE, then WRITE WITH IMM; the target checks both landed when it sees the immediate.
    let local = provider.register(DATA_LEN, Access::LOCAL_WRITE).unwrap();
    local.write(0, &pattern(1, 4096)).unwrap();
    local.write(4096, &pattern(2, 4096)).unwrap();
    let slice = |offset: usize, len: usize| LocalSlice {
        region: local.clone(),
        offset,
        len,
    };
    let remote_at = |offset: u64, len: u64| RemoteSlice {
        region: remote,
        offset,
        len,
    };
    peer.conn
        .post_write(1, slice(0, 4096), remote_at(0, 4096), None)
        .unwrap();
    let c = peer.expect("WRITE", |c| c.wr_id == 1);
    assert_eq!((c.op, c.status.clone()), (Op::Write, Ok(())), "{c:?}");
    peer.conn
        .post_write(2, slice(4096, 4096), remote_at(4096, 4096), Some(IMM))
        .unwrap();
    let c = peer.expect("WRITE WITH IMM", |c| c.wr_id == 2);
    assert_eq!((c.op, c.status.clone()), (Op::Write, Ok(())), "{c:?}");
    let report = peer.expect_text();
    assert!(
        report.starts_with(&format!("imm {IMM:#x} ")) && report.ends_with("data true write true"),
        "target reported {report:?}"
    );

    // READ back what the target prepared.
    peer.conn
        .post_read(3, slice(8192, 4096), remote_at(READ_AT as u64, 4096))
        .unwrap();
    let c = peer.expect("READ", |c| c.wr_id == 3);
    assert_eq!((c.op, c.status.clone()), (Op::Read, Ok(())), "{c:?}");
    let mut got = vec![0u8; 4096];
    local.read(8192, &mut got).unwrap();
    assert_eq!(got, pattern(7, 4096), "READ returned other bytes");

    // A WRITE with a wrong key never touches the target's memory and crashes no one; the
    // connection is not used afterwards (on verbs its RC QP would be in the error state).
    // tcp: the WRITE fails with RemoteAccess (the target provider drops its transport).
    // shm: libfabric 1.17's shm rejects it at the target but never answers, so it does not
    // complete, and that connection stalls (see OfiKind::wants_delivery_complete).
    // The target's memory is checked below, over datagrams.
    peer.send_text("bad-write-next");
    assert_eq!(peer.expect_text(), "ok");
    let mut bad = remote;
    bad.rkey = bad.rkey.wrapping_add(0x5a5a);
    // Source: the READ result (pattern 7), so a landed WRITE would change offset 0.
    peer.conn
        .post_write(
            4,
            slice(8192, 64),
            RemoteSlice {
                region: bad,
                offset: 0,
                len: 64,
            },
            None,
        )
        .unwrap();
    if kind == OfiKind::Tcp {
        let c = peer.expect("WRITE with a wrong rkey", |c| c.wr_id == 4);
        assert_eq!(c.status, Err(WorkError::RemoteAccess), "{c:?}");
    }

    // Datagram round trips (the target is alive); the reply names its sender. "check" makes
    // the target look at the bytes the wrong-key WRITE aimed at; "bye" ends it.
    let mut dgram = provider.datagram(&config).unwrap();
    for payload in [&b"hi"[..], b"check", b"bye"] {
        dgram.send_to(&target_dgram, payload).unwrap();
        let deadline = Instant::now() + STEP_TIMEOUT;
        let mut buf = vec![0u8; dgram.mtu()];
        let meta = loop {
            if let Some(meta) = dgram.try_recv(&mut buf).unwrap() {
                break meta;
            }
            assert!(Instant::now() < deadline, "no datagram reply");
            dgram.wait(Duration::from_millis(5)).unwrap();
        };
        let mut want = b"pong:".to_vec();
        want.extend_from_slice(payload);
        if payload == b"check" {
            want.extend_from_slice(b" unchanged");
        }
        let got = String::from_utf8_lossy(&buf[..meta.len]).to_string();
        if payload == b"check" && kind == OfiKind::Shm && running_as_root() {
            // Our shm WRITEs are injected (piecewise.rs), and an injected WRITE may take shm's
            // fast RMA path: process_vm_writev to the raw address, no key. A non-dumpable
            // target refuses it to anyone without CAP_SYS_PTRACE, and shm falls back to the
            // key-checked path; as root the fast path works, so the wrong key can land.
            // That is shm's stated boundary (README: the Unix user; root is above it); the
            // rogue tests play the attacker as another uid.
            eprintln!("  shm as root: the wrong-key WRITE reports {got:?} (fast RMA path)");
        } else {
            assert_eq!(got, String::from_utf8_lossy(&want));
        }
        assert_eq!(meta.from, target_dgram);
    }
    let deadline = Instant::now() + STEP_TIMEOUT;
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "target did not exit");
        // Progress our side, so the target's last sends can complete.
        let _ = dgram.try_recv(&mut [0u8; 64]);
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(status.success(), "target exited with {status}");
}

fn main() {
    if std::env::var("OFI_TEST_ROLE").as_deref() == Ok("target") {
        run_target();
        return;
    }
    // Fabric rendezvous is the default for tcp and shm; the TCP-socket rendezvous is EFA's,
    // run here on tcp and shm because EFA hardware is not available.
    for kind in [OfiKind::Tcp, OfiKind::Shm] {
        for rendezvous in [Rendezvous::Fabric, Rendezvous::TcpSocket] {
            let name = format!(
                "{} ({} rendezvous)",
                kind.name(),
                rendezvous_name(rendezvous)
            );
            eprintln!("ofi_two_process: {name}");
            run_initiator(kind, rendezvous);
            eprintln!("ofi_two_process: {name} ok");
        }
    }
}

/// Whether this process runs as root (`Uid:` of /proc/self/status: real, effective, ...).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}
